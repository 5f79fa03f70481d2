"""Store switches on a real 3-node cluster: REST, and a leader kill -9 in every phase.

Each phase is held for a moment (``--switch-hold-seconds``) so the leader can
be killed while the switch is in it. Whatever the phase, the switch must end
completed (killed after the commit point) or rolled back (before it), every
node must name the same active store, and the cluster's metadata must be intact.
"""
from __future__ import annotations

import uuid

import pytest

from tools.demo import SOURCE_CLASS
from tools.launcher import ConnectHTTPError, LocalCluster, wait_for
from tests.storage.conftest import PG_URL, drop_database

pytestmark = pytest.mark.integration

STORE = "/raftconnect/v1/metadata-store"


@pytest.fixture
def cluster(tmp_path, monkeypatch):
    db = f"raftconnect_it_{uuid.uuid4().hex[:8]}"
    monkeypatch.setenv("RAFTCONNECT_STORE_PG", PG_URL.format(db=db).replace("postgres@", "postgres:unused-pw@"))
    monkeypatch.setenv("RC_IT_PG_PASSWORD", "it-secret-9")  # what a store added at run time refers to
    c = LocalCluster(data_dir=str(tmp_path), bootstrap_servers="127.0.0.1:9", raft_nodes=3, raft_roles="raft",
                     extra_args=["--switch-hold-seconds", "1.5"])
    try:
        yield c.start()
    finally:
        c.stop()
        drop_database("postgresql", db)


def store_view(node) -> dict:
    return node.client().request("GET", STORE)


def test_store_api_validates_adds_through_followers_and_never_shows_credentials(cluster):
    node = cluster.nodes[0]
    view = store_view(node)
    assert view["active"] == "raft" and view["switch"] is None
    pg = next(s for s in view["stores"] if s["name"] == "pg")
    assert pg["backend"] == "postgresql" and "unused-pw" not in str(view) and "***" in pg["url"]
    for body, status in (({"target": "nope"}, 404), ({"target": "raft"}, 400), ({"tgt": "pg"}, 400), ([], 400)):
        with pytest.raises(ConnectHTTPError) as err:
            node.client().request("POST", STORE + "/switch", json=body)
        assert err.value.status == status and err.value.body["error_code"] == status
    with pytest.raises(ConnectHTTPError) as err:
        node.client().request("POST", STORE + "/rollback")
    assert err.value.status == 409

    # on the same cluster (a cluster start costs more than this): a store added, tested and removed at run
    # time through followers (forwarded to the leader), seen by every node
    leader = cluster.leader()
    followers = [n for n in cluster.nodes if n is not leader]
    url = next(s for s in store_view(leader)["stores"] if s["name"] == "pg")["url"].replace("postgres:***@", "postgres@")
    added = followers[0].client().request("POST", STORE + "/stores", json={
        "name": "pg2", "url": url, "password": "${env:RC_IT_PG_PASSWORD}"})
    assert added["source"] == "cluster" and added["password"] == "${env:RC_IT_PG_PASSWORD}"
    for n in cluster.nodes:
        wait_for(lambda n=n: n.client().request("GET", STORE + "/stores/pg2", ok=(404,)).get("source") == "cluster",
                 15, what=f"pg2 on {n.node_id}")
    test = followers[1].client().request("POST", STORE + "/stores/pg2/test")
    assert test["ok"] is True, test
    followers[1].client().request("DELETE", STORE + "/stores/pg2")
    for n in cluster.nodes:
        wait_for(lambda n=n: "pg2" not in {s["name"] for s in store_view(n)["stores"]}, 15,
                 what=f"pg2 gone from {n.node_id}")
    assert "it-secret-9" not in str(added) + str(test) + "".join(n.log_tail(1_000_000) for n in cluster.nodes)


# `make test` kills the leader mid-copy and mid-verify (the phases with the most to undo);
# `make chaos` also runs the two ends
@pytest.mark.parametrize("phase", [pytest.param("prepare", marks=pytest.mark.chaos), "copy", "verify",
                                   pytest.param("committed", marks=pytest.mark.chaos)])
def test_leader_kill_in_each_phase_ends_completed_or_rolled_back(cluster, phase, tmp_path):
    (tmp_path / "in.csv").write_text("id\n1\n")
    for i in range(5):
        cluster.nodes[i % 3].client().create_connector(
            f"c{i}", {"connector.class": SOURCE_CLASS, "path": str(tmp_path / "in.csv"), "topic": f"t{i}"})
    leader = cluster.leader()
    leader.client().request("POST", STORE + "/switch", json={"target": "pg"})
    wait_for(lambda: (store_view(leader)["switch"] or {}).get("phase") == phase, 60, interval=0.05,
             what=f"phase {phase}")
    leader.kill()
    survivors = [n for n in cluster.nodes if n is not leader]
    new_leader = cluster.leader()
    wait_for(lambda: store_view(new_leader)["switch"]["phase"] in ("completed", "aborted"), 60,
             what="the new leader to end the switch")
    expected = ("completed", "pg") if phase == "committed" else ("aborted", "raft")
    for node in survivors:
        wait_for(lambda: (store_view(node)["switch"]["phase"], store_view(node)["active"]) == expected, 15,
                 what=f"{node.node_id} to agree on {expected}")
    # the metadata is intact and writable in whichever store is active, through any node
    for node in survivors:
        assert sorted(node.client().connectors()) == [f"c{i}" for i in range(5)]
    survivors[0].client().pause("c0")
    leader.start()
    wait_for(lambda: store_view(leader)["active"] == expected[1], 30, what="the restarted node to agree")
    wait_for(lambda: sorted(leader.client().connectors()) == [f"c{i}" for i in range(5)], 30,
             what="the restarted node to read every connector")
