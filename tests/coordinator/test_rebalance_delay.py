"""scheduled.rebalance.max.delay.ms: a departed worker's connectors and tasks wait for it before they move.

A real single-member Raft group and coordinator, its clock injected; the loop is not started (each step is
called as the loop calls it).
"""
from __future__ import annotations

import pytest

from raftnode import RaftConfig, RaftNode
from webapp import environment
from webapp.connect import workerconfig
from webapp.coordinator.coordinator import GroupCoordinator
from webapp.kafka.embedded import free_port
from webapp.storage.raft import RaftMetadataStore

MEMBER = {"rest_address": "sim:1", "roles": ["worker"], "weight": 1.0}
SESSION_S = 5.0


@pytest.fixture
def make(tmp_path):
    """``make(delay_ms)`` -> ``(coordinator, clock)``: active, workers w1 and w2 sharing connectors a and b
    (2 tasks each); ``clock`` is a one-item list of the coordinator's time, in seconds."""
    made = []

    def build(delay_ms: int):
        raft = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / f"raft{len(made)}"),
                                   password="test-secret"))
        made.append(raft)
        assert raft.wait_ready(15)
        clock = [1000.0]
        c = GroupCoordinator(raft=raft, store=RaftMetadataStore(raft), node_id="n1", clock=lambda: clock[0],
                             session_timeout_ms=int(SESSION_S * 1000), scheduled_rebalance_max_delay_ms=delay_ms)
        c._activate(raft.term)
        for w in ("w1", "w2"):
            c.heartbeat(w, MEMBER, {})
        store = c.store
        for name in ("a", "b"):
            store.put_connector_config(name, {"connector.class": "X", "tasks.max": "2"})
        c.rebalance()
        a = raft.state.assignment
        for name in ("a", "b"):
            store.put_task_configs(name, [{"task.index": "0"}, {"task.index": "1"}], worker_id=a["connectors"][name],
                                   generation=a["assigned_at"][name])
        c.rebalance()
        assert len(raft.state.assignment["tasks"]) == 4
        assert set(raft.state.assignment["tasks"].values()) == {"w1", "w2"}
        return c, clock

    yield build
    for raft in made:
        raft.destroy()


def owned(c, worker):
    a = c.raft.state.assignment
    return sorted(k for k, w in a["connectors"].items() if w == worker), \
        sorted(k for k, w in a["tasks"].items() if w == worker)


def pass_time(c, clock, seconds, alive=("w1",)):
    """Advance the clock ``seconds`` in steps shorter than a session, heartbeating the ``alive`` workers."""
    end = clock[0] + seconds
    while clock[0] < end:
        clock[0] = min(end, clock[0] + SESSION_S / 2)
        for w in alive:
            c.heartbeat(w, MEMBER, {})
        c.expire_sessions()


def test_a_worker_back_within_the_delay_gets_its_own_back_and_nothing_moves(make):
    c, clock = make(60_000)
    before = dict(c.raft.state.assignment["tasks"]), dict(c.raft.state.assignment["connectors"])
    w2_items = owned(c, "w2")
    assert w2_items != ([], [])
    pass_time(c, clock, SESSION_S * 3)  # w2 silent: its session expires
    assert "w2" not in c.live_workers() and c.held_workers() == ("w2",)
    left = c.held_for()["w2"]  # what GET /raftconnect/v1/cluster shows as the node's reassign_in_s
    assert 60 - SESSION_S * 3 < left < 60
    c.rebalance()
    assert owned(c, "w2") == w2_items  # held for it, not given to w1
    c.heartbeat("w2", MEMBER, {})  # back before the delay ran out
    assert c.held_workers() == ()
    c.rebalance()
    assert (dict(c.raft.state.assignment["tasks"]), dict(c.raft.state.assignment["connectors"])) == before


def test_a_worker_not_back_by_the_end_of_the_delay_loses_its_work(make):
    c, clock = make(60_000)
    pass_time(c, clock, SESSION_S * 3)
    c.rebalance()
    assert c.held_workers() == ("w2",) and owned(c, "w2") != ([], [])
    pass_time(c, clock, 30)
    c.rebalance()
    assert owned(c, "w2") != ([], [])  # half way: still held
    pass_time(c, clock, 31)
    assert c.held_workers() == ()
    c.rebalance()
    assert owned(c, "w2") == ([], []) and owned(c, "w1") == (["a", "b"], ["a-0", "a-1", "b-0", "b-1"])


