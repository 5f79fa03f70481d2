"""Commits in their order: a late copy of a task's earlier commit is refused, not applied over a newer one.

A commit request can outlive its sender's attempt (a member forwards it again after a leader change
while the agent has sent it elsewhere and gone on), and a task restarted in the same agent process
keeps its generation. Both passed fencing and moved a file's offset back (``benchmarks/chaos``).
These tests apply the replicated commands directly, as every member does when it commits.
"""
from __future__ import annotations

from raftnode.state import ClusterStateMachine

from .members import apply, assigned_machine


def commit(sm, task: int, worker: str, generation: int, seq: int | None, position: int):
    [result] = apply(sm, "_zzzzzzz_commit_offsets", worker,
                     [["c", task, generation, seq, [["k", {"file": "f"}, {"pos": position}]]]])
    return result


def position(sm) -> int:
    return sm.connector_offsets("c")["k"][1]["pos"]


def test_a_late_copy_of_an_earlier_commit_is_refused_and_a_retry_of_the_last_is_applied():
    sm = assigned_machine()
    assert commit(sm, 0, "w1", 2, 5, 100)["ok"]
    assert commit(sm, 0, "w1", 2, 6, 200)["ok"]
    late = commit(sm, 0, "w1", 2, 5, 100)  # the first attempt of commit 5, forwarded again after a leader change
    assert "commit 5 of task c-0 at generation 2 is older than commit 6" in late["rejected"] and late["code"] == 409
    assert position(sm) == 200
    assert commit(sm, 0, "w1", 2, 6, 200)["ok"]  # a retry of the last commit, which did land: applied again
    assert sm.commit_floors["c-0"] == [2, 6]
    # another task's numbers are its own
    assert commit(sm, 1, "w2", 2, 1, 7)["ok"] and sm.commit_floors["c-1"] == [2, 1]


def test_a_task_start_refuses_the_late_commits_of_an_earlier_instance_at_the_same_generation():
    sm = assigned_machine()
    assert commit(sm, 0, "w1", 2, 3, 100)["ok"]
    # the instance fails and is started again by the same agent: same generation, its counter at 9
    assert apply(sm, "_zzzzzzz_start_task", "c", 0, "w1", 2, 9) == {"ok": True}
    assert "older than commit 9" in commit(sm, 0, "w1", 2, 4, 150)["rejected"]  # the old instance's, late
    assert position(sm) == 100  # what the new instance read at its start is still the committed offset
    assert commit(sm, 0, "w1", 2, 10, 120)["ok"] and position(sm) == 120


def test_a_new_generation_starts_the_numbers_afresh_and_fencing_comes_first():
    sm = assigned_machine()
    assert commit(sm, 0, "w1", 2, 50, 100)["ok"]
    apply(sm, "_zzzzzz_rejoin_member", 1, "w1", {"incarnation": "b"})  # a new agent process: counter from 1
    generation = sm.assignment["assigned_at"]["c-0"]
    assert generation == 3 and commit(sm, 0, "w1", 3, 1, 120)["ok"]
    assert sm.commit_floors["c-0"] == [3, 1]
    stale = commit(sm, 0, "w1", 2, 51, 130)  # the old process's: fenced by generation before any number
    assert "stale generation 2" in stale["rejected"]
    assert "not assigned to worker w1" in apply(sm, "_zzzzzzz_start_task", "c", 1, "w1", 3, 2)["rejected"]
    assert "c-1" not in sm.commit_floors


def test_commits_without_a_number_apply_as_before():
    sm = assigned_machine()
    assert commit(sm, 0, "w1", 2, 9, 100)["ok"]
    assert commit(sm, 0, "w1", 2, None, 50)["ok"]  # an agent from before numbers: not checked, not counted
    assert position(sm) == 50 and sm.commit_floors["c-0"] == [2, 9]


def test_floors_leave_with_their_tasks_and_survive_a_snapshot():
    sm = assigned_machine()
    commit(sm, 0, "w1", 2, 4, 1)
    commit(sm, 1, "w2", 2, 7, 1)
    restored = ClusterStateMachine()
    restored._deserialize(sm._serialize())
    assert restored.commit_floors == {"c-0": [2, 4], "c-1": [2, 7]} and restored.digest() == sm.digest()
    apply(sm, "_set_assignment", 1, 3, {}, {"c-1": None}, 2)  # task 1 gone (changes form)
    assert sm.commit_floors == {"c-0": [2, 4]}
    apply(sm, "_set_assignment", 1, 4, {"c": "w1"}, {})  # every task gone (whole form)
    assert sm.commit_floors == {}
    old = {k: v for k, v in restored._serialize().items() if k != "commit_floors"}
    fresh = ClusterStateMachine()
    fresh._deserialize(old)  # a snapshot from before commit numbers
    assert fresh.commit_floors == {}


