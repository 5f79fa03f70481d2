"""Reading ``/metrics`` in tests, and a worker that reports a running sink task by heartbeat.

Used by ``tests/connect/test_metrics.py``, the tests of the node's own metrics (``webapp/metrics.py``)
and of Kafka Connect's metric groups (``webapp/connect_metrics.py``).
"""
from __future__ import annotations

from typing import Callable

from prometheus_client.parser import text_string_to_metric_families

from tools.launcher import wait_for
from webapp.plugin import SourceOffset
from webapp.agent_tasks import AgentTasksWriter
from webapp.runtime.registry import resolve
from webapp.runtime.task_metrics import TaskMetrics

__all__ = ["scrape", "value", "report_a_sink_task", "report_a_task", "assert_source_skips"]


def scrape(client) -> dict[str, list]:
    """``GET /metrics`` (200, Prometheus text) as {family name: samples}."""
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(resp.content.decode())}


def value(samples, **labels) -> float:
    """The value of the first sample carrying ``labels``."""
    return next(s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items()))


def report_a_sink_task(node, fill: Callable[[TaskMetrics], None]) -> TaskMetrics:
    """A worker "w9", playing the node's agent, runs task 0 of a file sink "sink" (assigned through the
    node's coordinator, status RUNNING) and reports the metrics ``fill`` records. Returns those TaskMetrics."""
    return report_a_task(node, fill, "sink", {"connector.class": "FileSinkConnector", "topics": "t"})


def report_a_task(node, fill: Callable[[TaskMetrics], None] | TaskMetrics, connector: str,
                  config: dict[str, str]) -> TaskMetrics:
    """A worker "w9", playing the node's agent, runs task 0 of ``connector`` (``config``; assigned through
    the node's coordinator, status RUNNING) and reports the metrics ``fill`` records, or the TaskMetrics
    given (e.g. those a real task filled): in its heartbeat (the console's figures) and in the agent's
    tasks file in the node's data directory (``/metrics``). Returns those TaskMetrics."""
    member = {"rest_address": "127.0.0.1:9", "weight": 1.0, "roles": ["worker"]}
    tm = fill if isinstance(fill, TaskMetrics) else TaskMetrics()
    key = f"{connector}-0"

    def heartbeat():
        running = {"generation": node.raft.state.assignment["generation"], "connectors": [connector],
                   "tasks": {key: {"state": "RUNNING", "connector": connector, "task": 0, **tm.as_json()}}}
        return node.coordinator.heartbeat("w9", member, running)

    heartbeat()
    node.store.put_connector_config(connector, dict(config))
    node.coordinator.rebalance()
    wait_for(lambda: node.raft.state.assignment["connectors"].get(connector) == "w9", 15, what="connector assigned")
    node.store.put_task_configs(connector, [{"t": "0"}], worker_id="w9",
                                generation=node.raft.state.assignment["generation"])
    node.coordinator.rebalance()
    wait_for(lambda: node.raft.state.assignment["tasks"].get(key) == "w9", 15, what="task assigned")
    node.store.put_status(connector, 0, {"state": "RUNNING", "trace": None}, worker_id="w9",
                          generation=node.raft.state.assignment["generation"])
    if not isinstance(fill, TaskMetrics):
        fill(tm)
    heartbeat()
    entry = {"state": "RUNNING", "connector": connector, "task": 0, "type": resolve(config["connector.class"]).type,
             **tm.as_json()}
    AgentTasksWriter(node.options.data_dir, "w9").write({key: entry})
    return tm


def assert_source_skips(client, connector: str, *, written: int, skipped: int, logged: int) -> None:
    """``/metrics`` shows task 0 of source ``connector`` on worker "w9" with ``skipped`` records dropped by
    ``errors.tolerance=all`` (each a record error and failure), ``logged`` errors logged, and
    ``written + skipped`` records polled."""
    task = {"connector": connector, "task": "0", "worker": "w9"}
    written_family = "kafka_connect_source_task_metrics_source_record_write_total"
    seen: dict = {}

    def listed() -> bool:  # the collector reuses connectors' types for a few seconds (STATUS_CACHE_SECONDS)
        seen["m"] = scrape(client)
        return any(all(s.labels.get(k) == v for k, v in task.items()) for s in seen["m"].get(written_family, ()))

    wait_for(listed, 30, what=f"source task {connector}-0 in /metrics")
    m = seen["m"]
    e = "kafka_connect_task_error_metrics_"
    assert value(m[e + "total_records_skipped"], **task) == skipped
    assert value(m[e + "total_record_errors"], **task) == skipped
    assert value(m[e + "total_record_failures"], **task) == skipped
    assert value(m[e + "total_errors_logged"], **task) == logged
    assert value(m[e + "deadletterqueue_produce_requests"], **task) == 0  # a source has no dead letter queue
    assert value(m["kafka_connect_source_task_metrics_source_record_write_total"], **task) == written
    assert value(m["kafka_connect_source_task_metrics_source_record_poll_total"], **task) == written + skipped


def first_batch(tm: TaskMetrics) -> None:
    """One batch of 120 records in 0.25 s up to offset 120 of t[0], 30 records of lag."""
    tm.batch_done(120, 0.25, (SourceOffset({"kafka_topic": "t", "kafka_partition": 0}, {"kafka_offset": 120}),))
    tm.lag = 30
