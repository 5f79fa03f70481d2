"""``ClusterStateMachine.view_changes_since``: which connectors' view inputs moved after a ``view_version``.

The group coordinator trusts an empty answer to skip a worker's view marker, so every command that
changes what a view holds of a connector must name it, and the log must say "unknown" (None) rather
than answer for versions it no longer holds.
"""
from __future__ import annotations

import pytest

from raftnode.state import ChangeLog, ClusterStateMachine


def _apply(sm: ClusterStateMachine, command: str, *args):
    out = getattr(sm, command)(*args, _doApply=True)
    assert not (isinstance(out, dict) and "rejected" in out), out
    return out


@pytest.fixture
def sm() -> ClusterStateMachine:
    sm = ClusterStateMachine()
    _apply(sm, "_register_member", "w1", {"roles": ["worker"]})
    for name in ("a", "b"):
        _apply(sm, "_put_connector_config", name, {"connector.class": "X", "tasks.max": "1"}, None, False)
    _apply(sm, "_set_assignment", 0, 1, {"a": "w1", "b": "w1"}, {"a-0": "w1", "b-0": "w1"})
    return sm


@pytest.mark.parametrize("command, args, named", [
    ("_put_connector_config", ("a", {"connector.class": "X", "v": "2"}, None, False), {"a"}),
    ("_put_target_state", ("b", "PAUSED"), {"b"}),
    ("_put_task_configs", ("a", None, 1, [{"i": "0"}]), {"a"}),
    ("_request_restart", ("b", False, [0]), {"b"}),
    ("_delete_connector", ("a",), {"a"}),
    ("_register_member", ("w2", {"roles": ["worker"]}), set()),  # moves view_version, names nothing
])
def test_each_change_of_what_a_view_holds_names_its_connector(sm, command, args, named):
    before = sm.view_version
    assert sm.view_changes_since(before) == set()
    _apply(sm, command, *args)
    assert sm.view_version > before
    assert sm.view_changes_since(before) == named
    assert sm.view_changes_since(sm.view_version) == set()


def test_a_new_assignment_is_a_new_object_the_log_need_not_name(sm):
    """The coordinator compares the assignment object it saw; the log only covers what changes in place."""
    assignment = sm.assignment
    _apply(sm, "_set_assignment", 0, 2, {"a": "w1", "b": "w1"}, {"a-0": "w1"}, 1)
    assert sm.assignment is not assignment


def test_the_log_answers_none_past_what_it_keeps(sm):
    sm._view_changes.kept = 3
    start = sm.view_version
    for v in range(5):
        _apply(sm, "_put_connector_config", "a" if v % 2 else "b", {"connector.class": "X", "v": str(v)}, None, False)
    assert len(sm._view_changes._changes) <= 3
    assert sm.view_changes_since(start) is None
    assert sm.view_changes_since(sm.view_version - 2) == {"a", "b"}


def test_a_change_that_may_touch_every_view_or_a_snapshot_makes_earlier_versions_unknown(sm):
    before = sm.view_version
    sm._views_changed()  # imports, clears, the active store
    assert sm.view_changes_since(before) is None
    assert sm.view_changes_since(sm.view_version) == set()

    restored = ClusterStateMachine()
    _apply(restored, "_register_member", "w9", {"roles": ["worker"]})
    _apply(restored, "_put_connector_config", "z", {"connector.class": "X"}, None, False)
    mark = restored.view_version
    restored._deserialize(sm._serialize())
    assert restored.view_changes_since(mark) is None  # its versions before the snapshot are not comparable
    assert restored.view_changes_since(restored.view_version) == set()
    assert restored.digest() == sm.digest()  # the log is local: never in a snapshot


def test_a_change_log_numbers_its_own_changes_and_forgets_on_request():
    log = ChangeLog(kept=10)
    assert log.last == 0 and log.since(0) == set()
    assert log.add("a") == 1 and log.add("b") == 2 and log.last == 2
    assert log.since(0) == {"a", "b"} and log.since(1) == {"b"} and log.since(2) == set()
    log.forget()
    assert log.since(2) is None and log.since(10**9) is None
    assert log.add(None) == 3 and log.since(2) is None and log.since(3) == set()
    assert log.add("c") == 4 and log.since(3) == {"c"}


def test_an_assignment_names_the_workers_and_connectors_of_the_instances_it_gave_or_took(sm):
    _apply(sm, "_register_member", "w2", {"roles": ["worker"]})
    _apply(sm, "_register_member", "w3", {"roles": ["worker"]})
    before = sm.view_version
    _apply(sm, "_set_assignment", 0, 2, {"a": "w2"}, {"b-0": None, "a-0": "w1"}, 1)  # a: w1 -> w2; b-0 dropped
    assert sm.placement_changes_since(before) == {("w1", "a"), ("w2", "a"), ("w1", "b")}
    mark = sm.view_version
    _apply(sm, "_set_assignment", 0, 3, {}, {"b-0": "w3"}, 2)  # placed for the first time
    assert sm.placement_changes_since(mark) == {("w3", "b")}
    assert sm.placement_changes_since(before) == {("w1", "a"), ("w2", "a"), ("w1", "b"), ("w3", "b")}

    mark = sm.view_version
    sm._grant_anew(["a"], ["b-0"])  # their owners keep them at a new generation
    assert sm.placement_changes_since(mark) == {("w2", "a"), ("w3", "b")}

    mark = sm.view_version
    _apply(sm, "_set_assignment", 0, 5, {"a": "w2", "b": "w1"}, {"a-0": "w1", "b-0": "w3"})  # a whole one
    assert sm.placement_changes_since(mark) is None
    assert sm.placement_changes_since(sm.view_version) == set()


def test_assignment_steps_lead_from_one_generation_to_another_while_every_step_is_known(sm, monkeypatch):
    from raftnode import state as module

    _apply(sm, "_register_member", "w2", {"roles": ["worker"]})
    assert sm.assignment_steps(0, 1) is None  # generation 1 was applied whole
    _apply(sm, "_set_assignment", 0, 2, {"a": "w2"}, {"b-0": None}, 1)
    sm._grant_anew(["a"], [])  # generation 3: the owners stay
    _apply(sm, "_set_assignment", 0, 5, {}, {"b-0": "w2"}, 3)  # generations may skip numbers
    assert sm.assignment_steps(1, 5) == [({"a": "w2"}, {"b-0": None}), ({}, {}), ({}, {"b-0": "w2"})]
    assert sm.assignment_steps(3, 5) == [({}, {"b-0": "w2"})]
    assert sm.assignment_steps(5, 5) == []
    assert sm.assignment_steps(4, 5) is None  # 4 was never an assignment here
    assert sm.assignment_steps(0, 5) is None

    restored = ClusterStateMachine()
    restored._deserialize(sm._serialize())
    assert restored.assignment_steps(3, 5) is None  # a snapshot holds no steps
    assert restored.digest() == sm.digest()  # the steps are local: never in a snapshot

    monkeypatch.setattr(module, "ASSIGNMENT_STEPS_KEPT", 2)
    for generation in range(6, 9):
        _apply(sm, "_set_assignment", 0, generation, {}, {"a-0": "w2" if generation % 2 else "w1"}, generation - 1)
    assert sm.assignment_steps(6, 8) is not None and sm.assignment_steps(5, 8) is None  # the oldest went first
    _apply(sm, "_set_assignment", 0, 9, {"a": "w1"}, {"a-0": "w1"})  # whole
    assert sm.assignment_steps(8, 9) is None
