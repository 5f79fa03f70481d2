"""Create, update and validate refuse unusable Kafka client override keys, for file and JDBC connectors (issue 15)."""
from __future__ import annotations

import json

from webapp.kafka import client_overrides as co

FILE_SOURCE = "raftconnect.connectors.file.FileSourceConnector"
JDBC_SINK = "io.confluent.connect.jdbc.JdbcSinkConnector"


def test_rest_refuses_unknown_override_keys_for_file_and_jdbc_connectors(api, tmp_path, monkeypatch):
    (tmp_path / "in.csv").write_text("a\n1\n")
    file_cfg = {"connector.class": FILE_SOURCE, "path": str(tmp_path / "in.csv"), "topic": "t",
                "producer.override.max.request.size": "5000000", "producer.override.linger.ms": "5"}
    jdbc_cfg = {"connector.class": JDBC_SINK, "connection.url": "jdbc:postgresql://127.0.0.1:5432/x", "topics": "o",
                "consumer.override.fetch.max.wait.ms": "10"}
    bad = {**file_cfg, "producer.override.max.request.sizes": "5000000"}
    resp = api.post("/connectors", data=json.dumps({"name": "f", "config": bad}), content_type="application/json")
    assert resp.status_code == 400 and resp.json()["error_code"] == 400
    assert "producer.override.max.request.sizes: not a Kafka client setting" in resp.json()["message"]
    resp = api.put("/connector-plugins/JdbcSinkConnector/config/validate", content_type="application/json",
                   data=json.dumps({**jdbc_cfg, "name": "v", "consumer.override.max.poll.records": "10"}))
    body = resp.json()
    assert resp.status_code == 200 and body["error_count"] == 1, body
    [entry] = [c for c in body["configs"] if c["value"]["name"] == "consumer.override.max.poll.records"]
    assert "no librdkafka equivalent" in entry["value"]["errors"][0]
    for name, cfg in (("f", file_cfg), ("j", jdbc_cfg)):
        assert api.post("/connectors", data=json.dumps({"name": name, "config": cfg}),
                        content_type="application/json").status_code == 201
    monkeypatch.setenv(co.OVERRIDE_POLICY_ENV, "None")
    resp = api.put("/connectors/f/config", data=json.dumps(file_cfg), content_type="application/json")
    assert resp.status_code == 400 and "The 'None' policy does not allow 'linger.ms'" in resp.json()["message"]
