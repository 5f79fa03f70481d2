"""Fault-test support: a wall-clock jump for one process tree, without touching the host's clock.

Put this directory first on ``PYTHONPATH`` and set ``RAFTCONNECT_TEST_CLOCK_OFFSET_FILE`` to a
file holding a number of seconds: every Python process that starts with them (a node and the
agent it starts) then reads ``time.time()`` / ``time.time_ns()`` shifted by that many seconds,
re-read from the file at most every 50 ms, so a test jumps the clock of a running node by
writing the file. ``time.monotonic()`` is left alone, as the kernel leaves CLOCK_MONOTONIC
alone when the wall clock is stepped (NTP, an operator, a VM resume). C code that reads the
clock itself (``datetime.now()``, the JVM) is not shifted.

libfaketime was tried first: with ``FAKETIME_DONT_FAKE_MONOTONIC=1`` Python's ``time.sleep``
fails with EINVAL (0.9.10), and without it the monotonic clock jumps too, which no real clock
step does. Used by ``tests/integration/test_clock_jump.py``; never imported by ``webapp``.
"""
import os
import time

_path = os.environ.get("RAFTCONNECT_TEST_CLOCK_OFFSET_FILE")
if _path:
    _real_time, _real_time_ns, _monotonic = time.time, time.time_ns, time.monotonic
    _state = [-1.0, 0.0]  # [monotonic time of the last read, offset in seconds]

    def _offset() -> float:
        now = _monotonic()
        if now - _state[0] > 0.05:
            try:
                with open(_path) as fh:
                    _state[1] = float(fh.read().strip() or 0)
            except (OSError, ValueError):
                pass
            _state[0] = now
        return _state[1]

    def _shifted_time() -> float:
        return _real_time() + _offset()

    def _shifted_time_ns() -> int:
        return _real_time_ns() + int(_offset() * 1e9)

    time.time = _shifted_time
    time.time_ns = _shifted_time_ns
