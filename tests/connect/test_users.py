"""REST users and tokens on an in-process node: ``/raftconnect/v1/tokens`` and ``/raftconnect/v1/users``."""
from __future__ import annotations

import time

import pytest
from django.test import Client

from webapp.connect.api.accounts import token_digest

from .conftest import basic, make_user
from .test_rest import post

TOKENS = "/raftconnect/v1/tokens"
USERS = "/raftconnect/v1/users"


def patch(client, path, body):
    import json

    return client.patch(path, data=json.dumps(body), content_type="application/json")


def as_token(key: str) -> Client:
    c = Client()
    c.defaults["HTTP_AUTHORIZATION"] = f"Bearer {key}"
    return c


def test_tokens_are_named_listed_without_keys_and_never_replaced(api, node):
    first = post(api, TOKENS, {"name": "ci"})
    assert first.status_code == 201
    body = first.json()
    assert body["user"] == "operator" and body["name"] == "ci" and body["expires"] is None
    assert body["token"].startswith("rct_")
    second = post(api, TOKENS, {"name": "laptop", "expires_in_s": 3600})
    assert second.status_code == 201 and second.json()["expires"] == pytest.approx(time.time() + 3600, abs=60)
    dup = post(api, TOKENS, {"name": "ci"})
    assert dup.status_code == 409
    assert dup.json() == {"error_code": 409, "message": "User operator already has a token named ci"}
    assert as_token(body["token"]).get("/connectors").status_code == 200  # the first one still works
    listed = api.get(TOKENS).json()
    assert [t["name"] for t in listed] == ["ci", "laptop"]
    assert all(set(t) == {"name", "created", "expires", "expired"} for t in listed)
    assert body["token"] not in str(node.raft.state.tokens)  # only the digest is replicated
    assert token_digest(body["token"]) in node.raft.state.tokens


def test_a_revoked_or_expired_token_is_refused(api, node):
    key = post(api, TOKENS, {"name": "ci"}).json()["token"]
    assert api.delete(f"{TOKENS}/ci").status_code == 204
    refused = as_token(key).get("/connectors")
    assert refused.status_code == 401 and refused.json()["error_code"] == 401
    assert api.delete(f"{TOKENS}/ci").status_code == 404
    expired_key = "rct_expired-for-the-test"
    node.raft.commands.token_create(user="operator", name="old", digest=token_digest(expired_key),
                                    now=time.time() - 100, expires=time.time() - 1)
    assert as_token(expired_key).get("/connectors").status_code == 401
    assert [t["expired"] for t in api.get(TOKENS).json()] == [True]


@pytest.mark.parametrize("body", [{}, {"name": ""}, {"name": "a/b"}, {"name": "x", "expires_in_s": -1},
                                  {"name": "x", "expires_in_s": "60"}, {"name": "x", "expires_in_s": True},
                                  {"name": "x", "other": 1}, ["x"]])
def test_bad_token_requests_get_connects_400(api, body):
    resp = post(api, TOKENS, body)
    assert resp.status_code == 400 and set(resp.json()) == {"error_code", "message"}
    assert api.get(TOKENS).json() == []


def test_tokens_need_authentication(db, node):
    assert Client().get(TOKENS).status_code == 401
    assert post(Client(), TOKENS, {"name": "x"}).status_code == 401