def test_without_a_delay_the_work_moves_at_once(make):
    c, clock = make(0)
    pass_time(c, clock, SESSION_S * 3)
    assert c.held_workers() == ()
    c.rebalance()
    assert owned(c, "w2") == ([], []) and len(owned(c, "w1")[1]) == 4


def test_a_worker_that_leaves_is_held_too_and_a_deleted_connector_is_not(make):
    c, _ = make(60_000)
    connectors, tasks = owned(c, "w2")
    c.leave("w2")
    assert c.held_workers() == ("w2",)
    gone = (connectors or ["a"])[0]
    c.store.remove_connector_config(gone)
    c.rebalance()
    kept_connectors, kept_tasks = owned(c, "w2")
    assert gone not in kept_connectors and not any(t.startswith(gone + "-") for t in kept_tasks)
    assert set(kept_connectors) == set(connectors) - {gone}
    assert set(kept_tasks) == {t for t in tasks if not t.startswith(gone + "-")}


def test_a_worker_that_owned_nothing_is_not_held(make):
    c, _ = make(60_000)
    for name in ("a", "b"):
        c.store.remove_connector_config(name)
    c.rebalance()
    assert owned(c, "w2") == ([], [])
    c.leave("w2")
    assert c.held_workers() == ()


def test_a_new_leader_gives_grace_instead(make):
    """A new coordinator epoch starts from the committed assignment: its owners get two sessions
    (``_activate``), and one that does not come back is held from its expiry on."""
    c, clock = make(60_000)
    pass_time(c, clock, SESSION_S * 3)
    assert c.held_workers() == ("w2",)
    c._activate(c.raft.term)
    assert c.held_workers() == () and "w2" in c.live_workers()


def test_worker_property_and_environment():
    cfg = workerconfig.worker_config({"scheduled.rebalance.max.delay.ms": "300000"}, environ={})
    assert cfg.env["RAFTCONNECT_SCHEDULED_REBALANCE_MAX_DELAY_MS"] == "300000"
    assert "scheduled.rebalance.max.delay.ms" not in cfg.ignored
    with pytest.raises(workerconfig.PropertiesError, match="scheduled.rebalance.max.delay.ms"):
        workerconfig.worker_config({"scheduled.rebalance.max.delay.ms": "5m"}, environ={})


def test_environment_delay(monkeypatch):
    monkeypatch.delenv("RAFTCONNECT_SCHEDULED_REBALANCE_MAX_DELAY_MS", raising=False)
    assert environment.scheduled_rebalance_max_delay_ms() == 0
    monkeypatch.setenv("RAFTCONNECT_SCHEDULED_REBALANCE_MAX_DELAY_MS", "-3")
    with pytest.raises(ValueError, match=">= 0"):
        environment.scheduled_rebalance_max_delay_ms()


def test_a_worker_back_as_a_new_process_gets_its_own_back_granted_anew(make):
    """A rolling restart: the agent comes back as a new process (another incarnation) within the delay. Its
    held connectors and tasks stay its own and are granted anew, so its old process's late writes are fenced."""
    c, clock = make(60_000)
    c.heartbeat("w2", {**MEMBER, "incarnation": "first"}, {})
    before = dict(c.raft.state.assignment["tasks"])
    mine = owned(c, "w2")
    granted = {k: g for k, g in c.raft.state.assignment["assigned_at"].items()}
    pass_time(c, clock, SESSION_S * 3)
    c.rebalance()
    assert c.held_workers() == ("w2",)
    c.heartbeat("w2", {**MEMBER, "incarnation": "second"}, {})
    c.rebalance()
    assert owned(c, "w2") == mine and dict(c.raft.state.assignment["tasks"]) == before
    after = c.raft.state.assignment["assigned_at"]
    assert all(after[k] > granted[k] for k in mine[1])  # granted anew: a newer generation than before
