"""Property tests of the weighted round-robin assignor (hypothesis)."""
from __future__ import annotations

import math

from hypothesis import given, settings, strategies as st

from webapp.coordinator.assignor import (
    Assignment, WeightedRoundRobinAssignor, _keep_in_order, _place_round_robin, apportion,
)

workers_st = st.dictionaries(st.sampled_from([f"w{i}" for i in range(12)]),
                             st.sampled_from([0.5, 1.0, 1.0, 2.0, 3.0]), min_size=1, max_size=8)
tasks_st = st.integers(min_value=0, max_value=300)


def _tasks(n: int) -> list[str]:
    return [f"c{i % 7}-{i}" for i in range(n)]


def _loads(mapping: dict[str, str], workers) -> dict[str, int]:
    loads = dict.fromkeys(workers, 0)
    for w in mapping.values():
        loads[w] += 1
    return loads


def _check_balanced(a: WeightedRoundRobinAssignor, mapping, workers, leader, n):
    eff = a.effective_weights(workers, leader)
    total = sum(eff.values())
    for w, load in _loads(mapping, workers).items():
        ideal = n * eff[w] / total
        assert math.floor(ideal) <= load <= math.ceil(ideal), (w, load, ideal)


@settings(max_examples=200, deadline=None)
@given(workers=workers_st, n=tasks_st, data=st.data())
def test_every_task_assigned_once_and_loads_within_one_of_weighted_ideal(workers, n, data):
    leader = data.draw(st.sampled_from(sorted(workers) + [None]))
    a = WeightedRoundRobinAssignor(0.5)
    tasks = _tasks(n)
    result = a.assign(workers=workers, leader_worker=leader, connectors=["c0", "c1"], tasks=tasks)
    assert sorted(result.tasks) == sorted(tasks)
    assert set(result.tasks.values()) <= set(workers)
    _check_balanced(a, result.tasks, workers, leader, n)


@settings(max_examples=200, deadline=None)
@given(n=st.integers(min_value=1, max_value=400), others=st.integers(min_value=1, max_value=6))
def test_leader_gets_at_most_half_a_share(n, others):
    workers = {f"w{i}": 1.0 for i in range(others + 1)}
    a = WeightedRoundRobinAssignor(0.5)
    result = a.assign(workers=workers, leader_worker="w0", connectors=[], tasks=_tasks(n))
    loads = _loads(result.tasks, workers)
    full_share = n / (others + 0.5)
    assert loads["w0"] <= math.ceil(0.5 * full_share)
    assert loads["w0"] <= min(loads[w] for w in workers if w != "w0") + 1


def _minimal_moves(before: Assignment, after_quota: dict[str, int], alive: set[str]) -> int:
    """Lower bound of moves: items on dead workers + items over each live worker's new quota."""
    loads = _loads(before.tasks, set(before.tasks.values()) | alive)
    moves = sum(c for w, c in loads.items() if w not in alive)
    moves += sum(max(0, loads.get(w, 0) - q) for w, q in after_quota.items())
    return moves


@settings(max_examples=150, deadline=None)
@given(workers=workers_st, n=tasks_st, data=st.data())
def test_leave_and_join_move_only_what_must_move(workers, n, data):
    a = WeightedRoundRobinAssignor(0.5)
    tasks = _tasks(n)
    before = a.assign(workers=workers, leader_worker=None, connectors=[], tasks=tasks)
    # a worker leaves (if more than one) or a new one joins
    if len(workers) > 1 and data.draw(st.booleans()):
        gone = data.draw(st.sampled_from(sorted(workers)))
        after_workers = {w: v for w, v in workers.items() if w != gone}
    else:
        after_workers = dict(workers, newcomer=data.draw(st.sampled_from([0.5, 1.0, 2.0])))
    after = a.assign(workers=after_workers, leader_worker=None, connectors=[], tasks=tasks, previous=before)
    assert sorted(after.tasks) == sorted(tasks)
    _check_balanced(a, after.tasks, after_workers, None, n)
    quota = apportion(n, a.effective_weights(after_workers, None)) if after_workers else {}
    assert after.moved_from(before) == _minimal_moves(before, quota, set(after_workers))
    assert Assignment.moved_in(after.changes_from(before), before) == after.moved_from(before)