def test_an_admin_manages_users_and_the_changes_apply_at_once(admin_api, node):
    created = post(admin_api, USERS, {"name": "eve", "password": "pw-eve", "role": "viewer"})
    assert created.status_code == 201, created.json()
    assert created.json()["name"] == "eve" and created.json()["role"] == "viewer" and created.json()["active"]
    assert "password" not in created.json()
    assert node.raft.state.user("eve")["password"] not in ("pw-eve", "") and "pw-eve" not in str(node.raft.state.users)
    eve = Client()
    eve.defaults["HTTP_AUTHORIZATION"] = basic("eve", "pw-eve")
    assert eve.get("/connectors").status_code == 200
    assert post(eve, "/connectors", {"name": "x", "config": {}}).status_code == 403  # viewer
    assert post(admin_api, USERS, {"name": "eve", "password": "p", "role": "admin"}).status_code == 409
    key = post(eve, TOKENS, {"name": "t"}).json()["token"]

    assert patch(admin_api, f"{USERS}/eve", {"role": "operator"}).json()["role"] == "operator"
    assert post(eve, "/connectors", {"name": "x", "config": {}}).status_code == 400  # operator: reaches validation
    assert patch(admin_api, f"{USERS}/eve", {"password": "new"}).status_code == 200
    assert eve.get("/connectors").status_code == 401
    eve.defaults["HTTP_AUTHORIZATION"] = basic("eve", "new")
    assert eve.get("/connectors").status_code == 200
    assert patch(admin_api, f"{USERS}/eve", {"active": False}).json()["active"] is False
    assert eve.get("/connectors").status_code == 401
    assert as_token(key).get("/connectors").status_code == 401  # an inactive user's tokens are refused too
    assert patch(admin_api, f"{USERS}/eve", {"active": True}).status_code == 200
    assert as_token(key).get("/connectors").status_code == 200
    assert [u["name"] for u in admin_api.get(USERS).json()] == ["admin", "eve", "operator"]
    assert admin_api.get(f"{USERS}/eve").json()["tokens"] == 1
    assert admin_api.delete(f"{USERS}/eve").status_code == 204
    assert as_token(key).get("/connectors").status_code == 401
    assert eve.get("/connectors").status_code == 401
    assert admin_api.get(f"{USERS}/eve").status_code == 404
    assert admin_api.delete(f"{USERS}/eve").status_code == 404


def test_the_last_active_admin_stays(admin_api):
    for change in ({"role": "viewer"}, {"active": False}):
        resp = patch(admin_api, f"{USERS}/admin", change)
        assert resp.status_code == 409 and "last active admin" in resp.json()["message"]
    assert admin_api.delete(f"{USERS}/admin").status_code == 409
    assert admin_api.get(USERS).status_code == 200  # still an admin


@pytest.mark.parametrize("body", [{"name": "x", "password": "p"}, {"name": "x", "password": "p", "role": "root"},
                                  {"name": "a b", "password": "p", "role": "viewer"},
                                  {"name": "x", "password": "", "role": "viewer"},
                                  {"name": "x", "password": None, "role": "viewer"},
                                  {"name": "x", "password": "p", "role": "viewer", "active": "yes"},
                                  {"name": "x", "password": "p", "role": "viewer", "email": "e"}])
def test_bad_user_requests_get_connects_400(admin_api, node, body):
    resp = post(admin_api, USERS, body)
    assert resp.status_code == 400 and set(resp.json()) == {"error_code", "message"}
    assert node.raft.state.user("x") is None


def test_only_admins_see_or_change_users(api):
    assert api.get(USERS).status_code == 403
    assert post(api, USERS, {"name": "x", "password": "p", "role": "admin"}).status_code == 403
    assert patch(api, f"{USERS}/operator", {"role": "admin"}).status_code == 403


def test_backup_users_come_from_the_replicated_state_and_restore_only_the_missing_ones(db, node):
    from django.contrib.auth.hashers import check_password

    from webapp.connect.api.stores import export_users, import_users

    make_user("ops", "operator", password="ops-password")
    exported = export_users()
    assert exported == [{"username": "ops", "password": node.raft.state.user("ops")["password"], "is_active": True,
                         "is_superuser": False, "groups": ["operator"]}]
    node.raft.commands.user_delete(name="ops")
    make_user("kept", "viewer", password="mine")
    result = import_users(exported + [{"username": "kept", "password": "pbkdf2_sha256$other", "groups": ["admin"]},
                                      {"username": "norole", "password": "x", "groups": []}])
    assert result == {"created": ["ops", "norole"], "kept": ["kept"]}
    back = node.raft.state.user("ops")
    assert check_password("ops-password", back["password"]) and back["role"] == "operator" and back["active"]
    assert check_password("mine", node.raft.state.user("kept")["password"])  # not overwritten by the backup
    assert node.raft.state.user("norole")["active"] is False  # no role in the backup: nobody gains rights


