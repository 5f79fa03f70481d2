"""A real network partition of the Raft leader under a write load (nodes in network namespaces).

Three ``raft,worker`` nodes each run in their own network namespace
(:class:`tools.netns.NetnsNetwork`); Kafka listens on the bridge. The
leader is cut off from the two others (it still reaches Kafka and the test),
while config writes go through every node and a file source pipeline commits
offsets. The majority must elect a new leader, the old one must step down
without acknowledging a write it cannot commit, and after the heal it must
rejoin as a follower holding every acknowledged write. The longer randomized
campaign is ``make chaos`` (benchmarks/chaos/run.py).
"""
from __future__ import annotations

import json
import threading
import time

import pytest

from tools.demo import SOURCE_CLASS
from tools.launcher import LocalCluster, wait_for
from tools.netns import NetnsNetwork, netns_available
from webapp.kafka.embedded import EmbeddedKafka

# `make test` runs it once and `make chaos` ten times. On 2026-11-25 it failed about 2 runs in 5 after
# the task engine made offset commits frequent; both causes are fixed: a cut-off leader's divergent tail
# kept it from catching up (RaftNode._catch_up_loop), and a forwarded write delayed in the network while
# the leader was cut off reached the deposed member, which let pysyncobj hand it on to the new leader after
# the client's newer writes (forwarded writes are now proposed only on the leader: forwarding.py).
pytestmark = pytest.mark.integration

RAFT = "/raftconnect/v1/raft"


@pytest.fixture
def netns_cluster(tmp_path):
    """``(network, cluster)``: 3 raft,worker nodes in namespaces, Kafka on the bridge; all torn down after."""
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    with NetnsNetwork(3) as net, EmbeddedKafka(log_dir=tmp_path / "kafka", host=net.host_ip) as kafka:
        cluster = LocalCluster(data_dir=str(tmp_path / "cluster"), bootstrap_servers=kafka.bootstrap_servers,
                               raft_nodes=3, hosts=[net.node_ip(i) for i in range(3)],
                               command_prefixes=[net.command_prefix(i) for i in range(3)])
        try:
            yield net, cluster.start()
        finally:
            net.heal()
            for n in cluster.nodes:  # nothing to keep: kill -9 is the quick teardown (agents die with their node)
                n.kill()


def source(path, topic, tasks=1, **extra):
    return {"connector.class": SOURCE_CLASS, "path": str(path), "format": "csv", "topic": topic,
            "tasks.max": str(tasks), **extra}


class Writer(threading.Thread):
    """PUTs configs of its own connectors in a loop; remembers what was acknowledged and what was only tried."""

    def __init__(self, node, prefix, path, names=3):
        super().__init__(daemon=True)
        self.client, self.prefix, self.path = node.client(), prefix, path
        self.client.timeout = 15
        self.names = [f"{prefix}-{i}" for i in range(names)]
        self.acked: dict[str, str] = {}           # name -> last acknowledged topic
        self.tried_after: dict[str, list[str]] = {}  # name -> topics tried (unacknowledged) after it
        self.ok = 0
        self.failed = 0
        self.stop = threading.Event()

    def run(self):
        i = 0
        while not self.stop.is_set():
            name, topic = self.names[i % len(self.names)], f"{self.prefix}-t{i}"
            self.tried_after.setdefault(name, []).append(topic)
            try:
                self.client.request("PUT", f"/connectors/{name}/config", json=source(self.path, topic))
                self.acked[name] = topic
                self.tried_after[name] = []
                self.ok += 1
            except Exception:  # noqa: BLE001 - unacknowledged: it may or may not have landed
                self.failed += 1
                time.sleep(0.1)
            i += 1

    def missing(self, node) -> list[tuple]:
        """Acknowledged writes ``node`` does not serve: ``[(name, acknowledged topic, served topic)]``.

        A later write that was tried but not acknowledged may have landed, so it counts as present too.
        """
        client = node.client()
        out = []
        for name, topic in self.acked.items():
            got = client.request("GET", f"/connectors/{name}/config")["topic"]
            if got != topic and got not in self.tried_after.get(name, []):
                out.append((name, topic, got))
        return out


