"""``/metrics``: Prometheus text format with the node's real Raft, assignment and store figures, and Kafka
Connect's metric groups under the JMX exporter's names (``webapp/connect_metrics.py``)."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from tests.metrics_helpers import first_batch, report_a_sink_task, scrape, value
from webapp.plugin import SourceOffset


def test_metrics_report_raft_assignment_and_store_latency(api, node, client):
    m = scrape(api)
    assert value(m["raftconnect_raft_term"]) == node.raft.term
    assert value(m["raftconnect_raft_is_leader"]) == 1.0
    assert value(m["raftconnect_raft_role"], role="leader") == 1.0
    ticks = node.raft.ticks.figures()  # raftnode.ticks: why this member elected, stepped down or went quiet
    assert value(m["raftconnect_raft_elections_started"]) == ticks["elections_started"]
    assert value(m["raftconnect_raft_step_downs"]) == ticks["step_downs"] == 0
    assert value(m["raftconnect_raft_held_up_ticks"]) <= node.raft.ticks.held_up
    # the member ticks every few ms (its poll's timeout): the longest gap is at least one tick period
    assert node.raft.config.tick_period <= value(m["raftconnect_raft_longest_tick_gap_seconds"]) \
        <= node.raft.ticks.longest_gap_s + 1e-4  # figures() rounds to 0.1 ms
    assert value(m["raftconnect_assignment_generation"]) == node.raft.state.assignment["generation"]
    assert value(m["raftconnect_metadata_store_active"], store="raft") == 1.0
    assert value(m["raftconnect_members"], role="raft") >= 1
    before = sum(s.value for s in m["raftconnect_offset_commit_seconds"] if s.name.endswith("_count"))
    proposals_before = value(m["raftconnect_raft_proposals"])
    commands_before = value(m["raftconnect_raft_proposed_commands"])
    seconds_before = value(m["raftconnect_raft_proposal_seconds"])
    node.store.put_connector_config("m1", {"connector.class": "FileStreamSource"})
    node.store.alter_offsets("m1", [SourceOffset({"p": 0}, {"o": 1})])
    m = scrape(api)
    after = sum(s.value for s in m["raftconnect_offset_commit_seconds"] if s.name.endswith("_count"))
    assert after == before + 1
    writes = [s for s in m["raftconnect_store_write_seconds"] if s.name.endswith("_count")]
    assert value(writes, store="raft", kind="config") >= 1
    # the leader's group commit carried both writes above, each entry one command or more
    proposals, commands = value(m["raftconnect_raft_proposals"]), value(m["raftconnect_raft_proposed_commands"])
    assert commands >= commands_before + 2 and proposals >= proposals_before + 1
    assert 1 <= proposals <= commands
    assert value(m["raftconnect_raft_proposal_seconds"]) > seconds_before  # the rounds of those entries
    stats = node.raft.group_commit.stats()  # read after the scrape: never behind it
    assert stats["proposals"] >= proposals and stats["commands"] >= commands


def test_metrics_need_authentication(api, client):
    del client.defaults["HTTP_AUTHORIZATION"]
    resp = client.get("/metrics")
    assert resp.status_code == 401 and resp.json()["error_code"] == 401


def test_metrics_export_per_task_figures_of_the_nodes_own_agent(api, node):
    """The node's agent writes its tasks' TaskMetrics to its tasks file; the node exports them per task."""
    report_a_sink_task(node, first_batch)

    m = scrape(api)
    task = {"connector": "sink", "task": "0", "worker": "w9"}
    assert value(m["raftconnect_task_records"], **task) == 120
    assert value(m["raftconnect_task_batches"], **task) == 1
    assert value(m["raftconnect_task_records_per_second"], **task) > 0
    assert value(m["raftconnect_task_last_batch_seconds"], **task) == 0.25
    assert value(m["raftconnect_task_lag_records"], **task) == 30
    assert value(m["raftconnect_task_running"], worker="w9", state="RUNNING") == 1
    assert value(m["raftconnect_tasks"], state="RUNNING") == 1
    assert value(m["raftconnect_tasks"], state="FAILED") == 0
    assert value(m["raftconnect_worker_tasks"], worker="w9") == 1
    assert value(m["raftconnect_raft_leader_changes"]) >= 1
    assert value(m["raftconnect_raft_commit_lag"]) >= 0


def test_the_leader_does_not_export_the_tasks_other_workers_report(api, node):
    """Another worker's heartbeat reaches the coordinator (the console shows its tasks), but its task series
    are that worker's node's to export, as in Kafka Connect: a leader exporting every task of the cluster
    took over 30 s and 1.26 GB per scrape at 100,000 tasks (benchmarks/scale)."""
    from webapp.runtime.task_metrics import TaskMetrics

    running = {"generation": -1, "connectors": [], "tasks": {
        "far-0": {"state": "RUNNING", "connector": "far", "task": 0, **TaskMetrics().as_json()}}}
    node.coordinator.heartbeat("w5", {"rest_address": "127.0.0.1:9", "roles": ["worker"]}, running)
    assert "far-0" in node.coordinator.reported["w5"]["tasks"]
    m = scrape(api)
    for family in ("raftconnect_task_records", "kafka_connect_connector_task_metrics", "raftconnect_task_running"):
        assert not [s for s in m.get(family, []) if s.labels.get("worker") == "w5"], family


def test_an_exited_or_replaced_agent_exports_no_task_series(api, node, monkeypatch):
    """The node exports its agent's tasks only while that agent process runs and wrote the file itself
    (a file left by an agent that hung goes stale: tests/runtime/test_agent_status.py)."""
    import os
    from types import SimpleNamespace

    report_a_sink_task(node, first_batch)
    assert value(scrape(api)["raftconnect_task_records"], connector="sink", worker="w9") == 120
    monkeypatch.setattr(node, "agent", SimpleNamespace(pid=os.getpid(), poll=lambda: None))
    assert value(scrape(api)["raftconnect_task_records"], connector="sink", worker="w9") == 120  # its own file
    monkeypatch.setattr(node, "agent", SimpleNamespace(pid=os.getpid() + 1, poll=lambda: None))
    assert not scrape(api).get("raftconnect_task_records")  # a file another process wrote
    monkeypatch.setattr(node, "agent", SimpleNamespace(pid=os.getpid(), poll=lambda: 1))
    assert not scrape(api).get("raftconnect_task_records")  # the agent exited


def test_lag_of_a_task_is_left_out_while_unknown(api, node):
    from webapp.agent_tasks import AgentTasksWriter
    from webapp.runtime.task_metrics import TaskMetrics

    AgentTasksWriter(node.options.data_dir, "w8").write({
        "src-0": {"state": "RUNNING", "connector": "src", "task": 0, "type": "source", **TaskMetrics().as_json()}})
    m = scrape(api)
    assert value(m["raftconnect_task_records"], connector="src", worker="w8") == 0
    assert not [s for s in m.get("raftconnect_task_lag_records", []) if s.labels.get("connector") == "src"]


def test_every_exported_metric_is_documented_in_operations(api, node):
    from pathlib import Path

    from webapp.agent_tasks import AgentTasksWriter
    from webapp.runtime.task_metrics import TaskMetrics

    AgentTasksWriter(node.options.data_dir, "w7").write({
        "s-0": {"state": "RUNNING", "connector": "s", "task": 0, "type": "sink", **TaskMetrics().as_json(), "lag": 1}})
    node.store.put_connector_config("doc", {"connector.class": "FileStreamSource"})
    doc = (Path(__file__).resolve().parents[2] / "docs" / "OPERATIONS.md").read_text()
    names = [n for n in scrape(api) if n.startswith("raftconnect_") and not n.endswith("_created")]
    assert "raftconnect_task_lag_records" in names and "raftconnect_store_write_seconds" in names
    assert [n for n in names if f"`{n}" not in doc] == []


def test_heartbeats_carry_only_the_task_entries_that_changed(api, node):
    """A delta report is merged into the worker's previous report; with nothing to merge into (a new
    coordinator) the answer asks for a full report, which the agent then sends."""
    from types import SimpleNamespace

    from webapp.runtime.worker import Worker

    member = {"rest_address": "127.0.0.1:9", "roles": ["worker"]}
    a = {"state": "RUNNING", "connector": "c", "task": 0, "records": 5}
    b = {"state": "RUNNING", "connector": "c", "task": 1, "records": 7}
    full = {"generation": 1, "connectors": [], "tasks": {"c-0": a, "c-1": b}}
    agent = SimpleNamespace(_acked_tasks=None)
    assert Worker._report(agent, full) is full  # nothing acknowledged yet: everything
    assert not node.coordinator.heartbeat("w6", member, full).get("report_full")
    agent._acked_tasks = full["tasks"]
    now = {"generation": 1, "connectors": [], "tasks": {"c-0": {**a, "records": 9}, "c-1": b}}
    delta = Worker._report(agent, now)
    assert delta["tasks"] == {"c-0": {**a, "records": 9}} and delta["task_keys"] == ["c-0", "c-1"]
    assert not node.coordinator.heartbeat("w6", member, delta).get("report_full")
    assert node.coordinator.reported["w6"]["tasks"] == now["tasks"]
    gone = Worker._report(agent, {"generation": 1, "connectors": [], "tasks": {"c-1": b}})
    node.coordinator.heartbeat("w6", member, gone)
    assert node.coordinator.reported["w6"]["tasks"] == {"c-1": b}  # a stopped task leaves the report
    node.coordinator.reported.pop("w6")  # as on a coordinator that never heard this worker
    assert node.coordinator.heartbeat("w6", member, delta).get("report_full") is True


# ------------------------------------------------------------------ Kafka Connect's metric groups
def report_a_sink_task_with_errors(node) -> None:
    """A worker "w9" runs task 0 of a file sink "sink", with two batches and five records skipped, and says so."""
    def fill(tm):
        first_batch(tm)
        tm.batch_done(80, 0.75)
        tm.record_errors(failed=5, skipped=5, logged=5, dlq_sent=5)
        for ok in (True, False, True, True):  # one commit attempt of four could not reach the control plane
            tm.commit_done(ok)

    report_a_sink_task(node, fill)


def test_connect_groups_show_a_sink_task_and_the_records_it_skipped(api, node):
    report_a_sink_task_with_errors(node)
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
    assert value(m["kafka_connect_connector_task_metrics_offset_commit_failure_percentage"], **task) == 25.0
    assert value(m["kafka_connect_connector_task_metrics_offset_commit_success_percentage"], **task) == 75.0
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


def test_a_follower_exports_no_task_groups(monkeypatch, node):
    from webapp.connect_metrics import ConnectMetricsCollector

    monkeypatch.setattr(type(node.coordinator), "active", property(lambda self: False))
    names = {f.name for f in ConnectMetricsCollector(lambda: node).collect()}
    assert "kafka_connect_connect_worker_rebalance_metrics_epoch" in names
    assert not any(n.startswith("kafka_connect_task_error_metrics") for n in names)


def test_the_grafana_dashboard_queries_only_exported_names(api, node):
    """deploy/grafana/raftconnect-connect.json works against /metrics: each metric it names is exported."""
    import json
    import re

    from tools.launcher import REPO_ROOT

    report_a_sink_task_with_errors(node)
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


def test_a_new_connector_shows_at_the_next_scrape_despite_the_kept_series(node):
    """The leader's kept per-connector lines never hide a connector created or deleted since the last scrape."""
    from webapp.connect_metrics import ConnectMetricsCollector

    collector = ConnectMetricsCollector(lambda: node, clock=lambda: 0.0)  # time stands still

    def listed() -> set[str]:
        text = collector.connector_exposition().decode()
        return {s.labels["connector"] for f in text_string_to_metric_families(text)
                if f.name == "kafka_connect_connector_metrics" for s in f.samples}

    assert "fresh" not in listed()
    node.store.put_connector_config("fresh", {"connector.class": "FileSinkConnector", "topics": "t"})
    assert "fresh" in listed()
    node.store.remove_connector_config("fresh")
    assert "fresh" not in listed()
