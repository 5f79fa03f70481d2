"""The files that idle file-source tasks follow, checked together by one thread of the agent.

Owns :class:`FileChangeWatcher`. Kafka's ``FileStreamSourceTask`` sleeps a
second and reads again when its file had nothing new; a thousand such tasks on
one worker would be a thousand wake-ups a second through the task pool. Here a
task that found nothing registers the files it read with what it saw of them
(size and modification time) and parks; one thread compares them with ``stat``
every ``interval`` and wakes the tasks whose files changed. A parked file
source then costs one ``stat`` per second (a few µs) and no task step.

Also owns :class:`QuietFiles`: whether a file has stopped changing, timed on the
monotonic clock from what the caller itself observed (a followed file's
unterminated last line is read only once its writer has gone quiet).

Must not import Django, Spark or Kafka.
"""
from __future__ import annotations

import logging
import os
import threading
import time
from typing import Callable, Iterable, Mapping

from webapp import environment

__all__ = ["FileChangeWatcher", "QuietFiles", "file_state", "states"]

log = logging.getLogger(__name__)

def file_state(path: str) -> tuple[int, int] | None:
    """``(size in bytes, modification time in ns)`` of ``path``, or None when it cannot be stat'ed."""
    try:
        st = os.stat(path)
    except OSError:
        return None
    return st.st_size, st.st_mtime_ns


class FileChangeWatcher:
    """Wakes parked file-source tasks when one of their files changes.

    A task calls :meth:`watch` with the state of each file *as it saw it before
    reading* (:func:`file_state`), so a change that lands between its read and
    its registration is still noticed. A watch is one-shot: it is dropped when it
    fires (the task registers again when it next finds nothing). The thread runs
    only while something is watched.

    Args:
        interval: seconds between checks (``RAFTCONNECT_FILE_WATCH_INTERVAL_MS``,
            default 1000, the poll interval of Kafka's FileStreamSourceTask).
    """

    def __init__(self, interval: float | None = None):
        self.interval = interval if interval is not None else environment.file_watch_interval_s()
        self._lock = threading.Lock()
        self._watches: dict[str, tuple[dict[str, tuple[int, int] | None], Callable[[], None]]] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()

    def watch(self, key: str, seen: Mapping[str, tuple[int, int] | None], wake: Callable[[], None]) -> None:
        """Call ``wake()`` once, when a file of ``seen`` no longer has the state given for it.

        Replaces ``key``'s earlier watch.
        """
        with self._lock:
            self._watches[key] = (dict(seen), wake)
            start = self._thread is None or not self._thread.is_alive()
            if start:
                self._stop.clear()
                self._thread = threading.Thread(target=self._loop, name="file-changes", daemon=True)
        if start:
            self._thread.start()

    def unwatch(self, key: str) -> None:
        """Forget ``key``'s watch (a stopped task)."""
        with self._lock:
            self._watches.pop(key, None)

    def watched(self) -> int:
        """How many tasks are parked here."""
        with self._lock:
            return len(self._watches)

    def stop(self) -> None:
        """Stop checking (the agent shuts down)."""
        self._stop.set()

    def check(self) -> int:
        """One round: wake (and forget) every watch whose files changed; returns how many were woken."""
        with self._lock:
            watches = list(self._watches.items())
        states: dict[str, tuple[int, int] | None] = {}
        fired: list[tuple[str, Callable[[], None]]] = []
        for key, (seen, wake) in watches:
            for path, state in seen.items():
                now = states[path] if path in states else states.setdefault(path, file_state(path))
                if now != state:
                    fired.append((key, wake))
                    break
        with self._lock:
            for key, wake in fired:
                if self._watches.get(key, (None, None))[1] is wake:
                    del self._watches[key]
        for key, wake in fired:
            try:
                wake()
            except Exception:
                log.exception("waking file source task %s failed", key)
        return len(fired)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.check()
            with self._lock:
                if not self._watches:  # nothing left: end; the next watch() starts a thread again
                    self._thread = None
                    return


def states(paths: Iterable[str]) -> dict[str, tuple[int, int] | None]:
    """``{path: file_state(path)}``."""
    return {p: file_state(p) for p in paths}


class QuietFiles:
    """Whether files have kept the same :func:`file_state` for ``seconds``, timed on a monotonic clock.

    :meth:`quiet` stats the file and compares ``(size, mtime)`` with what the previous call saw;
    a difference (or a first look) restarts that file's quiet time at ``clock()``. The
    modification time is only ever compared with itself, never with the wall clock, so a
    clock jump (an NTP step, ±1 h) can neither make a file still being written look quiet
    (comparing its mtime with ``time.time()`` read a half-written line after a jump forward)
    nor keep a finished one looking busy forever (after a jump back). The price: a file
    first looked at counts as just changed, so its last line waits ``seconds`` once.

    Args:
        seconds: how long a file must stay unchanged to be quiet.
        clock: monotonic seconds (injectable for tests).

    Not thread-safe: one task's steps never run at once.
    """

    def __init__(self, seconds: float, clock: Callable[[], float] = time.monotonic):
        self.seconds = seconds
        self._clock = clock
        self._seen: dict[str, tuple[tuple[int, int], float]] = {}

    def quiet(self, path: str) -> bool:
        """True when ``path`` has not changed for :attr:`seconds` as observed by the calls here; also True
        when it cannot be stat'ed (nothing is being written to it)."""
        state = file_state(path)
        if state is None:
            self._seen.pop(path, None)
            return True
        now = self._clock()
        seen = self._seen.get(path)
        if seen is None or seen[0] != state:
            self._seen[path] = (state, now)
            return False
        return now - seen[1] >= self.seconds
