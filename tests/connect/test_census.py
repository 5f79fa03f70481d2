"""``webapp.connect.census``: the memory census diagnostic (off unless its variable is set)."""
from __future__ import annotations

import gc
import json
import time

import pytest

from tools.launcher import wait_for
from webapp.connect import census


def test_off_without_its_variable(monkeypatch):
    monkeypatch.delenv(census.DIR_ENV, raising=False)
    assert census.start_from_env("n1", lambda: None) is None


def test_a_bad_interval_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(census.DIR_ENV, str(tmp_path))
    monkeypatch.setenv(census.INTERVAL_ENV, "0")
    with pytest.raises(ValueError, match=census.INTERVAL_ENV):
        census.start_from_env("n1", lambda: None)


def test_a_census_counts_this_process_and_the_raft_log(lone_raft, tmp_path, monkeypatch):
    raft = lone_raft
    for i in range(5):
        raft.commands.put_connector_config(name=f"c{i}", config={"connector.class": "X"}, target_state=None,
                                           create_only=False)
    before = census.census(raft)["blocks"]
    keep = [[i] for i in range(300_000)]
    one = census.census(raft)
    # other threads of the test process allocate and free meanwhile: a margin, not an exact count
    assert one["rss"] > 0 and one["heap"] > 0 and one["blocks"] >= before + 200_000
    assert one["raft"]["log_entries"] >= 5 and one["raft"]["log_bytes"] > 0
    assert one["raft"]["snapshots_loaded"] == 0  # a new member: nothing loaded
    assert one["raft"]["send_buffers"] == {}  # a lone member has no peers
    del keep
    collected = census.census(raft)["gc_collected"]
    for _ in range(100):  # a cycle only the collector frees
        a: list = []
        a.append(a)
    del a
    gc.collect()
    assert sum(census.census(raft)["gc_collected"]) >= sum(collected) + 100
    monkeypatch.setenv(census.DIR_ENV, str(tmp_path / "census"))
    monkeypatch.setenv(census.INTERVAL_ENV, "0.05")
    census.start_from_env("n1", lambda: raft)
    files = lambda: list((tmp_path / "census").glob("n1-*.jsonl"))  # noqa: E731
    wait_for(lambda: files() and files()[0].read_text().count("\n") >= 2, 30, interval=0.05,
             what="two census lines")
    line = json.loads(files()[0].read_text().splitlines()[0])
    assert line["t"] <= time.time() and line["raft"]["log_entries"] >= 5


def test_a_census_beside_threads_building_tuples_breaks_none():
    """A tuple built from a generator is tracked while it grows; a census that walked every object
    (gc.get_objects) held a reference to it when its builder resumed, and the resize failed with
    SystemError."""
    import threading

    stop = threading.Event()
    errors: list[BaseException] = []

    def build() -> None:
        while not stop.is_set():
            try:
                tuple(i for i in range(2000))
            except SystemError as exc:  # pragma: no cover - the failure this test looks for
                errors.append(exc)

    threads = [threading.Thread(target=build) for _ in range(4)]
    for t in threads:
        t.start()
    try:
        for _ in range(20):
            census.census()
    finally:
        stop.set()
        for t in threads:
            t.join()
    assert errors == []


def test_allocation_sites_name_where_live_memory_was_allocated():
    import tracemalloc

    assert census.allocation_sites() == []  # not tracing: nothing, and no error
    tracemalloc.start(4)
    try:
        keep = [bytearray(1000) for _ in range(2000)]  # ~2 MB from this line
        sites = census.allocation_sites()
        top = sites[0]
        assert top["bytes"] >= 2_000_000 and top["blocks"] >= 2000
        assert any(frame.startswith(__file__) for frame in top["trace"]), top
        del keep
    finally:
        tracemalloc.stop()


def test_a_bad_trace_setting_is_refused(monkeypatch, tmp_path):
    monkeypatch.setenv(census.DIR_ENV, str(tmp_path))
    monkeypatch.setenv(census.TRACE_ENV, "-1")
    with pytest.raises(ValueError, match=census.TRACE_ENV):
        census.start_from_env("n1", lambda: None)
