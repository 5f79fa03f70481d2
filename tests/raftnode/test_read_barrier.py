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

from raftnode import RaftUnavailable
from raftnode.barrier import ReadBarriers
from tools.launcher import wait_for
from webapp.plugin import ConnectorTaskId, SourceOffset
from webapp.storage.base import StoreUnavailable
from webapp.storage.raft import RaftMetadataStore

from .members import MessageTap, destroy, is_append_entries, raft_members, ready_leader


def _position(read, name: str) -> int | None:
    """The one partition's ``position`` that ``read(name)`` (a store's offsets read) gives, or None."""
    offsets = read(name)
    return offsets[0].offset["position"] if offsets else None


def test_latest_offsets_on_a_lagging_follower_are_current_or_refused_never_older(tmp_path):
    # election timeouts well past the time a follower is kept from hearing the leader here, so that the
    # lag under test does not turn into an election
    _, nodes = raft_members(tmp_path, connection_timeout=30.0, raft_min_timeout=8.0, raft_max_timeout=9.0)
    try:
        leader = ready_leader(nodes, timeout=60)
        leader.propose("_become_coordinator", leader.term, "n1")
        follower = next(n for n in nodes if n is not leader)
        wait_for(lambda: follower.leader is not None, 30, interval=0.02, what="the follower to know its leader")
        generation = leader.state.assignment["generation"] + 1
        leader.propose("_set_assignment", leader.term, generation, {"src": "w1"}, {"src-0": "w1"})
        at_leader = RaftMetadataStore(leader)
        at_follower = RaftMetadataStore(follower, read_timeout=1.0)
        task, part = ConnectorTaskId("src", 0), {"file": "a.csv"}

        at_leader.commit_offsets(task, [SourceOffset(part, {"position": 1})], worker_id="w1", generation=generation)
        wait_for(lambda: _position(at_follower.get_offsets, "src") == 1, 15, interval=0.02,
                 what="the follower to apply the first commit")

        # deafened: it drops the leader's append-entries, learning nothing new, as a member cut off or
        # stuck behind its disk does, and still sends what it proposes
        ears = MessageTap(follower, lambda node, message, handle: None if is_append_entries(message)
                          else handle(node, message))
        ears.armed.set()
        # acknowledged: committed by the leader and the other follower
        at_leader.commit_offsets(task, [SourceOffset(part, {"position": 2})], worker_id="w1", generation=generation)
        assert _position(at_follower.get_offsets, "src") == 1  # the replica's own, older view
        with pytest.raises(StoreUnavailable, match="could not catch up"):
            at_follower.latest_offsets("src")  # refused rather than 1
        with pytest.raises(RaftUnavailable):
            follower.read_barrier(timeout=0.5)

        ears.armed.clear()
        assert _position(at_follower.latest_offsets, "src") == 2
        assert _position(at_leader.latest_offsets, "src") == 2
        # a barrier is an empty entry: it changed nothing on any member
        before = leader.state.digest()
        leader.read_barrier()
        assert leader.state.digest() == before
        wait_for(lambda: {n.state.digest() for n in nodes} == {before}, 15, interval=0.02,
                 what="every member to hold the leader's state")
    finally:
        destroy(nodes)


class GatedProposals:
    """A ``propose(timeout)`` for :class:`ReadBarriers` that records its calls and holds each one until released."""

    def __init__(self, fail_first: bool = False):
        self.events: list[tuple[str, object]] = []
        self.lock = threading.Lock()
        self.gates: list[threading.Event] = []
        self.fail_first = fail_first

    def __call__(self, timeout: float) -> None:
        gate = threading.Event()
        with self.lock:
            k = len(self.gates)
            self.gates.append(gate)
            self.events.append(("propose", k))
        assert gate.wait(10), "never released"
        if self.fail_first and k == 0:
            raise RaftUnavailable("Raft command _zzz_apply_batch not committed: NOT_LEADER")

    def started(self) -> int:
        with self.lock:
            return len(self.gates)

    def release(self, k: int) -> None:
        self.gates[k].set()


def _call(barriers: ReadBarriers, proposals: GatedProposals, name: str, outcomes: dict, timeout: float = 10.0):
    def run():
        with proposals.lock:
            proposals.events.append(("arrive", name))
        try:
            barriers.wait(timeout)
            outcomes[name] = None
        except Exception as exc:  # noqa: BLE001 - the test reads it
            outcomes[name] = exc
        with proposals.lock:
            proposals.events.append(("return", name))

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t


def test_concurrent_read_barriers_share_the_next_entry_and_none_is_served_by_an_older_one():
    proposals = GatedProposals()
    barriers = ReadBarriers(proposals, RaftUnavailable)
    outcomes: dict = {}
    first = _call(barriers, proposals, "first", outcomes)
    wait_for(lambda: proposals.started() == 1, 10, interval=0.01, what="the first barrier proposed")
    # twenty callers arrive while it is in flight: it was proposed before them, so it cannot serve them
    late = [_call(barriers, proposals, f"late-{i}", outcomes) for i in range(20)]
    wait_for(lambda: barriers._open is not None and barriers._open.callers == 20, 10, interval=0.01,
             what="the late callers to join the next flight")
    assert proposals.started() == 1  # the next flight waits for the one in flight
    proposals.release(0)
    first.join(10)
    assert outcomes["first"] is None
    wait_for(lambda: proposals.started() == 2, 10, interval=0.01, what="the next barrier proposed")
    assert not any(name.startswith("late") for name in outcomes)  # none returned on the older entry
    proposals.release(1)
    for t in late:
        t.join(10)
    assert all(outcomes[f"late-{i}"] is None for i in range(20))
    assert barriers.proposed == proposals.started() == 2  # 21 reads, 2 entries
    second = proposals.events.index(("propose", 1))
    assert all(proposals.events.index(("arrive", f"late-{i}")) < second < proposals.events.index(("return", f"late-{i}"))
               for i in range(20))
    # a lone read later proposes at once, and the chain of old flights is not kept
    assert barriers._last is not None and barriers._last.previous is None
    lone = _call(barriers, proposals, "lone", outcomes)
    wait_for(lambda: proposals.started() == 3, 10, interval=0.01, what="the lone barrier proposed")
    proposals.release(2)
    lone.join(10)
    assert outcomes["lone"] is None


def test_a_failed_barrier_fails_its_callers_alone_and_a_timed_out_caller_leaves_nothing_stuck():
    proposals = GatedProposals(fail_first=True)
    barriers = ReadBarriers(proposals, RaftUnavailable)
    outcomes: dict = {}
    a = _call(barriers, proposals, "a", outcomes)
    wait_for(lambda: proposals.started() == 1, 10, interval=0.01, what="the first barrier proposed")
    impatient = _call(barriers, proposals, "impatient", outcomes, timeout=0.05)  # waits for the flight before
    impatient.join(10)
    assert isinstance(outcomes["impatient"], RaftUnavailable) and "still in flight" in str(outcomes["impatient"])
    proposals.release(0)
    a.join(10)
    assert isinstance(outcomes["a"], RaftUnavailable) and "NOT_LEADER" in str(outcomes["a"])
    b = _call(barriers, proposals, "b", outcomes)  # nothing left open or stuck: proposes afresh
    wait_for(lambda: proposals.started() == 2, 10, interval=0.01, what="a new barrier proposed")
    proposals.release(1)
    b.join(10)
    assert outcomes["b"] is None and barriers.proposed == 2
