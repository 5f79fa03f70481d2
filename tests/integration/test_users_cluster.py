"""Replicated users and tokens on a real cluster (3 Raft members and a worker-only node): created through one node,
valid on all, after a leader change and a restart; roles travel with forwarded writes; revocation and expiry hold
everywhere, the worker-only node (which reads a copy from a member) included."""
from __future__ import annotations

import pytest
import requests

from tools.demo import SOURCE_CLASS
from tools.launcher import wait_for

pytestmark = pytest.mark.integration


def status(node, path: str = "/connectors", **auth) -> int:
    return requests.get(f"{node.url}{path}", timeout=30, **auth).status_code


def bearer(key: str) -> dict:
    return {"headers": {"Authorization": f"Bearer {key}"}}


def test_users_and_tokens_created_through_one_node_work_on_every_node(tmp_path, members_and_a_worker):
    cluster = members_and_a_worker
    src = tmp_path / "in.csv"
    src.write_text("a\n1\n")
    leader = cluster.leader()
    follower = next(n for n in cluster.nodes if n is not leader and "raft" in n.roles)
    others = [n for n in cluster.nodes if n is not follower]
    # the bootstrap admin of runnode is one replicated user, not three local ones
    assert [u["name"] for u in follower.client().request("GET", "/raftconnect/v1/users")] == ["admin"]
    for name, role in (("vera", "viewer"), ("otto", "operator")):
        follower.create_user(name, role)  # a write: the follower forwards it to the leader
    for node in cluster.nodes:
        wait_for(lambda: status(node, auth=("otto", "pw")) == 200, 30, what=f"otto on {node.node_id}")
        assert status(node, auth=("vera", "pw")) == 200
        assert status(node, auth=("otto", "wrong")) == 401

    cfg = {"connector.class": SOURCE_CLASS, "path": str(src), "format": "csv", "topic": "t", "tasks.max": "1"}
    denied = requests.post(f"{follower.url}/connectors", json={"name": "by-vera", "config": cfg},
                           auth=("vera", "pw"), timeout=30)
    assert denied.status_code == 403 and "needs the operator role" in denied.json()["message"]
    created = requests.post(f"{follower.url}/connectors", json={"name": "by-otto", "config": cfg},
                            auth=("otto", "pw"), timeout=30)
    assert created.status_code == 201, created.text
    members = requests.post(f"{follower.url}/raftconnect/v1/raft/members", json={"address": "127.0.0.1:1"},
                            auth=("otto", "pw"), timeout=30)
    assert members.status_code == 403 and "needs the admin role" in members.json()["message"]

    issued = requests.post(f"{follower.url}/raftconnect/v1/tokens", json={"name": "ci"}, auth=("otto", "pw"),
                           timeout=30)
    assert issued.status_code == 201, issued.text
    key = issued.json()["token"]
    again = requests.post(f"{others[0].url}/raftconnect/v1/tokens", json={"name": "ci"}, auth=("otto", "pw"),
                          timeout=30)
    assert again.status_code == 409 and again.json()["error_code"] == 409
    for node in cluster.nodes:
        wait_for(lambda: status(node, **bearer(key)) == 200, 30, what=f"the token on {node.node_id}")
    listed = requests.get(f"{others[1].url}/raftconnect/v1/tokens", auth=("otto", "pw"), timeout=30).json()
    assert [t["name"] for t in listed] == ["ci"] and key not in str(listed)

    # a leader change and a restart of the old leader: the users and the token are in every member's log
    leader.kill()
    survivors = [n for n in cluster.nodes if n is not leader]  # two members, then the worker-only node
    cluster.leader()
    for node in survivors:
        assert status(node, **bearer(key)) == 200
    deleted = requests.delete(f"{survivors[0].url}/connectors/by-otto", timeout=30, **bearer(key))
    assert deleted.status_code == 204, deleted.text  # a write under the new leader, by token
    leader.start(timeout=120)
    wait_for(lambda: status(leader, **bearer(key)) == 200, 60, what="the token on the restarted node")
    assert status(leader, auth=("vera", "pw")) == 200

    # revocation through one node holds on all of them
    revoked = requests.delete(f"{leader.url}/raftconnect/v1/tokens/ci", auth=("otto", "pw"), timeout=30)
    assert revoked.status_code == 204, revoked.text
    for node in cluster.nodes:
        wait_for(lambda: status(node, **bearer(key)) == 401, 30, what=f"the revoked token refused on {node.node_id}")

    # an expired token is refused (each node checks the expiry the issuing node computed)
    short = requests.post(f"{follower.url}/raftconnect/v1/tokens", json={"name": "short", "expires_in_s": 2},
                          auth=("otto", "pw"), timeout=30).json()["token"]
    for node in cluster.nodes:
        wait_for(lambda: status(node, **bearer(short)) == 401, 30, what=f"the expired token refused on {node.node_id}")
    assert [t["expired"] for t in requests.get(f"{leader.url}/raftconnect/v1/tokens", auth=("otto", "pw"),
                                               timeout=30).json()] == [True]

    # a deactivated user is refused everywhere
    admin = survivors[1].client()
    admin.request("PATCH", "/raftconnect/v1/users/otto", json={"active": False})
    for node in cluster.nodes:
        wait_for(lambda: status(node, auth=("otto", "pw")) == 401, 30, what=f"otto refused on {node.node_id}")

