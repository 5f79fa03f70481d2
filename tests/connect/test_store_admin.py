"""The Django admin's metadata store page and the REST store endpoints on an in-process node."""
from __future__ import annotations

import uuid

import pytest

from tests.storage.conftest import PG_URL, drop_database
from tools.launcher import wait_for
from webapp.connect.node import ConnectNode, NodeOptions
from webapp.kafka.embedded import free_port

from .conftest import basic, make_user


@pytest.fixture
def pg_node(tmp_path, django_db_blocker):
    db = f"raftconnect_admin_{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        n = ConnectNode(NodeOptions(node_id="n1", raft_address=f"127.0.0.1:{free_port()}",
                                    rest_address="127.0.0.1:18083", data_dir=str(tmp_path / "node"),
                                    store_urls={"pg": PG_URL.format(db=db).replace("postgres@", "postgres:pw-123@")}))
        n.start_control_plane()
        wait_for(lambda: n.coordinator.active, 15, what="coordinator to become active")
        try:
            yield n
        finally:
            n.stop()
            drop_database("postgresql", db)


def test_admin_page_is_for_superusers_and_switches_the_store(db, pg_node, client, django_user_model):
    client.force_login(make_user("op", "operator"))  # replicated users below admin are not staff
    assert client.get("/admin/metadata-store/").status_code == 302  # to the admin's login page
    client.force_login(make_user("root", "admin"))  # the admin role is staff and superuser in each node's mirror
    page = client.get("/admin/metadata-store/")
    assert page.status_code == 200
    html = page.content.decode()
    assert 'id="active-store">raft<' in html and "pw-123" not in html and "***" in html
    assert "/admin/metadata-store/" in client.get("/admin/").content.decode()  # linked from the index
    resp = client.post("/admin/metadata-store/", {"action": "switch", "target": "pg"})
    assert resp.status_code == 302
    wait_for(lambda: pg_node.raft.state.switch["phase"] == "completed", 60, what="the switch to complete")
    assert pg_node.raft.state.active_store == "pg"
    assert 'id="active-store">pg<' in client.get("/admin/metadata-store/").content.decode()


def test_admin_page_needs_the_csrf_token(db, pg_node, django_user_model):
    from django.test import Client

    csrf_client = Client(enforce_csrf_checks=True)
    csrf_client.force_login(make_user("root", "admin"))
    assert csrf_client.post("/admin/metadata-store/", {"action": "rollback"}).status_code == 403
    assert pg_node.raft.state.switch is None


def test_rest_switch_needs_an_admin_and_reports_progress(db, pg_node, client, django_user_model):
    make_user("viewer", "viewer")
    make_user("root", "admin")
    assert client.get("/raftconnect/v1/metadata-store").status_code == 401
    client.defaults["HTTP_AUTHORIZATION"] = basic("viewer", "pw")
    assert client.get("/raftconnect/v1/metadata-store").json()["active"] == "raft"
    denied = client.post("/raftconnect/v1/metadata-store/switch", {"target": "pg"}, content_type="application/json")
    assert denied.status_code == 403 and denied.json()["error_code"] == 403
    client.defaults["HTTP_AUTHORIZATION"] = basic("root", "pw")
    resp = client.post("/raftconnect/v1/metadata-store/switch", {"target": "pg"}, content_type="application/json")
    assert resp.status_code == 202 and resp.json()["switch"]["target"] == "pg"
    wait_for(lambda: client.get("/raftconnect/v1/metadata-store").json()["switch"]["phase"] == "completed", 60,
             what="the switch to complete")
    body = client.get("/raftconnect/v1/metadata-store").json()
    assert body["active"] == "pg" and body["previous"] == "raft" and "pw-123" not in str(body)
    assert set(body["switch"]["progress"]["digest"]) == {"config", "statuses", "offsets"}


def _switch(phase: str, **progress) -> dict:
    return {"id": "s1", "source": "raft", "target": "pg", "phase": phase, "epoch": 1, "started_at": 1_000.0,
            "updated_at": 1_012.0, "progress": progress, "error": "verify failed: c1 differs in offsets"
            if phase == "aborted" else None}


def test_switch_view_shows_steps_progress_and_a_plain_result():
    from webapp.connect.store_admin import readable_duration, switch_view

    running = switch_view(_switch("copy", prepare_s=0.4, names_total=200, names_copied=50), now=1_003.0)
    assert [s["state"] for s in running["steps"]] == ["done", "current", "pending", "pending"]
    assert running["steps"][1]["detail"] == "50 of 200 names" and running["percent"] == 18
    assert running["running"] and running["elapsed"] == "3.0 s" and "copying 50 of 200" in running["headline"]
    done = switch_view(_switch("completed", prepare_s=0.4, copy_s=61, verify_s=2, duration_s=64.2,
                               commit_stall_ms=12.0, digest={"config": {"count": 1}, "statuses": {"count": 3},
                                                             "offsets": {"count": 0}}), now=1_100.0)
    assert [s["state"] for s in done["steps"]] == ["done"] * 4 and done["steps"][1]["detail"] == "1 min 1 s"
    assert done["headline"] == "Switched from raft to pg in 1 min 4 s."
    text = " ".join(done["result"])
    assert "1 connector, 3 statuses and 0 offsets" in text and "1970-01-01 00:16:40 UTC" in text
    assert "raft is now read-only and keeps its data" in text
    aborted = switch_view(_switch("aborted", prepare_s=0.4, copy_s=1.0, names_total=3, names_verified=0), now=1_020.0)
    assert [s["state"] for s in aborted["steps"]] == ["done", "done", "failed", "pending"]
    assert "during verify" in aborted["headline"] and "after 12 s" in aborted["headline"]
    assert "raft stayed the active store and kept every write" in " ".join(aborted["result"])
    assert [readable_duration(s) for s in (0.25, 42, 3725)] == ["0.2 s", "42 s", "1 h 2 min"]


