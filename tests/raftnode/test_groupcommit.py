"""Group commit (raftnode.groupcommit): fewer log entries, the same guarantees as one entry per write.

No timing asserts: every wait is on a condition with a generous deadline.
"""
from __future__ import annotations

import threading

import pytest
from pysyncobj import FAIL_REASON
from pysyncobj.syncobj import SyncObjException

from raftnode import CommandRejected, RaftConfig, RaftNode, RaftUnavailable
from raftnode.groupcommit import GroupCommitter
from raftnode.state import BATCH_COMMAND, LEGACY_COMMANDS
from tools.launcher import wait_for
from webapp.kafka.embedded import free_port

from .members import apply, assigned_machine, destroy, raft_member, raft_members, ready_leader


# ------------------------------------------------------------------ the batch entry itself
def test_batch_command_is_numbered_after_every_command_before_it(tmp_path):
    node = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "raft")))
    try:
        ids = {name[:-3]: i for (owner, name), i in node.syncobj._methodToID.items()
               if isinstance(owner, int) and name.endswith("_v0")}
        # after the first journals' commands, the users/tokens four and _zz_store_spec: it keeps this number
        assert ids[BATCH_COMMAND] == len(LEGACY_COMMANDS) + 5
        assert sorted(ids, key=ids.get)[:len(LEGACY_COMMANDS) + 6][-2:] == ["_zz_store_spec", BATCH_COMMAND]
    finally:
        node.destroy()


def test_a_fenced_write_in_a_batch_fails_alone_and_the_others_apply():
    sm = assigned_machine()
    results = apply(sm, BATCH_COMMAND, [
        ["_put_status", ["c", 0, "w1", 2, {"state": "RUNNING"}]],
        ["_put_status", ["c", 1, "w1", 2, {"state": "RUNNING"}]],  # task 1 is w2's: fenced
        ["_commit_offsets", ["c", 0, "w1", 1, [["k", {"p": 0}, {"o": 1}]]]],  # generation 1 < assigned at 2
        ["_commit_offsets", ["c", 0, "w1", 2, [["k", {"p": 0}, {"o": 7}]]]],
        ["_put_status", ["gone", 0, "w1", 2, {"state": "RUNNING"}]],  # unknown connector: 404
        ["_put_status", ["c", 1, "w2", 2, {"state": "FAILED"}]],
    ])
    assert [r.get("ok", False) for r in results] == [True, False, False, True, False, True]
    assert "not assigned to worker w1" in results[1]["rejected"] and results[1]["code"] == 409
    assert "stale generation 1" in results[2]["rejected"]
    assert results[4]["code"] == 404
    st = sm.status("c")
    assert st["tasks"]["0"]["state"] == "RUNNING" and st["tasks"]["1"]["state"] == "FAILED"
    assert st["tasks"]["1"]["worker_id"] == "w2"
    assert sm.connector_offsets("c") == {"k": [{"p": 0}, {"o": 7}]}  # the fenced commit changed nothing


def test_a_batch_applies_its_commands_in_order_and_refuses_what_is_not_a_command():
    sm = assigned_machine()
    results = apply(sm, BATCH_COMMAND, [
        ["_commit_offsets", ["c", 0, "w1", 2, [["k", {"p": 0}, {"o": 1}]]]],
        ["_commit_offsets", ["c", 0, "w1", 2, [["k", {"p": 0}, {"o": 2}]]]],
        [BATCH_COMMAND, [[]]],
        ["digest", []],
        ["_put_status", ["c", 0]],  # wrong arguments: that command alone fails
        ["_commit_offsets", ["c", 0, "w1", 2, [["k", {"p": 0}, {"o": 3}]]]],
    ])
    assert [r.get("code") for r in results] == [None, None, 400, 400, 500, None]
    assert sm.connector_offsets("c") == {"k": [{"p": 0}, {"o": 3}]}  # the last write of the key wins


def test_same_log_same_digest_and_any_difference_shows():
    a, b = assigned_machine(), assigned_machine()
    assert a.digest() == b.digest()
    apply(b, "_put_status", "c", 0, "w1", 2, {"state": "RUNNING"})
    assert a.digest() != b.digest()


# ------------------------------------------------------------------ the committer, step by step
class _ManualState:
    """Stands in for the state machine: records each proposal; the test completes it like the Raft thread."""

    def __init__(self):
        self.proposed: list[tuple[str, tuple, object]] = []
        self.changed = threading.Condition()

    def __getattr__(self, name):
        def propose(*args, callback):
            with self.changed:
                self.proposed.append((name, args, callback))
                self.changed.notify_all()
        return propose

    def wait_for_proposals(self, n: int) -> None:
        with self.changed:
            assert self.changed.wait_for(lambda: len(self.proposed) >= n, 30), self.proposed


