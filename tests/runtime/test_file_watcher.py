"""The agent's FileChangeWatcher: idle file sources park on it and are woken when their file changes."""
from __future__ import annotations

import threading

from tools.launcher import wait_for
from webapp.runtime.file_watcher import FileChangeWatcher, file_state, states


def test_a_watch_fires_once_when_its_file_changes(tmp_path):
    feed = tmp_path / "feed.csv"
    feed.write_text("id\n1\n")
    watcher = FileChangeWatcher(interval=0.02)
    woken = threading.Event()
    try:
        watcher.watch("t-0", states([str(feed)]), woken.set)
        assert watcher.check() == 0 and not woken.is_set()  # unchanged: stays parked
        with open(feed, "a") as f:
            f.write("2\n")
        assert woken.wait(30)
        assert watcher.watched() == 0  # one-shot: the task registers again when it finds nothing
        wait_for(lambda: watcher._thread is None, 30, what="the thread to end with nothing watched")
    finally:
        watcher.stop()


def test_a_change_before_the_watch_is_registered_still_wakes(tmp_path):
    """The task gives the state it saw before reading; an append in between is not lost."""
    feed = tmp_path / "feed.csv"
    feed.write_text("id\n1\n")
    seen = {str(feed): file_state(str(feed))}
    with open(feed, "a") as f:  # lands while the task reads and finds nothing new
        f.write("2\n")
    watcher = FileChangeWatcher(interval=60)
    woken = []
    watcher.watch("t-0", seen, lambda: woken.append(1))
    assert watcher.check() == 1 and woken == [1]
    watcher.stop()


def test_a_file_that_appears_or_disappears_wakes(tmp_path):
    later = tmp_path / "later.csv"
    watcher = FileChangeWatcher(interval=60)
    woken = []
    watcher.watch("t-0", states([str(later)]), lambda: woken.append("t-0"))
    assert watcher.check() == 0
    later.write_text("id\n")
    assert watcher.check() == 1
    watcher.watch("t-1", states([str(later)]), lambda: woken.append("t-1"))
    watcher.unwatch("t-1")
    later.unlink()
    assert watcher.check() == 0 and woken == ["t-0"]  # t-1 was unwatched (its task stopped)
    watcher.stop()


def test_quiet_files_time_quietness_on_the_monotonic_clock_only(tmp_path, monkeypatch):
    """QuietFiles: a file is quiet once its (size, mtime) stayed the same for ``seconds`` of the monotonic clock
    since the caller saw it change; the wall clock (patched here to jump an hour either way) plays no part."""
    import os
    import time

    from webapp.runtime.file_watcher import QuietFiles

    feed = tmp_path / "feed.csv"
    feed.write_text("id\n1\n2")
    now = [100.0]
    quiet = QuietFiles(2.0, clock=lambda: now[0])
    real = time.time
    monkeypatch.setattr(time, "time", lambda: real() + 3600)  # the file now looks an hour old by the wall clock
    assert not quiet.quiet(str(feed))  # first look: just changed, as far as we know
    now[0] += 1.9
    assert not quiet.quiet(str(feed))
    with open(feed, "a") as f:
        f.write("3")
    now[0] += 0.5
    assert not quiet.quiet(str(feed))  # it changed: quiet time starts again
    now[0] += 2.0
    assert quiet.quiet(str(feed))
    monkeypatch.setattr(time, "time", lambda: real() - 3600)  # the mtime looks an hour in the future
    assert quiet.quiet(str(feed))
    st = feed.stat()
    os.utime(feed, ns=(st.st_atime_ns, st.st_mtime_ns + 1))  # touched, same size: a change too
    assert not quiet.quiet(str(feed))
    assert quiet.quiet(str(tmp_path / "gone.csv"))  # nothing can be written to a file that is not there
