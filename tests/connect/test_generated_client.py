"""A client generated from the public OpenAPI schema (openapi-python-client) drives a live node.

If the generated, typed client can create, read, pause, resume and delete a
connector and parse Connect's error body, the schema describes the API as it
answers, not only as its views are declared.
"""
from __future__ import annotations

import importlib
import json
import subprocess
import sys
from pathlib import Path

import pytest
import requests

pytestmark = pytest.mark.integration

SOURCE = "raftconnect.connectors.file.FileSourceConnector"


@pytest.fixture(scope="module")
def generated(live_node, tmp_path_factory):
    """The package ``rc_client`` generated from the node's schema, imported."""
    out = tmp_path_factory.mktemp("generated")
    schema = requests.get(f"{live_node.url}/raftconnect/v1/openapi.json", timeout=30)  # public: no credentials
    schema.raise_for_status()
    (out / "openapi.json").write_text(json.dumps(schema.json()))
    tool = Path(sys.executable).with_name("openapi-python-client")
    done = subprocess.run([str(tool), "generate", "--path", str(out / "openapi.json"), "--meta", "none",
                           "--output-path", str(out / "rc_client")], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    sys.path.insert(0, str(out))
    try:
        yield importlib.import_module("rc_client")
    finally:
        sys.path.remove(str(out))
        for name in [m for m in sys.modules if m == "rc_client" or m.startswith("rc_client.")]:
            del sys.modules[name]


def test_a_generated_client_drives_a_connector_through_its_life(generated, live_node, tmp_path):
    from rc_client.api.connectors import (connectors_config_retrieve, connectors_create, connectors_destroy,
                                          connectors_list, connectors_pause_update, connectors_resume_update,
                                          connectors_retrieve, connectors_status_retrieve)
    from rc_client.client import Client
    from rc_client.models import ConnectError, ConnectorInfo, ConnectorStateInfo, CreateConnectorRequest

    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,x\n")
    client = Client(base_url=live_node.url, httpx_args={"auth": live_node.auth}, raise_on_unexpected_status=True)
    config = {"connector.class": SOURCE, "path": str(data), "format": "csv", "topic": "generated", "tasks.max": "1"}
    created = connectors_create.sync_detailed(
        client=client, body=CreateConnectorRequest.from_dict({"name": "generated-1", "config": config}))
    assert created.status_code == 201 and isinstance(created.parsed, ConnectorInfo)
    assert created.parsed.name == "generated-1" and created.parsed.config["topic"] == "generated"
    assert "generated-1" in connectors_list.sync_detailed(client=client).parsed
    got = connectors_config_retrieve.sync_detailed("generated-1", client=client)
    assert got.status_code == 200 and got.parsed["path"] == str(data)
    status = connectors_status_retrieve.sync_detailed("generated-1", client=client)
    assert isinstance(status.parsed, ConnectorStateInfo) and status.parsed.name == "generated-1"
    assert connectors_pause_update.sync_detailed("generated-1", client=client).status_code == 202
    assert connectors_resume_update.sync_detailed("generated-1", client=client).status_code == 202
    assert connectors_destroy.sync_detailed("generated-1", client=client).status_code == 204
    missing = connectors_retrieve.sync_detailed("generated-1", client=client)
    assert missing.status_code == 404 and isinstance(missing.parsed, ConnectError)
    assert missing.parsed.error_code == 404 and "generated-1" in missing.parsed.message
    anonymous = Client(base_url=live_node.url)
    assert connectors_list.sync_detailed(client=anonymous).status_code == 401


def test_a_generated_client_reads_raftconnect_resources_as_typed_models(generated, live_node, tmp_path):
    """RaftConnect's own answers parse into named models: the cluster, the metadata store, a token's life."""
    from rc_client.api.raftconnect import (raftconnect_v1_cluster_retrieve, raftconnect_v1_console_connectors_retrieve,
                                           raftconnect_v1_metadata_store_retrieve, raftconnect_v1_tokens_create,
                                           raftconnect_v1_tokens_destroy, raftconnect_v1_tokens_list,
                                           raftconnect_v1_whoami_retrieve)
    from rc_client.api.connectors import connectors_create, connectors_destroy
    from rc_client.client import AuthenticatedClient, Client
    from rc_client.models import (ClusterView, ConnectorHealth, CreateConnectorRequest, HealthEnum,
                                  MetadataStoreStatus, NewToken, NewTokenRequest, RaftRoleEnum, UserRoleEnum, WhoAmI)

    admin = Client(base_url=live_node.url, httpx_args={"auth": live_node.auth}, raise_on_unexpected_status=True)
    cluster = raftconnect_v1_cluster_retrieve.sync(client=admin)
    assert isinstance(cluster, ClusterView) and cluster.node_id == "live"
    assert cluster.raft.state == RaftRoleEnum.LEADER and cluster.metadata_store == "raft"
    assert [n.id for n in cluster.nodes] == ["live"] and cluster.nodes[0].raft.state.value == "LEADER"
    store = raftconnect_v1_metadata_store_retrieve.sync(client=admin)
    assert isinstance(store, MetadataStoreStatus) and store.active == "raft"
    assert any(s.name == "raft" and s.active for s in store.stores)

    data = tmp_path / "in.csv"
    data.write_text("a\n1\n")
    config = {"connector.class": SOURCE, "path": str(data), "format": "csv", "topic": "typed", "tasks.max": "1"}
    connectors_create.sync(client=admin,
                           body=CreateConnectorRequest.from_dict({"name": "generated-2", "config": config}))
    health = raftconnect_v1_console_connectors_retrieve.sync("generated-2", client=admin)
    assert isinstance(health, ConnectorHealth) and health.name == "generated-2"
    assert health.health == HealthEnum.UNASSIGNED  # this node runs no worker
    connectors_destroy.sync_detailed("generated-2", client=admin)

    issued = raftconnect_v1_tokens_create.sync(client=admin, body=NewTokenRequest(name="generated", expires_in_s=600))
    assert isinstance(issued, NewToken) and issued.token.startswith("rct_") and issued.expires > issued.created
    bearer = AuthenticatedClient(base_url=live_node.url, token=issued.token, raise_on_unexpected_status=True)
    me = raftconnect_v1_whoami_retrieve.sync(client=bearer)
    assert isinstance(me, WhoAmI) and me.username == live_node.auth[0] and me.roles == [UserRoleEnum.ADMIN]
    listed = raftconnect_v1_tokens_list.sync(client=bearer)
    assert [(t.name, t.expired) for t in listed] == [("generated", False)]
    assert raftconnect_v1_tokens_destroy.sync_detailed("generated", client=bearer).status_code == 204
    anonymous = AuthenticatedClient(base_url=live_node.url, token=issued.token)
    assert raftconnect_v1_whoami_retrieve.sync_detailed(client=anonymous).status_code == 401
