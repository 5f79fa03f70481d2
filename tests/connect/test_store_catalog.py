"""Metadata stores added, tested, switched to and removed at run time over REST and the admin page,
replicated to a second Raft member; real PostgreSQL and MariaDB; passwords only as references."""
from __future__ import annotations

import logging
import uuid

import pytest

from raftnode import RaftConfig, RaftNode
from tests.storage.conftest import MARIADB_URL, PG_URL, drop_database
from tools.launcher import wait_for
from webapp.connect.store_catalog import StoreCatalogError, resolve_spec, store_add, store_remove, validate_spec
from webapp.kafka.embedded import free_port
from webapp.storage.raft import RaftMetadataStore
from webapp.storage.switch import StoreSet

from .conftest import assert_conforms, basic, make_user

STORES = "/raftconnect/v1/metadata-store/stores"
SECRET = "pw-Never-Shown-7"


@pytest.fixture
def unblocked(django_db_blocker):
    """The stores use their own database aliases (not the test database): let them (request it after ``db``)."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture
def dbs(unblocked):
    """Names of a PostgreSQL and a MariaDB database the test may create; dropped at the end."""
    suffix = uuid.uuid4().hex[:8]
    names = {"postgresql": f"raftconnect_cat_{suffix}", "mysql": f"raftconnect_cat_{suffix}"}
    yield names
    for kind, db in names.items():
        drop_database(kind, db)


@pytest.fixture
def admin(admin_api, monkeypatch, caplog):
    """The ``admin_api`` client; the PostgreSQL password is in an environment variable (trust ignores it)."""
    monkeypatch.setenv("RC_TEST_PG_PASSWORD", SECRET)
    caplog.set_level(logging.DEBUG)
    return admin_api


def wait_switch(client, phase: str = "completed") -> dict:
    """The store status once the latest switch is in ``phase``."""
    def reached() -> dict | None:
        body = client.get("/raftconnect/v1/metadata-store").json()
        return body if body["switch"] and body["switch"]["phase"] == phase else None

    return wait_for(reached, 60, what=f"the switch to reach {phase}")


def test_add_test_switch_and_remove_a_postgresql_store(admin, node, dbs, caplog, client):
    url = PG_URL.format(db=dbs["postgresql"])
    resp = admin.post(STORES, {"name": "pg", "url": url, "password": "${env:RC_TEST_PG_PASSWORD}"},
                      content_type="application/json")
    assert resp.status_code == 201, resp.json()
    entry = resp.json()
    assert entry["source"] == "cluster" and entry["url"] == url and entry["password"] == "${env:RC_TEST_PG_PASSWORD}"
    assert admin.post(STORES, {"name": "pg", "url": url}, content_type="application/json").status_code == 409

    test = admin.post(f"{STORES}/pg/test").json()
    assert test["ok"] is True and [c["check"] for c in test["checks"]] == ["resolve", "connect", "schema"], test
    assert test["connectors"] == 0
    assert_conforms(admin, "POST", STORES, 201, entry)  # the published schema types what is answered
    assert_conforms(admin, "POST", STORES + "/{name}/test", 200, test)

    node.store.put_connector_config("c1", {"connector.class": "FileStreamSource", "file": "/tmp/x"})
    assert admin.post("/raftconnect/v1/metadata-store/switch", {"target": "pg"},
                      content_type="application/json").status_code == 202
    done = wait_switch(admin)
    assert done["active"] == "pg" and node.store.get_connector("c1") is not None
    assert_conforms(admin, "GET", "/raftconnect/v1/metadata-store", 200, done)
    refused = admin.delete(f"{STORES}/pg")
    assert refused.status_code == 409 and refused.json()["error_code"] == 409 and "active" in refused.json()["message"]

    assert admin.post("/raftconnect/v1/metadata-store/rollback").status_code == 202
    assert wait_switch(admin)["active"] == "raft"  # the rollback is a new switch, recorded before the 202
    assert admin.delete(f"{STORES}/pg").status_code == 204
    assert admin.get(f"{STORES}/pg").status_code == 404
    assert node.raft.state.store_specs == {}

    # the password was in no answer, page or log line
    client.force_login(make_user("root", "admin"))
    pages = client.get("/admin/metadata-store/").content.decode()
    answers = admin.get("/raftconnect/v1/metadata-store").content.decode() + str(test) + str(entry)
    assert SECRET not in pages + answers + caplog.text


def test_bad_specs_are_refused_and_a_bad_url_fails_its_test_clearly(admin, node, unblocked):
    def add(**body):
        return admin.post(STORES, body, content_type="application/json")

    clear = add(name="pg", url="postgresql://postgres:hunter2@127.0.0.1:5432/x")
    assert clear.status_code == 400 and "in clear" in clear.json()["message"] and "hunter2" not in clear.json()["message"]
    assert add(name="pg", url="postgresql://postgres@h/x", password="hunter2").status_code == 400
    assert "no database" in add(name="pg", url="postgresql://postgres@127.0.0.1:5432").json()["message"]
    assert "unknown config provider" in add(name="pg", url="postgresql://u@h/x", password="${vault:a:b}").json()["message"]
    assert "scheme" in add(name="pg", url="ftp://h/x").json()["message"]
    assert add(name="Raft", url="postgresql://u@h/x").status_code == 400
    assert add(name="raft", url="postgresql://u@h/x").status_code == 400

    port = free_port()  # nothing listens there
    assert add(name="down", url=f"postgresql://postgres@127.0.0.1:{port}/nowhere").status_code == 201
    test = admin.post(f"{STORES}/down/test").json()
    assert test["ok"] is False
    connect = next(c for c in test["checks"] if c["check"] == "connect")
    assert not connect["ok"] and f"127.0.0.1:{port}" in connect["message"] and "unavailable" in connect["message"]

    assert add(name="noenv", url="mysql://root@127.0.0.1:3306/x", password="${env:RC_TEST_UNSET_VAR}").status_code == 201
    test = admin.post(f"{STORES}/noenv/test").json()
    assert test["ok"] is False and test["checks"][0]["check"] == "resolve"
    assert "RC_TEST_UNSET_VAR is not set" in test["checks"][0]["message"]
    assert admin.post(f"{STORES}/nosuch/test").status_code == 404


def test_store_changes_need_an_admin(db, node, client, settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("op", "operator")
    client.defaults["HTTP_AUTHORIZATION"] = basic("op", "pw")
    assert client.get(STORES).status_code == 200
    denied = client.post(STORES, {"name": "pg", "url": "postgresql://u@h/x"}, content_type="application/json")
    assert denied.status_code == 403 and denied.json()["error_code"] == 403
    assert client.post(f"{STORES}/raft/test").status_code == 403
    client.defaults.pop("HTTP_AUTHORIZATION")
    assert client.get(STORES).status_code == 401


def test_mariadb_store_with_a_file_reference_from_the_admin_page(db, node, client, dbs, tmp_path, monkeypatch):
    """Added, tested and switched to entirely from the admin page, with confirmation and progress."""
    secrets = tmp_path / "secrets"
    secrets.mkdir()
    (secrets / "stores.properties").write_text("maria.password=\n")  # root has no password here
    monkeypatch.setenv("RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS", str(secrets))
    client.force_login(make_user("root", "admin"))
    page = client.get("/admin/metadata-store/").content.decode()
    assert "No other store yet: add one below." in page
    ref = f"${{file:{secrets}/stores.properties:maria.password}}"
    url = MARIADB_URL.format(db=dbs["mysql"])
    resp = client.post("/admin/metadata-store/", {"action": "add", "name": "maria", "url": url, "password": ref})
    assert resp.status_code == 302
    page = client.get("/admin/metadata-store/").content.decode()
    assert "Store maria added on every node" in page and 'data-store="maria"' in page

    tested = client.post("/admin/metadata-store/", {"action": "test", "name": "maria"}).content.decode()
    assert 'id="test-result" data-ok="1"' in tested

    confirm = client.post("/admin/metadata-store/", {"action": "confirm", "target": "maria"}).content.decode()
    assert "Switch the metadata store to maria?" in confirm and 'id="confirm-switch"' in confirm
    assert "read-only and keeps its data" in confirm
    assert client.post("/admin/metadata-store/", {"action": "switch", "target": "maria"}).status_code == 302
    wait_for(lambda: node.raft.state.switch["phase"] == "completed", 60, what="the switch to complete")
    live = client.get("/admin/metadata-store/?part=live").content.decode()
    assert 'id="active-store">maria<' in live and live.count('data-state="done"') == 4
    assert "Switched from raft to maria in" in live and "raft is now read-only" in live
    assert 'value="Switch back to raft"' in live and 'id="rollback" disabled' not in live


def test_a_store_added_on_the_leader_is_usable_and_removed_on_another_member(tmp_path, dbs, monkeypatch):
    """Two Raft members, each with its own StoreSet as on a node: the definition travels through Raft."""
    monkeypatch.setenv("RC_TEST_PG_PASSWORD", SECRET)
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(2)]
    members = [RaftNode(RaftConfig(self_address=a, peers=[b for b in addrs if b != a],
                                   data_dir=str(tmp_path / f"m{i}"), password="secret")) for i, a in enumerate(addrs)]
    sets = [StoreSet(RaftMetadataStore(m), {}, fence=m.state.check_fence, specs=lambda m=m: m.state.store_specs,
                     resolve=resolve_spec) for m in members]
    try:
        leader = wait_for(lambda: next((m for m in members if m.is_leader), None), 15, what="a leader")
        other = sets[1 - members.index(leader)]
        url = PG_URL.format(db=dbs["postgresql"])
        store_add(raft=leader, stores=sets[members.index(leader)], name="pg", url=url,
                  password="${env:RC_TEST_PG_PASSWORD}", user="root")
        wait_for(lambda: other.source("pg") == "cluster", 15, what="the store on the other member")
        other.get("pg").ping()  # built from the replicated spec, password resolved there
        assert SECRET not in repr(other.get("pg")) and SECRET not in str(other.describe())
        store_remove(raft=leader, stores=sets[members.index(leader)], name="pg", user="root")
        wait_for(lambda: other.source("pg") is None, 15, what="the removal on the other member")
        assert other.prune() == ["pg"]
    finally:
        for s in sets:
            s.close()
        for m in members:
            m.destroy()


def test_validate_and_resolve_keep_references_and_quote_values(monkeypatch):
    monkeypatch.setenv("RC_TEST_PW", "p@ss/word:1")
    spec = validate_spec(name="pg", url="postgresql://rc:${env:RC_TEST_PW}@db:5432/meta", password=None)
    assert spec["url"] == "postgresql://rc:${env:RC_TEST_PW}@db:5432/meta"
    assert resolve_spec("pg", spec) == "postgresql://rc:p%40ss%2Fword%3A1@db:5432/meta"
    spec = validate_spec(name="pg", url="postgresql://rc@db/meta", password="${env:RC_TEST_PW}")
    assert resolve_spec("pg", spec) == "postgresql://rc:p%40ss%2Fword%3A1@db/meta"
    with pytest.raises(StoreCatalogError, match="in clear"):
        validate_spec(name="pg", url="postgresql://rc@db/meta?password=x")
    with pytest.raises(StoreCatalogError, match="user name"):
        validate_spec(name="pg", url="postgresql://db/meta", password="${env:RC_TEST_PW}")
