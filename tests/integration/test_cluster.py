"""Multi-node clusters as real processes: roles, forwarding, failover, membership, faults."""
from __future__ import annotations

import json
import os
import signal
import threading
import time

import pytest
import requests

from tools.demo import SOURCE_CLASS
from tools.launcher import LocalCluster, NodeProcess, wait_for
from webapp.connect.api.forwarding import BUDGET_HEADER, FORWARDED_HEADER, FORWARDED_USER_HEADER, NOT_LEADER_HEADER
from webapp.coordinator.signing import signed_headers
from webapp.kafka.embedded import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def small_csv(tmp_path):
    path = tmp_path / "small.csv"
    path.write_text("id,name\n" + "".join(f"{i},row {i}\n" for i in range(500)))
    return path


@pytest.fixture
def cluster_factory(tmp_path, kafka):
    started: list[LocalCluster] = []

    def make(raft_nodes=3, worker_nodes=0, **kw) -> LocalCluster:
        c = LocalCluster(data_dir=str(tmp_path / f"cluster{len(started)}"), bootstrap_servers=kafka.bootstrap_servers,
                         raft_nodes=raft_nodes, worker_nodes=worker_nodes, **kw)
        started.append(c)
        return c.start()

    yield make
    for c in started:
        for n in c.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.signal(signal.SIGCONT)
        c.stop()


def source(path, topic, tasks=1):
    return {"connector.class": SOURCE_CLASS, "path": str(path), "format": "csv", "topic": topic, "tasks.max": str(tasks)}


def test_roles_forwarding_and_cluster_view(cluster_factory, small_csv):
    cluster = cluster_factory(raft_nodes=3, worker_nodes=1)
    leader = cluster.leader()
    follower = next(n for n in cluster.nodes if n is not leader and "raft" in n.roles)
    worker_only = cluster.nodes[-1]
    # writes through a follower and through a worker-only node land on the leader
    assert follower.client().create_connector("via-follower", source(small_csv, "t1"))["name"] == "via-follower"
    assert worker_only.client().create_connector("via-worker", source(small_csv, "t2"))["name"] == "via-worker"
    for node in cluster.nodes:  # every node answers reads (followers from their replica)
        wait_for(lambda: sorted(node.client().connectors()) == ["via-follower", "via-worker"], 10,
                 what=f"{node.node_id} to see both connectors")
    # a worker-only node becomes a member with its agent's first heartbeat, which may come after the creates
    view = wait_for(lambda: (lambda v: v if {n["id"] for n in v["nodes"]} == {n.node_id for n in cluster.nodes}
                             else None)(worker_only.client().request("GET", "/raftconnect/v1/cluster")),
                    30, what="every node in the cluster view")
    by_id = {n["id"]: n for n in view["nodes"]}
    assert by_id[worker_only.node_id]["roles"] == ["worker"] and by_id[worker_only.node_id]["raft_address"] is None
    wait_for(lambda: all(n["alive"] for n in worker_only.client().request("GET", "/raftconnect/v1/cluster")["nodes"]),
             15, what="every node alive in the cluster view")
    # a worker-only node holds no Raft state; every Raft member reports its own Raft status
    assert not os.path.exists(os.path.join(worker_only.data_dir, "raft"))
    view = worker_only.client().request("GET", "/raftconnect/v1/cluster")
    states = sorted(n["raft"]["state"] for n in view["nodes"] if n["raft"] is not None)
    assert states == ["FOLLOWER", "FOLLOWER", "LEADER"]
    assert next(n for n in view["nodes"] if n["id"] == worker_only.node_id)["raft"] is None
    assert all(n["raft"]["term"] >= 1 and n["raft"]["applied_index"] >= 1 for n in view["nodes"] if n["raft"])

    # A forwarded write that reaches a member that is not the leader (one delayed in the network while
    # leadership moved) is refused before anything reaches a log, and says so: the forwarding member
    # sends it to the leader if it is still waiting. pysyncobj alone would hand it on and commit it late.
    path, body = "/connectors/via-follower/config", json.dumps(source(small_csv, "late")).encode()
    headers = {**signed_headers(cluster.secret, "PUT", path, body), FORWARDED_HEADER: "1",
               FORWARDED_USER_HEADER: "admin;role=admin", BUDGET_HEADER: "10000", "Content-Type": "application/json"}
    late = requests.put(follower.url + path, data=body, headers=headers, timeout=30)
    assert late.status_code == 503 and late.headers.get(NOT_LEADER_HEADER) == "1", (late.status_code, late.text)
    assert "not the Raft leader" in late.json()["message"]
    leader.client().request("PUT", "/connectors/marker/config", json=source(small_csv, "m"))  # after the refusal
    for node in cluster.nodes:
        wait_for(lambda: "marker" in node.client().connectors(), 10, what=f"{node.node_id} to see the marker")
        assert node.client().request("GET", "/connectors/via-follower/config")["topic"] == "t1"


