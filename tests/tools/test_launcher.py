"""``tools.launcher.ConnectClient.create_connector_once`` against a stubbed ``request``: no node needed."""
from __future__ import annotations

import pytest

import time

from tools.launcher import ConnectClient, ConnectHTTPError, NodeProcess


def client_answering(stored: dict | None, status: int = 409) -> tuple[ConnectClient, list]:
    calls: list = []
    c = ConnectClient("http://127.0.0.1:9")

    def request(method, path, json=None, params=None, ok=()):
        calls.append((method, path, json))
        if method == "POST":
            raise ConnectHTTPError(status, {"error_code": status, "message": "exists"})
        return stored

    c.request = request
    return c, calls


def test_a_409_for_the_same_config_counts_as_created_and_the_initial_state_is_sent():
    c, calls = client_answering({"a": "1"})
    c.create_connector_once("x", {"a": "1"}, initial_state="STOPPED")
    assert calls[0] == ("POST", "/connectors", {"name": "x", "config": {"a": "1"}, "initial_state": "STOPPED"})
    assert calls[1][:2] == ("GET", "/connectors/x/config")


def test_a_409_for_another_config_and_other_errors_are_raised():
    with pytest.raises(ConnectHTTPError):
        client_answering({"a": "2"})[0].create_connector_once("x", {"a": "1"})
    c, calls = client_answering(None, status=500)
    with pytest.raises(ConnectHTTPError):
        c.create_connector_once("x", {"a": "1"})
    assert len(calls) == 1


def test_wait_healthy_gives_up_as_soon_as_the_node_exits(tmp_path):
    """A node that exited cannot become healthy: the error names its exit code at once instead of
    after the whole timeout (a failed chaos iteration waited 3 minutes)."""
    node = NodeProcess(node_id="n1", rest_port=1, raft_port=2, data_dir=str(tmp_path), bootstrap_servers="",
                       command_prefix=["sh", "-c", "echo cannot start; exit 3", "--"])
    node.start(wait=False)
    started = time.monotonic()
    with pytest.raises(RuntimeError, match=r"node n1 exited with 3:\n(.|\n)*cannot start"):
        node.wait_healthy(timeout=600)
    assert time.monotonic() - started < 300  # far from the timeout: it did not wait it out
