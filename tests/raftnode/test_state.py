"""The replicated state machine on a real single-member pysyncobj group."""
from __future__ import annotations


import pytest

from raftnode import CommandRejected, RaftConfig, RaftNode
from webapp.kafka.embedded import free_port


@pytest.fixture
def raft_dir(tmp_path):
    return str(tmp_path / "raft")


def start(raft_dir: str, port: int) -> RaftNode:
    node = RaftNode(RaftConfig(self_address=f"127.0.0.1:{port}", data_dir=raft_dir, password="test-secret"))
    assert node.wait_ready(15), node.status()
    return node


def test_multi_member_cluster_requires_a_secret(raft_dir):
    with pytest.raises(ValueError, match="cluster secret"):
        RaftNode(RaftConfig(self_address="127.0.0.1:1", peers=["127.0.0.1:2"], data_dir=raft_dir))


def test_fencing_rejects_writes_from_previous_owner_and_stale_generation(raft_dir):
    node = start(raft_dir, free_port())
    try:
        node.propose("_become_coordinator", node.term, "n1")
        node.propose("_put_connector_config", "c", {"k": "v"}, None, True)
        node.propose("_set_assignment", node.term, 1, {"c": "w1"}, {"c-0": "w1"})
        node.propose("_commit_offsets", "c", 0, "w1", 1, [["p", {"f": 1}, {"position": 10}]])
        # task moves to w2 at generation 2
        node.propose("_set_assignment", node.term, 2, {"c": "w1"}, {"c-0": "w2"})
        with pytest.raises(CommandRejected, match="not assigned to worker w1"):
            node.propose("_commit_offsets", "c", 0, "w1", 1, [["p", {"f": 1}, {"position": 99}]])
        with pytest.raises(CommandRejected, match="stale generation"):
            node.propose("_commit_offsets", "c", 0, "w2", 1, [["p", {"f": 1}, {"position": 99}]])
        node.propose("_commit_offsets", "c", 0, "w2", 2, [["p", {"f": 1}, {"position": 20}]])
        assert node.state.connector_offsets("c") == {"p": [{"f": 1}, {"position": 20}]}
        # the connector stayed with w1: its assigned_at generation is still 1
        assert node.state.assignment["assigned_at"] == {"c": 1, "c-0": 2}
        with pytest.raises(CommandRejected, match="stale coordinator epoch"):
            node.propose("_set_assignment", node.term - 1, 3, {}, {})
        with pytest.raises(CommandRejected, match="stale generation"):
            node.propose("_set_assignment", node.term, 2, {}, {})
    finally:
        node.destroy()


def test_create_only_and_missing_connector_are_rejected(raft_dir):
    node = start(raft_dir, free_port())
    try:
        node.propose("_put_connector_config", "c", {"k": "v"}, "PAUSED", True)
        with pytest.raises(CommandRejected) as exc:
            node.propose("_put_connector_config", "c", {"k": "w"}, None, True)
        assert exc.value.code == 409
        with pytest.raises(CommandRejected) as exc:
            node.propose("_put_target_state", "nope", "PAUSED")
        assert exc.value.code == 404
        assert node.state.connector("c")["target_state"] == "PAUSED"
    finally:
        node.destroy()


def test_state_survives_restart_from_journal(raft_dir):
    port = free_port()
    node = start(raft_dir, port)
    node.propose("_put_connector_config", "c", {"k": "v"}, "PAUSED", True)
    node.propose("_commit_offsets", "c", None, "", 0, [["p", {"f": 1}, {"position": 7}]])
    node.destroy()
    node = start(raft_dir, port)
    try:
        assert node.state.connector("c")["config"] == {"k": "v"}
        assert node.state.connector("c")["target_state"] == "PAUSED"
        assert node.state.connector_offsets("c") == {"p": [{"f": 1}, {"position": 7}]}
    finally:
        node.destroy()