def test_leader_kill_9_under_load_loses_no_acknowledged_write(cluster_factory, tmp_path):
    data = tmp_path / "load.csv"
    data.write_text("id,name\n" + "".join(f"{i},row {i}\n" for i in range(200_000)))
    cluster = cluster_factory(raft_nodes=3)
    leader = cluster.leader()
    c = leader.client()
    c.create_connector("load", {**source(data, "lk", tasks=3), "batch.max.rows": "500"})
    wait_for(lambda: c.offsets("load")["offsets"], 120, what="offset commits to run")
    survivors = [n for n in cluster.nodes if n is not leader]
    for k in range(2):  # the connectors written under load stay paused: config writes only
        for i in range(5):
            survivors[k].client().request("PUT", f"/connectors/w{k}-{i}/config", json=source(data, f"v{k}-0"))
            survivors[k].client().pause(f"w{k}-{i}")
    acked: dict[str, str] = {}
    stop = threading.Event()
    counts = [0, 0]

    def writer(k: int) -> None:
        client = survivors[k].client()
        i = 0
        while not stop.is_set():
            name, topic = f"w{k}-{i % 5}", f"v{k}-{i}"
            try:
                client.request("PUT", f"/connectors/{name}/config", json=source(data, topic))
                acked[name] = topic  # acknowledged: must never be lost
                counts[k] += 1
            except Exception:  # noqa: BLE001 - an unacknowledged write may or may not land
                pass
            i += 1

    threads = [threading.Thread(target=writer, args=(k,), daemon=True) for k in range(2)]
    for t in threads:
        t.start()
    wait_for(lambda: min(counts) >= 10, 60, what="writes before the kill")
    dead_tasks = [t for t, w in c.request("GET", "/raftconnect/v1/assignment")["tasks"].items() if w == leader.node_id]
    leader.kill()
    t0 = time.monotonic()
    before = list(counts)
    wait_for(lambda: all(n > b + 10 for n, b in zip(counts, before)), 60, interval=0.05,
             what="writes to go on after the kill")
    print(f"writes resumed on the survivors within {time.monotonic() - t0:.2f} s of kill -9 of the leader")
    stop.set()
    for t in threads:
        t.join(30)
    c = cluster.leader().client()
    for name, topic in acked.items():
        assert c.request("GET", f"/connectors/{name}/config")["topic"] == topic, name
    dead_address = leader.url.split("//")[1]

    def moved():
        tasks = c.status("load")["tasks"]
        return all(t["state"] == "RUNNING" and t["worker_id"] != dead_address for t in tasks)
    wait_for(moved, 30, what="the dead leader's tasks RUNNING elsewhere")
    assert all(c.request("GET", "/raftconnect/v1/assignment")["tasks"][t] != leader.node_id for t in dead_tasks)


@pytest.mark.chaos  # make test's pause case is the paused worker below (fencing); this one runs in make chaos
def test_sigstop_of_the_leader(cluster_factory, small_csv):
    cluster = cluster_factory(raft_nodes=3)
    leader = cluster.leader()
    leader.client().create_connector("x", source(small_csv, "s1"))
    others = [n for n in cluster.nodes if n is not leader]
    leader.signal(signal.SIGSTOP)
    try:
        others[0].client().create_connector("during", source(small_csv, "s2"))
        new_leader = cluster.leader(30)
        assert new_leader is not leader
    finally:
        leader.signal(signal.SIGCONT)
    # the old leader comes back as a follower and catches up
    wait_for(lambda: leader.client().request("GET", "/raftconnect/v1/raft")["state"] == "FOLLOWER", 30,
             what="the paused leader to rejoin as follower")
    wait_for(lambda: sorted(leader.client().connectors()) == ["during", "x"], 30, what="it to catch up")