def _submit_in_thread(committer, name, args, timeout=30.0):
    out: dict = {}

    def run():
        try:
            out["result"] = committer.submit(name, args, timeout)
        except SyncObjException as exc:
            out["error"] = exc.errorCode

    t = threading.Thread(target=run, daemon=True)
    t.start()
    return t, out


def test_commands_queued_behind_an_outstanding_entry_go_out_together_in_arrival_order():
    state = _ManualState()
    gc = GroupCommitter(state, lambda: True, max_in_flight=1)
    first, first_out = _submit_in_thread(gc, "_put_status", ("a",))
    state.wait_for_proposals(1)
    assert state.proposed[0][0] == "_put_status"  # idle: proposed at once, alone, as a plain entry
    later = []
    for i in range(5):
        later.append(_submit_in_thread(gc, "_commit_offsets", (f"c{i}",)))
        wait_for(lambda n=i + 1: gc.pending() == n, 30, interval=0.005, what="the command to queue")
    state.proposed[0][2]({"ok": 1}, FAIL_REASON.SUCCESS)  # the first entry commits: the queue goes out
    state.wait_for_proposals(2)
    name, (entries,), callback = state.proposed[1]
    assert name == BATCH_COMMAND and entries == [["_commit_offsets", [f"c{i}"]] for i in range(5)]
    callback([{"ok": i} for i in range(5)], FAIL_REASON.SUCCESS)
    for t, _ in [(first, first_out)] + later:
        t.join(30)
    assert first_out == {"result": {"ok": 1}}
    assert [out for _, out in later] == [{"result": {"ok": i}} for i in range(5)]  # each its own result
    assert (gc.proposals, gc.batches, gc.batched_commands) == (2, 1, 5)
    stats = gc.stats()
    assert stats["seconds"] > 0  # each entry's time from proposal to its callback, summed
    del stats["seconds"]
    assert stats == {"proposals": 2, "commands": 6, "abandoned": 0}  # one alone, five in one batch


def test_a_failed_entry_fails_each_of_its_commands_and_a_timed_out_command_is_never_proposed():
    state = _ManualState()
    gc = GroupCommitter(state, lambda: True, max_in_flight=1)
    first, first_out = _submit_in_thread(gc, "_put_status", ("a",))
    state.wait_for_proposals(1)
    with pytest.raises(SyncObjException) as gave_up:
        gc.submit("_put_status", ("too late",), 0.01)  # queued behind the first; its caller gives up
    assert gave_up.value.errorCode == "Timeout" and gc.pending() == 0
    waiting = [_submit_in_thread(gc, "_put_status", (f"b{i}",)) for i in range(2)]
    wait_for(lambda: gc.pending() == 2, 30, interval=0.005, what="two commands to queue")
    state.proposed[0][2](None, FAIL_REASON.DISCARDED)  # a new leader overwrote the entry
    state.wait_for_proposals(2)
    assert state.proposed[1][1] == ([["_put_status", ["b0"]], ["_put_status", ["b1"]]],)  # not "too late"
    state.proposed[1][2](None, FAIL_REASON.NOT_LEADER)
    first.join(30)
    for t, _ in waiting:
        t.join(30)
    assert first_out == {"error": FAIL_REASON.DISCARDED}
    assert [out for _, out in waiting] == [{"error": FAIL_REASON.NOT_LEADER}] * 2


def test_a_proposal_pysyncobj_never_answers_does_not_block_the_queue_once_its_caller_gave_up():
    """pysyncobj drops a command without its callback when the journal cannot store its entry (full
    disk). Its slot must be freed once its caller gave up, or the leader commits nothing again."""
    state = _ManualState()
    gc = GroupCommitter(state, lambda: True, max_in_flight=1)
    with pytest.raises(SyncObjException) as lost:
        gc.submit("_become_coordinator", ("lost",), 0.05)  # proposed at once, never answered
    assert lost.value.errorCode == "Timeout" and len(state.proposed) == 1 and gc.abandoned == 1
    after, out = _submit_in_thread(gc, "_become_coordinator", ("next",))
    state.wait_for_proposals(2)  # proposed although the lost one never got its callback
    assert state.proposed[1][:2] == ("_become_coordinator", ("next",))
    state.proposed[1][2]({"ok": 2}, FAIL_REASON.SUCCESS)
    after.join(30)
    assert out == {"result": {"ok": 2}}
    state.proposed[0][2]({"ok": 1}, FAIL_REASON.SUCCESS)  # a late answer to the abandoned one changes nothing
    third, third_out = _submit_in_thread(gc, "_put_status", ("x",))
    state.wait_for_proposals(3)
    state.proposed[2][2]({"ok": 3}, FAIL_REASON.SUCCESS)
    third.join(30)
    assert third_out == {"result": {"ok": 3}} and gc.abandoned == 1


