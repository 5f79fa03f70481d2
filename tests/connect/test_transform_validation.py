"""Connector create/update validates transforms, predicates and errors.* keys (400 listing every error)."""
from __future__ import annotations

import json

SOURCE = "raftconnect.connectors.file.FileSourceConnector"
SINK = "raftconnect.connectors.file.FileSinkConnector"


def post(api, path, body):
    return api.post(path, data=json.dumps(body), content_type="application/json")


def test_bad_transform_configs_are_refused_with_every_error(api, tmp_path):
    (tmp_path / "in.csv").write_text("a\n1\n")
    config = {"connector.class": SOURCE, "path": str(tmp_path / "in.csv"), "topic": "t",
              "transforms": "a,b,c", "transforms.a.type": "org.example.NoSuchTransform",
              "transforms.b.type": "org.apache.kafka.connect.transforms.ExtractField$Value",
              "transforms.c.type": "Cast$Value", "transforms.c.spec": "x:int128",
              "errors.tolerance": "most"}
    resp = post(api, "/connectors", {"name": "smt", "config": config})
    assert resp.status_code == 400 and resp.json()["error_code"] == 400
    message = resp.json()["message"]
    assert "contains the following 4 error(s)" in message
    assert "Class org.example.NoSuchTransform could not be found" in message
    assert 'Missing required configuration "transforms.b.field"' in message
    assert "Invalid type found in casting spec: int128" in message
    assert "errors.tolerance" in message
    assert api.get("/connectors").json() == []


def test_valid_transforms_and_dlq_are_accepted(api, tmp_path):
    config = {"connector.class": SINK, "topics": "orders", "path": str(tmp_path / "out"),
              "transforms": "route", "transforms.route.type": "RegexRouter", "transforms.route.regex": "(.*)",
              "transforms.route.replacement": "$1-copy", "transforms.route.predicate": "tomb",
              "transforms.route.negate": "true", "predicates": "tomb", "predicates.tomb.type": "RecordIsTombstone",
              "errors.tolerance": "all", "errors.deadletterqueue.topic.name": "orders-dlq"}
    assert post(api, "/connectors", {"name": "sink", "config": config}).status_code == 201
    bad = post(api, "/connectors", {"name": "sink2", "config": {**config, "predicates.tomb.type": "Nope"}})
    assert bad.status_code == 400 and "Class Nope could not be found" in bad.json()["message"]


JDBC_SINK = "io.confluent.connect.jdbc.JdbcSinkConnector"
JDBC_SOURCE = "io.confluent.connect.jdbc.JdbcSourceConnector"


def test_jdbc_connectors_accept_transforms_tolerance_and_dlq(api):
    smt = {"transforms": "key,route", "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey",
           "transforms.key.fields": "id", "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
           "transforms.route.regex": "(.*)", "transforms.route.replacement": "t_$1",
           "errors.tolerance": "all", "errors.log.enable": "true"}
    sink = {"connector.class": JDBC_SINK, "connection.url": "jdbc:postgresql://127.0.0.1:5432/x", "topics": "orders",
            "errors.deadletterqueue.topic.name": "orders-dlq",
            "errors.deadletterqueue.context.headers.enable": "true", **smt}
    source = {"connector.class": JDBC_SOURCE, "connection.url": "jdbc:mariadb://127.0.0.1:3306/x", "mode": "bulk",
              "table.whitelist": "t", "topic.prefix": "p-", **smt}
    for name, cfg in (("JdbcSinkConnector", sink), ("JdbcSourceConnector", source)):
        resp = api.put(f"/connector-plugins/{name}/config/validate", data=json.dumps({**cfg, "name": "v"}),
                       content_type="application/json")
        assert resp.status_code == 200 and resp.json()["error_count"] == 0, resp.json()
    assert post(api, "/connectors", {"name": "jdbc-sink", "config": sink}).status_code == 201


def test_jdbc_connectors_refuse_wrong_transform_and_error_keys_with_connects_error_body(api):
    sink = {"connector.class": JDBC_SINK, "connection.url": "jdbc:postgresql://127.0.0.1:5432/x", "topics": "orders",
            "transforms": "c", "transforms.c.type": "Cast$Value", "transforms.c.spec": "x:int128",
            "errors.tolerance": "most", "errors.deadletterqueue.topic.name": "orders"}
    resp = post(api, "/connectors", {"name": "bad-jdbc", "config": sink})
    assert resp.status_code == 400 and resp.json()["error_code"] == 400
    message = resp.json()["message"]
    assert "Invalid type found in casting spec: int128" in message
    assert "errors.tolerance" in message
    assert "may not be included in the list of topics" in message
    source = {"connector.class": JDBC_SOURCE, "connection.url": "jdbc:postgresql://127.0.0.1:5432/x",
              "mode": "bulk", "topic.prefix": "p-", "errors.deadletterqueue.topic.name": "dlq"}
    resp = post(api, "/connectors", {"name": "bad-src", "config": source})
    assert resp.status_code == 400 and "only available to sink connectors" in resp.json()["message"]
    assert api.get("/connectors").json() == []


def _validate_errors(api, plugin, config):
    resp = api.put(f"/connector-plugins/{plugin}/config/validate", data=json.dumps(config),
                   content_type="application/json")
    assert resp.status_code == 200
    return resp.json()["error_count"], sorted(m for c in resp.json()["configs"] for m in c["value"]["errors"])


def test_validate_endpoint_and_create_report_the_same_smt_and_errors_mistakes(api, tmp_path):
    """One validation function: each message of a refused create is a per-key error of the validate endpoint."""
    config = {"connector.class": SINK, "topics": "orders", "path": str(tmp_path / "out"), "name": "same",
              "transforms": "a,c", "transforms.a.type": "org.example.NoSuchTransform",
              "transforms.c.type": "Cast$Value", "transforms.c.spec": "x:int128",
              "predicates": "p", "predicates.p.type": "Nope",
              "errors.tolerance": "most", "errors.deadletterqueue.context.headers.enable": "maybe"}
    created = post(api, "/connectors", {"name": "same", "config": config})
    assert created.status_code == 400
    head, *lines = created.json()["message"].splitlines()
    refused = sorted(lines[:-1])  # the last line points at the validate endpoint
    assert f"the following {len(refused)} error(s)" in head and len(refused) >= 4
    count, reported = _validate_errors(api, "FileSinkConnector", config)
    assert reported == refused and count == len(refused)
    for fragment in ("NoSuchTransform", "int128", "Class Nope could not be found", "errors.tolerance"):
        assert any(fragment in m for m in reported), fragment
    # updating an existing connector applies the same function
    good = {k: v for k, v in config.items() if not k.startswith(("transforms", "predicates", "errors."))}
    assert post(api, "/connectors", {"name": "same", "config": good}).status_code == 201
    updated = api.put("/connectors/same/config", data=json.dumps(config), content_type="application/json")
    assert updated.status_code == 400 and sorted(updated.json()["message"].splitlines()[1:-1]) == refused
    assert _validate_errors(api, "FileSinkConnector", good) == (0, [])
