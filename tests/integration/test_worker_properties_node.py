"""A raft,worker node configured by a Kafka Connect worker properties file moves data with the file's
producer./consumer./admin. client settings: the agent receives exactly them, librdkafka accepts them in
real clients, the worker's converter settings become the connectors' (schemaless JSON on the wire), and the
raftconnect client restarts the running connector."""
from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from tests.kafka_helpers import read_messages
from tools.demo import SINK_CLASS, SOURCE_CLASS
from tools.launcher import REPO_ROOT, NodeProcess, wait_for
from webapp.kafka.embedded import free_port

pytestmark = pytest.mark.integration

ROWS = 500


def _agent_environ(node_pid: int) -> dict[str, str]:
    children = subprocess.run(["pgrep", "-P", str(node_pid)], capture_output=True, text=True).stdout.split()
    for pid in children:
        try:
            raw = open(f"/proc/{pid}/environ", "rb").read().split(b"\0")
        except OSError:
            continue
        env = dict(item.decode(errors="replace").split("=", 1) for item in raw if b"=" in item)
        if "RAFTCONNECT_NODE_ID" in env:
            return env
    return {}


def test_client_settings_from_worker_properties_reach_running_tasks(tmp_path, kafka_broker):
    props = tmp_path / "worker.properties"
    props.write_text("producer.compression.type=gzip\nproducer.linger.ms=5\nconsumer.fetch.wait.max.ms=50\n"
                     "admin.request.timeout.ms=20000\nclient.id=rc-props-test\n"
                     "producer.max.request.size=1048576\n"  # Java's name: mapped (webapp/kafka/client_overrides.py)
                     "task.shutdown.graceful.timeout.ms=3000\n"
                     # the tasks hold their offsets up to 2 s: the sink's count below arrives by the interval's timer
                     "offset.flush.interval.ms=2000\n"
                     # the worker's converter: connectors that name none write and read schemaless JSON
                     "value.converter=org.apache.kafka.connect.json.JsonConverter\n"
                     "value.converter.schemas.enable=false\n")
    node = NodeProcess(node_id="props", rest_port=free_port(), raft_port=free_port(),
                       data_dir=str(tmp_path / "props"), bootstrap_servers=kafka_broker.bootstrap_servers,
                       extra_args=["--config", str(props)])
    node.start(timeout=120)
    try:
        agent = wait_for(lambda: _agent_environ(node.proc.pid), 60, what="the agent process")
        assert json.loads(agent["RAFTCONNECT_KAFKA_CLIENT_CONFIG"]) == {
            "producer.compression.type": "gzip", "producer.linger.ms": "5", "consumer.fetch.wait.max.ms": "50",
            "admin.socket.timeout.ms": "20000", "client.id": "rc-props-test", "producer.message.max.bytes": "1048576"}
        assert agent["RAFTCONNECT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS"] == "3000"
        assert agent["RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS"] == "2000"

        data = tmp_path / "in.csv"
        data.write_text("id,name\n" + "".join(f"{i},n{i}\n" for i in range(ROWS)))
        c = node.client()
        c.create_connector("props-src", {"connector.class": SOURCE_CLASS, "path": str(data), "format": "csv",
                                         "topic": "props-topic", "tasks.max": "1"})
        c.create_connector("props-sink", {"connector.class": SINK_CLASS, "topics": "props-topic",
                                          "path": str(tmp_path / "out"), "format": "json", "tasks.max": "1"})

        def consumed():
            failures = c.failures("props-src") + c.failures("props-sink")
            assert not failures, failures
            return c.sink_offsets_total("props-sink") >= ROWS
        wait_for(consumed, 180, interval=0.5, what=f"the sink to consume {ROWS} records")
        first = json.loads(read_messages(kafka_broker.bootstrap_servers, "props-topic")[0].value())
        assert "schema" not in first and "payload" not in first and set(first) == {"id", "name"}

        env = {**{k: v for k, v in os.environ.items() if not k.startswith("RAFTCONNECT_") or k == "RAFTCONNECT_DEVELOPMENT"},
               "RAFTCONNECT_URL": node.url, "RAFTCONNECT_USER": node.auth[0], "RAFTCONNECT_PASSWORD": node.auth[1],
               "RAFTCONNECT_CLI_CONFIG": str(tmp_path / "contexts.json"), "PYTHONPATH": str(REPO_ROOT)}
        done = subprocess.run([sys.executable, "-m", "webapp.cli", "restart", "props-sink", "--include-tasks",
                               "-o", "json"], cwd=tmp_path, env=env, capture_output=True, text=True, timeout=60)
        assert done.returncode == 0, done.stderr
        restarted = json.loads(done.stdout)
        assert restarted["name"] == "props-sink" and restarted["connector"]["state"] == "RESTARTING"
        wait_for(lambda: c.all_running("props-sink", 1), 120, what="the sink to run again after its restart")
    finally:
        node.stop()
