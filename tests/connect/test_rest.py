"""Kafka Connect REST API on an in-process node: shapes, status codes, errors, authentication."""
from __future__ import annotations

import json

import pytest

from webapp.coordinator.signing import signed_headers

from .conftest import make_user

SOURCE = "raftconnect.connectors.file.FileSourceConnector"


def source_config(tmp_path, **extra):
    f = tmp_path / "in.csv"
    f.write_text("a,b\n1,x\n")
    return {"connector.class": SOURCE, "path": str(f), "format": "csv", "topic": "t", "tasks.max": "1", **extra}


def post(client, path, body, **kw):
    return client.post(path, data=json.dumps(body) if not isinstance(body, (str, bytes)) else body,
                       content_type="application/json", **kw)


def put(client, path, body=None):
    return client.put(path, data=json.dumps(body) if body is not None else "", content_type="application/json")


def test_root_and_health_need_no_authentication(db, node, client):
    root = client.get("/")
    assert root.status_code == 200 and "version" in root.json()
    assert client.get("/health").json()["status"] == "healthy"


@pytest.mark.parametrize("auth", [None, "Basic b3BlcmF0b3I6d3Jvbmc="])  # operator:wrong
def test_everything_else_requires_authentication(db, node, client, auth):
    make_user("operator", "operator")
    headers = {"HTTP_AUTHORIZATION": auth} if auth else {}
    for path in ("/connectors", "/connector-plugins", "/raftconnect/v1/cluster", "/connectors/x/status"):
        resp = client.get(path, **headers)
        assert resp.status_code == 401, path
        assert set(resp.json()) == {"error_code", "message"} and resp.json()["error_code"] == 401


def test_connector_lifecycle_shapes_and_codes(api, tmp_path):
    cfg = source_config(tmp_path)
    resp = post(api, "/connectors", {"name": "src", "config": cfg})
    assert resp.status_code == 201, resp.json()
    assert resp["Location"].endswith("/connectors/src")
    body = resp.json()
    assert body["name"] == "src" and body["type"] == "source" and body["config"]["name"] == "src"
    assert body["tasks"] == []  # no worker has produced task configs yet

    assert api.get("/connectors").json() == ["src"]
    expanded = api.get("/connectors?expand=status&expand=info").json()
    assert expanded["src"]["info"]["config"]["topic"] == "t"
    assert expanded["src"]["status"]["connector"]["state"] == "UNASSIGNED"
    assert api.get("/connectors/src/config").json() == {**cfg, "name": "src"}
    assert api.get("/connectors/src/tasks").json() == []

    assert put(api, "/connectors/src/pause").status_code == 202
    assert api.get("/connectors/src").status_code == 200
    assert put(api, "/connectors/src/resume").status_code == 202

    updated = put(api, "/connectors/src/config", {**cfg, "topic": "t2"})
    assert updated.status_code == 200 and updated.json()["config"]["topic"] == "t2"
    created = put(api, "/connectors/other/config", cfg)
    assert created.status_code == 201

    assert api.delete("/connectors/src").status_code == 204
    gone = api.get("/connectors/src")
    assert gone.status_code == 404 and gone.json() == {"error_code": 404, "message": "Connector src not found"}
    assert api.get("/connectors").json() == ["other"]


def test_target_state_is_stored(api, node, tmp_path):
    post(api, "/connectors", {"name": "src", "config": source_config(tmp_path)})
    put(api, "/connectors/src/pause")
    assert node.store.get_connector("src").target_state == "PAUSED"
    put(api, "/connectors/src/resume")
    assert node.store.get_connector("src").target_state == "STARTED"
    assert put(api, "/connectors/src/stop").status_code == 204
    assert api.get("/connectors/src/status").json()["connector"]["state"] in ("STOPPED", "UNASSIGNED")


@pytest.mark.parametrize("name, fragment", [
    ("a/b", "may not contain '/'"),
    ("bad\x07name", "control characters"),
    ("x" * 10_000, "too long"),
    ("", "required"),
])
def test_bad_names_are_refused_without_partial_state(api, tmp_path, name, fragment):
    resp = post(api, "/connectors", {"name": name, "config": source_config(tmp_path)})
    assert resp.status_code == 400 and fragment in resp.json()["message"]
    assert api.get("/connectors").json() == []


def test_duplicate_and_mismatched_names(api, tmp_path):
    cfg = source_config(tmp_path)
    assert post(api, "/connectors", {"name": "src", "config": cfg}).status_code == 201
    dup = post(api, "/connectors", {"name": "src", "config": cfg})
    assert dup.status_code == 409 and "already exists" in dup.json()["message"]
    mismatch = put(api, "/connectors/abc/config", {**cfg, "name": "xyz"})
    assert mismatch.status_code == 400 and "doesn't match" in mismatch.json()["message"]
    assert api.get("/connectors").json() == ["src"]