def test_isolated_leader_steps_down(cluster_factory):
    cluster = cluster_factory(raft_nodes=3)
    leader = cluster.leader()
    others = [n for n in cluster.nodes if n is not leader]
    for n in others:
        n.signal(signal.SIGSTOP)
    t0 = time.monotonic()
    try:
        wait_for(lambda: leader.client().request("GET", "/raftconnect/v1/raft")["state"] != "LEADER", 10,
                 interval=0.05, what="the isolated leader to step down")
        print(f"isolated leader stepped down after {time.monotonic() - t0:.2f} s")
        health = leader.client().session.get(leader.url + "/health", timeout=5)
        assert health.status_code in (200, 503)
    finally:
        for n in others:
            n.signal(signal.SIGCONT)
    assert cluster.leader(30) is not None


def test_add_and_remove_a_raft_member_online(cluster_factory, tmp_path, kafka, small_csv):
    cluster = cluster_factory(raft_nodes=3)
    leader = cluster.leader()
    leader.client().create_connector("c", source(small_csv, "m1"))
    members = leader.client().request("GET", "/raftconnect/v1/raft")["members"]
    newcomer = NodeProcess(node_id="node-new", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "new"),
                           bootstrap_servers=kafka.bootstrap_servers, roles="raft",
                           extra_args=["--raft-peers", ",".join(members)],
                           env={"RAFTCONNECT_CLUSTER_SECRET": cluster.secret}, auth=cluster.auth)
    newcomer.start(wait=False)
    try:
        address = f"127.0.0.1:{newcomer.raft_port}"
        resp = leader.client().request("POST", "/raftconnect/v1/raft/members", json={"address": address})
        assert address in resp["members"]
        newcomer.wait_healthy(60)
        # the new member caught up: it serves the connector from its own replica
        wait_for(lambda: newcomer.client().connectors() == ["c"], 30, what="the new member to catch up")
        dup = leader.client().request("POST", "/raftconnect/v1/raft/members", json={"address": address}, ok=(409,))
        assert dup is None or dup.get("error_code") == 409
        leader.client().request("DELETE", f"/raftconnect/v1/raft/members/{address}")
        assert address not in leader.client().request("GET", "/raftconnect/v1/raft")["members"]
    finally:
        newcomer.stop()


def test_restart_of_all_members_at_once_keeps_metadata(cluster_factory, small_csv):
    cluster = cluster_factory(raft_nodes=3)
    c = cluster.leader().client()
    c.create_connector("keep", source(small_csv, "r1"))
    c.pause("keep")
    for n in cluster.nodes:
        n.kill()
    for n in cluster.nodes:
        n.start(wait=False)
    for n in cluster.nodes:
        n.wait_healthy(90)
    c = cluster.leader(60).client()
    assert c.connectors() == ["keep"]
    assert c.request("GET", "/connectors/keep/config")["topic"] == "r1"
    wait_for(lambda: c.status("keep")["connector"]["state"] == "PAUSED", 60, what="PAUSED after full restart")


def test_a_member_with_a_damaged_journal_refuses_to_start_and_rejoins_from_its_peers(cluster_factory, small_csv):
    """raftnode/durability.py: flipped journal bytes stop the member with what to do; done, it catches up."""
    import shutil
    import struct

    cluster = cluster_factory(raft_nodes=3)
    leader = cluster.leader()
    c = leader.client()
    for i in range(20):
        c.request("PUT", f"/connectors/j{i}/config", json=source(small_csv, f"j{i}"))
    victim = next(n for n in cluster.nodes if n is not leader)
    wait_for(lambda: len(victim.client().connectors()) == 20, 30, what="the follower to hold every config")
    victim.stop()
    journal = os.path.join(victim.data_dir, "raft", "raft.journal")
    with open(journal, "r+b") as fh:
        data = bytearray(fh.read())
        end = struct.unpack("<I", data[36:40])[0]  # pysyncobj's header: records from byte 40 to this offset
        middle = (40 + end) // 2
        fh.seek(middle)
        fh.write(bytes(b ^ 0xFF for b in data[middle:middle + 8]))
    victim.start(wait=False)
    wait_for(lambda: victim.proc.poll() is not None, 60, what="the damaged member to refuse to start")
    assert victim.proc.returncode != 0
    with open(victim.log_path) as fh:
        log_text = fh.read()
    assert "raft.journal" in log_text and "move its Raft directory" in log_text
    # the documented recovery (docs/OPERATIONS.md, a member whose disk is lost): out of the cluster, the
    # directory aside, back in; it then receives the leader's log or snapshot
    address = f"127.0.0.1:{victim.raft_port}"
    leader = cluster.leader()
    leader.client().request("DELETE", f"/raftconnect/v1/raft/members/{address}")
    shutil.move(os.path.join(victim.data_dir, "raft"), os.path.join(victim.data_dir, "raft.damaged"))
    victim.start(wait=False)
    leader.client().request("POST", "/raftconnect/v1/raft/members", json={"address": address})
    victim.wait_healthy(60)
    wait_for(lambda: len(victim.client().connectors()) == 20, 60, what="the member to catch up from its peers")
    assert victim.client().request("GET", "/connectors/j19/config")["topic"] == "j19"