@pytest.mark.chaos  # make chaos runs it 10 times; make test's partition case is test_cluster's isolated leader
def test_partitioned_leader_steps_down_and_rejoins_without_losing_acknowledged_writes(netns_cluster, tmp_path):
    T0 = time.monotonic()
    net, cluster = netns_cluster
    data = tmp_path / "load.csv"
    data.write_text("id,name\n" + "".join(f"{i},row {i}\n" for i in range(200_000)))
    print(f"[{time.monotonic() - T0:.0f} s] cluster up")
    leader = cluster.leader(60)
    c = next(n for n in cluster.nodes if n is not leader).client()
    # the pipeline starts (Spark) while the partition happens; its offsets are checked after the heal
    c.create_connector_once("pipe", source(data, "p", **{"batch.max.rows": "500"}))
    writers = [Writer(n, f"w{k}", data) for k, n in enumerate(cluster.nodes)]
    for w in writers:  # the written connectors are STOPPED: config writes only, no tasks
        for name in w.names:
            c.create_connector_once(name, source(data, "init"), initial_state="STOPPED")
    for w in writers:
        w.start()
    wait_for(lambda: all(w.ok >= 3 for w in writers), 60, what="writes through every node")
    print(f"[{time.monotonic() - T0:.0f} s] writing through every node; partitioning the leader")
    leader = cluster.leader(60)  # again: on a loaded machine leadership may have moved meanwhile
    li = cluster.nodes.index(leader)
    followers = [n for n in cluster.nodes if n is not leader]
    old_term = leader.client().request("GET", RAFT)["term"]

    # Watch every member's own Raft view: no term may have two leaders.
    leaders_by_term: dict[int, set[str]] = {}
    watching = threading.Event()

    def watch():
        while not watching.is_set():
            for n in cluster.nodes:
                try:
                    st = n.client().request("GET", RAFT)
                except Exception:  # noqa: BLE001 - an unreachable member says nothing
                    continue
                if st["state"] == "LEADER":
                    leaders_by_term.setdefault(st["term"], set()).add(n.node_id)
            time.sleep(0.05)
    watcher = threading.Thread(target=watch, daemon=True)
    watcher.start()

    net.isolate(li)
    t0 = time.monotonic()
    minority_ok = writers[li].ok
    try:
        def new_leader():
            for n in followers:
                st = n.client().request("GET", RAFT)
                if st["state"] == "LEADER" and st["term"] > old_term:
                    return n
            return None
        successor = wait_for(new_leader, 30, interval=0.05, what="the majority to elect a new leader")
        print(f"new leader {successor.node_id} after {time.monotonic() - t0:.2f} s")
        wait_for(lambda: leader.client().request("GET", RAFT)["state"] != "LEADER", 30, interval=0.05,
                 what="the partitioned leader to step down")
        print(f"old leader stepped down after {time.monotonic() - t0:.2f} s")
        before = [w.ok for w in writers]
        wait_for(lambda: all(w.ok >= b + 5 for w, b in zip(writers[:li] + writers[li + 1:],
                                                             before[:li] + before[li + 1:])),
                 60, what="writes through the majority to go on")
        # a write through the cut-off member cannot be acknowledged while it cannot reach a quorum
        minority_client = leader.client()
        minority_client.timeout = 15
        with pytest.raises(Exception):
            minority_client.request("PUT", "/connectors/probe/config", json=source(data, "probe"))
        assert writers[li].ok - minority_ok <= 1  # at most one write that was in flight when the cut began
    finally:
        net.heal()
    print(f"[{time.monotonic() - T0:.0f} s] healed")
    wait_for(lambda: leader.client().request("GET", RAFT)["state"] == "FOLLOWER", 60,
             what="the old leader to rejoin as follower")
    wait_for(lambda: writers[li].ok > minority_ok + 3, 60, what="writes through the old leader to go on")
    for w in writers:
        w.stop.set()
    for w in writers:
        w.join(30)
    watching.set()
    watcher.join(10)
    assert all(len(ids) == 1 for ids in leaders_by_term.values()), leaders_by_term
    assert len(leaders_by_term) >= 2
    for node in cluster.nodes:  # every member, the old leader included, serves every acknowledged write
        try:
            wait_for(lambda: not any(w.missing(node) for w in writers), 60,
                     what=f"{node.node_id} to hold every acknowledged write")
        except TimeoutError:
            views = {}
            for n in cluster.nodes:  # each member's own Raft view, to tell a lagging member from lost writes
                try:
                    views[n.node_id] = {k: v for k, v in n.client().request("GET", RAFT).items()
                                        if k in ("state", "term", "leader", "commit_index", "applied_index")}
                except Exception as exc:  # noqa: BLE001
                    views[n.node_id] = repr(exc)
            pytest.fail(f"{node.node_id} lost acknowledged writes: {[w.missing(node) for w in writers]}; "
                        f"raft views: {views}")
    print(f"[{time.monotonic() - T0:.0f} s] every member holds every acknowledged write")
    wait_for(lambda: c.all_running("pipe", tasks=1), 180, what="the pipeline RUNNING after the heal")
    committed = wait_for(lambda: c.offsets("pipe")["offsets"], 180, what="the pipeline to commit offsets")
    print(f"[{time.monotonic() - T0:.0f} s] pipeline RUNNING and committing")
    # the pipeline goes on from there: its committed positions only move forward. Rows are appended
    # (the source follows its file): the task may have read all 200,000 rows by now
    before = {json.dumps(o["partition"], sort_keys=True): _position(o) for o in committed}
    with open(data, "a") as fh:
        fh.writelines(f"{i},row {i}\n" for i in range(200_000, 201_000))

    def advanced():
        now = {json.dumps(o["partition"], sort_keys=True): _position(o) for o in c.offsets("pipe")["offsets"]}
        assert all(now.get(k, -1) >= v for k, v in before.items()), (before, now)
        return any(now[k] > v for k, v in before.items())
    wait_for(advanced, 60, what="the pipeline to commit further offsets")


def _position(entry) -> int:
    return int(next(iter(entry["offset"].values())))
