"""Instances granted anew: a task-config change or a restarted worker fences every older incarnation.

Two instances of one source partition must never both pass fencing, or the slower one's commit moves
the partition's offset back (``benchmarks/chaos``, ``offsets-monotonic``). These tests apply the
replicated commands directly, as every member does when it commits.
"""
from __future__ import annotations

from raftnode.state import ClusterStateMachine

from .members import apply


def machine() -> ClusterStateMachine:
    """Connector ``c`` (instance on w1) with tasks 0 and 1 on w1 and 2 on w2, written at generation 2;
    connector ``d`` with task 0 on w1. Both have task configs."""
    sm = ClusterStateMachine()
    for name in ("c", "d"):
        apply(sm, "_put_connector_config", name, {"connector.class": "X"}, None, False)
    apply(sm, "_set_assignment", 1, 1, {"c": "w1", "d": "w1"}, {})
    assert apply(sm, "_zzzzzz_put_task_configs", "c", "w1", 1, [{"file": f"part-{i}"} for i in range(3)])["ok"]
    assert apply(sm, "_zzzzzz_put_task_configs", "d", "w1", 1, [{"file": "x"}])["ok"]
    apply(sm, "_set_assignment", 1, 2, {}, {"c-0": "w1", "c-1": "w1", "c-2": "w2", "d-0": "w1"}, 1)
    return sm


def commit(sm: ClusterStateMachine, task: int, worker: str, generation: int, offset: int, name: str = "c"):
    return apply(sm, "_commit_offsets", name, task, worker, generation, [["k", {"file": "part-2"}, {"pos": offset}]])


def test_first_task_configs_grant_nothing_anew():
    sm = ClusterStateMachine()
    apply(sm, "_put_connector_config", "c", {"connector.class": "X"}, None, False)
    apply(sm, "_set_assignment", 1, 1, {"c": "w1"}, {})
    result = apply(sm, "_zzzzzz_put_task_configs", "c", "w1", 1, [{"file": "a"}])
    assert result == {"ok": True, "tasks": 1, "generation": None}
    assert sm.assignment["generation"] == 1


def test_changed_task_configs_fence_the_instances_started_before_them():
    sm = machine()
    assert commit(sm, 1, "w1", 2, 100)["ok"]  # task 1 holds part-2 under the old configs
    # the connector instance moves part-2 to task 2: one entry writes the configs and grants c's tasks anew
    moved = [{"file": "part-1"}, {"file": "part-0"}, {"file": "part-2"}]
    result = apply(sm, "_zzzzzz_put_task_configs", "c", "w1", 1, moved)
    assert result["ok"] and result["generation"] == 3
    a = sm.assignment
    assert a["generation"] == 3 and {k: a["assigned_at"][k] for k in ("c-0", "c-1", "c-2")} == \
        {"c-0": 3, "c-1": 3, "c-2": 3}
    assert a["tasks"] == {"c-0": "w1", "c-1": "w1", "c-2": "w2", "d-0": "w1"}  # owners stay
    assert a["assigned_at"]["d-0"] == 2 and a["assigned_at"]["c"] == 1  # others' and the instance's stay
    # the old task 1 finishes its batch late: refused, so the offset task 2 starts from cannot move back
    late = commit(sm, 1, "w1", 2, 150)
    assert "stale generation 2" in late["rejected"]
    assert commit(sm, 2, "w2", 3, 120)["ok"]
    assert sm.connector_offsets("c")["k"][1] == {"pos": 120}
    assert "stale generation 2" in apply(sm, "_put_status", "c", 2, "w2", 2, {"state": "RUNNING"})["rejected"]
    assert commit(sm, 0, "w1", 2, 1, name="d")["ok"]  # d's tasks were not touched


def test_the_same_task_configs_again_grant_nothing():
    sm = machine()
    same = [{"file": f"part-{i}"} for i in range(3)]
    assert apply(sm, "_zzzzzz_put_task_configs", "c", "w1", 1, same)["generation"] is None
    assert sm.assignment["generation"] == 2 and commit(sm, 1, "w1", 2, 5)["ok"]


