"""``webapp.connect.malloc``: the node's malloc arena limit and periodic trim, configured from the environment."""
from __future__ import annotations

import threading

import pytest

from webapp.connect import malloc

pytestmark = pytest.mark.skipif(malloc._glibc() is None, reason="the C library is not glibc")


def test_defaults_limit_the_arenas_and_start_a_trimmer():
    limited, thread = malloc.configure_from_env({})
    assert limited is True
    assert thread is not None and thread.daemon and thread.is_alive() and thread.name == "malloc-trim"


def test_zero_keeps_glibc_defaults_and_no_trimmer():
    assert malloc.configure_from_env({malloc.ARENA_MAX_ENV: "0", malloc.TRIM_INTERVAL_ENV: "0"}) == (False, None)


@pytest.mark.parametrize("env", [{malloc.ARENA_MAX_ENV: "two"}, {malloc.TRIM_INTERVAL_ENV: "-1"}])
def test_bad_values_name_the_variable(env):
    with pytest.raises(ValueError, match="RAFTCONNECT_MALLOC_ARENA_MAX"):
        malloc.configure_from_env(env)


def test_the_trimmer_trims_until_stopped(monkeypatch):
    calls = []
    done = threading.Event()

    def fake_trim():
        calls.append(1)
        if len(calls) == 3:
            done.set()
        return True

    monkeypatch.setattr(malloc, "trim", fake_trim)
    stop = threading.Event()
    thread = malloc.start_trimmer(0.01, stop)
    assert done.wait(5)
    stop.set()
    thread.join(5)
    assert not thread.is_alive() and len(calls) >= 3


def test_trim_hands_freed_memory_back():
    """A freed 64 MiB of small blocks stays in the process until trimmed."""
    def rss() -> int:
        with open("/proc/self/status") as fh:
            return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) * 1024

    blocks = [bytearray(4096) for _ in range(16_384)]  # below the mmap threshold: from an arena
    keep = blocks[::512]  # a few live blocks spread over the arena keep glibc from trimming on its own
    del blocks
    before = rss()
    malloc.trim()
    assert rss() < before - 32 * 2**20
    del keep
