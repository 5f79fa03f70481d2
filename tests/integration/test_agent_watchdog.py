"""The node keeps its worker agent running: a ``kill -9`` of the agent brings its tasks back by themselves."""
from __future__ import annotations

import os
import signal

import pyarrow.parquet as pq
import pytest
import requests

from tools.demo import SINK_CLASS, SOURCE_CLASS
from tools.launcher import NodeProcess, wait_for
from webapp.kafka.embedded import EmbeddedKafka, free_port

pytestmark = pytest.mark.integration


def agent_check(node: NodeProcess) -> dict:
    return requests.get(node.url + "/health", timeout=5).json()["checks"]["agent"]


def test_a_killed_agent_is_started_again_and_its_tasks_run(tmp_path):
    feed = tmp_path / "feed.csv"
    feed.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(50)))
    out = tmp_path / "out"
    with EmbeddedKafka(log_dir=tmp_path / "kafka") as kafka:
        node = NodeProcess(node_id="w1", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "n1"),
                           bootstrap_servers=kafka.bootstrap_servers).start(timeout=90)
        try:
            c = node.client()
            c.create_connector("src", {"connector.class": SOURCE_CLASS, "path": str(feed), "format": "csv",
                                       "topic": "feed", "tasks.max": "1"})
            c.create_connector("sink", {"connector.class": SINK_CLASS, "topics": "feed", "path": str(out),
                                        "format": "parquet", "tasks.max": "1"})
            wait_for(lambda: c.sink_offsets_total("sink") >= 50, 120, what="the first 50 rows in the sink")
            wait_for(lambda: agent_check(node)["state"] == "ok", 30, what="the agent reporting ok")
            first = agent_check(node)["pid"]
            os.kill(first, signal.SIGKILL)
            wait_for(lambda: agent_check(node)["state"] == "down", 30, what="/health to see the agent down")
            wait_for(lambda: agent_check(node).get("pid") not in (None, first) and agent_check(node)["state"] == "ok",
                     60, what="a new agent process heartbeating")
            assert agent_check(node)["restarts"] == 1
            with open(feed, "a") as f:  # rows written after the restart travel through the new agent's tasks
                f.writelines(f"{i},n{i}\n" for i in range(50, 80))
            wait_for(lambda: c.sink_offsets_total("sink") >= 80, 120, what="rows written after the restart")
            wait_for(lambda: c.all_running("src", 1) and c.all_running("sink", 1), 60, what="tasks RUNNING")
            got = pq.read_table(out).column("id").to_pylist()
            assert set(got) == set(range(80))
            metrics = c.session.get(node.url + "/metrics", timeout=10).text
            assert "raftconnect_agent_restarts_total 1.0" in metrics and "raftconnect_agent_up 1.0" in metrics
        finally:
            node.stop()
