"""``/metrics``: Prometheus text format with the node's real Raft, assignment and store figures."""
from __future__ import annotations

from prometheus_client.parser import text_string_to_metric_families

from webapp.connectors.api import SourceOffset


def scrape(client) -> dict[str, list]:
    resp = client.get("/metrics")
    assert resp.status_code == 200 and resp["Content-Type"].startswith("text/plain")
    return {f.name: f.samples for f in text_string_to_metric_families(resp.content.decode())}


def value(samples, **labels) -> float:
    return next(s.value for s in samples if all(s.labels.get(k) == v for k, v in labels.items()))


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
