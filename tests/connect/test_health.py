"""``GET /health``: each dependency's state word, on real nodes.

Live nodes (``manage.py runnode``) answer over HTTP without credentials: one
with the embedded Kafka and its agent reports every check ok (and its agent's
death once killed), one pointed at a port where nothing listens names that
address as unreachable within the check's bound. In-process nodes cover the
503 rule (no Raft leader) and the view's body through Django's test client;
:class:`~webapp.connect.health.CachedProbe` is checked on its own.
"""
from __future__ import annotations

import os
import signal
import threading
import time
import uuid

import pytest
import requests

from tools.launcher import NodeProcess, wait_for
from webapp.connect.health import CHECKS, STATES, CachedProbe
from webapp.connect.node import ConnectNode, NodeOptions
from webapp.kafka.embedded import free_port


def get_health(url: str) -> tuple[int, dict, float]:
    """``(status, body, seconds)`` of an unauthenticated ``GET /health``."""
    t0 = time.monotonic()
    resp = requests.get(url + "/health", timeout=10)
    return resp.status_code, resp.json(), time.monotonic() - t0


def health_when(url: str, condition, timeout: float, what: str) -> tuple[int, dict]:
    """Poll ``GET /health`` until ``condition(body)`` holds; ``(status, body)`` of that answer."""
    def check():
        status, body, _ = get_health(url)
        return (status, body) if condition(body) else None
    return wait_for(check, timeout, what=what)


@pytest.mark.integration
def test_live_node_with_embedded_kafka_reports_every_check_ok(kafka_broker, tmp_path):
    # the node starts a dead agent again (tests/integration/test_agent_watchdog.py): not within this test
    node = NodeProcess(node_id="healthy", rest_port=free_port(), raft_port=free_port(),
                       data_dir=str(tmp_path / "n"), bootstrap_servers=kafka_broker.bootstrap_servers,
                       env={"RAFTCONNECT_AGENT_RESTART_BACKOFF_MS": "600000"})
    node.start(timeout=120)
    try:
        # the agent (a Celery worker) joins a few seconds after REST answers: until then it is "starting"
        status, body = health_when(node.url, lambda b: b["state"] == "ok", 90, "every check ok")
        checks = body["checks"]
        assert status == 200 and body["status"] == "healthy" and body["node_id"] == "healthy"
        assert body["roles"] == ["raft", "worker"]
        assert list(checks) == ["raft", "metadata_store", "kafka", "spark", "agent"]
        raft = checks["raft"]
        assert raft["state"] == "ok" and raft["role"] == "LEADER" and raft["leader"]
        assert (raft["members"], raft["reachable_members"], raft["has_quorum"]) == (1, 1, True)
        assert checks["metadata_store"] == {"state": "ok", "name": "raft", "backend": "raft"}
        kafka = checks["kafka"]
        assert kafka["state"] == "ok" and kafka["bootstrap_servers"] == kafka_broker.bootstrap_servers
        assert kafka["brokers"] >= 1
        # no batch has needed Spark: the agent's session is started lazily
        assert checks["spark"]["state"] == "not_started" and checks["spark"]["master"]
        agent = checks["agent"]
        assert agent["state"] == "ok" and agent["last_heartbeat_s_ago"] <= agent["session_timeout_s"]

        # the agent dies: the node still serves requests (200) and says which part is down
        os.kill(agent["pid"], signal.SIGKILL)
        status, body = health_when(node.url, lambda b: b["checks"]["agent"]["state"] == "down", 10,
                                   "the agent reported down")
        assert status == 200 and body["state"] == "degraded"
        assert body["checks"]["agent"]["exit_code"] == -signal.SIGKILL
        assert body["checks"]["spark"]["state"] == "down"
        assert "agent down" in body["message"]
    finally:
        node.stop()