def test_a_lost_proposal_queued_behind_is_freed_by_the_next_caller_that_gives_up():
    state = _ManualState()
    gc = GroupCommitter(state, lambda: True, max_in_flight=1)
    first, first_out = _submit_in_thread(gc, "_put_status", ("lost",), timeout=0.2)
    state.wait_for_proposals(1)  # never answered
    queued, queued_out = _submit_in_thread(gc, "_put_status", ("queued",), timeout=30.0)
    first.join(30)
    assert first_out == {"error": "Timeout"}
    state.wait_for_proposals(2)  # the first caller's timeout freed the slot: the queued command went out
    state.proposed[1][2]({"ok": 1}, FAIL_REASON.SUCCESS)
    queued.join(30)
    assert queued_out == {"result": {"ok": 1}}


def test_a_member_that_no_longer_leads_proposes_nothing_of_its_queue():
    state = _ManualState()
    leading = [True]
    gc = GroupCommitter(state, lambda: leading[0], max_in_flight=1)
    first, _ = _submit_in_thread(gc, "_put_status", ("a",))
    state.wait_for_proposals(1)
    queued, queued_out = _submit_in_thread(gc, "_put_status", ("b",))
    wait_for(lambda: gc.pending() == 1, 30, interval=0.005, what="the command to queue")
    leading[0] = False
    state.proposed[0][2]({"ok": True}, FAIL_REASON.SUCCESS)
    queued.join(30)
    first.join(30)
    assert queued_out == {"error": FAIL_REASON.NOT_LEADER} and len(state.proposed) == 1


# ------------------------------------------------------------------ on a real Raft cluster
def _writers(leader: RaftNode, n: int, stop: threading.Event, acked: dict, errors: list, timeout: float = 10.0):
    """``n`` threads, each committing offsets of its own task in sequence until ``stop``; ``acked[t]``: last acked."""

    def run(t: int):
        seq = 0
        while not stop.is_set():
            seq += 1
            try:
                leader.commands.commit_offsets(name="c", task=t, worker_id="w", generation=1,
                                               entries=[[f"t{t}", {"task": t}, {"seq": seq}]], timeout=timeout)
            except RaftUnavailable:
                return  # the leader is gone: the outcome of this one is unknown, it was not acknowledged
            except Exception as exc:  # noqa: BLE001 - reported by the test
                errors.append(exc)
                return
            acked[t] = seq

    threads = [threading.Thread(target=run, args=(t,), daemon=True) for t in range(n)]
    for th in threads:
        th.start()
    return threads


def _assign(leader: RaftNode, tasks: int) -> None:
    leader.commands.put_connector_config(name="c", config={"connector.class": "X"}, target_state=None,
                                         create_only=False)
    leader.commands.set_assignment(epoch=0, generation=1, connectors={"c": "w"},
                                   tasks={f"c-{t}": "w" for t in range(tasks)})


def test_a_lone_member_commits_without_waiting_for_its_tick_period(tmp_path):
    """A single member commits an entry in the tick after the one that appended it; that tick must start
    at once, not when the poll of ``tick_period`` ends (nothing else wakes a lone member). With a 2.5 s
    tick period, writes that waited for it would each time out after 1 s."""
    node = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "lone"),
                               tick_period=2.5))
    try:
        ready_leader([node])
        _assign(node, 1)
        for seq in range(1, 6):
            node.commands.commit_offsets(name="c", task=0, worker_id="w", generation=1,
                                         entries=[["k", {"p": 0}, {"seq": seq}]], timeout=1.0)
        assert node.state.connector_offsets("c")["k"][1] == {"seq": 5}
    finally:
        node.destroy()


def test_concurrent_writers_are_batched_keep_their_order_and_a_fenced_one_fails_alone(tmp_path):
    _, nodes = raft_members(tmp_path)
    try:
        leader = ready_leader(nodes)
        _assign(leader, 8)
        stop, acked, errors = threading.Event(), {}, []
        threads = _writers(leader, 8, stop, acked, errors)
        fenced: list = []

        def stranger():  # a worker that owns nothing, writing alongside the others the whole time
            while not stop.is_set():
                try:
                    leader.commands.commit_offsets(name="c", task=0, worker_id="intruder", generation=1,
                                                   entries=[["t0", {"task": 0}, {"seq": -1}]])
                except CommandRejected as exc:
                    fenced.append(exc)

        intruder = threading.Thread(target=stranger, daemon=True)
        intruder.start()
        wait_for(lambda: leader.group_commit.batches >= 5 and len(fenced) >= 5, 60, interval=0.02,
                 what="several batches and fenced writes")
        stop.set()
        for th in threads + [intruder]:
            th.join(30)
        assert not errors
        assert all(exc.code == 409 and "not assigned to worker intruder" in exc.reason for exc in fenced)
        # every writer's last acknowledged write is the state: nothing reordered, nothing fenced got in
        offsets = leader.state.connector_offsets("c")
        assert {k: v[1]["seq"] for k, v in offsets.items()} == {f"t{t}": acked[t] for t in range(8)}
        wait_for(lambda: len({n.status()["applied_index"] for n in nodes}) == 1, 30, what="followers to apply all")
        assert len({n.state.digest() for n in nodes}) == 1
    finally:
        destroy(nodes)


