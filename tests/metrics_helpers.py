"""Reading ``/metrics`` in tests, and a worker that reports a running sink task by heartbeat.

Used by ``tests/connect/test_metrics.py``, the tests of the node's own metrics (``webapp/metrics.py``)
and of Kafka Connect's metric groups (``webapp/connect_metrics.py``).
"""
from __future__ import annotations

from typing import Callable

from prometheus_client.parser import text_string_to_metric_families

from tools.launcher import wait_for
from webapp.plugin import SourceOffset
from webapp.runtime.task_metrics import TaskMetrics

__all__ = ["scrape", "value", "report_a_sink_task"]


def scrape(client) -> dict[str, list]:
    """``GET /metrics`` (200, Prometheus text) as {family name: samples}."""
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(resp.content.decode())}


def value(samples, **labels) -> float:
    """The value of the first sample carrying ``labels``."""
    return next(s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items()))


def report_a_sink_task(node, fill: Callable[[TaskMetrics], None]) -> TaskMetrics:
    """A worker "w9" runs task 0 of a file sink "sink" (assigned through the node's coordinator, status
    RUNNING) and reports the metrics ``fill`` records in its heartbeat. Returns those TaskMetrics."""
    member = {"rest_address": "127.0.0.1:9", "weight": 1.0, "roles": ["worker"]}
    tm = TaskMetrics()

    def heartbeat():
        running = {"generation": node.raft.state.assignment["generation"], "connectors": ["sink"],
                   "tasks": {"sink-0": {"state": "RUNNING", "connector": "sink", "task": 0, **tm.as_json()}}}
        return node.coordinator.heartbeat("w9", member, running)

    heartbeat()
    node.store.put_connector_config("sink", {"connector.class": "FileSinkConnector", "topics": "t"})
    node.coordinator.rebalance()
    wait_for(lambda: node.raft.state.assignment["connectors"].get("sink") == "w9", 15, what="connector assigned")
    node.store.put_task_configs("sink", [{"t": "0"}], worker_id="w9",
                                generation=node.raft.state.assignment["generation"])
    node.coordinator.rebalance()
    wait_for(lambda: node.raft.state.assignment["tasks"].get("sink-0") == "w9", 15, what="task assigned")
    node.store.put_status("sink", 0, {"state": "RUNNING", "trace": None}, worker_id="w9",
                          generation=node.raft.state.assignment["generation"])
    fill(tm)
    heartbeat()
    return tm


def first_batch(tm: TaskMetrics) -> None:
    """One batch of 120 records in 0.25 s up to offset 120 of t[0], 30 records of lag."""
    tm.batch_done(120, 0.25, (SourceOffset({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 120}),))
    tm.lag = 30
