"""Fixtures: an in-process node (real Raft, no agent) and an authenticated API client."""
from __future__ import annotations

import base64

import pytest

from tools.launcher import wait_for
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


def make_user(name: str, role: str, password: str = "pw"):
    """A user of this node with one role group (``createconnectuser``'s service)."""
    from django.contrib.auth import get_user_model

    from webapp.connect.management.commands.createconnectuser import create_connect_user

    create_connect_user(username=name, role=role, password=password)
    return get_user_model().objects.get(username=name)


@pytest.fixture
def api(db, node, client, settings):
    """A client authenticated as an operator (fast MD5 hashing: PBKDF2 is tested in test_auth)."""
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]
    make_user("operator", "operator")
    client.defaults["HTTP_AUTHORIZATION"] = basic("operator", "pw")
    return client


@pytest.fixture(scope="session")
def live_node(tmp_path_factory):
    """A real node process (``manage.py runnode``, its REST server) with Raft only (no worker: tasks never run).

    Shared by the tests that drive the API over HTTP (client compatibility,
    schema fuzzing). ``.url``, ``.auth`` (the admin's ``(user, password)``).
    Connectors created here stay UNASSIGNED; use unique names per test.
    """
    from tools.launcher import NodeProcess

    data = tmp_path_factory.mktemp("live-node")
    node = NodeProcess(node_id="live", rest_port=free_port(), raft_port=free_port(), data_dir=str(data / "n"),
                       bootstrap_servers="127.0.0.1:9", roles="raft")
    node.start(timeout=120)
    try:
        yield node
    finally:
        node.stop()


@pytest.fixture
def admin_api(api):
    """Like ``api``, authenticated as an admin (cluster operations, ``/admin/loggers``)."""
    make_user("admin", "admin")
    api.defaults["HTTP_AUTHORIZATION"] = basic("admin", "pw")
    return api


def assert_conforms(client, method: str, path: str, status: int, body) -> None:
    """``body``, answered with ``status`` to ``method`` on ``path`` (a schema path such as
    ``/connectors/{name}``), conforms to what the node's OpenAPI schema publishes for it."""
    import jsonschema

    schema = client.get("/raftconnect/v1/openapi.json").json()
    content = schema["paths"][path][method.lower()]["responses"][str(status)]["content"]["application/json"]
    jsonschema.validate(body, {**content["schema"], "components": schema["components"]},
                        cls=jsonschema.Draft202012Validator)
