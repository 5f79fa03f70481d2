"""Large log entries reach the followers in one message (``RaftConfig.append_entries_max_bytes``).

pysyncobj cuts an entry at least ``appendEntriesBatchSizeBytes`` long into chunks and marks the
last one by the command's length, not the pickled entry's: a command with many bytes above 0x7f
(non-ASCII text, binary fields) pickles larger, so followers were told "finish" early, failed to
unpickle the partial entry once per remaining chunk and logged a trace each time (benchmarks/scale,
every ~1 MB assignment at 10,000 connectors). The 64 KiB case pins that cause; the default shows
it gone.
"""
from __future__ import annotations

import logging

import pytest

from tools.launcher import wait_for

from .members import destroy, raft_members, ready_leader


@pytest.mark.parametrize("max_bytes, chunked", [(None, False), (2**16, True)], ids=["default", "pysyncobj-64KiB"])
def test_a_large_non_ascii_entry_reaches_every_follower_without_a_failed_tick(tmp_path, caplog, max_bytes, chunked):
    overrides = {} if max_bytes is None else {"append_entries_max_bytes": max_bytes}
    _, nodes = raft_members(tmp_path, **overrides)
    try:
        leader = ready_leader(nodes)
        value = "é" * 150_000  # 300 KB of UTF-8, each byte above 0x7f
        with caplog.at_level(logging.ERROR, logger="pysyncobj"):
            leader.commands.put_connector_config(name="big", config={"v": value}, target_state=None,
                                                 create_only=False, timeout=30)
            wait_for(lambda: all(n.state.connectors.get("big", {}).get("config", {}).get("v") == value for n in nodes),
                     60, interval=0.05, what="every member to apply the large entry")
        failed = [r for r in caplog.records if r.name.startswith("pysyncobj") and "failed _onTick" in r.getMessage()]
        assert bool(failed) is chunked, [r.getMessage() for r in failed]
    finally:
        destroy(nodes)
