"""Authentication and roles on an in-process node: basic, tokens, sessions/CSRF, roles, forwarding, logs."""
from __future__ import annotations

import http.server
import json
import logging
import threading

import pytest
from django.core.management import call_command
from django.test import Client

from webapp.connect.api import forwarding, views
from webapp.connect.api.forwarding import FORWARDED_HEADER, FORWARDED_USER_HEADER
from webapp.coordinator.signing import signed_headers

from .conftest import basic, make_user
from .test_rest import post, source_config

RAFT_MEMBERS = "/raftconnect/v1/raft/members"


@pytest.fixture(autouse=True)
def fast_hashing(settings):
    """PBKDF2 costs ~0.3 s per password (seconds on a loaded machine); these tests are about roles, not hashing."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def users(db, node):
    for role in ("viewer", "operator", "admin"):
        make_user(role, role)
    from django.contrib.auth import get_user_model

    get_user_model().objects.create_user("nobody", password="pw")  # only in this node's database
    make_user("root", "admin")


def as_user(client: Client, name: str) -> Client:
    client.defaults["HTTP_AUTHORIZATION"] = basic(name, "pw")
    return client


def test_role_groups_are_created_by_the_migration(db):
    from django.contrib.auth.models import Group

    assert set(Group.objects.values_list("name", flat=True)) >= {"viewer", "operator", "admin"}


def test_401_carries_the_challenge_and_connects_error_body(db, node, client):
    resp = client.get("/connectors")
    assert resp.status_code == 401
    assert resp["WWW-Authenticate"].startswith("Basic")
    assert resp.json()["error_code"] == 401


def test_viewer_reads_but_cannot_write(users, client, tmp_path):
    as_user(client, "viewer")
    assert client.get("/connectors").status_code == 200
    assert client.get("/connector-plugins").status_code == 200
    assert client.get("/raftconnect/v1/cluster").status_code == 200
    denied = post(client, "/connectors", {"name": "src", "config": source_config(tmp_path)})
    assert denied.status_code == 403
    assert denied.json() == {"error_code": 403, "message": "User viewer has the viewer role; "
                                                           "POST /connectors needs the operator role"}
    assert client.get("/connectors").json() == []  # nothing was created
    assert client.put("/connectors/src/pause").status_code == 403
    assert client.delete("/connectors/src").status_code == 403


def test_operator_writes_connectors_but_not_cluster_operations(users, client, tmp_path, node):
    as_user(client, "operator")
    assert post(client, "/connectors", {"name": "src", "config": source_config(tmp_path)}).status_code == 201
    assert client.put("/connectors/src/pause").status_code == 202
    members_before = node.raft.raft_members()
    denied = post(client, RAFT_MEMBERS, {"address": "127.0.0.1:1"})
    assert denied.status_code == 403 and "needs the admin role" in denied.json()["message"]
    assert node.raft.raft_members() == members_before
    assert client.delete(f"{RAFT_MEMBERS}/127.0.0.1:1").status_code == 403
    assert post(client, "/raftconnect/v1/metadata-store/switch", {"target": "raft"}).status_code == 403
    assert client.get(RAFT_MEMBERS).status_code == 200  # reading the membership is a viewer right


@pytest.mark.parametrize(("method", "path", "role"), [
    ("GET", "/connectors", "viewer"), ("PUT", "/connectors/a/config", "operator"),
    ("POST", "/connectors/a/restart", "operator"), ("PATCH", "/connectors/a/offsets", "operator"),
    ("GET", "/admin/loggers", "admin"), ("PUT", "/admin/loggers/org.x", "admin"),  # loggers: admin, reads too
    ("GET", "/raftconnect/v1/raft/members", "viewer"), ("POST", "/raftconnect/v1/raft/members", "admin"),
    ("POST", "/raftconnect/v1/metadata-store/rollback", "admin"), ("TRACE", "/connectors", "admin"),
])
def test_the_policy_declares_the_role_per_path(method, path, role):
    from webapp.connect.api.roles import required_role

    assert required_role(object(), method, path) == role


@pytest.mark.parametrize("admin", ["admin", "root"])
def test_admins_pass_the_cluster_checks(users, client, admin):
    as_user(client, admin)
    # passes the role check, then fails validation: the admin may perform the operation
    resp = post(client, RAFT_MEMBERS, {"address": "no-port"})
    assert resp.status_code == 400, resp.json()


def test_a_user_only_in_this_nodes_database_is_not_a_cluster_user(users, client):
    as_user(client, "nobody")
    resp = client.get("/connectors")
    assert resp.status_code == 401 and resp.json()["error_code"] == 401
    assert client.get("/health").status_code == 200  # still public


def test_a_forwarded_user_without_a_role_is_refused(users, node):
    path = "/connectors"
    resp = Client().get(path, **_forwarded(node, "GET", path, b"", "ghost;role="))
    assert resp.status_code == 403 and "has no RaftConnect role" in resp.json()["message"]


def test_token_and_bearer_schemes_carry_the_users_role(users, client):
    as_user(client, "operator")
    issued = post(client, "/raftconnect/v1/tokens", {"name": "ci"})
    assert issued.status_code == 201, issued.json()
    key = issued.json()["token"]
    anon = Client()
    assert anon.get("/connectors", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert anon.get("/connectors", HTTP_AUTHORIZATION=f"Bearer {key}").status_code == 200
    assert anon.get("/connectors", HTTP_AUTHORIZATION="Bearer not-a-token").status_code == 401
    # the token carries the user's role: an operator's token cannot change Raft membership
    assert post(anon, RAFT_MEMBERS, {"address": "x:1"}, HTTP_AUTHORIZATION=f"Token {key}").status_code == 403
    assert client.delete("/raftconnect/v1/tokens/ci").status_code == 204
    assert anon.get("/connectors", HTTP_AUTHORIZATION=f"Token {key}").status_code == 401


def test_local_users_and_drf_tokens_move_into_raft_once(db, node, django_user_model):
    from rest_framework.authtoken.models import Token

    from webapp.connect.api import accounts

    old = django_user_model.objects.create_user("old", password="pw")
    from django.contrib.auth.models import Group

    old.groups.add(Group.objects.get(name="operator"))
    django_user_model.objects.create_superuser("boss", password="pw")
    key = Token.objects.create(user=old).key
    accounts.bootstrap_users(node, admin_user=None, admin_password=None)
    assert node.raft.state.user("old")["role"] == "operator"
    assert node.raft.state.user("boss")["role"] == "admin"
    assert Client().get("/connectors", HTTP_AUTHORIZATION=f"Token {key}").status_code == 200
    assert as_user(Client(), "old").get("/connectors").status_code == 200
    node.raft.commands.user_delete(name="old")
    accounts.bootstrap_users(node, admin_user=None, admin_password=None)  # marker: no second import
    assert node.raft.state.user("old") is None
    assert as_user(Client(), "old").get("/connectors").status_code == 401
    stale = django_user_model.objects.get(username="old")  # its mirror row can no longer bring it back
    assert not stale.is_active and not stale.has_usable_password()


def test_the_bootstrap_admin_is_replicated_and_not_rehashed_when_unchanged(db, node):
    from webapp.connect.api import accounts

    accounts.bootstrap_users(node, admin_user="boot", admin_password="s3cret")
    first = node.raft.state.user("boot")
    assert first["role"] == "admin" and first["active"] and first["password"] != "s3cret"
    accounts.bootstrap_users(node, admin_user="boot", admin_password="s3cret")
    assert node.raft.state.user("boot") == first  # nothing proposed
    accounts.bootstrap_users(node, admin_user="boot", admin_password="changed")
    assert node.raft.state.user("boot")["password"] != first["password"]
    assert Client().get("/connectors", HTTP_AUTHORIZATION=basic("boot", "changed")).status_code == 200
    assert Client().get("/connectors", HTTP_AUTHORIZATION=basic("boot", "s3cret")).status_code == 401


def test_createconnectuser_sets_exactly_one_role(db, node, monkeypatch):
    monkeypatch.setenv("RAFTCONNECT_USER_PASSWORD", "pw")
    call_command("createconnectuser", "carol", "--role", "operator")
    c = as_user(Client(), "carol")
    assert post(c, "/connectors", {"name": "x", "config": {}}).status_code == 400  # operator: reaches validation
    call_command("createconnectuser", "carol", "--role", "viewer", "--no-password")
    from django.contrib.auth import get_user_model

    assert list(get_user_model().objects.get(username="carol").groups.values_list("name", flat=True)) == ["viewer"]
    assert node.raft.state.user("carol")["role"] == "viewer"
    assert post(c, "/connectors", {"name": "x", "config": {}}).status_code == 403


def test_createconnectuser_refuses_once_the_data_dirs_users_are_replicated(db, tmp_path, monkeypatch):
    from django.core.management.base import CommandError

    (tmp_path / "users-migrated").write_text("")
    monkeypatch.setenv("RAFTCONNECT_DATA_DIR", str(tmp_path))
    monkeypatch.setenv("RAFTCONNECT_USER_PASSWORD", "pw")
    with pytest.raises(CommandError, match="/raftconnect/v1/users"):
        call_command("createconnectuser", "dave", "--role", "viewer")


def test_session_writes_need_the_csrf_token(users, django_user_model, tmp_path):
    from django.contrib.auth import get_user_model

    c = Client(enforce_csrf_checks=True)
    c.force_login(get_user_model().objects.get(username="operator"))
    assert c.get("/connectors").status_code == 200  # reads with the session cookie
    body = json.dumps({"name": "src", "config": source_config(tmp_path)})
    refused = c.post("/connectors", body, content_type="application/json")
    assert refused.status_code == 403 and "CSRF" in refused.json()["message"]
    assert c.get("/connectors").json() == []
    c.get("/admin/login/")  # sets the csrftoken cookie
    token = c.cookies["csrftoken"].value
    ok = c.post("/connectors", body, content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert ok.status_code == 201, ok.json()


def test_passwords_never_reach_the_logs(users, client, caplog, django_user_model, settings):
    secret = "Zq-unique-password-7731"
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]  # the real default here
    make_user("logged", "viewer", password=secret)
    with caplog.at_level(logging.DEBUG):
        logging.getLogger().setLevel(logging.DEBUG)
        for password in (secret + "x", secret, "wrong"):
            Client().get("/connectors", HTTP_AUTHORIZATION=basic("logged", password))
        Client().get("/connectors", HTTP_AUTHORIZATION=basic("nosuchuser", secret))
        Client().post("/admin/login/", {"username": "logged", "password": secret})
    assert caplog.records  # the requests did log something (401s are logged as warnings)
    text = "\n".join(r.getMessage() + str(r.args) + str(getattr(r, "request", "")) for r in caplog.records)
    assert secret not in text
    assert django_user_model.objects.get(username="logged").password.startswith("pbkdf2_sha256$")


def test_internal_endpoints_refuse_user_credentials_and_bad_signatures(users, client, node):
    path = "/raftconnect/v1/internal/heartbeat"
    body = json.dumps({"worker_id": "w", "generation": 0}).encode()
    as_user(client, "root")  # even a superuser's password is not a cluster member's signature
    assert client.post(path, body, content_type="application/json").status_code in (401, 403)
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v
               for k, v in signed_headers("wrong-secret", "POST", path, body).items()}
    assert Client().post(path, body, content_type="application/json", **headers).status_code in (401, 403)
    good = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed_headers(node.secret, "POST", path, body).items()}
    assert Client().post(path, body, content_type="application/json", **good).status_code not in (401, 403)


def _forwarded(node, method: str, path: str, body: bytes, user_header: str) -> dict:
    headers = signed_headers(node.secret, method, path, body)
    headers[FORWARDED_HEADER] = "1"
    headers[FORWARDED_USER_HEADER] = user_header
    return {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in headers.items()}


def test_the_leader_applies_the_forwarded_role(db, node, tmp_path):
    body = json.dumps({"name": "src", "config": source_config(tmp_path)}).encode()
    c = Client()
    denied = c.post("/connectors", body, content_type="application/json",
                    **_forwarded(node, "POST", "/connectors", body, "alice;role=viewer"))
    assert denied.status_code == 403 and "alice has the viewer role" in denied.json()["message"]
    no_role = c.post("/connectors", body, content_type="application/json",
                     **_forwarded(node, "POST", "/connectors", body, "alice;"))
    assert no_role.status_code == 403
    assert node.herder.connector_names() == []
    ok = c.post("/connectors", body, content_type="application/json",
                **_forwarded(node, "POST", "/connectors", body, "alice;role=operator"))
    assert ok.status_code == 201
    members = b'{"address": "no-port"}'
    for header, status in (("ops;role=operator", 403), ("root;role=admin", 400), ("page;superuser", 400)):
        resp = c.post(RAFT_MEMBERS, members, content_type="application/json",
                      **_forwarded(node, "POST", RAFT_MEMBERS, members, header))
        assert resp.status_code == status, (header, resp.json())  # 400: passed the admin check, then validated
    # an unsigned claim of a role is not accepted
    forged = {"HTTP_X_RAFTCONNECT_FORWARDED": "1", "HTTP_X_RAFTCONNECT_FORWARDED_USER": "eve;role=admin"}
    assert c.get("/connectors", **forged).status_code == 401


class _Recorder(http.server.BaseHTTPRequestHandler):
    seen: list[dict] = []

    def do_POST(self):  # noqa: N802 - http.server's naming
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        _Recorder.seen.append(dict(self.headers))
        self.send_response(201)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(b'{"name": "src"}')

    def log_message(self, *args):
        pass


@pytest.fixture
def fake_leader(monkeypatch):
    """A real HTTP server standing in for the leader; the node forwards every request to it."""
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), _Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    _Recorder.seen = []
    target = f"127.0.0.1:{server.server_address[1]}"
    monkeypatch.setattr(views, "forward_target", lambda request, node, stale=None: target)
    # the in-process node is itself the leader, so skip the leader watch and send the request as is
    monkeypatch.setattr(forwarding, "proxy_watching_leader",
                        lambda request, target, node, deadline=None: forwarding.proxy(request, target, node.secret))
    yield _Recorder.seen
    server.shutdown()


def test_a_follower_checks_the_role_before_forwarding_and_forwards_it(users, client, fake_leader, tmp_path):
    as_user(client, "viewer")
    assert post(client, "/connectors", {"name": "src", "config": source_config(tmp_path)}).status_code == 403
    assert fake_leader == []  # refused here, nothing sent to the leader
    as_user(client, "operator")
    assert post(client, "/connectors", {"name": "src", "config": source_config(tmp_path)}).status_code == 201
    assert len(fake_leader) == 1
    assert fake_leader[0][FORWARDED_USER_HEADER] == "operator;role=operator"
    assert "Authorization" not in fake_leader[0]  # the password is not passed on


def test_the_admin_user_set_at_start_is_not_hashed_again_by_its_first_request(db, node, monkeypatch, settings):
    """runnode makes the admin a replicated user (one PBKDF2) and counts it verified: the first request with
    that password costs no second PBKDF2; any other password is checked in full."""
    from django.contrib.auth.hashers import PBKDF2PasswordHasher

    from webapp.connect.api.accounts import bootstrap_users

    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    bootstrap_users(node, admin_user="boot", admin_password="boot-secret")
    checks = []
    real = PBKDF2PasswordHasher.verify
    monkeypatch.setattr(PBKDF2PasswordHasher, "verify",
                        lambda self, password, encoded: checks.append(password) or real(self, password, encoded))
    c = Client()
    assert c.get("/connectors", HTTP_AUTHORIZATION=basic("boot", "boot-secret")).status_code == 200
    assert checks == []
    assert c.get("/connectors", HTTP_AUTHORIZATION=basic("boot", "wrong")).status_code == 401
    assert checks == ["wrong"]
