"""The bounded cache of verified Basic credentials (see :mod:`webapp.connect.api.authentication`).

Owns the cache alone so that both the authentication classes and the account
bootstrap (which seeds it with the admin password it has just hashed) can use it
without importing each other. Holds HMACs only, never a password.
"""
from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict

from django.conf import settings

__all__ = ["cache", "remember_verified"]


class _VerifiedCache:
    """Keys (HMACs of user, password and stored hash) verified within ``ttl`` seconds; at most ``max_entries``."""

    def __init__(self, max_entries: int = 4096, ttl: float = 300.0):
        self.max_entries = max_entries
        self.ttl = ttl
        self._data: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, username: str, password: str, stored_hash: str) -> str:
        msg = "\x00".join((username, password, stored_hash)).encode()
        return hmac.new(settings.SECRET_KEY.encode(), msg, hashlib.sha256).hexdigest()

    def hit(self, key: str) -> bool:
        with self._lock:
            expires = self._data.get(key)
            if expires is None:
                return False
            if expires < time.monotonic():
                del self._data[key]
                return False
            return True

    def add(self, key: str) -> None:
        with self._lock:
            self._data[key] = time.monotonic() + self.ttl
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)


cache = _VerifiedCache()


def remember_verified(username: str, password: str, stored_hash: str) -> None:
    """Count ``(username, password)`` as verified against ``stored_hash`` without a PBKDF2 check.

    Only for a hash this process has just computed from that very password
    (``runnode`` setting the admin user's password at start): the check would
    repeat the same ~0.3 s of PBKDF2 on the first request and prove nothing new.
    """
    cache.add(cache.key(username, password, stored_hash))
