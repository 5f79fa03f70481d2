"""The console's server side on an in-process node: roles, session login with CSRF, task metrics, its files."""
from __future__ import annotations

import json

import pytest
from django.test import Client

from tests.connect.conftest import basic, make_user
from webapp.console import middleware as console_files

SOURCE = "raftconnect.connectors.file.FileSourceConnector"
XHR = {"HTTP_X_REQUESTED_WITH": "XMLHttpRequest"}


def login(client: Client, username: str, password: str):
    """Log in as the console does: whoami for the CSRF cookie, then POST /session with X-CSRFToken."""
    client.get("/raftconnect/v1/whoami", **XHR)
    token = client.cookies["csrftoken"].value
    return client.post("/raftconnect/v1/session", data=json.dumps({"username": username, "password": password}),
                       content_type="application/json", HTTP_X_CSRFTOKEN=token, **XHR)


@pytest.mark.parametrize("role, staff", [("viewer", False), ("operator", False), ("admin", True)])
def test_whoami_gives_the_replicated_role(db, node, client, role, staff):
    make_user("u", role)  # replicated; the node's auth_user row mirrors it (admins are staff and superuser)
    body = client.get("/raftconnect/v1/whoami", HTTP_AUTHORIZATION=basic("u", "pw")).json()
    assert body == {"username": "u", "roles": [role], "is_superuser": staff, "is_staff": staff}


def test_whoami_of_a_user_without_a_role_on_a_node_without_replicated_users(db, client, django_user_model):
    django_user_model.objects.create_user("u", password="pw")  # no node in this process: the local database
    body = client.get("/raftconnect/v1/whoami", HTTP_AUTHORIZATION=basic("u", "pw")).json()
    assert body == {"username": "u", "roles": [], "is_superuser": False, "is_staff": False}


def test_whoami_unauthenticated_sets_csrf_cookie_and_no_basic_challenge_for_scripts(db, node, client):
    resp = client.get("/raftconnect/v1/whoami", **XHR)
    assert resp.status_code == 401 and resp.json()["error_code"] == 401
    assert not resp["WWW-Authenticate"].startswith("Basic")  # the browser must not open its own dialog
    assert client.cookies["csrftoken"].value
    assert client.get("/raftconnect/v1/whoami")["WWW-Authenticate"].startswith("Basic")  # curl still gets Basic


def test_session_login_enforces_csrf_and_authenticates_the_api(db, node, django_user_model, tmp_path):
    make_user("op", "operator")
    client = Client(enforce_csrf_checks=True)
    no_token = client.post("/raftconnect/v1/session", data=json.dumps({"username": "op", "password": "pw"}),
                           content_type="application/json")
    assert no_token.status_code == 403
    assert login(client, "op", "wrong").status_code == 401
    resp = login(client, "op", "pw")
    assert resp.status_code == 200 and resp.json()["roles"] == ["operator"]

    assert client.get("/connectors", **XHR).json() == []
    f = tmp_path / "in.csv"
    f.write_text("a\n1\n")
    body = json.dumps({"name": "src", "config": {"connector.class": SOURCE, "path": str(f), "format": "csv",
                                                  "topic": "t"}})
    # the session cookie alone is not enough for a write: the CSRF token must come with it
    assert client.post("/connectors", data=body, content_type="application/json", **XHR).status_code == 403
    token = client.cookies["csrftoken"].value  # rotated at login
    created = client.post("/connectors", data=body, content_type="application/json", HTTP_X_CSRFTOKEN=token, **XHR)
    assert created.status_code == 201, created.json()

    assert client.delete("/raftconnect/v1/session", HTTP_X_CSRFTOKEN=token, **XHR).status_code == 204
    assert client.get("/connectors", **XHR).status_code == 401


def test_a_session_ends_when_its_replicated_user_is_deactivated_elsewhere(db, node):
    make_user("op", "operator")
    client = Client(enforce_csrf_checks=True)
    assert login(client, "op", "pw").status_code == 200
    assert client.get("/connectors", **XHR).status_code == 200
    node.raft.commands.user_put(name="op", changes={"active": False}, create=False, now=1.0)  # as another node would
    assert client.get("/connectors", **XHR).status_code == 401


def test_task_metrics_come_from_heartbeats(api, node, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("a\n1\n")
    api.post("/connectors", data=json.dumps({"name": "src-a", "config": {
        "connector.class": SOURCE, "path": str(f), "format": "csv", "topic": "t"}}), content_type="application/json")
    running = {"generation": 1, "connectors": ["src-a"], "tasks": {
        "src-a-0": {"state": "RUNNING", "records": 1200, "batches": 3, "last_batch_seconds": 0.4,
                    "records_per_second": 300.0},
        "src-a-1": {"state": "RUNNING", "records": 800, "batches": 2, "last_batch_seconds": 0.5,
                    "records_per_second": 200.0, "lag": 42},
        "other-0": {"state": "RUNNING", "records": 5, "batches": 1, "last_batch_seconds": 0.1,
                    "records_per_second": 1.0}}}
    node.coordinator.heartbeat("w1", {"rest_address": "127.0.0.1:9999", "roles": ["worker"]}, running)

    body = api.get("/raftconnect/v1/connectors/src-a/metrics").json()
    assert body["connector"] == "src-a" and body["records"] == 2000 and body["records_per_second"] == 500.0
    assert [(t["task"], t["worker_id"], t["records"], t["lag"]) for t in body["tasks"]] == \
        [(0, "127.0.0.1:9999", 1200, None), (1, "127.0.0.1:9999", 800, 42)]
    everything = api.get("/raftconnect/v1/task-metrics").json()["tasks"]
    assert [(t["connector"], t["task"]) for t in everything] == [("other", 0), ("src-a", 0), ("src-a", 1)]
    missing = api.get("/raftconnect/v1/connectors/nope/metrics")
    assert missing.status_code == 404 and missing.json()["error_code"] == 404


def test_console_files_are_served_with_index_and_immutable_assets(db, tmp_path, monkeypatch):
    dist = tmp_path / "dist"
    (dist / "assets").mkdir(parents=True)
    (dist / "index.html").write_text("<!doctype html><div id=root></div>")
    (dist / "assets" / "index-AbCd1234.js").write_text("console.log(1)")
    monkeypatch.setattr(console_files, "CONSOLE_DIST", dist)
    client = Client()  # builds its middleware now, reading the patched directory
    page = client.get("/console/")
    assert page.status_code == 200 and b"id=root" in b"".join(page.streaming_content)
    assert page["Content-Type"].startswith("text/html") and "immutable" not in page["Cache-Control"]
    asset = client.get("/console/assets/index-AbCd1234.js")
    assert asset.status_code == 200 and "immutable" in asset["Cache-Control"]
    assert client.get("/console").status_code == 302
    assert client.get("/static/admin/css/base.css").status_code == 200  # the admin's styles, without DEBUG


def test_console_not_built_says_how_to_build_it(db, tmp_path, monkeypatch):
    monkeypatch.setattr(console_files, "CONSOLE_DIST", tmp_path / "missing")
    resp = Client().get("/console/")
    assert resp.status_code == 503 and b"make frontend" in resp.content


def test_whoami_of_a_forwarded_principal(db):
    """A request forwarded by another member carries its role; whoami reports it."""
    from webapp.connect.api.forwarding import ForwardedUser
    from webapp.console.api import whoami

    assert whoami(ForwardedUser("v", "viewer"))["roles"] == ["viewer"]
    assert whoami(ForwardedUser("x", None))["roles"] == []