def test_invalid_configs_and_bodies(api, tmp_path):
    unknown = post(api, "/connectors", {"name": "x", "config": {"connector.class": "NoSuchConnector"}})
    assert unknown.status_code == 400 and "NoSuchConnector" in unknown.json()["message"]
    missing = post(api, "/connectors", {"name": "x", "config": {"connector.class": SOURCE}})
    assert missing.status_code == 400 and "path" in missing.json()["message"]
    malformed = post(api, "/connectors", "{not json")
    assert malformed.status_code == 400 and malformed.json()["error_code"] == 400
    wrong_type = post(api, "/connectors", {"name": "x", "config": {"connector.class": SOURCE, "path": ["a"]}})
    assert wrong_type.status_code == 400
    not_object = post(api, "/connectors", [1, 2])
    assert not_object.status_code == 400
    assert api.get("/connectors").json() == []


def test_connector_plugins_lists_file_connectors(api):
    classes = {p["class"]: p["type"] for p in api.get("/connector-plugins").json()}
    assert classes[SOURCE] == "source"
    assert classes["raftconnect.connectors.file.FileSinkConnector"] == "sink"


def test_simple_class_names_are_accepted(api, tmp_path):
    for i, alias in enumerate(["FileSourceConnector", "FileSource"]):
        resp = post(api, "/connectors", {"name": f"s{i}", "config": source_config(tmp_path, **{"connector.class": alias})})
        assert resp.status_code == 201, resp.json()


def test_internal_endpoints_accept_only_signed_requests(api, node):
    path = "/raftconnect/v1/internal/heartbeat"
    body = json.dumps({"worker_id": "w9", "member": {"rest_address": "127.0.0.1:1"}, "running": {}}).encode()
    unsigned = api.post(path, data=body, content_type="application/json")
    assert unsigned.status_code in (401, 403)
    forged = api.post(path, data=body, content_type="application/json",
                      **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed_headers("wrong", "POST", path, body).items()})
    assert forged.status_code in (401, 403)
    signed = api.post(path, data=body, content_type="application/json",
                      **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed_headers(node.secret, "POST", path, body).items()})
    assert signed.status_code == 200, signed.json()
    assert signed.json()["worker_id"] == "w9"
    assert "w9" in node.raft.state.members


def test_stale_offset_commit_is_fenced_with_409(api, node, tmp_path):
    post(api, "/connectors", {"name": "src", "config": source_config(tmp_path)})
    path = "/raftconnect/v1/internal/connectors/src/offsets"
    body = json.dumps({"worker_id": "ghost", "generation": 1, "task": 0,
                       "offsets": [[{"filename": "f"}, {"position": 1}]]}).encode()
    resp = api.post(path, data=body, content_type="application/json",
                    **{f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed_headers(node.secret, "POST", path, body).items()})
    assert resp.status_code == 409 and "not assigned" in resp.json()["message"]
    assert api.get("/connectors/src/offsets").json() == {"offsets": []}


def test_password_change_invalidates_cached_credentials(api, node):
    from django.contrib.auth.hashers import make_password

    assert api.get("/connectors").status_code == 200
    assert api.get("/connectors").status_code == 200  # served from the verified-credentials cache
    # the replicated hash changes (as when another node changed the password): the cache key no longer matches
    node.raft.commands.user_put(name="operator", changes={"password": make_password("new")}, create=False, now=1.0)
    assert api.get("/connectors").status_code == 401


def test_openapi_schema_is_generated_from_the_views_and_public(api, client, node, settings):
    resp = api.get("/raftconnect/v1/openapi.json")
    assert resp.status_code == 200
    schema = resp.json()
    assert schema["openapi"].startswith("3.")
    paths = schema["paths"]
    for p in ("/connectors", "/connectors/{name}/config", "/connectors/{name}/status",
              "/raftconnect/v1/metadata-store/switch"):
        assert p in paths, p
    assert not any(p.startswith("/raftconnect/v1/internal/") for p in paths)
    del client.defaults["HTTP_AUTHORIZATION"]
    public = client.get("/raftconnect/v1/openapi.json")
    assert public.status_code == 200 and public.json()["paths"].keys() == paths.keys()
    text = public.content.decode()
    assert node.secret not in text and settings.SECRET_KEY not in text
    assert client.get("/connectors").status_code == 401  # the operations it describes still need credentials
    # Swagger UI and ReDoc, with their files served by the node (no CDN: nodes may have no internet)
    import re

    for page in ("/raftconnect/v1/docs", "/raftconnect/v1/redoc"):
        html = client.get(page)
        assert html.status_code == 200, page
        body = html.content.decode()
        assert "/raftconnect/v1/openapi.json" in body
        assert not re.search(r"""(src|href)=["']https?://""", body), page
    bundle = re.search(r"""src=["']([^"']*swagger-ui-bundle\.js)["']""",
                       client.get("/raftconnect/v1/docs").content.decode()).group(1)
    assert client.get(bundle).status_code == 200


