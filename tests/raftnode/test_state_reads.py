"""The state machine's reads for lists of every connector hand out copies (no Raft group needed).

``connector_summary`` and ``status`` copy only what they must (a record's config, flat status
entries with ``dict()``), so these check that nothing they return reaches the replicated state,
including a status whose trace is not a string (nothing validates what a worker reports there).
"""
from __future__ import annotations

from raftnode.state import ClusterStateMachine, json_copy


def apply(state: ClusterStateMachine, command: str, *args) -> None:
    out = getattr(state, command)(*args, _doApply=True)  # as a member applies a committed entry
    assert not (isinstance(out, dict) and "rejected" in out), out


def filled() -> ClusterStateMachine:
    state = ClusterStateMachine()
    apply(state, "_put_connector_config", "c", {"connector.class": "X", "k": "v"}, None, False)
    apply(state, "_put_task_configs", "c", None, 0, [{"t": "0"}, {"t": "1"}])
    apply(state, "_set_assignment", 0, 1, {"c": "w1"}, {"c-0": "w1", "c-1": "w1"})
    apply(state, "_put_status", "c", None, "w1", 1, {"state": "RUNNING", "trace": None})
    apply(state, "_put_status", "c", 0, "w1", 1, {"state": "FAILED", "trace": {"frames": ["a", "b"]}})
    apply(state, "_put_status", "c", 1, "w1", 1, {"state": "RUNNING", "trace": None})
    return state


def test_summary_is_the_record_less_its_task_configs_and_a_copy():
    state = filled()
    rec = state.connector("c")
    config, target_state, tasks = state.connector_summary("c")
    assert (config, target_state, tasks) == (rec["config"], rec["target_state"], len(rec["tasks"]))
    config["k"] = "changed"
    assert state.connector_summary("c")[0] == {"connector.class": "X", "k": "v"}
    assert state.connector_summary("missing") is None


def test_statuses_are_deep_copies_even_with_a_nested_trace():
    state = filled()
    before = json_copy(state.statuses["c"])
    got = state.status("c")
    assert got == before
    got["connector"]["state"] = "FAILED"
    got["tasks"]["0"]["trace"]["frames"].append("mine")
    got["tasks"]["1"]["state"] = "PAUSED"
    got["tasks"]["2"] = {}
    assert state.statuses["c"] == before
    assert state.status("missing") == {"connector": None, "tasks": {}}


def test_an_entry_with_other_keys_is_copied_whole():
    state = filled()
    apply(state, "_put_status", "c", 1, "w1", 1, {"state": "RUNNING", "extra": ["x"]})  # no trace key
    got = state.status("c")
    got["tasks"]["1"]["extra"].append("mine")
    assert state.statuses["c"]["tasks"]["1"]["extra"] == ["x"]
