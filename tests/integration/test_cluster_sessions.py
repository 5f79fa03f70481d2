"""A console login through one node holds on every node of a real cluster (3 Raft members and a worker-only
node), though each node numbers its user rows in its own order: reads, a CSRF-checked write through a
follower with the operator's rights, and the logout (webapp.connect.api.sessions)."""
from __future__ import annotations

import pytest
import requests

from tools.demo import SOURCE_CLASS
from tools.launcher import wait_for

pytestmark = pytest.mark.integration

XHR = {"X-Requested-With": "XMLHttpRequest"}


def whoami(browser: requests.Session, node) -> str | int:
    resp = browser.get(f"{node.url}/raftconnect/v1/whoami", headers=XHR, timeout=30)
    return resp.json()["username"] if resp.status_code == 200 else resp.status_code


def test_a_console_login_through_one_node_holds_on_every_node(tmp_path, members_and_a_worker):
    cluster = members_and_a_worker
    src = tmp_path / "in.csv"
    src.write_text("a\n1\n")
    leader = cluster.leader()
    follower = next(n for n in cluster.nodes if n is not leader and "raft" in n.roles)
    worker_only = next(n for n in cluster.nodes if "raft" not in n.roles)
    for name, role in (("otto", "operator"), ("vera", "viewer")):
        leader.create_user(name, role)
    # each node writes its row of a user when the user first authenticates there: in opposite orders
    # on the two nodes, otto's row id on the leader is vera's on the follower
    for node, order in ((leader, ("otto", "vera")), (follower, ("vera", "otto"))):
        for name in order:
            wait_for(lambda node=node, name=name: requests.get(f"{node.url}/connectors", auth=(name, "pw"),
                                                               timeout=30).status_code == 200,
                     30, what=f"{name} on {node.node_id}")

    browser = requests.Session()  # cookies go to every port of 127.0.0.1, as a browser's do
    assert whoami(browser, leader) == 401
    login = browser.post(f"{leader.url}/raftconnect/v1/session", json={"username": "otto", "password": "pw"},
                         headers={**XHR, "X-CSRFToken": browser.cookies["csrftoken"]}, timeout=30)
    assert login.status_code == 200, login.text
    for node in cluster.nodes:
        assert whoami(browser, node) == "otto", node.node_id

    cfg = {"connector.class": SOURCE_CLASS, "path": str(src), "format": "csv", "topic": "t", "tasks.max": "1"}
    created = browser.post(f"{follower.url}/connectors", json={"name": "by-otto", "config": cfg},
                           headers={**XHR, "X-CSRFToken": browser.cookies["csrftoken"]}, timeout=30)
    assert created.status_code == 201, created.text  # forwarded to the leader as otto, an operator
    assert browser.get(f"{worker_only.url}/connectors", headers=XHR, timeout=30).json() == ["by-otto"]

    out = browser.delete(f"{worker_only.url}/raftconnect/v1/session",
                         headers={**XHR, "X-CSRFToken": browser.cookies["csrftoken"]}, timeout=30)
    assert out.status_code == 204
    for node in cluster.nodes:
        assert whoami(browser, node) == 401, node.node_id