def test_restart_counters_count_per_instance_and_are_dropped_with_the_assignment(raft_dir):
    node = start(raft_dir, free_port())
    try:
        node.propose("_become_coordinator", node.term, "n1")
        node.propose("_set_assignment", node.term, 1, {"c": "w1"}, {"c-0": "w1", "c-1": "w1"})
        assert node.propose("_request_restart", "c", True, [1])["restarts"] == {"c": 1, "c-1": 1}
        node.propose("_request_restart", "c", False, [0, 1])
        st = node.state
        assert (st.restart_seq("c"), st.restart_seq("c-0"), st.restart_seq("c-1"), st.restart_seq("x")) == (1, 1, 2, 0)
        node.propose("_set_assignment", node.term, 2, {"c": "w2"}, {"c-0": "w2"})  # c-1 is gone
        assert st.restarts == {"c": 1, "c-0": 1}
    finally:
        node.destroy()


def test_status_never_reports_leader_of_a_term_it_does_not_lead(raft_dir):
    """The Raft thread stores a newer term before it leaves LEADER (a journal write in between); a status
    read in that window must not name this member LEADER of the new term (seen as a split brain in make chaos)."""
    node = start(raft_dir, free_port())
    try:
        st = node.status()
        assert st["state"] == "LEADER"
        # the Raft thread's first step on a higher-term message (pysyncobj __setCurrentTerm), state not yet changed
        node.syncobj._SyncObj__raftCurrentTerm = st["term"] + 1
        torn = node.status()
        assert torn["term"] == st["term"] + 1 and torn["state"] == "FOLLOWER"
    finally:
        node.destroy()


def test_view_version_moves_with_what_workers_run_and_not_with_reports(raft_dir):
    """The coordinator rebuilds views when ``view_version`` moves: it must move on every change a view is
    made of, and stay put under status reports, offset commits and topics (most of a busy log)."""
    node = start(raft_dir, free_port())
    try:
        st = node.state
        seen = [st.view_version]

        def moved() -> bool:
            seen.append(st.view_version)
            return seen[-1] != seen[-2]

        node.propose("_become_coordinator", node.term, "n1")
        assert moved()
        node.propose("_put_connector_config", "c", {"k": "v"}, None, True)
        assert moved()
        node.propose("_set_assignment", node.term, 1, {"c": "w1"}, {"c-0": "w1"})
        assert moved()
        node.propose("_put_task_configs", "c", "w1", 1, [{"t": "0"}])
        assert moved()
        node.propose("_put_task_configs", "c", "w1", 1, [{"t": "0"}])  # the same configs again
        assert not moved()
        node.propose("_put_status", "c", 0, "w1", 1, {"state": "RUNNING", "trace": None})
        node.propose("_commit_offsets", "c", 0, "w1", 1, [["p", {"f": 1}, {"position": 1}]])
        node.propose("_put_topics", "c", ["t"])
        assert not moved()
        node.propose("_put_target_state", "c", "PAUSED")
        assert moved()
        node.propose("_request_restart", "c", False, [0])
        assert moved()
        node.propose("_register_member", "w1", {"roles": ["worker"], "weight": 2.0})
        assert moved()
        node.propose("_delete_connector", "c")
        assert moved()
    finally:
        node.destroy()