def test_many_starts_in_one_entry_are_each_fenced_and_raise_only_their_own_floor():
    sm = assigned_machine()
    assert commit(sm, 0, "w1", 2, 3, 100)["ok"] and commit(sm, 1, "w2", 2, 3, 100)["ok"]
    # w1 owns c-0 only: its start of c-1 is refused alone, and the same entry's start of c-0 holds
    ok, fenced = apply(sm, "_zzzzzzzz_start_tasks", "w1", [["c", 0, 2, 8], ["c", 1, 2, 9]])
    assert ok == {"ok": True} and "not assigned to worker w1" in fenced["rejected"] and fenced["code"] == 409
    assert sm.commit_floors == {"c-0": [2, 8], "c-1": [2, 3]}
    assert "older than commit 8" in commit(sm, 0, "w1", 2, 5, 150)["rejected"]
    assert commit(sm, 1, "w2", 2, 5, 150)["ok"]  # c-1's earlier instance was not fenced by a start that failed


def _import(sm, offsets: dict[str, int], orders: dict[str, list] | None, *, legacy: bool = False):
    """A switch's import of connector ``c``'s offsets (``{partition key: position}``) with the commit numbers
    that wrote them; ``legacy``: an entry logged before numbers travelled (6 fields)."""
    item = ["c", ["offsets"], None, {}, [[k, {"file": k}, {"pos": p}] for k, p in offsets.items()], []]
    return apply(sm, "_import_names", [item if legacy else [*item, orders]])


def commit_many(sm, generation: int, seq: int | None, positions: dict[str, int]):
    [result] = apply(sm, "_zzzzzzz_commit_offsets", "w1",
                     [["c", 0, generation, seq, [[k, {"file": k}, {"pos": p}] for k, p in positions.items()]]])
    return result


def positions(sm) -> dict[str, int]:
    return {k: v[1]["pos"] for k, v in sm.connector_offsets("c").items()}


def test_imported_commit_numbers_keep_a_late_copy_from_moving_an_imported_offset_back():
    """A switch from a relational store brings each offset's commit numbers (``offset_orders``): a late copy
    of an older commit the relational store took, landing after the switch, leaves that partition as it
    is and writes the others, as the relational store would have; the partition's next write hands its
    order to the task's floor and drops the entry (bounded), and a reset drops what is left."""
    sm = assigned_machine()
    assert _import(sm, {"a": 2, "b": 1}, {"a": [2, 6], "b": [2, 5]}) == {"ok": True, "imported": 1}
    assert sm.offset_orders == {"c": {"a": [2, 6], "b": [2, 5]}}
    assert commit_many(sm, 2, 5, {"a": 1, "b": 1, "n": 1})["ok"]  # late for a only
    assert positions(sm) == {"a": 2, "b": 1, "n": 1}
    assert sm.offset_orders == {"c": {"a": [2, 6]}}  # b was written: its order is the task's floor's now
    assert commit_many(sm, 2, 7, {"a": 3})["ok"] and positions(sm)["a"] == 3
    assert sm.offset_orders == {} and sm.commit_floors["c-0"] == [2, 7]
    assert "older than commit 7" in commit_many(sm, 2, 6, {"a": 9})["rejected"]  # the task's floor orders it now
    assert positions(sm)["a"] == 3

    _import(sm, {"a": 2}, {"a": [2, 6]})
    assert apply(sm, "_reset_offsets", "c") == {"ok": True} and sm.offset_orders == {}


def test_imported_numbers_of_another_generation_or_an_unnumbered_write_order_nothing():
    sm = assigned_machine()
    _import(sm, {"a": 2, "b": 2}, {"a": [1, 6], "b": [2, 9], "gone": [2, 9]})
    assert sm.offset_orders == {"c": {"a": [1, 6], "b": [2, 9]}}  # none for an offset the import does not hold
    assert commit_many(sm, 2, 3, {"a": 5})["ok"] and positions(sm)["a"] == 5  # another generation's numbers
    assert commit_many(sm, 2, None, {"b": 5})["ok"] and positions(sm)["b"] == 5  # an agent's from before numbers
    assert sm.offset_orders == {}
    assert _import(sm, {"a": 2}, None, legacy=True)["ok"] and sm.offset_orders == {}  # logged before numbers


def test_imported_commit_numbers_survive_a_snapshot_and_an_older_snapshot_has_none():
    sm = assigned_machine()
    _import(sm, {"a": 2}, {"a": [2, 6]})
    restored = ClusterStateMachine()
    restored._deserialize(sm._serialize())
    assert restored.offset_orders == {"c": {"a": [2, 6]}} and restored.digest() == sm.digest()
    older = sm._serialize()
    older.pop("offset_orders")
    restored._deserialize(older)
    assert restored.offset_orders == {}
    assert commit_many(restored, 2, 5, {"a": 1})["ok"] and positions(restored)["a"] == 1