def test_an_edit_of_a_nodes_mirror_row_grants_nothing_and_is_undone(api, node, django_user_model):
    """The Django admin saves rows through the ORM: the next authentication reads the row again and undoes it."""
    assert api.get("/connectors").status_code == 200  # the operator's row now mirrors the replicated user
    row = django_user_model.objects.get(username="operator")
    row.is_superuser = row.is_staff = True
    row.save()
    denied = post(api, "/raftconnect/v1/raft/members", {"address": "x:1"})
    assert denied.status_code == 403 and "has the operator role" in denied.json()["message"]
    row = django_user_model.objects.get(username="operator")
    assert not row.is_superuser and not row.is_staff


def test_a_group_given_in_the_admin_is_taken_away_at_the_next_authentication(api, node, django_user_model):
    """The row's groups are exactly its role's: the admin's group pages write through the ORM, so the next
    authentication sets them again (before, a row once given its group was never looked at again)."""
    from django.contrib.auth.models import Group

    assert api.get("/connectors").status_code == 200
    row = django_user_model.objects.get(username="operator")
    assert set(row.groups.values_list("name", flat=True)) == {"operator"}
    row.groups.add(Group.objects.get(name="admin"))
    assert api.get("/connectors").status_code == 200
    assert set(row.groups.values_list("name", flat=True)) == {"operator"}


def test_the_mirrors_own_writes_do_not_make_other_users_write_their_groups_again(api, node, django_user_model):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    assert api.get("/connectors").status_code == 200  # the operator's row and groups are set
    make_user("other", "viewer")
    other = Client()
    other.defaults["HTTP_AUTHORIZATION"] = basic("other", "pw")
    node.raft.commands.user_put(name="other", changes={"role": "operator"}, create=False, now=time.time())
    assert other.get("/connectors").status_code == 200  # "other" is mirrored again: its writes fire the signals
    assert set(django_user_model.objects.get(username="other").groups.values_list("name", flat=True)) == {"operator"}
    with CaptureQueriesContext(connection) as queries:
        assert api.get("/connectors").status_code == 200
    assert not [q for q in queries if q["sql"].lstrip().upper().startswith(("INSERT", "UPDATE", "DELETE"))]


def test_the_rows_given_their_group_are_bounded(monkeypatch, api, node, django_user_model):
    from webapp.connect.api import accounts

    monkeypatch.setattr(accounts, "MIRROR_MAX_ENTRIES", 2)
    for name in ("g1", "g2", "g3"):
        accounts.mirror(name, {"password": "h", "active": True, "role": "viewer"})
    assert list(accounts._groups_done) == ["g2", "g3"]


def test_an_edit_past_the_orm_grants_nothing_and_is_undone_once_the_checked_row_expires(api, node,
                                                                                      django_user_model, monkeypatch):
    from webapp.connect.api import accounts

    assert api.get("/connectors").status_code == 200
    django_user_model.objects.filter(username="operator").update(is_superuser=True, is_staff=True)  # no signal
    denied = post(api, "/raftconnect/v1/raft/members", {"address": "x:1"})
    assert denied.status_code == 403 and "has the operator role" in denied.json()["message"]  # the role is Raft's
    assert django_user_model.objects.get(username="operator").is_superuser  # checked moments ago: not read yet
    monkeypatch.setattr(accounts, "MIRROR_TTL_S", 0.0)
    assert api.get("/connectors").status_code == 200
    row = django_user_model.objects.get(username="operator")
    assert not row.is_superuser and not row.is_staff


def test_a_checked_mirror_row_is_not_read_again_until_its_user_changes(api, node, django_user_model):
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    def user_reads() -> int:
        with CaptureQueriesContext(connection) as queries:
            assert api.get("/connectors").status_code == 200
        return sum(1 for q in queries if "auth_user" in q["sql"])

    assert user_reads() == 1  # read, found equal to the replicated record
    assert user_reads() == 0
    node.raft.commands.user_put(name="operator", changes={"role": "viewer"}, create=False, now=time.time())
    assert user_reads() > 1  # the role changed in Raft: read and rewritten (staff flags, group)
    assert user_reads() == 1  # its own write made the cache forget; read once more, then trusted
    assert user_reads() == 0


