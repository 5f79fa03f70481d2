"""A wall-clock jump of ±1 h on the Raft leader (issue 19 item 4): heartbeats and assignment go on.

The leader's process tree (node and agent) runs with ``tools/faultshim`` (its
``time.time()`` shifted by what a file says, the monotonic clock untouched, as a
real clock step). Each phase (+1 h, then -1 h) jumps the leader and creates a
connector whose tasks must run (assignment, status writes: signed requests).
Before the fix the leader refused every signed request outside 60 s of its wall
clock, and the remote workers' sessions expired.

Invariants: every agent has heartbeats acknowledged more than a session timeout
after each jump (read from its status file, which uses the host's monotonic
clock), every worker alive, every acknowledged config served by every member.
Elections may happen on a loaded machine; each phase jumps whoever leads then.
"""
from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest

from tools.demo import SOURCE_CLASS
from tools.launcher import REPO_ROOT, LocalCluster, wait_for

pytestmark = [pytest.mark.integration, pytest.mark.chaos]

SHIM = str(REPO_ROOT / "tools" / "faultshim")


def source(path, topic: str, tasks: int) -> dict[str, str]:
    return {"connector.class": SOURCE_CLASS, "path": str(path), "format": "csv", "topic": topic,
            "tasks.max": str(tasks), "split.min.bytes": "16"}


@pytest.fixture
def cluster(tmp_path, kafka_broker):
    c = LocalCluster(data_dir=str(tmp_path / "c"), bootstrap_servers=kafka_broker.bootstrap_servers, raft_nodes=3,
                     file_allowed_paths=[str(tmp_path)])
    for node in c.nodes:
        offset = tmp_path / f"{node.node_id}.clock"
        offset.write_text("0")
        node.env.update({"PYTHONPATH": os.pathsep.join(p for p in (SHIM, os.environ.get("PYTHONPATH")) if p),
                         "RAFTCONNECT_TEST_CLOCK_OFFSET_FILE": str(offset)})
    try:
        yield c.start()
    finally:
        c.stop()


def heartbeats_acknowledged_since(node, t0: float) -> bool:
    """Whether ``node``'s agent had a heartbeat acknowledged after ``t0`` (``time.monotonic()`` of this host: the
    agent's status file uses the same clock)."""
    status = json.loads((Path(node.data_dir) / "agent-status.json").read_text())
    return (status.get("last_heartbeat_at") or 0) > t0


def test_heartbeats_and_assignment_continue_through_a_leader_clock_jump(cluster, tmp_path):
    data = tmp_path / "rows.csv"
    data.write_text("id,name\n" + "".join(f"{i},row {i}\n" for i in range(30)))
    client = cluster.leader().client()
    client.create_connector("before", source(data, "t-before", 3))
    wait_for(lambda: client.all_running("before", 3), 180, what="the first connector's tasks")
    acknowledged = ["before"]
    jumped: dict[str, int] = {}
    # each phase jumps whoever leads then; a node keeps its offset afterwards, so once leadership moves
    # (elections happen on a loaded machine) the members' clocks differ from each other as well
    for phase, offset in (("plus-1h", 3600), ("minus-1h", -3600)):
        leader = cluster.leader()
        (tmp_path / f"{leader.node_id}.clock").write_text(str(offset))
        jumped[leader.node_id] = offset
        t_jump = time.monotonic()
        name = f"after-{phase}"
        leader.client().create_connector(name, source(data, f"t-{phase}", 6))
        acknowledged.append(name)
        wait_for(lambda: leader.client().all_running(name, 6), 120, what=f"{name}'s tasks RUNNING ({phase})")
        for node in cluster.nodes:  # every agent, the remote ones included, heartbeats through the jump
            wait_for(lambda: heartbeats_acknowledged_since(node, t_jump + 6.0), 60,
                     what=f"{node.node_id}'s heartbeats acknowledged past a session timeout after the jump ({phase})")
        view = leader.client().request("GET", "/raftconnect/v1/cluster")
        assert all(n["alive"] for n in view["nodes"]), (phase, jumped, view["nodes"])
    assert jumped, "no leader was found to jump"
    for node in cluster.nodes:
        wait_for(lambda: sorted(node.client().connectors()) == sorted(acknowledged), 15,
                 what=f"{node.node_id} to serve every acknowledged connector")
        for name in acknowledged:
            assert node.client().request("GET", f"/connectors/{name}/config")["topic"] == \
                f"t-{name.removeprefix('after-')}"
