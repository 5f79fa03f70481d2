"""A metadata store outage under a running pipeline: tasks hold their offsets and resume, none fails.

A node whose active store is PostgreSQL runs a file source task one row per batch. The store's
database then refuses connections (``ALLOW_CONNECTIONS false`` and its sessions ended) for longer than
``offset.flush.timeout.ms``: the task's commits cannot get through, so it must hold (no new batch, no
FAILED) and, once the database is back, commit and carry on to the end of the file with every row in
the topic, at most one batch twice.
"""
from __future__ import annotations

import uuid

import pytest
from prometheus_client.parser import text_string_to_metric_families

from tools.demo import SOURCE_CLASS
from tools.launcher import NodeProcess, wait_for
from webapp.kafka.embedded import free_port
from webapp.runtime.converters import decode_value
from tests.kafka_helpers import read_topic
from tests.storage.conftest import PG_URL, drop_database, set_pg_connections

pytestmark = pytest.mark.integration

ROWS = 1000  # one per batch: the outage begins a few rows in, long before the end of the file


def failure_percentage(client) -> float:
    """``src`` task 0's ``offset_commit_failure_percentage`` in the leader's ``/metrics`` (0 before it shows)."""
    text = client.session.get(client.url + "/metrics", timeout=10).text
    for family in text_string_to_metric_families(text):
        if family.name == "kafka_connect_connector_task_metrics_offset_commit_failure_percentage":
            for sample in family.samples:
                if sample.labels.get("connector") == "src" and sample.labels.get("task") == "0":
                    return sample.value
    return 0.0


def test_a_task_holds_through_a_store_outage_and_resumes_without_failing(tmp_path, kafka):
    db = f"raftconnect_it_{uuid.uuid4().hex[:8]}"
    data = tmp_path / "in.csv"
    data.write_text("id\n" + "".join(f"{i}\n" for i in range(ROWS)))
    node = NodeProcess(node_id="n1", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "n1"),
                       bootstrap_servers=kafka.bootstrap_servers, extra_args=["--metadata-store", "pg"],
                       env={"RAFTCONNECT_STORE_PG": PG_URL.format(db=db),
                            "RAFTCONNECT_OFFSET_FLUSH_TIMEOUT_MS": "1000"})
    try:
        node.start(timeout=90)
        client = node.client()

        def agent_log() -> str:
            return node.log_tail(1_000_000, path=node.agent_log_path)

        client.create_connector("src", {"connector.class": SOURCE_CLASS, "path": str(data), "format": "csv",
                                        "topic": "outage", "tasks.max": "1", "batch.max.rows": "1"})
        wait_for(lambda: client.offsets("src")["offsets"], 60, what="a first committed offset")
        set_pg_connections(db, allowed=False)
        try:
            wait_for(lambda: "could not commit its offsets" in agent_log(), 60,
                     what="the task holding its offsets")
            read_during = len(read_topic(kafka.bootstrap_servers, "outage"))
            # the agent's heartbeats still reach the leader: its /metrics shows the failed tries mount up
            wait_for(lambda: failure_percentage(client) > 0, 30, what="the failed try in /metrics")
            first = failure_percentage(client)
            wait_for(lambda: failure_percentage(client) > first, 30, what="the task trying its commit again")
            assert len(read_topic(kafka.bootstrap_servers, "outage")) == read_during  # and no new batch ran
        finally:
            set_pg_connections(db, allowed=True)
        assert read_during < ROWS  # held mid-file: no batch ran while its commit could not get through
        wait_for(lambda: "the control plane answered after" in agent_log(), 60, what="the held commit")
        # it carries on to the end of the file: every row arrives, the task never FAILED
        wait_for(lambda: len(read_topic(kafka.bootstrap_servers, "outage")) >= ROWS, 120, what="the rest of the file")
        assert client.all_running("src", 1) and not client.failures("src")
        assert agent_log().count("could not commit its offsets") == 1  # a warning per outage, not per try
        rows = [decode_value(v)[1]["id"] for v in read_topic(kafka.bootstrap_servers, "outage")]
        assert {str(r) for r in rows} == {str(i) for i in range(ROWS)}
        assert len(rows) - ROWS <= 1  # at most the held batch again
    finally:
        node.stop()
        drop_database("postgresql", db)
