"""How the node's process uses the C allocator: fewer malloc arenas, and free memory handed back.

Owns two process-wide settings of glibc's malloc, applied by ``runnode`` before any thread starts:

* **Arenas.** glibc gives threads their own malloc arenas, up to 8 per core. A node's REST threads
  (16 by default), Raft thread and coordinator each allocate large buffers (request bodies, worker
  views of ~1 MB, lists of ~7 MB at 10,000 connectors) in their own arenas, and the memory one
  arena frees is not reused by another: at issue 16's scale the leader's RSS reached 1.31 GB for
  ~0.5 GB of live objects (benchmarks/scale). Two arenas are what the Python services that meet
  this commonly run with (``MALLOC_ARENA_MAX=2``).
* **Trim.** ``malloc_trim(0)`` returns the free pages inside the arenas to the kernel, which glibc
  does only for the top of the main heap on its own. Run every ``interval`` seconds by a daemon
  thread (a few ms with the GIL released, benchmarks/scale/memory.py).

Both are skipped, with a debug log, where the C library is not glibc. Nothing here changes what
Python allocates, only how much of the freed memory the process keeps.

Variables: ``RAFTCONNECT_MALLOC_ARENA_MAX`` (default 2; 0 keeps glibc's default) and
``RAFTCONNECT_MALLOC_TRIM_INTERVAL_S`` (default 30; 0 turns the trim off).
"""
from __future__ import annotations

import ctypes
import ctypes.util
import logging
import os
import threading

__all__ = ["ARENA_MAX_ENV", "TRIM_INTERVAL_ENV", "limit_arenas", "trim", "start_trimmer", "configure_from_env"]

log = logging.getLogger(__name__)

ARENA_MAX_ENV = "RAFTCONNECT_MALLOC_ARENA_MAX"
TRIM_INTERVAL_ENV = "RAFTCONNECT_MALLOC_TRIM_INTERVAL_S"
DEFAULT_ARENA_MAX = 2
DEFAULT_TRIM_INTERVAL_S = 30.0
_M_ARENA_MAX = -8  # glibc's malloc.h

_libc: ctypes.CDLL | None | bool = False  # False: not looked up yet; None: not glibc


def _glibc() -> ctypes.CDLL | None:
    """The C library when it is glibc (it has ``mallopt`` and ``malloc_trim``), else ``None``."""
    global _libc
    if _libc is False:
        try:
            libc = ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6")
            libc.gnu_get_libc_version  # noqa: B018 - only glibc has it
            libc.mallopt.argtypes, libc.mallopt.restype = [ctypes.c_int, ctypes.c_int], ctypes.c_int
            libc.malloc_trim.argtypes, libc.malloc_trim.restype = [ctypes.c_size_t], ctypes.c_int
            _libc = libc
        except (OSError, AttributeError):
            _libc = None
    return _libc


def limit_arenas(count: int) -> bool:
    """Let malloc use at most ``count`` arenas (``mallopt(M_ARENA_MAX)``); effective for arenas made
    after the call, so call it before threads start. ``count <= 0`` changes nothing.

    Returns whether the limit was set (``False`` off glibc or when glibc refused it).
    """
    libc = _glibc()
    if count <= 0 or libc is None:
        return False
    return libc.mallopt(_M_ARENA_MAX, count) == 1


def trim() -> bool:
    """``malloc_trim(0)``: hand free pages of every arena back to the kernel. Returns whether any
    memory was released (``False`` off glibc)."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))


def start_trimmer(interval_s: float, stop: threading.Event | None = None) -> threading.Thread | None:
    """Start a daemon thread that calls :func:`trim` every ``interval_s`` seconds until ``stop`` is
    set. Returns the thread, or ``None`` when ``interval_s <= 0`` or the C library is not glibc."""
    if interval_s <= 0 or _glibc() is None:
        return None
    stop = stop or threading.Event()

    def run() -> None:
        while not stop.wait(interval_s):
            trim()

    thread = threading.Thread(target=run, name="malloc-trim", daemon=True)
    thread.start()
    return thread


def configure_from_env(environ: dict[str, str] | None = None) -> tuple[bool, threading.Thread | None]:
    """Apply both settings from :data:`ARENA_MAX_ENV` and :data:`TRIM_INTERVAL_ENV` (defaults 2 and
    30 s): ``(arenas limited, trimmer thread or None)``.

    Errors: ``ValueError`` naming the variable when a value is not a number or is negative.
    """
    env = os.environ if environ is None else environ
    try:
        arenas = int(env.get(ARENA_MAX_ENV, DEFAULT_ARENA_MAX))
        interval = float(env.get(TRIM_INTERVAL_ENV, DEFAULT_TRIM_INTERVAL_S))
    except ValueError as exc:
        raise ValueError(f"{ARENA_MAX_ENV} must be a whole number and {TRIM_INTERVAL_ENV} a number of "
                         f"seconds: {exc}") from exc
    if arenas < 0 or interval < 0:
        raise ValueError(f"{ARENA_MAX_ENV} and {TRIM_INTERVAL_ENV} must not be negative")
    limited = limit_arenas(arenas)
    thread = start_trimmer(interval)
    if _glibc() is None:
        log.debug("malloc: the C library is not glibc; arenas and trim left as they are")
    return limited, thread