def test_the_checked_mirror_rows_are_bounded(monkeypatch, django_user_model):
    from webapp.connect.api import accounts

    monkeypatch.setattr(accounts, "MIRROR_MAX_ENTRIES", 2)
    users = []
    for name in ("u1", "u2", "u3"):
        users.append(django_user_model(pk=len(users) + 1, username=name, password="h", is_active=True))
        accounts._checked.put(name, ("h", True, "viewer"), accounts._checked.epoch, users[-1])
    assert accounts._checked.get("u1", ("h", True, "viewer")) is None  # the oldest went first
    got = accounts._checked.get("u3", ("h", True, "viewer"))
    assert got.username == "u3" and got is not users[2]  # a copy: requests never share an instance
    assert accounts._checked.get("u3", ("other-hash", True, "viewer")) is None  # the record changed


def test_a_worker_only_nodes_directory_is_a_refreshed_copy_kept_for_a_while_when_the_cluster_is_gone():
    from webapp.connect.api.accounts import RemoteDirectory

    now = [0.0]
    answers = [{"users": {"a": {"role": "viewer"}}, "tokens": {"d": {"user": "a", "name": "t", "created": 1.0,
                                                                         "expires": None}}}]
    calls = []

    def fetch():
        calls.append(now[0])
        if not answers:
            raise ConnectionError("no member answers")
        return answers.pop(0)

    remote = RemoteDirectory(fetch, ttl=2.0, max_stale=60.0, clock=lambda: now[0])
    assert remote.ready() and remote.user("a") == {"role": "viewer"} and remote.token("d")["name"] == "t"
    assert remote.user_tokens("a") == [{"name": "t", "created": 1.0, "expires": None}]
    assert calls == [0.0]  # within the ttl: no second fetch
    answers.append({"users": {}, "tokens": {}})
    now[0] = 2.5
    assert remote.user("a") is None and remote.token("d") is None  # a deletion arrives with the next copy
    now[0] = 5.0
    assert remote.ready()  # the fetch failed: the last copy is still served
    assert calls == [0.0, 2.5, 5.0]
    now[0] = 6.0
    assert remote.ready() and calls == [0.0, 2.5, 5.0]  # no new attempt within the ttl after a failure
    now[0] = 70.0
    assert not remote.ready()  # and dropped once too old: the node falls back to its own database


def test_the_internal_user_directory_is_for_signed_members_only(admin_api, node):
    from webapp.coordinator.signing import signed_headers

    path = "/raftconnect/v1/internal/users"
    assert admin_api.get(path).status_code in (401, 403)  # an admin's password is not a member's signature
    signed = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed_headers(node.secret, "GET", path, b"").items()}
    body = Client().get(path, **signed).json()
    assert set(body["users"]) == {"admin", "operator"} and body["tokens"] == {}
    assert body["users"]["admin"]["password"] == node.raft.state.user("admin")["password"]


def test_a_new_users_password_reaches_neither_the_logs_nor_the_replicated_state(admin_api, node, caplog):
    import logging

    secret = "Yx-unique-user-password-4417"
    with caplog.at_level(logging.DEBUG):
        assert post(admin_api, USERS, {"name": "pat", "password": secret, "role": "viewer"}).status_code == 201
        assert post(admin_api, USERS, {"name": "pat", "password": secret, "role": "viewer"}).status_code == 409
    assert secret not in "\n".join(r.getMessage() + str(r.args) for r in caplog.records)
    assert secret not in repr(node.raft.state._serialize())


@pytest.mark.django_db
def test_the_mirror_row_read_on_every_request_gives_what_the_orm_gives(django_user_model):
    """``accounts._mirror_row`` (a plain SELECT, the ORM's query cost ~10x more) builds the same user."""
    from webapp.connect.api.accounts import _mirror_row

    row = django_user_model.objects.create_user("mirrored", password="pw", is_staff=True, email="m@example.org")
    got = _mirror_row(django_user_model, "mirrored")
    for f in django_user_model._meta.concrete_fields:
        assert getattr(got, f.attname) == getattr(row, f.attname), f.attname
    assert got.is_staff is True and got.is_superuser is False and got.check_password("pw")
    assert _mirror_row(django_user_model, "nobody") is None
