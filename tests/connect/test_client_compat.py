"""A published Kafka Connect client (kafka-connect-py, PyPI) drives a live node through a connector's life.

The client knows nothing of RaftConnect: if it works, our paths, status codes
and bodies are what Connect clients expect. kafka-connect-py 1.0.0 has no
offsets methods, so offsets are read and changed with plain ``requests`` on the
same node.
"""
from __future__ import annotations

import json

import pytest
import requests
from kafka_connect import KafkaConnect
from requests.exceptions import HTTPError

pytestmark = pytest.mark.integration

SOURCE = "raftconnect.connectors.file.FileSourceConnector"


@pytest.fixture
def kc(live_node) -> KafkaConnect:
    return KafkaConnect(url=live_node.url, auth=":".join(live_node.auth))


def config(tmp_path, name: str, **extra) -> dict:
    f = tmp_path / "in.csv"
    f.write_text("a,b\n1,x\n")
    return {"connector.class": SOURCE, "name": name, "path": str(f), "format": "csv", "topic": "compat",
            "tasks.max": "1", **extra}


def test_connector_lifecycle_through_kafka_connect_py(kc, live_node, tmp_path):
    name = "compat-lifecycle"
    assert "version" in kc.get_cluster_info()
    assert any(p["class"] == SOURCE for p in kc.list_connector_plugins())
    created = kc.create_connector({"name": name, "config": config(tmp_path, name)})
    assert created["name"] == name and created["type"] == "source"
    assert name in kc.list_connectors()
    expanded = kc.list_connectors(expand="status")
    assert expanded[name]["status"]["name"] == name
    assert expanded[name]["status"]["connector"]["state"] in ("UNASSIGNED", "RUNNING")
    assert kc.list_connectors(expand="info")[name]["info"]["config"]["topic"] == "compat"

    updated = kc.update_connector(name, config(tmp_path, name, topic="compat2"))
    assert updated["config"]["topic"] == "compat2"
    assert kc.get_connector_config(name)["topic"] == "compat2"
    assert kc.get_connector(name)["name"] == name

    kc.pause_connector(name)
    assert kc.get_connector_status(name)["name"] == name
    kc.resume_connector(name)
    kc.stop_connector(name)
    assert kc.list_connector_tasks(name) == []  # a stopped connector has no tasks, as in Connect

    offsets = requests.get(f"{live_node.url}/connectors/{name}/offsets", auth=live_node.auth, timeout=10)
    assert offsets.status_code == 200 and offsets.json() == {"offsets": []}

    kc.delete_connector(name)
    assert name not in kc.list_connectors()
    with pytest.raises(HTTPError) as missing:
        kc.get_connector(name)
    assert missing.value.response.status_code == 404
    assert missing.value.response.json() == {"error_code": 404, "message": f"Connector {name} not found"}


def test_restart_offsets_and_topics_through_kafka_connect_py(kc, live_node, tmp_path):
    name = "compat-restart"
    kc.create_connector({"name": name, "config": config(tmp_path, name)})
    try:
        kc.restart_connector(name)  # the connector instance only: 204, as Connect
        with pytest.raises(HTTPError) as no_status:  # no worker here, so no status to plan a restart from
            kc.restart_connector(name, include_tasks=True, only_failed=False)
        assert json.loads(str(no_status.value)) == {"error_code": 404,  # the client raises with the body only
                                                    "message": f"Status for connector {name} not found"}
        assert set(kc.list_connector_topics(name)[name]["topics"]) <= {"compat"}
        kc.stop_connector(name)
        url = f"{live_node.url}/connectors/{name}/offsets"
        partition = {"filename": str(tmp_path / "in.csv")}
        patched = requests.patch(url, auth=live_node.auth, timeout=10,
                                 json={"offsets": [{"partition": partition, "offset": {"position": 1}}]})
        assert patched.status_code == 200, patched.text
        got = requests.get(url, auth=live_node.auth, timeout=10).json()["offsets"]
        assert got == [{"partition": partition, "offset": {"position": 1}}]
        reset = requests.delete(url, auth=live_node.auth, timeout=10)
        assert reset.status_code == 200, reset.text
        assert requests.get(url, auth=live_node.auth, timeout=10).json() == {"offsets": []}
    finally:
        kc.delete_connector(name)