@pytest.mark.integration
def test_node_whose_kafka_is_unreachable_says_so_naming_the_address(tmp_path):
    address = f"127.0.0.1:{free_port()}"  # nothing listens there
    node = NodeProcess(node_id="no-kafka", rest_port=free_port(), raft_port=free_port(),
                       data_dir=str(tmp_path / "n"), bootstrap_servers=address, roles="raft")
    node.start(timeout=120)  # /health is 200: the control plane does not need Kafka
    try:
        # answers within the request's 10 s timeout (a generous deadline) although nothing answers at the address:
        # the wait of each check is bounded (health.WAIT_S), see test_cached_probe_bounds_the_wait_and_reuses_its_answer
        status, body, _ = get_health(node.url)
        assert status == 200 and body["state"] == "degraded"
        kafka = body["checks"]["kafka"]
        assert kafka["state"] == "unreachable" and kafka["bootstrap_servers"] == address
        assert address in kafka["error"]
        assert "kafka unreachable" in body["message"]
        assert body["checks"]["raft"]["state"] == "ok"
        assert body["checks"]["metadata_store"]["state"] == "ok"
        # a raft-only node runs no agent
        assert body["checks"]["agent"]["state"] == "not_applicable"
        assert body["checks"]["spark"]["state"] == "not_applicable"
    finally:
        node.stop()


def in_process_node(tmp_path, **options) -> ConnectNode:
    return ConnectNode(NodeOptions(node_id="n1", raft_address=f"127.0.0.1:{free_port()}",
                                   rest_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "node"),
                                   bootstrap_servers=f"127.0.0.1:{free_port()}", **options))


def test_view_answers_without_credentials_with_every_check(db, client, tmp_path):
    node = in_process_node(tmp_path)
    node.start_control_plane()
    try:
        resp = client.get("/health")
        assert resp.status_code == 200
        body = resp.json()
        assert body["status"] == "healthy" and body["state"] == "degraded"
        checks = body["checks"]
        assert checks["raft"]["state"] == "ok"
        assert checks["metadata_store"]["state"] == "ok"
        assert checks["kafka"]["state"] == "unreachable"
        assert node.options.bootstrap_servers in checks["kafka"]["error"]
        # this in-process node never started its agent process
        assert checks["agent"] == {"state": "down", "error": "this node has not started its agent process"}
        assert checks["spark"]["state"] == "down"
    finally:
        node.stop()
    resp = client.get("/health")  # stopped: no node in this process
    assert resp.status_code == 503 and resp.json()["status"] == "starting" and resp.json()["state"] == "down"


def test_raft_member_without_a_leader_answers_503(tmp_path):
    # its only peer never answers: no election can succeed
    node = in_process_node(tmp_path, raft_peers=[f"127.0.0.1:{free_port()}"], cluster_secret="s", roles=("raft",))
    with pytest.raises(RuntimeError, match="did not elect a leader"):
        node.start_control_plane(ready_timeout=0.5)
    try:
        status, body = node.health.report()
        assert status == 503 and body["status"] == "unhealthy" and body["state"] == "down"
        raft = body["checks"]["raft"]
        assert raft["state"] == "unreachable" and raft["leader"] is None
        assert (raft["members"], raft["reachable_members"]) == (2, 1)
        assert "no Raft leader" in raft["error"]
        assert body["checks"]["metadata_store"]["state"] == "unreachable"
    finally:
        node.stop()


def test_a_member_with_state_starts_without_a_leader_and_serves_its_journal(tmp_path):
    """A member restarted while no majority is up (all of them after a power cut) exited after 30 s;
    now it starts from its journal, answers 503 on /health and has the state it had."""
    first = in_process_node(tmp_path, cluster_secret="s", roles=("raft",))
    first.start_control_plane()
    meta = os.path.join(first.options.data_dir, "raft", "raft.journal.meta")
    try:
        written = time.time_ns()
        first.store.put_connector_config("kept", {"connector.class": "X"})
        # pysyncobj saves the commit index with the journal's metadata once a second: a member applies
        # from its journal only what that index covers
        wait_for(lambda: os.stat(meta).st_mtime_ns > written, 15, interval=0.05, what="the commit index saved")
    finally:
        first.stop()
    # the same member again, now with a peer that never answers: no election can succeed
    node = ConnectNode(NodeOptions(node_id="n1", raft_address=first.options.raft_address,
                                   rest_address=first.options.rest_address, data_dir=first.options.data_dir,
                                   bootstrap_servers=first.options.bootstrap_servers, cluster_secret="s",
                                   roles=("raft",), raft_peers=[f"127.0.0.1:{free_port()}"]))
    node.start_control_plane(ready_timeout=0.5)  # returns
    try:
        status, body = node.health.report()
        assert status == 503 and body["checks"]["raft"]["leader"] is None
        assert node.store.get_connector("kept").config == {"connector.class": "X"}
        assert not node.coordinator.active
    finally:
        node.stop()