def test_a_fenced_task_config_write_grants_nothing():
    sm = machine()
    refused = apply(sm, "_zzzzzz_put_task_configs", "c", "w2", 1, [{"file": "other"}])  # c's instance is w1's
    assert "not assigned to worker w2" in refused["rejected"]
    assert sm.assignment["generation"] == 2 and sm.connector("c")["tasks"][0] == {"file": "part-0"}


def test_fewer_task_configs_grant_the_dropped_tasks_anew_too():
    sm = machine()
    assert apply(sm, "_zzzzzz_put_task_configs", "c", "w1", 1, [{"file": "all"}])["generation"] == 3
    # task 2 is gone from the configs but still assigned until the next rebalance: it can no longer write
    assert "stale generation 2" in commit(sm, 2, "w2", 2, 9)["rejected"]


def test_regrant_tasks_for_configs_kept_outside_raft():
    sm = machine()
    assert apply(sm, "_zzzzzz_regrant_tasks", "c", 3) == {"ok": True, "generation": 3}
    assert "stale generation 2" in commit(sm, 0, "w1", 2, 1)["rejected"]
    assert apply(sm, "_zzzzzz_regrant_tasks", "unknown", 3) == {"ok": True, "generation": None}
    assert sm.assignment["generation"] == 3


def test_a_restarted_worker_is_granted_everything_it_owns_anew():
    sm = machine()
    before = sm.assignment
    result = apply(sm, "_zzzzzz_rejoin_member", 1, "w1", {"roles": ["worker"], "incarnation": "b"})
    assert result == {"ok": True, "generation": 3}
    a = sm.assignment
    assert a is not before and a["tasks"] == before["tasks"] and a["connectors"] == before["connectors"]
    assert {k for k, g in a["assigned_at"].items() if g == 3} == {"c", "d", "c-0", "c-1", "d-0"}
    assert a["assigned_at"]["c-2"] == 2  # w2's task is not touched
    assert sm.members["w1"]["incarnation"] == "b"
    # a commit the old process left in flight lands now: refused; the new process's passes
    assert "stale generation 2" in commit(sm, 1, "w1", 2, 10)["rejected"]
    assert "stale generation 1" in apply(sm, "_zzzzzz_put_task_configs", "c", "w1", 1, [{}])["rejected"]
    assert commit(sm, 1, "w1", 3, 10)["ok"] and commit(sm, 2, "w2", 2, 11)["ok"]


def test_a_rejoin_from_a_stale_coordinator_is_refused_and_one_owning_nothing_moves_no_generation():
    sm = machine()
    apply(sm, "_become_coordinator", 2, "n1")
    assert "stale coordinator epoch 1" in apply(sm, "_zzzzzz_rejoin_member", 1, "w1", {"incarnation": "b"})["rejected"]
    assert "incarnation" not in sm.members.get("w1", {})
    assert apply(sm, "_zzzzzz_rejoin_member", 2, "w3", {"incarnation": "c"}) == {"ok": True, "generation": None}
    assert sm.assignment["generation"] == 2 and sm.members["w3"] == {"incarnation": "c"}


def test_grants_anew_replay_to_the_same_state_on_every_member():
    """A fresh member replaying the same commands, and one restored from a snapshot, hold the same state."""
    sm = machine()
    apply(sm, "_zzzzzz_put_task_configs", "c", "w1", 1, [{"file": "z"}, {"file": "y"}, {"file": "x"}])
    apply(sm, "_zzzzzz_rejoin_member", 1, "w2", {"incarnation": "n"})
    again = machine()
    apply(again, "_zzzzzz_put_task_configs", "c", "w1", 1, [{"file": "z"}, {"file": "y"}, {"file": "x"}])
    apply(again, "_zzzzzz_rejoin_member", 1, "w2", {"incarnation": "n"})
    assert again.digest() == sm.digest()
    restored = ClusterStateMachine()
    restored._deserialize(sm._serialize())
    assert restored.digest() == sm.digest() and restored.assignment["generation"] == 4