def test_kill_9_of_worker_only_node_moves_its_tasks(cluster_factory, small_csv):
    cluster = cluster_factory(raft_nodes=2, worker_nodes=1)
    c = cluster.leader().client()
    c.create_connector("spread", source(small_csv, "w1", tasks=1))
    c.create_connector("spread2", {**source(small_csv, "w2", tasks=1)})
    c.create_connector("spread3", {**source(small_csv, "w3", tasks=1)})
    worker = cluster.nodes[-1]

    def tasks_on(node_id):
        view = c.request("GET", "/raftconnect/v1/cluster")
        return next(n for n in view["nodes"] if n["id"] == node_id)["tasks"]

    wait_for(lambda: tasks_on(worker.node_id), 60, what="a task on the worker-only node")
    moved = tasks_on(worker.node_id)
    worker.kill()
    t0 = time.monotonic()
    wait_for(lambda: not tasks_on(worker.node_id), 30, interval=0.1, what="the dead worker's tasks to move")
    print(f"tasks of the killed worker reassigned after {time.monotonic() - t0:.2f} s (session timeout 5 s)")
    assignment = c.request("GET", "/raftconnect/v1/assignment")["tasks"]
    assert all(assignment[t] != worker.node_id for t in moved)


def test_paused_worker_is_fenced_and_stops_its_tasks(cluster_factory, tmp_path):
    """SIGSTOP a worker past its session: its tasks move; on SIGCONT none of its late writes lands."""
    data = tmp_path / "big.csv"
    data.write_text("id,name\n" + "".join(f"{i},row {i}\n" for i in range(200_000)))
    cluster = cluster_factory(raft_nodes=2, worker_nodes=1)
    leader = cluster.leader()
    c = leader.client()
    worker = cluster.nodes[-1]
    worker_address = worker.url.split("//")[1]
    c.create_connector("z", {**source(data, "zombie", tasks=3), "batch.max.rows": "500"})

    def node_view(node_id):
        return next(n for n in c.request("GET", "/raftconnect/v1/cluster")["nodes"] if n["id"] == node_id)

    mine = wait_for(lambda: node_view(worker.node_id)["running_tasks"], 120, what="tasks running on the worker")
    generation_before = c.request("GET", "/raftconnect/v1/assignment")["generation"]
    worker.signal(signal.SIGSTOP)
    try:
        wait_for(lambda: not node_view(worker.node_id)["tasks"], 30, interval=0.1, what="its tasks to be reassigned")

        def moved_and_running():
            st = c.status("z")["tasks"]
            return all(st[int(k.rsplit("-", 1)[1])]["state"] == "RUNNING"
                       and st[int(k.rsplit("-", 1)[1])]["worker_id"] != worker_address for k in mine)
        wait_for(moved_and_running, 60, what="moved tasks RUNNING on other workers")
        offsets_while_away = c.offsets("z")
    finally:
        worker.signal(signal.SIGCONT)
    assert c.request("GET", "/raftconnect/v1/assignment")["generation"] > generation_before
    # the resumed worker stops what it no longer owns: eventually it runs only its current assignment
    def runs_only_assigned():
        view = node_view(worker.node_id)
        return set(view["running_tasks"]) <= set(view["tasks"])
    wait_for(runs_only_assigned, 30, interval=0.2, what="the resumed worker to stop tasks it no longer owns")
    agent_log = open(os.path.join(worker.data_dir, "agent.log")).read()
    leader_logs = "".join(open(n.log_path).read() for n in cluster.nodes if "raft" in n.roles)
    fenced = agent_log.count("fenced") + leader_logs.count("Conflict: /raftconnect/v1/internal")
    print(f"late writes refused after SIGCONT: {fenced}")
    # committed offsets never go backwards because of the zombie
    for entry in offsets_while_away["offsets"]:
        now = next(o for o in c.offsets("z")["offsets"] if o["partition"] == entry["partition"])
        assert _position(now) >= _position(entry)


def _position(entry) -> int:
    return int(next(iter(entry["offset"].values())))
