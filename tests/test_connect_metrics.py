"""Kafka Connect's metric groups on ``/metrics`` under the JMX exporter's names (webapp/connect_metrics.py)."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests import metrics_helpers
from tests.connect.conftest import api, node  # noqa: F401 - fixtures
from tests.metrics_helpers import first_batch, scrape, value


def report_a_sink_task(node) -> None:  # noqa: F811
    """A worker "w9" runs task 0 of a file sink "sink", with two batches and five records skipped, and says so."""
    def fill(tm):
        first_batch(tm)
        tm.batch_done(80, 0.75)
        tm.record_errors(failed=5, skipped=5, logged=5, dlq_sent=5)

    metrics_helpers.report_a_sink_task(node, fill)


def test_connect_groups_show_a_sink_task_and_the_records_it_skipped(api, node):  # noqa: F811
    report_a_sink_task(node)
    m = scrape(api)
    task = {"connector": "sink", "task": "0", "worker": "w9"}
    # the silent data loss of errors.tolerance=all is a number now
    assert value(m["kafka_connect_task_error_metrics_total_records_skipped"], **task) == 5
    assert value(m["kafka_connect_task_error_metrics_total_errors_logged"], **task) == 5
    assert value(m["kafka_connect_task_error_metrics_deadletterqueue_produce_requests"], **task) == 5
    assert value(m["kafka_connect_task_error_metrics_deadletterqueue_produce_failures"], **task) == 0
    assert value(m["kafka_connect_sink_task_metrics_sink_record_send_total"], **task) == 200
    assert value(m["kafka_connect_sink_task_metrics_sink_record_read_total"], **task) == 205
    assert value(m["kafka_connect_sink_task_metrics_put_batch_avg_time_ms"], **task) == 500.0
    assert value(m["kafka_connect_connector_task_metrics_batch_size_avg"], **task) == 100.0
    assert value(m["kafka_connect_connector_task_metrics"], status="running", **task) == 1.0
    assert value(m["kafka_connect_connector_task_metrics_running_ratio"], **task) == 1.0
    assert "kafka_connect_source_task_metrics_source_record_poll_total" not in m or \
        not any(s.labels.get("connector") == "sink" for s in m["kafka_connect_source_task_metrics_source_record_poll_total"])
    assert value(m["kafka_connect_connect_worker_metrics_connector_running_task_count"], connector="sink") == 1
    assert value(m["kafka_connect_connect_worker_metrics_connector_failed_task_count"], connector="sink") == 0
    assert value(m["kafka_connect_connect_worker_metrics_task_count"], worker="w9") == 1
    assert value(m["kafka_connect_connector_metrics"], connector="sink", connector_type="sink") == 1
    generation = node.raft.state.assignment["generation"]
    assert value(m["kafka_connect_connect_worker_rebalance_metrics_epoch"]) == generation
    assert value(m["kafka_connect_connect_worker_rebalance_metrics_completed_rebalances_total"]) == generation
    assert "raftconnect_raft_term" in m  # beside the node's own metrics


def test_a_follower_exports_no_task_groups(monkeypatch, node):  # noqa: F811
    from webapp.connect_metrics import ConnectMetricsCollector

    monkeypatch.setattr(type(node.coordinator), "active", property(lambda self: False))
    names = {f.name for f in ConnectMetricsCollector(lambda: node).collect()}
    assert "kafka_connect_connect_worker_rebalance_metrics_epoch" in names
    assert not any(n.startswith("kafka_connect_task_error_metrics") for n in names)


def test_the_grafana_dashboard_queries_only_exported_names(api, node):  # noqa: F811
    """deploy/grafana/raftconnect-connect.json works against /metrics: each metric it names is exported."""
    import json
    import re

    from tools.launcher import REPO_ROOT

    report_a_sink_task(node)
    node.store.put_connector_config("src", {"connector.class": "FileSourceConnector", "path": "/x", "topic": "t"})
    exported = set()
    for f in text_string_to_metric_families(api.get("/metrics").content.decode()):
        exported.update(s.name for s in f.samples)
    dashboard = json.loads((REPO_ROOT / "deploy" / "grafana" / "raftconnect-connect.json").read_text())
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    named = {n for e in exprs for n in re.findall(r"\b((?:kafka_connect|raftconnect)_[a-z_]+)\b", e)}
    assert len(named) >= 15
    # the dashboard's source-task panels need a running source: those names come from the collector's groups
    missing = {n for n in named - exported if not n.startswith("kafka_connect_source_task_metrics_")}
    assert not missing, missing
    from webapp.connect_metrics import ConnectMetricsCollector
    source_names = {n for n in named if n.startswith("kafka_connect_source_task_metrics_")}
    declared = {f.name for f in ConnectMetricsCollector(lambda: node).collect()}
    assert source_names <= declared, source_names - declared
