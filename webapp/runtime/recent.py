"""Keys seen in the last few seconds: a bounded, expiring set shared by the caches that need one.

Used where a check that passed may be taken as passed again for a short while: verified Basic
credentials (``webapp.connect.api.verified``, five minutes) and a file source's path check
(``webapp.connectors.file.connectors``, one second). A helper connectors may use (pyproject's
import contracts).
"""
from __future__ import annotations

import threading
import time
from collections import OrderedDict
from collections.abc import Callable, Hashable

__all__ = ["RecentKeys"]


class RecentKeys:
    """Keys added within the last ``ttl`` seconds (``clock``: ``time.monotonic``), at most ``max_entries``:
    past that, the key added longest ago is forgotten first. Thread-safe.

    ``key in keys`` is true while the key's last :meth:`add` is less than ``ttl`` seconds old; an expired
    key found by a lookup is dropped there.
    """

    def __init__(self, ttl: float, max_entries: int, clock: Callable[[], float] = time.monotonic) -> None:
        self.ttl = ttl
        self.max_entries = max_entries
        self._clock = clock
        self._expires: OrderedDict[Hashable, float] = OrderedDict()
        self._lock = threading.Lock()

    def __contains__(self, key: Hashable) -> bool:
        with self._lock:
            expires = self._expires.get(key)
            if expires is None:
                return False
            if expires <= self._clock():
                del self._expires[key]
                return False
            return True

    def add(self, key: Hashable) -> None:
        """Count ``key`` as seen now (for ``ttl`` seconds from now)."""
        with self._lock:
            self._expires[key] = self._clock() + self.ttl
            self._expires.move_to_end(key)
            while len(self._expires) > self.max_entries:
                self._expires.popitem(last=False)
