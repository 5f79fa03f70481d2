"""What Celery carries between nodes: assignment views reach a remote worker through a shared broker.

The coordinator sends each worker its view as a Celery message (the fast path)
and again in every heartbeat reply (the repair path). With a broker every node
reaches (Redis here), a remote worker gets new generations by Celery even when
its heartbeats are slowed to one every 4 s. With the embedded filesystem broker
(one folder per node) a message for another node could never arrive, so none
is sent: remote workers learn their views from heartbeats, and nothing piles up
in the leader's folder.
"""
from __future__ import annotations

import json
import os

import pytest
import redis

from tools.demo import SOURCE_CLASS
from tools.launcher import LocalCluster, wait_for

pytestmark = pytest.mark.integration

REDIS_DB = 11


def _run_pipeline(cluster, data):
    """Two one-task connectors (the assignor puts one task on each worker); the remote agent's delivery counts."""
    c = cluster.leader().client()
    names = ["spread-a", "spread-b"]
    for name in names:
        c.create_connector(name, {"connector.class": SOURCE_CLASS, "path": str(data), "format": "csv",
                                  "topic": name, "tasks.max": "1"})
    remote = cluster.nodes[-1]

    def remote_task_running():
        tasks = [t for name in names for t in c.status(name)["tasks"]]
        return len(tasks) == 2 and all(t["state"] == "RUNNING" for t in tasks) and \
            any(t["worker_id"].endswith(f":{remote.rest_port}") for t in tasks)
    wait_for(remote_task_running, 120, what="both tasks RUNNING, one on the worker-only node")
    return remote


def _agent_status(remote) -> dict:
    with open(os.path.join(remote.data_dir, "agent-status.json")) as fh:
        return json.load(fh)


def _delivered(remote, path: str) -> dict[str, int] | None:
    """The remote agent's deliveries once ``path`` has brought a generation (the agent writes its status
    file on heartbeats, so it may show a delivery a heartbeat late)."""
    with open(os.path.join(remote.data_dir, "agent-status.json")) as fh:
        counts = json.load(fh)["first_delivered_by"]
    return counts if counts[path] >= 1 else None


def test_views_reach_a_remote_worker_by_celery_through_a_shared_broker(kafka, tmp_path, monkeypatch):
    redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB).flushdb()
    monkeypatch.setenv("RAFTCONNECT_CELERY_BROKER", f"redis://127.0.0.1:6379/{REDIS_DB}")
    monkeypatch.setenv("RAFTCONNECT_HEARTBEAT_INTERVAL_MS", "4000")  # heartbeats rarely win the race
    data = tmp_path / "in.csv"
    data.write_text("id\n" + "".join(f"{i}\n" for i in range(100)))
    cluster = LocalCluster(data_dir=str(tmp_path / "c"), bootstrap_servers=kafka.bootstrap_servers, raft_nodes=1,
                           worker_nodes=1, extra_args=["--session-timeout-ms", "20000"],
                           file_allowed_paths=[str(tmp_path)]).start()
    try:
        remote = _run_pipeline(cluster, data)
        wait_for(lambda: _delivered(remote, "celery"), 30, what="a generation delivered by Celery")
        # a later generation goes by Celery as a delta from the view the agent's last heartbeat named; it
        # applies whatever the heartbeats brought meanwhile (a base they could overtake was dropped once: d005f1f)
        beat = _agent_status(remote)["last_heartbeat_at"]
        wait_for(lambda: _agent_status(remote)["last_heartbeat_at"] != beat, 30,
                 what="a heartbeat naming the view the remote agent holds")
        cluster.leader().client().create_connector(
            "spread-c", {"connector.class": SOURCE_CLASS, "path": str(data), "format": "csv", "topic": "spread-c",
                         "tasks.max": "4"})
        deltas = wait_for(lambda: (lambda d: d if d["applied"]["celery"] >= 1 else None)(
            _agent_status(remote)["view_deltas"]), 30, what="a view delta applied from Celery")
        assert deltas["dropped"]["celery"] == 0, deltas
    finally:
        cluster.stop()
        redis.Redis(host="127.0.0.1", port=6379, db=REDIS_DB).flushdb()


def test_with_the_embedded_broker_remote_workers_get_views_by_heartbeat_and_nothing_is_left_queued(
        kafka, tmp_path, monkeypatch):
    monkeypatch.delenv("RAFTCONNECT_CELERY_BROKER", raising=False)
    data = tmp_path / "in.csv"
    data.write_text("id\n" + "".join(f"{i}\n" for i in range(100)))
    cluster = LocalCluster(data_dir=str(tmp_path / "c"), bootstrap_servers=kafka.bootstrap_servers, raft_nodes=1,
                           worker_nodes=1, file_allowed_paths=[str(tmp_path)]).start()
    try:
        remote = _run_pipeline(cluster, data)
        delivered = wait_for(lambda: _delivered(remote, "heartbeat"), 30, what="a generation delivered by heartbeat")
        assert delivered["celery"] == 0, delivered
        remote_queue = f"connect.worker.{cluster.nodes[-1].node_id}"
        leader_folder = os.path.join(cluster.nodes[0].data_dir, "broker", "queue")
        assert not [f for f in os.listdir(leader_folder) if f.endswith(f".{remote_queue}.msg")]
    finally:
        cluster.stop()
