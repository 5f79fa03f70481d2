"""Fixtures: an in-process node (real Raft, no agent) and an authenticated API client."""
from __future__ import annotations

import base64

import pytest

from webapp.connect.launcher import wait_for
from webapp.connect.node import ConnectNode, NodeOptions
from webapp.kafka.embedded import free_port


@pytest.fixture
def node(tmp_path):
    n = ConnectNode(NodeOptions(node_id="n1", raft_address=f"127.0.0.1:{free_port()}",
                                rest_address="127.0.0.1:18083", data_dir=str(tmp_path / "node")))
    n.start_control_plane()
    wait_for(lambda: n.coordinator.active, 15, what="coordinator to become active")
    yield n
    n.stop()


def basic(user: str, password: str) -> str:
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode()


@pytest.fixture
def api(db, node, client, django_user_model):
    django_user_model.objects.create_user("operator", password="pw")
    client.defaults["HTTP_AUTHORIZATION"] = basic("operator", "pw")
    return client