@settings(max_examples=100, deadline=None)
@given(workers=st.dictionaries(st.sampled_from([f"w{i}" for i in range(6)]), st.just(1.0), min_size=2, max_size=6),
       n=tasks_st, data=st.data())
def test_leader_change_moves_only_what_must_move(workers, n, data):
    a = WeightedRoundRobinAssignor(0.5)
    old_leader, new_leader = data.draw(st.permutations(sorted(workers)))[:2]
    tasks = _tasks(n)
    before = a.assign(workers=workers, leader_worker=old_leader, connectors=[], tasks=tasks)
    after = a.assign(workers=workers, leader_worker=new_leader, connectors=[], tasks=tasks, previous=before)
    _check_balanced(a, after.tasks, workers, new_leader, n)
    quota = apportion(n, a.effective_weights(workers, new_leader))
    assert after.moved_from(before) == _minimal_moves(before, quota, set(workers))
    assert Assignment.moved_in(after.changes_from(before), before) == after.moved_from(before)


def test_no_change_means_no_movement():
    a = WeightedRoundRobinAssignor()
    workers = {"a": 1.0, "b": 2.0, "c": 1.0}
    first = a.assign(workers=workers, leader_worker="a", connectors=["x", "y"], tasks=_tasks(50))
    again = a.assign(workers=workers, leader_worker="a", connectors=["x", "y"], tasks=_tasks(50), previous=first)
    assert again == first


def test_apportion_rejects_bad_input():
    import pytest

    with pytest.raises(ValueError):
        apportion(3, {})
    with pytest.raises(ValueError):
        WeightedRoundRobinAssignor(0)


def _walk_every_item(items, weights, previous, sort_key):
    """The assignor's pool as a walk of every item in order (steps 3-4 of its docstring, no shortcut)."""
    items = list(dict.fromkeys(items))
    quota = apportion(len(items), weights)
    load = dict.fromkeys(weights, 0)
    result, unplaced = _keep_in_order(items, previous, quota, load, sort_key)
    return _place_round_robin(unplaced, quota, load, result)


@settings(max_examples=300, deadline=None)
@given(workers=workers_st, data=st.data())
def test_the_assignment_equals_a_walk_of_every_item_whatever_was_added_dropped_or_left(workers, data):
    """The pool keeps every previous item without walking them in order when no worker holds more than
    its new quota; the answer must be the walk's, in that case and in the others."""
    from webapp.coordinator.assignor import _task_sort_key

    a = WeightedRoundRobinAssignor(0.5)
    leader = data.draw(st.sampled_from(sorted(workers) + [None]))
    before_workers = data.draw(st.dictionaries(st.sampled_from([f"w{i}" for i in range(12)]), st.just(1.0),
                                               min_size=1, max_size=8))
    before_tasks = _tasks(data.draw(tasks_st))
    before = a.assign(workers=before_workers, leader_worker=None, connectors=[f"c{i}" for i in range(7)],
                      tasks=before_tasks)
    # some tasks dropped, some added (other connectors' keys sort among them), duplicates given twice
    kept = [t for t in before_tasks if data.draw(st.booleans()) or len(before_tasks) > 60]
    added = [f"c{i % 9}x-{i}" for i in range(data.draw(st.integers(0, 80)))]
    tasks = kept + added + added[:3]
    connectors = [f"c{i}" for i in range(data.draw(st.integers(0, 9)))]
    after = a.assign(workers=workers, leader_worker=leader, connectors=connectors, tasks=tasks, previous=before)
    weights = a.effective_weights(workers, leader)
    assert after.tasks == _walk_every_item(tasks, weights, before.tasks, _task_sort_key)
    assert after.connectors == _walk_every_item(connectors, weights, before.connectors, None)