def test_config_provider_references_are_stored_and_shown_never_resolved(api, tmp_path, monkeypatch):
    monkeypatch.setenv("SECRET_IN_PATH", str(tmp_path / "in.csv"))
    cfg = {**source_config(tmp_path), "path": "${env:SECRET_IN_PATH}", "csv.delimiter": "${file:/nowhere:x}"}
    created = post(api, "/connectors", {"name": "src", "config": cfg})
    assert created.status_code == 201, created.json()  # references are checked by the worker, not here
    for body in (created.json()["config"], api.get("/connectors/src/config").json(),
                 api.get("/connectors/src").json()["config"],
                 api.get("/connectors?expand=info").json()["src"]["info"]["config"]):
        assert body["path"] == "${env:SECRET_IN_PATH}"
        assert str(tmp_path) not in json.dumps(body)


def test_openapi_schema_describes_bodies_errors_and_auth(api):
    schema = api.get("/raftconnect/v1/openapi.json").json()
    create = schema["paths"]["/connectors"]["post"]
    assert create["requestBody"]["content"]["application/json"]["schema"]["$ref"].endswith("/CreateConnectorRequest")
    assert create["responses"]["201"]["content"]["application/json"]["schema"]["$ref"].endswith("/ConnectorInfo")
    for path, item in schema["paths"].items():
        for method, op in item.items():
            if path not in ("/", "/health"):
                assert {"401", "403"} <= set(op["responses"]), (path, method)
                assert op["responses"]["401"]["content"]["application/json"]["schema"]["$ref"].endswith("/ConnectError")
    assert set(schema["components"]["securitySchemes"]) >= {"basicAuth", "bearerAuth", "tokenAuth"}
    assert not any(p.startswith("/raftconnect/v1/internal/") for p in schema["paths"])


def test_secrets_are_hidden_in_responses_and_kept_when_sent_back(api, node):
    """PASSWORD keys, password-like client keys and passwords inside URLs read back as [hidden]; a client that
    writes back what it read (the console, scripts) keeps the stored secrets (issue 19 item 3)."""
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "t",
              "connection.url": "jdbc:postgresql://u:url-secret-1@db/x?sslmode=disable",
              "connection.password": "pw-secret-2", "consumer.override.sasl.jaas.config":
                  'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="jaas-secret-3";',
              "connection.user": "${env:DB_USER}"}
    created = api.post("/connectors", data=json.dumps({"name": "hid", "config": config}),
                       content_type="application/json")
    assert created.status_code == 201, created.content
    for path in ("/connectors/hid", "/connectors/hid/config", "/connectors?expand=info"):  # tasks: the sweep
        body = api.get(path).content.decode()
        assert "secret-" not in body and "[hidden]" in body, (path, body)
    shown = api.get("/connectors/hid/config").json()
    assert shown["connection.url"] == "jdbc:postgresql://u:[hidden]@db/x?sslmode=disable"
    assert shown["connection.password"] == shown["consumer.override.sasl.jaas.config"] == "[hidden]"
    assert shown["connection.user"] == "${env:DB_USER}"  # a reference is not the secret
    shown["topics"] = "t2"
    assert api.put("/connectors/hid/config", data=json.dumps(shown), content_type="application/json").status_code == 200
    assert api.patch("/connectors/hid/config", data=json.dumps({"batch.size": "10", "connection.password": "[hidden]"}),
                     content_type="application/json").status_code == 200
    stored = node.herder.store.get_connector("hid").config
    assert stored["topics"] == "t2" and stored["batch.size"] == "10"
    assert (stored["connection.url"], stored["connection.password"], stored["consumer.override.sasl.jaas.config"]) == \
        (config["connection.url"], config["connection.password"], config["consumer.override.sasl.jaas.config"])
    changed = dict(shown, **{"connection.password": "new-pw"})
    api.put("/connectors/hid/config", data=json.dumps(changed), content_type="application/json")
    assert node.herder.store.get_connector("hid").config["connection.password"] == "new-pw"
