"""Kernel names for this process's threads, as ``top -H``, ``perf`` and ``/proc/<pid>/task/*/comm`` show them.

CPython 3.11 names a thread only for Python (``threading.Thread.name``); the kernel gives every
thread its creator's name, so the Raft thread, the REST threads and the rest all read ``python``
(or ``tokio-rt-worker`` for a thread granian's Rust runtime started). Naming the busy ones lets an
operator, and ``benchmarks/cluster``, tell where a member's CPU goes. Imports nothing of
``webapp`` or Django, so both layers use it.
"""
from __future__ import annotations

import ctypes
import sys

__all__ = ["name_os_thread"]

_PR_SET_NAME = 15  # linux/prctl.h
_libc = None


def name_os_thread(name: str) -> bool:
    """Give the calling thread the kernel name ``name`` (its first 15 bytes of UTF-8); ``True`` if set.

    Linux only (``prctl(PR_SET_NAME)``); elsewhere, or when libc refuses, nothing changes and the
    answer is ``False``. The Python name (``threading.current_thread().name``) is left alone.
    """
    global _libc
    if not sys.platform.startswith("linux"):
        return False
    try:
        if _libc is None:
            _libc = ctypes.CDLL(None, use_errno=True)
        return _libc.prctl(_PR_SET_NAME, ctypes.c_char_p(name.encode()[:15]), 0, 0, 0) == 0
    except (OSError, AttributeError):
        return False
