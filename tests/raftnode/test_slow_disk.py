"""A slow disk under one Raft member (issue 19 item 4): its journal and meta writes stall.

Three in-process members under a steady stream of proposals through every
member. One member's journal is slowed down by wrapping its journal object's
writes (each entry append, each term/vote store and each commit-index save
sleeps first, as a disk whose writes and fsyncs take that long would block
pysyncobj's single Raft thread). The fault lasts a few hundred writes, then the
disk is fast again.

Invariants (as the fault campaign's): at most one leader per term, ever
(sampled every 20 ms throughout); writes keep being acknowledged during the
fault; after it, every member applies every acknowledged write with the value
of that write or of a later attempted one, in the same order on every member.
"""
from __future__ import annotations

import itertools
import threading
import time

import pytest

from raftnode import CommandRejected, RaftNode, RaftUnavailable
from tools.launcher import wait_for

from .members import destroy, raft_members


class SlowDisk:
    """Delays the journal writes of one member while :attr:`delay_s` is set."""

    def __init__(self, node: RaftNode):
        self.delay_s = 0.0
        journal = node.syncobj._SyncObj__raftLog
        for name in ("add", "setCurrentTerm", "onOneSecondTimer"):
            real = getattr(journal, name)

            def slowed(*args, _real=real, **kw):
                if self.delay_s:
                    time.sleep(self.delay_s)
                return _real(*args, **kw)

            setattr(journal, name, slowed)


class LeaderWatch(threading.Thread):
    """Samples every member's own view every 20 ms; records ``{term: {leaders}}``."""

    def __init__(self, nodes):
        super().__init__(daemon=True)
        self.nodes, self.leaders, self.stop = nodes, {}, threading.Event()

    def run(self) -> None:
        while not self.stop.wait(0.02):
            for i, n in enumerate(self.nodes):
                try:
                    st = n.status()
                except Exception:  # noqa: BLE001 - destroyed at the end
                    continue
                if st["state"] == "LEADER":
                    self.leaders.setdefault(st["term"], set()).add(i)


def _run(tmp_path, slow_leader: bool, delay_s: float, writes_during: int):
    _, nodes = raft_members(tmp_path)
    watch = LeaderWatch(nodes)
    watch.start()
    try:
        leader = wait_for(lambda: next((n for n in nodes if n.is_leader), None), 30, interval=0.05,
                          what="a leader")
        target = leader if slow_leader else next(n for n in nodes if n is not leader)
        disk = SlowDisk(target)
        acked: dict[str, int] = {}  # connector -> last acknowledged value
        tried: dict[str, set[int]] = {}  # connector -> every value attempted
        counter = itertools.count()

        def write(node_index: int) -> bool:
            n = next(counter)
            name = f"c{n % 20}"
            tried.setdefault(name, set()).add(n)
            try:
                nodes[node_index].propose("_put_connector_config", name, {"v": str(n)}, None, False, timeout=5.0)
            except (RaftUnavailable, CommandRejected):
                return False
            acked[name] = n
            return True

        for i in range(30):
            write(i % 3)
        disk.delay_s = delay_s
        ok = sum(write(i % 3) for i in range(writes_during))
        disk.delay_s = 0.0
        assert ok >= writes_during // 3, f"only {ok} of {writes_during} writes acknowledged on a slow disk"
        for i in range(10):
            assert wait_for(lambda i=i: write(i % 3), 30, what="a write after the disk is fast again")

        def converged() -> bool:
            for n in nodes:
                for name, value in acked.items():
                    rec = n.state.connector(name)
                    if rec is None or int(rec["config"]["v"]) < value or int(rec["config"]["v"]) not in tried[name]:
                        return False
            return True

        wait_for(converged, 60, what="every member to apply every acknowledged write")
        logs = [[n.state.connector(f"c{k}")["config"]["v"] for k in range(20) if n.state.connector(f"c{k}")]
                for n in nodes]
        assert logs[0] == logs[1] == logs[2], "members disagree on the last value of a connector"
        watch.stop.set()
        watch.join(5)
        assert all(len(ls) == 1 for ls in watch.leaders.values()), f"two leaders in one term: {watch.leaders}"
    finally:
        watch.stop.set()
        destroy(nodes)


def test_a_slow_follower_disk_keeps_writes_going_and_loses_none(tmp_path):
    _run(tmp_path, slow_leader=False, delay_s=0.05, writes_during=60)


@pytest.mark.chaos
@pytest.mark.parametrize("delay_s, writes", [(0.05, 120), (0.3, 45)])
def test_a_slow_leader_disk_keeps_one_leader_per_term_and_loses_no_acknowledged_write(tmp_path, delay_s, writes):
    _run(tmp_path, slow_leader=True, delay_s=delay_s, writes_during=writes)