def test_rollback_is_offered_only_when_it_means_something():
    from types import SimpleNamespace

    from raftnode.state import ClusterStateMachine
    from webapp.storage.switch import SwitchManager

    sm = ClusterStateMachine()
    stores = SimpleNamespace(source=lambda name: "cluster" if name in sm.store_specs else None)
    manager = SwitchManager(SimpleNamespace(state=sm), SimpleNamespace(stores=stores))
    assert manager.rollback_plan()["possible"] is False  # no switch yet
    sm._zz_store_spec("pg", {"url": "postgresql://u@h/db"}, 1.0, _doApply=True)
    sm._begin_switch(0, "s1", "raft", "pg", 1.0, _doApply=True)
    assert manager.rollback_plan() | {"reason": ""} == {"possible": True, "action": "abort", "target": "raft",
                                                        "reason": ""}
    sm._abort_switch(0, "s1", "operator", 2.0, _doApply=True)
    plan = manager.rollback_plan()
    assert not plan["possible"] and "raft has been the active store throughout" in plan["reason"]
    sm._begin_switch(0, "s2", "raft", "pg", 3.0, _doApply=True)
    sm._switch_phase(0, "s2", "verify", {}, 3.0, _doApply=True)
    sm._commit_switch(0, "s2", {}, 4.0, _doApply=True)
    assert not manager.rollback_plan()["possible"]  # committed, finishing
    sm._switch_phase(0, "s2", "completed", {}, 5.0, _doApply=True)
    assert manager.rollback_plan()["action"] == "switch_back" and manager.rollback_plan()["target"] == "raft"


class _StandInLeader:
    """A leader's REST API stand-in: keeps each request (path, forwarding headers, signature verdict) and
    answers ``answer`` (status, body bytes)."""

    def __init__(self, secret: str):
        self.secret = secret
        self.seen: list[dict] = []
        self.answer = (200, b'{"ok": true}')

    def __call__(self, environ, start_response):
        from webapp.coordinator.signing import (
            NONCE_HEADER,
            SIG_HEADER,
            TS_HEADER,
            verify,
        )

        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        header = lambda name: environ.get("HTTP_" + name.upper().replace("-", "_"))
        self.seen.append({"path": environ["PATH_INFO"], "user": header("X-RaftConnect-Forwarded-User"),
                          "why not authentic": verify(self.secret, environ["REQUEST_METHOD"], environ["PATH_INFO"],
                                                      body, header(TS_HEADER), header(SIG_HEADER),
                                                      nonce=header(NONCE_HEADER))})
        status, data = self.answer
        start_response(f"{status} X", [("Content-Type", "application/json")])
        return [data]


def test_on_a_follower_an_admin_action_goes_to_the_leader_signed_and_direct(node, monkeypatch):
    """The admin page's actions run on the leader: a follower sends them there itself (signed, naming the
    admin), past any proxy its environment names, and shows the leader's refusal as its own."""
    from types import SimpleNamespace

    from webapp.connect import store_admin
    from webapp.storage.switch import SwitchError

    from .test_rest_server import serving

    leader = _StandInLeader(node.secret)
    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "")
    with serving(leader, "waitress") as (_, port):
        monkeypatch.setattr(type(node.raft), "is_leader", property(lambda self: False))
        monkeypatch.setattr(node, "leader_rest_address", lambda: f"127.0.0.1:{port}")
        request = SimpleNamespace(user=SimpleNamespace(get_username=lambda: "root"))
        path = "/raftconnect/v1/metadata-store/stores/pg/test"

        def here():
            raise AssertionError("a follower ran the action itself")

        assert store_admin._via_leader(node, request, "POST", path, None, here) == {"ok": True}
        [seen] = leader.seen
        assert seen["path"] == path and seen["user"] == "root;role=admin" and seen["why not authentic"] is None
        leader.answer = (409, b'{"error_code": 409, "message": "a switch is already running"}')
        with pytest.raises(SwitchError, match="a switch is already running") as refused:
            store_admin._via_leader(node, request, "POST", path, None, here)
        assert refused.value.status == 409
        leader.answer = (502, b"bad gateway")
        with pytest.raises(SwitchError, match="bad gateway"):
            store_admin._via_leader(node, request, "POST", path, None, here)
    with pytest.raises(SwitchError, match="did not answer") as gone:
        store_admin._via_leader(node, request, "POST", path, None, here)
    assert gone.value.status == 503
