"""The agent's ControlPlaneClient over HTTP: signed requests straight to the nodes, whatever proxy the
environment names, and each kind of answer mapped as its callers expect."""
from __future__ import annotations

import json

import pytest

from tests.connect.test_rest_server import serving
from webapp.coordinator.signing import NONCE_HEADER, SIG_HEADER, TS_HEADER, verify
from webapp.kafka.embedded import free_port
from webapp.runtime.client import ControlPlaneClient, ControlPlaneUnavailable, Fenced

SECRET = "s" * 32


class _Node:
    """A node's internal API stand-in: checks each request's signature, keeps what it was sent, and
    answers with ``answers[path]`` (status, JSON body or ``None``)."""

    def __init__(self):
        self.seen: list[dict] = []
        self.answers: dict[str, tuple[int, object]] = {}

    def __call__(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        path = environ["PATH_INFO"]
        header = lambda name: environ.get("HTTP_" + name.upper().replace("-", "_"))
        self.seen.append({"path": path, "uri": environ.get("REQUEST_URI") or environ.get("RAW_URI") or path,
                          "body": json.loads(body) if body else None, "proxy": header("Proxy-Connection"),
                          "why not authentic": verify(SECRET, environ["REQUEST_METHOD"], path, body,
                                                      header(TS_HEADER), header(SIG_HEADER), nonce=header(NONCE_HEADER))})
        status, data = self.answers.get(path, (200, {"ok": True}))
        start_response(f"{status} X", [("Content-Type", "application/json")])
        return [] if data is None else [json.dumps(data).encode()]


@pytest.fixture
def node():
    app = _Node()
    with serving(app, "waitress", threads=4) as (_, port):
        app.address = f"127.0.0.1:{port}"
        yield app


@pytest.fixture(autouse=True)
def a_proxy_that_is_nowhere(monkeypatch):
    """The environment of an agent whose outbound traffic goes through a proxy (that is not there)."""
    dead = f"http://127.0.0.1:{free_port()}"
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, dead)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)


def test_a_call_goes_signed_straight_to_the_node_past_the_environments_proxy(node):
    client = ControlPlaneClient([node.address], SECRET, "w1", timeout=5)
    node.answers["/raftconnect/v1/internal/heartbeat"] = (200, {"generation": 3})
    assert client.heartbeat({"weight": 1}, {}) == {"generation": 3}
    [seen] = node.seen
    assert seen["why not authentic"] is None and seen["proxy"] is None
    assert seen["uri"].startswith("/raftconnect/")  # origin form: no proxy's absolute URI
    assert seen["body"] == {"worker_id": "w1", "member": {"weight": 1}, "running": {}}


def test_an_unreachable_node_is_skipped_for_the_next_and_none_reachable_is_unavailable(node):
    gone = f"127.0.0.1:{free_port()}"
    client = ControlPlaneClient([gone, node.address], SECRET, "w1", timeout=5)
    client.leave()
    assert [s["path"] for s in node.seen] == ["/raftconnect/v1/internal/leave"]
    with pytest.raises(ControlPlaneUnavailable):
        ControlPlaneClient([gone], SECRET, "w1", timeout=1).call("POST", "/raftconnect/v1/internal/leave", {},
                                                                retry_for=0.2)


def test_answers_map_to_fenced_unavailable_and_errors(node):
    client = ControlPlaneClient([node.address], SECRET, "w1", timeout=5)
    path = "/raftconnect/v1/internal/connectors/c/tasks"
    node.answers[path] = (409, {"error_code": 409, "message": "stale generation 2 < 3"})
    with pytest.raises(Fenced, match="stale generation 2 < 3"):
        client.put_task_configs("c", 2, [{}])
    node.answers[path] = (503, {"error_code": 503, "message": "no leader"})
    with pytest.raises(ControlPlaneUnavailable, match="503"):
        client.call("POST", path, {}, retry_for=0.3)
    assert len(node.seen) >= 3  # retried with backoff while it lasted
    node.answers[path] = (400, {"error_code": 400, "message": "bad configs"})
    with pytest.raises(RuntimeError, match="400 .*bad configs"):
        client.put_task_configs("c", 2, [{}])
    node.answers[path] = (204, None)
    assert client.call("POST", path, {}) is None
