"""Roles across a real cluster: users exist only on a follower; its forwarded writes carry their role to the leader."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest
import requests

from tools.demo import SOURCE_CLASS
from tools.launcher import REPO_ROOT, LocalCluster, wait_for

pytestmark = pytest.mark.integration


def create_user(data_dir: str, name: str, role: str) -> None:
    env = {**os.environ, "RAFTCONNECT_DATA_DIR": data_dir, "RAFTCONNECT_USER_PASSWORD": "pw"}
    subprocess.run([sys.executable, str(REPO_ROOT / "manage.py"), "createconnectuser", name, "--role", role],
                   env=env, check=True, capture_output=True, timeout=120)


def test_a_followers_users_write_through_the_leader_with_their_role(tmp_path):
    src = tmp_path / "in.csv"
    src.write_text("a\n1\n")
    cluster = LocalCluster(data_dir=str(tmp_path / "c"), bootstrap_servers="127.0.0.1:9", raft_nodes=3,
                           raft_roles="raft").start()
    try:
        leader = cluster.leader()
        follower = next(n for n in cluster.nodes if n is not leader)
        for name, role in (("vera", "viewer"), ("otto", "operator")):
            create_user(follower.data_dir, name, role)  # on the follower only
        cfg = {"connector.class": SOURCE_CLASS, "path": str(src), "format": "csv", "topic": "t", "tasks.max": "1"}

        def post(node, user, path, body):
            return requests.post(f"{node.url}{path}", json=body, auth=(user, "pw"), timeout=30)

        denied = post(follower, "vera", "/connectors", {"name": "by-vera", "config": cfg})
        assert denied.status_code == 403 and "needs the operator role" in denied.json()["message"]
        created = post(follower, "otto", "/connectors", {"name": "by-otto", "config": cfg})
        assert created.status_code == 201, created.text  # committed by the leader, which has no user otto
        assert post(leader, "otto", "/connectors", {"name": "x", "config": cfg}).status_code == 401
        assert leader.client().connectors() == ["by-otto"]
        members = post(follower, "otto", "/raftconnect/v1/raft/members", {"address": "127.0.0.1:1"})
        assert members.status_code == 403 and "needs the admin role" in members.json()["message"]
        assert requests.get(f"{follower.url}/connectors", auth=("vera", "pw"), timeout=30).json() == ["by-otto"]
        token = post(follower, "otto", "/raftconnect/v1/tokens", None).json()["token"]
        deleted = requests.delete(f"{follower.url}/connectors/by-otto", headers={"Authorization": f"Bearer {token}"},
                                  timeout=30)
        assert deleted.status_code == 204, deleted.text
        wait_for(lambda: leader.client().connectors() == [], 10, what="the delete to reach the leader")
    finally:
        cluster.stop()
