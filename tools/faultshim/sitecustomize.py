"""Fault-test support: a wall-clock jump or a slow disk for one node's process tree, from outside.

**Clock.**
Put this directory first on ``PYTHONPATH`` and set ``RAFTCONNECT_TEST_CLOCK_OFFSET_FILE`` to a
file holding a number of seconds: every Python process that starts with them (a node and the
agent it starts) then reads ``time.time()`` / ``time.time_ns()`` shifted by that many seconds,
re-read from the file at most every 50 ms, so a test jumps the clock of a running node by
writing the file. ``time.monotonic()`` is left alone, as the kernel leaves CLOCK_MONOTONIC
alone when the wall clock is stepped (NTP, an operator, a VM resume). C code that reads the
clock itself (``datetime.now()``, the JVM) is not shifted.

libfaketime was tried first: with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` Python's ``time.sleep``
fails with EINVAL (0.9.10), and without it the monotonic clock jumps too, which no real clock
step does.

**Slow disk.** With ``RAFTCONNECT_TEST_DISK_DELAY_FILE`` naming a file that holds a number of
seconds, every write of the Raft journal (pysyncobj's ``FileJournal.add``, ``setCurrentTerm`` and
its once-a-second meta save) sleeps that long first, on the Raft thread, as on a disk whose writes
and syncs take that long (re-read at most every 50 ms; 0 or no file: no delay).

Used by ``tests/integration/test_clock_jump.py`` and ``benchmarks/chaos/run.py``; never imported
by ``webapp``.
"""
import os
import time

_monotonic = time.monotonic


def _number_in(path: str):
    """A function giving the number in ``path``, re-read at most every 50 ms (0 while unreadable)."""
    state = [-1.0, 0.0]  # [monotonic time of the last read, value]

    def value() -> float:
        now = _monotonic()
        if now - state[0] > 0.05:
            try:
                with open(path) as fh:
                    state[1] = float(fh.read().strip() or 0)
            except (OSError, ValueError):
                state[1] = 0.0
            state[0] = now
        return state[1]

    return value


_path = os.environ.get("RAFTCONNECT_TEST_CLOCK_OFFSET_FILE")
if _path:
    _real_time, _real_time_ns = time.time, time.time_ns
    _offset = _number_in(_path)

    def _shifted_time() -> float:
        return _real_time() + _offset()

    def _shifted_time_ns() -> int:
        return _real_time_ns() + int(_offset() * 1e9)

    time.time = _shifted_time
    time.time_ns = _shifted_time_ns

_delay_path = os.environ.get("RAFTCONNECT_TEST_DISK_DELAY_FILE")
if _delay_path:
    from pysyncobj import journal as _journal

    _delay = _number_in(_delay_path)

    def _slowed(real):
        def write(*args, **kwargs):
            seconds = _delay()
            if seconds > 0:
                time.sleep(seconds)
            return real(*args, **kwargs)
        return write

    for _name in ("add", "setCurrentTerm", "onOneSecondTimer"):
        setattr(_journal.FileJournal, _name, _slowed(getattr(_journal.FileJournal, _name)))