def test_a_fresh_member_restored_from_a_snapshot_has_the_same_state_digest(tmp_path):
    addrs, nodes = raft_members(tmp_path, log_compaction_min_entries=50, log_compaction_min_time=0.1)
    try:
        leader = ready_leader(nodes)
        lost = next(i for i, n in enumerate(nodes) if n is not leader)
        nodes[lost].destroy()
        _assign(leader, 4)
        stop, acked, errors = threading.Event(), {}, []
        threads = _writers(leader, 4, stop, acked, errors)
        wait_for(lambda: leader.group_commit.batches >= 3 and sum(acked.values()) >= 300, 60, interval=0.02,
                 what="batched writes past the compaction threshold")
        stop.set()
        for th in threads:
            th.join(30)
        assert not errors
        for n in nodes:
            if n is not nodes[lost]:
                n.syncobj.forceLogCompaction()
        wait_for(lambda: leader.status()["log_size"] < 50, 30, what="the leader to compact its log")
        nodes[lost] = raft_member(tmp_path, addrs, lost, "fresh",  # a new, empty data directory
                              log_compaction_min_entries=50, log_compaction_min_time=0.1)
        fresh = nodes[lost]
        wait_for(lambda: fresh.status()["applied_index"] == leader.status()["applied_index"], 30,
                 what="the fresh member to load the snapshot and catch up")
        assert fresh.state.digest() == leader.state.digest()
        assert fresh.state.connector_offsets("c") == leader.state.connector_offsets("c")
    finally:
        destroy(nodes)


def test_a_leader_lost_in_the_middle_of_batches_loses_no_acknowledged_write(tmp_path):
    _, nodes = raft_members(tmp_path)
    try:
        leader = ready_leader(nodes)
        _assign(leader, 8)
        stop, acked, errors = threading.Event(), {}, []
        threads = _writers(leader, 8, stop, acked, errors, timeout=3.0)
        wait_for(lambda: leader.group_commit.batches >= 3 and leader.group_commit._in_flight > 0, 60,
                 interval=0.001, what="batches being committed")
        leader.destroy()  # gone while entries are outstanding and commands queued
        for th in threads:
            th.join(30)
        stop.set()
        assert not errors
        survivors = [n for n in nodes if n is not leader]
        new = ready_leader(survivors)
        new.commands.put_topics(name="c", topics=["after"])  # commits in the new term, and all before it

        def all_acked_applied():
            for n in survivors:
                offsets = n.state.connector_offsets("c")
                if any(offsets.get(f"t{t}", [None, {"seq": 0}])[1]["seq"] < seq for t, seq in acked.items()):
                    return False
            return True

        assert acked
        wait_for(all_acked_applied, 30, what="every acknowledged write on both survivors")
    finally:
        destroy(nodes)


def test_an_older_acknowledgement_does_not_move_the_next_index_back():
    """pysyncobj sets a follower's next index from each success answer; entries already sent must not be re-sent."""
    from raftnode.node import _keep_next_index_monotonic

    class FakeTransport:
        def setOnMessageReceivedCallback(self, callback):
            self.callback = callback

    class FakeSyncObj:  # the three pysyncobj internals the wrapper uses, with pysyncobj's handling of the answer
        def __init__(self):
            self._SyncObj__transport = FakeTransport()
            self._SyncObj__raftNextIndex = {"f": 21}  # entries up to 20 already sent

        def _SyncObj__onMessageReceived(self, node, message):
            self._SyncObj__raftNextIndex[node] = message["next_node_idx"]

    sync = FakeSyncObj()
    _keep_next_index_monotonic(sync)
    receive = sync._SyncObj__transport.callback
    receive("f", {"type": "next_node_idx", "next_node_idx": 16, "success": True, "reset": False})
    assert sync._SyncObj__raftNextIndex["f"] == 21  # the answer to an older message: nothing is re-sent
    receive("f", {"type": "next_node_idx", "next_node_idx": 25, "success": True, "reset": False})
    assert sync._SyncObj__raftNextIndex["f"] == 25
    receive("f", {"type": "next_node_idx", "next_node_idx": 12, "success": False, "reset": True})
    assert sync._SyncObj__raftNextIndex["f"] == 12  # a follower lacking entries still resets it