def test_reads_are_deep_copies_of_json_shaped_records():
    """The reads use ``json_copy`` instead of ``copy.deepcopy`` (expand=status at scale): same result, and a
    caller changing what it read never changes the replicated state."""
    import copy

    from raftnode.state import ClusterStateMachine, json_copy

    value = {"a": [1, {"b": [2.5, None, True]}, ("t", {"u": "v"})], "c": {"d": {"e": "f"}}, "n": None}
    copied = json_copy(value)
    assert copied == copy.deepcopy(value)
    copied["a"][1]["b"].append(3)
    copied["c"]["d"]["e"] = "changed"
    copied["a"][2][1]["u"] = "changed"
    assert value == {"a": [1, {"b": [2.5, None, True]}, ("t", {"u": "v"})], "c": {"d": {"e": "f"}}, "n": None}

    st = ClusterStateMachine()
    st.connectors["c"] = {"config": {"k": "v"}, "target_state": "STARTED", "tasks": [{"t": "0"}], "created": 1}
    st.statuses["c"] = {"connector": {"state": "RUNNING", "worker_id": "w"}, "tasks": {"0": {"state": "RUNNING"}}}
    st.offsets["c"] = {"p": [{"f": 1}, {"position": 1}]}
    rec, status, offsets = st.connector("c"), st.status("c"), st.connector_offsets("c")
    rec["config"]["k"] = rec["tasks"][0]["t"] = "x"
    status["connector"]["state"] = status["tasks"]["0"]["state"] = "FAILED"
    offsets["p"][1]["position"] = 99
    assert st.connectors["c"]["config"] == {"k": "v"} and st.connectors["c"]["tasks"] == [{"t": "0"}]
    assert st.statuses["c"]["connector"]["state"] == "RUNNING" and st.statuses["c"]["tasks"]["0"]["state"] == "RUNNING"
    assert st.offsets["c"]["p"][1] == {"position": 1}
    snap = st.snapshot()
    snap["connectors"]["c"]["config"]["k"] = "y"
    assert st.connectors["c"]["config"] == {"k": "v"}


def _apply(sm, command: str, *args):
    return getattr(sm, command)(*args, _doApply=True)


def test_assignment_changes_give_the_state_the_whole_assignment_gives():
    """The coordinator commits only what a rebalance changed (``base_generation``); every member must
    reach the state the first journals' whole-assignment entries give, ``assigned_at`` and dropped
    restart counters included."""
    from raftnode.state import ClusterStateMachine

    from webapp.coordinator.assignor import Assignment

    steps = [
        ({"a": "w1", "b": "w2"}, {"a-0": "w1", "a-1": "w2", "b-0": "w2"}),
        ({"a": "w1", "b": "w1", "c": "w2"}, {"a-0": "w1", "a-1": "w1", "b-0": "w2", "c-0": "w2"}),  # b, a-1 move
        ({"a": "w1", "c": "w2"}, {"a-0": "w2", "c-0": "w2", "c-1": "w1"}),  # b dropped, a-0 moves, c-1 new
        ({}, {}),
        ({"a": "w3"}, {"a-0": "w3"}),
    ]
    whole, changes = ClusterStateMachine(), ClusterStateMachine()
    for sm in (whole, changes):
        _apply(sm, "_request_restart", "a", True, [0, 1])
        _apply(sm, "_request_restart", "b", False, [0])
    prev = Assignment({}, {})
    for generation, (connectors, tasks) in enumerate(steps, start=1):
        new = Assignment(connectors, tasks)
        assert _apply(whole, "_set_assignment", 1, generation, connectors, tasks)["ok"]
        c_changes, t_changes = new.changes_from(prev)
        assert _apply(changes, "_set_assignment", 1, generation, c_changes, t_changes, generation - 1)["ok"]
        assert changes.assignment == whole.assignment, generation
        assert changes.restarts == whole.restarts
        assert changes.view_version == whole.view_version
        prev = new
    # changes name only what moved: the last step from nothing gives one connector and one task
    assert Assignment({"a": "w3", "b": "w3"}, {"a-0": "w3"}).changes_from(prev) == ({"b": "w3"}, {})


def test_assignment_changes_against_another_generation_are_refused_and_change_nothing():
    from raftnode.state import ClusterStateMachine

    sm = ClusterStateMachine()
    assert _apply(sm, "_become_coordinator", 1, "n1")["ok"]
    assert _apply(sm, "_set_assignment", 1, 1, {"a": "w1"}, {"a-0": "w1"})["ok"]
    before = dict(sm.assignment)
    refused = _apply(sm, "_set_assignment", 1, 3, {"a": "w2"}, {}, 2)
    assert refused["code"] == 409 and "generation 2" in refused["rejected"] and "committed generation 1" in refused["rejected"]
    assert sm.assignment == before
    stale = _apply(sm, "_set_assignment", 0, 2, {"a": "w2"}, {}, 1)
    assert "stale coordinator epoch" in stale["rejected"] and sm.assignment == before
