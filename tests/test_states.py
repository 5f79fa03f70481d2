"""webapp.states: the enums encode exactly as the strings stored and served before them."""
import json
import pickle

import pytest

from webapp.states import (
    STATES,
    TARGET_STATES,
    State,
    TargetState,
    reported_state,
    target_from_initial_state,
)


def test_vocabularies_are_connects_in_order():
    assert TARGET_STATES == ("STARTED", "PAUSED", "STOPPED")
    assert STATES == ("UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING")


def test_members_are_their_strings_in_json_dict_keys_and_values():
    assert json.dumps({"state": State.FAILED, TargetState.PAUSED: 1}) == '{"state": "FAILED", "PAUSED": 1}'
    assert {"RUNNING": 1}[State.RUNNING] == 1
    assert State.STOPPED == TargetState.STOPPED == "STOPPED"


def test_value_is_a_plain_str_so_a_pickled_raft_command_names_no_webapp_class():
    blob = pickle.dumps(("_set_target_state", "c", TargetState.PAUSED.value))
    assert b"webapp" not in blob
    assert type(TargetState.PAUSED.value) is str


@pytest.mark.parametrize(("initial", "target"), [(None, "STARTED"), ("RUNNING", "STARTED"), ("PAUSED", "PAUSED"),
                                                 ("STOPPED", "STOPPED"), ("FAILED", None), ("running", None)])
def test_initial_state_of_a_create(initial, target):
    assert target_from_initial_state(initial) == target


def test_reported_state_of_a_target():
    assert [reported_state(t) for t in TARGET_STATES] == [State.RUNNING, State.PAUSED, State.STOPPED]
    with pytest.raises(ValueError):
        reported_state("RUNNING")