def test_a_relational_active_store_is_pinged(tmp_path, django_db_blocker):
    from tests.storage.conftest import PG_URL, drop_database

    db = f"raftconnect_test_{uuid.uuid4().hex[:10]}"
    with django_db_blocker.unblock():  # the store manages its own connections on a runtime alias
        node = in_process_node(tmp_path, roles=("raft",), metadata_store="pg", store_urls={"pg": PG_URL.format(db=db)})
        node.start_control_plane()
        try:
            status, body = node.health.report()
            assert status == 200
            assert body["checks"]["metadata_store"] == {"state": "ok", "name": "pg", "backend": "postgresql"}
        finally:
            node.stop()
            drop_database("postgresql", db)


def test_worker_only_node_reports_raft_and_store_as_not_applicable(tmp_path):
    cluster = f"127.0.0.1:{free_port()}"
    node = in_process_node(tmp_path, roles=("worker",), cluster=[cluster], cluster_secret="s")
    node.start_control_plane()  # holds no Raft state: serves REST by forwarding to its cluster
    try:
        status, body = node.health.report()
        assert status == 200 and body["roles"] == ["worker"]
        checks = body["checks"]
        assert checks["raft"]["state"] == "not_applicable" and checks["raft"]["cluster"] == [cluster]
        assert checks["metadata_store"]["state"] == "not_applicable"
        assert checks["agent"]["state"] == "down"  # this in-process node started no agent
    finally:
        node.stop()


def test_cached_probe_bounds_the_wait_and_reuses_its_answer():
    release = threading.Event()
    calls = []

    def probe():
        calls.append(1)
        release.wait(10)
        return {"state": "ok"}

    p = CachedProbe("test", probe, lambda s: {"state": "unreachable", "error": f"no answer within {s:.1f} s"},
                    ttl=60.0, wait=0.2)
    try:
        late = p.get()  # the probe is still blocked: the answer says so instead of waiting for it (up to 10 s)
        assert late["state"] == "unreachable" and "no answer within 0.2 s" in late["error"]
        assert p.get()["state"] == "unreachable"  # the same check still runs: not a second one
        release.set()
        assert wait_for(lambda: p.get()["state"] == "ok", 5, interval=0.01, what="the answer")
        assert p.get() == {"state": "ok"} and len(calls) == 1  # reused within the ttl
    finally:
        release.set()
        p.close()
    assert p.get() == {"state": "ok"}  # a fresh answer is still served after close


def test_cached_probe_turns_an_exception_into_unreachable():
    def probe():
        raise ConnectionRefusedError("127.0.0.1:1 refused")

    p = CachedProbe("test", probe, lambda s: {"state": "unreachable"}, ttl=60.0, wait=5.0)
    try:
        assert p.get() == {"state": "unreachable", "error": "ConnectionRefusedError: 127.0.0.1:1 refused"}
    finally:
        p.close()


def test_openapi_describes_the_health_body_and_the_answer_conforms(api):
    import jsonschema

    schema = api.get("/raftconnect/v1/openapi.json").json()
    op = schema["paths"]["/health"]["get"]
    for code in ("200", "503"):
        assert op["responses"][code]["content"]["application/json"]["schema"]["$ref"].endswith("/HealthReport")
    assert op.get("security") in (None, [], [{}])  # no authentication
    report = schema["components"]["schemas"]["HealthReport"]
    checks = report["properties"]["checks"]
    assert checks["required"] == list(CHECKS)
    assert set(checks["properties"]["kafka"]["properties"]["state"]["enum"]) == set(STATES)
    resp = api.get("/health")
    jsonschema.validate(resp.json(), report)
