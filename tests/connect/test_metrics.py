"""``/metrics``: Prometheus text format with the node's real Raft, assignment and store figures."""
from __future__ import annotations


from tests.metrics_helpers import first_batch, report_a_sink_task, scrape, value
from webapp.plugin import SourceOffset


def test_metrics_report_raft_assignment_and_store_latency(api, node, client):
    m = scrape(api)
    assert value(m["raftconnect_raft_term"]) == node.raft.term
    assert value(m["raftconnect_raft_is_leader"]) == 1.0
    assert value(m["raftconnect_raft_role"], role="leader") == 1.0
    assert value(m["raftconnect_assignment_generation"]) == node.raft.state.assignment["generation"]
    assert value(m["raftconnect_metadata_store_active"], store="raft") == 1.0
    assert value(m["raftconnect_members"], role="raft") >= 1
    before = sum(s.value for s in m["raftconnect_offset_commit_seconds"] if s.name.endswith("_count"))
    node.store.put_connector_config("m1", {"connector.class": "FileStreamSource"})
    node.store.alter_offsets("m1", [SourceOffset({"p": 0}, {"o": 1})])
    m = scrape(api)
    after = sum(s.value for s in m["raftconnect_offset_commit_seconds"] if s.name.endswith("_count"))
    assert after == before + 1
    writes = [s for s in m["raftconnect_store_write_seconds"] if s.name.endswith("_count")]
    assert value(writes, store="raft", kind="config") >= 1


def test_metrics_need_authentication(api, client):
    del client.defaults["HTTP_AUTHORIZATION"]
    resp = client.get("/metrics")
    assert resp.status_code == 401 and resp.json()["error_code"] == 401


def test_metrics_export_per_task_figures_that_agents_report_in_heartbeats(api, node):
    """An agent's heartbeat carries its tasks' TaskMetrics; the leader exports them per task and worker."""
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


def test_lag_of_a_task_is_left_out_while_unknown(api, node):
    from webapp.runtime.task_metrics import TaskMetrics

    running = {"generation": -1, "connectors": [], "tasks": {
        "src-0": {"state": "RUNNING", "connector": "src", "task": 0, **TaskMetrics().as_json()}}}
    node.coordinator.heartbeat("w8", {"rest_address": "127.0.0.1:9", "roles": ["worker"]}, running)
    m = scrape(api)
    assert value(m["raftconnect_task_records"], connector="src", worker="w8") == 0
    assert not [s for s in m.get("raftconnect_task_lag_records", []) if s.labels.get("connector") == "src"]


def test_every_exported_metric_is_documented_in_operations(api, node):
    from pathlib import Path

    from webapp.runtime.task_metrics import TaskMetrics

    node.coordinator.heartbeat("w7", {"rest_address": "127.0.0.1:9", "roles": ["worker"]}, {"tasks": {
        "s-0": {"state": "RUNNING", "connector": "s", "task": 0, **TaskMetrics().as_json(), "lag": 1}}})
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
