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
