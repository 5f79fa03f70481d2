"""``/connector-plugins``: plugin types, config definitions (ConfigKeyInfo) and validation (ConfigInfos)."""
from __future__ import annotations

import json

from webapp.connect import plugins
from webapp.plugin import ConfigDef, ConfigKey

from .test_rest import SOURCE, put, source_config

CONFIG_KEY_INFO = {"name", "type", "required", "default_value", "importance", "documentation", "group",
                   "order_in_group", "width", "display_name", "dependents"}


def test_connectors_only_by_default_and_all_types_on_request(api):
    default = api.get("/connector-plugins").json()
    assert {p["type"] for p in default} == {"source", "sink"}
    assert api.get("/connector-plugins?connectorsOnly=true").json() == default
    everything = api.get("/connector-plugins?connectorsOnly=false").json()
    by_class = {p["class"]: p for p in everything}
    assert by_class["org.apache.kafka.connect.json.JsonConverter"]["type"] == "converter"
    assert by_class["org.apache.kafka.connect.storage.StringConverter"]["type"] == "converter"
    assert [p for p in everything if p["type"] in ("source", "sink")] == default
    assert all(set(p) == {"class", "type", "version"} for p in everything)
    bad = api.get("/connector-plugins?connectorsOnly=perhaps")
    assert bad.status_code == 400 and bad.json()["error_code"] == 400


def test_registered_plugins_are_listed(api):
    plugins.register("com.example.MaskField", "transformation",
                     config_def=ConfigDef((ConfigKey("fields", "LIST", None, required=True),)))
    try:
        listed = api.get("/connector-plugins?connectorsOnly=false").json()
        assert {"class": "com.example.MaskField", "type": "transformation", "version": plugins.RUNTIME_VERSION} in listed
        cfg = api.get("/connector-plugins/MaskField/config").json()
        assert [k["name"] for k in cfg] == ["fields"] and cfg[0]["required"] is True
    finally:
        plugins._registered.pop("com.example.MaskField")
        plugins._discovered.cache_clear()


def test_plugin_config_definitions(api):
    for name in (SOURCE, "FileSourceConnector", "FileSource"):
        keys = api.get(f"/connector-plugins/{name}/config").json()
        assert keys and all(set(k) == CONFIG_KEY_INFO for k in keys), name
        path = next(k for k in keys if k["name"] == "path")
        assert path["required"] is True and path["type"] == "STRING" and path["importance"] == "HIGH"
    conv = api.get("/connector-plugins/org.apache.kafka.connect.json.JsonConverter/config").json()
    assert conv[0]["name"] == "schemas.enable" and conv[0]["default_value"] == "true"
    unknown = api.get("/connector-plugins/NoSuchThing/config")
    assert unknown.status_code == 404 and unknown.json()["message"] == "Unknown plugin NoSuchThing."


def test_validate_a_good_and_a_bad_config(api, tmp_path):
    good = put(api, "/connector-plugins/FileSourceConnector/config/validate", {**source_config(tmp_path), "name": "x"})
    assert good.status_code == 200, good.json()
    body = good.json()
    assert body["name"] == SOURCE and body["error_count"] == 0 and "Common" in body["groups"]
    entry = next(c for c in body["configs"] if c["definition"]["name"] == "topic")
    assert set(entry) == {"definition", "value"} and set(entry["definition"]) == CONFIG_KEY_INFO
    assert entry["value"] == {"name": "topic", "value": "t", "recommended_values": [], "errors": [], "visible": True}
    fmt = next(c for c in body["configs"] if c["definition"]["name"] == "format")
    assert fmt["value"]["recommended_values"] == ["csv", "json", "parquet"]

    bad = put(api, "/connector-plugins/FileSource/config/validate",
              {"connector.class": SOURCE, "tasks.max": "zero", "raftconnect.auto.restart": "sometimes"}).json()
    errors = {c["value"]["name"]: c["value"]["errors"] for c in bad["configs"] if c["value"]["errors"]}
    assert {"name", "path", "topic", "tasks.max", "raftconnect.auto.restart"} <= set(errors)
    assert bad["error_count"] == sum(len(e) for e in errors.values())
    assert any("Missing required configuration \"path\"" in e for e in errors["path"])


def test_validate_hostile_bodies(api, tmp_path):
    mismatch = put(api, "/connector-plugins/FileSinkConnector/config/validate", source_config(tmp_path))
    assert mismatch.status_code == 400
    assert mismatch.json()["message"] == f"Included connector type {SOURCE} does not match request type FileSinkConnector"
    no_class = put(api, "/connector-plugins/FileSource/config/validate", {"topic": "t"})
    assert no_class.status_code == 400 and "contains no connector type" in no_class.json()["message"]
    unknown = put(api, "/connector-plugins/Nope/config/validate", {"connector.class": "Nope"})
    assert unknown.status_code == 400 and "Nope" in unknown.json()["message"]
    for body in ("{oops", json.dumps([1]), json.dumps({"connector.class": SOURCE, "path": {"a": 1}})):
        resp = api.put("/connector-plugins/FileSource/config/validate", data=body, content_type="application/json")
        assert resp.status_code == 400 and resp.json()["error_code"] == 400, body


def test_validate_hides_password_values_as_kafka_does():
    secret = ConfigDef((ConfigKey("connection.password", "PASSWORD", None, required=True),
                        ConfigKey("connection.user", "STRING", None)))
    infos = plugins.validate({"connector.class": "X", "connection.password": "hunter2", "connection.user": "bob"},
                             {}, "X", secret)
    values = {c["value"]["name"]: c["value"]["value"] for c in infos["configs"]}
    assert values["connection.password"] == "[hidden]"
    assert values["connection.user"] == "bob"
    assert "hunter2" not in json.dumps(infos)
