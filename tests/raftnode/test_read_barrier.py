"""Reads that must not go back in time: a Raft read barrier on a member that lags (benchmarks/chaos).

A follower behind the leader (back from a partition, a slow or full disk) answered a task's starting
offsets from its own replica, older than commits the leader had acknowledged; the task started from
them and its next commit moved the committed offsets backwards (chaos invariant ``offsets-monotonic``,
found after a disk-full leader fault). ``RaftNode.read_barrier`` and ``latest_offsets`` answer what a
write acknowledged before the read says, or fail; never less.
"""
from __future__ import annotations

import threading

import pytest

from raftnode import RaftConfig, RaftNode, RaftUnavailable
from tools.launcher import wait_for
from webapp.kafka.embedded import free_port
from webapp.plugin import ConnectorTaskId, SourceOffset
from webapp.storage.base import StoreUnavailable
from webapp.storage.raft import RaftMetadataStore


def _cluster(tmp_path) -> list[RaftNode]:
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    # election timeouts well past the time a follower is kept from hearing the leader here, so that the
    # lag under test does not turn into an election
    return [RaftNode(RaftConfig(self_address=addrs[i], peers=[a for a in addrs if a != addrs[i]],
                                data_dir=str(tmp_path / f"m{i}"), password="secret", connection_timeout=30.0,
                                raft_min_timeout=8.0, raft_max_timeout=9.0))
            for i in range(3)]


class Deafened:
    """While :meth:`deafen` is in force, ``member`` drops the leader's append-entries: it learns nothing
    new, as a member cut off or stuck behind its disk does, and still sends what it proposes."""

    def __init__(self, member: RaftNode):
        transport = member.syncobj._SyncObj__transport
        self._handle = transport._onMessageReceivedCallback
        self.deaf = threading.Event()
        transport.setOnMessageReceivedCallback(self._on_message)

    def _on_message(self, node, message) -> None:
        if self.deaf.is_set() and isinstance(message, dict) and message.get("type") == "append_entries":
            return
        self._handle(node, message)


def _position(store: RaftMetadataStore, name: str, read) -> int | None:
    offsets = read(name)
    return offsets[0].offset["position"] if offsets else None


def test_latest_offsets_on_a_lagging_follower_are_current_or_refused_never_older(tmp_path):
    nodes = _cluster(tmp_path)
    try:
        leader = wait_for(lambda: next((n for n in nodes if n.is_leader and n.status()["ready"]), None), 60,
                          interval=0.02, what="a leader")
        leader.propose("_become_coordinator", leader.term, "n1")
        follower = next(n for n in nodes if n is not leader)
        wait_for(lambda: follower.leader is not None, 30, interval=0.02, what="the follower to know its leader")
        generation = leader.state.assignment["generation"] + 1
        leader.propose("_set_assignment", leader.term, generation, {"src": "w1"}, {"src-0": "w1"})
        at_leader = RaftMetadataStore(leader)
        at_follower = RaftMetadataStore(follower, read_timeout=1.0)
        task, part = ConnectorTaskId("src", 0), {"file": "a.csv"}

        at_leader.commit_offsets(task, [SourceOffset(part, {"position": 1})], worker_id="w1", generation=generation)
        wait_for(lambda: _position(at_follower, "src", at_follower.get_offsets) == 1, 15, interval=0.02,
                 what="the follower to apply the first commit")

        ears = Deafened(follower)
        ears.deaf.set()
        # acknowledged: committed by the leader and the other follower
        at_leader.commit_offsets(task, [SourceOffset(part, {"position": 2})], worker_id="w1", generation=generation)
        assert _position(at_follower, "src", at_follower.get_offsets) == 1  # the replica's own, older view
        with pytest.raises(StoreUnavailable, match="could not catch up"):
            at_follower.latest_offsets("src")  # refused rather than 1
        with pytest.raises(RaftUnavailable):
            follower.read_barrier(timeout=0.5)

        ears.deaf.clear()
        assert _position(at_follower, "src", at_follower.latest_offsets) == 2
        assert _position(at_leader, "src", at_leader.latest_offsets) == 2
        # a barrier is an empty entry: it changed nothing on any member
        before = leader.state.digest()
        leader.read_barrier()
        assert leader.state.digest() == before
        wait_for(lambda: {n.state.digest() for n in nodes} == {before}, 15, interval=0.02,
                 what="every member to hold the leader's state")
    finally:
        for n in nodes:
            n.destroy()
