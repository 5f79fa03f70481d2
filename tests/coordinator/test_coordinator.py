"""GroupCoordinator on a real single-member Raft group with the Raft metadata store (no agent, no REST).

What the scale benchmark changed: a worker's view is rebuilt only when something it is made of
changed (not on every status report or offset commit), and views are cut from one index of the
assignment per generation.
"""
from __future__ import annotations

import pytest

from raftnode import RaftConfig, RaftNode
from tools.launcher import wait_for
from webapp.plugin import ConnectorTaskId, SourceOffset
from webapp.coordinator.coordinator import GroupCoordinator
from webapp.coordinator.views import Owned
from webapp.kafka.embedded import free_port
from webapp.storage.raft import RaftMetadataStore

MEMBER = {"rest_address": "sim:1", "roles": ["worker"], "weight": 1.0}


@pytest.fixture
def cluster(lone_raft):
    raft = lone_raft
    store = RaftMetadataStore(raft)
    coordinator = GroupCoordinator(raft=raft, store=store, node_id="n1")
    coordinator.on_leader_change(True, raft.term)
    coordinator.start()
    wait_for(lambda: coordinator.active, 15, interval=0.02, what="the coordinator to become active")
    yield raft, store, coordinator
    coordinator.stop()


def _setup(store, coordinator, workers, connectors):
    """Join ``workers``, create ``connectors`` ({name: task count}) with their task configs; returns the
    assignment once every task is assigned."""
    for w in workers:
        coordinator.heartbeat(w, MEMBER, {})
    for name in connectors:
        store.put_connector_config(name, {"connector.class": "X", "tasks.max": str(connectors[name])})
    coordinator.rebalance()
    a = store.raft.state.assignment
    for name, n in connectors.items():
        store.put_task_configs(name, [{"task.index": str(i)} for i in range(n)], worker_id=a["connectors"][name],
                               generation=a["assigned_at"][name])
    coordinator.rebalance()
    a = store.raft.state.assignment
    assert len(a["tasks"]) == sum(connectors.values())
    return a


def _counting(coordinator, monkeypatch) -> list[str]:
    """Worker ids whose views are (re)assembled from now on."""
    built: list[str] = []
    real = coordinator.views.build

    def build(worker_id, *args, **kw):
        built.append(worker_id)
        return real(worker_id, *args, **kw)

    monkeypatch.setattr(coordinator.views, "build", build)
    return built


def _reads(coordinator, monkeypatch) -> list[str]:
    """Connector names read from the store from now on through the record cache the views and the
    rebalance share (the coordinator loop's rebalance runs in its own thread whenever it is woken, so
    both may miss the cache for the same change at once: tests compare sets where that can happen)."""
    reads: list[str] = []
    store = coordinator.views.store

    class Counting:
        def __getattr__(self, attr):
            return getattr(store, attr)

        def get_connector(self, name):
            reads.append(name)
            return store.get_connector(name)

    monkeypatch.setattr(coordinator.views, "store", Counting())
    return reads


def test_status_reports_and_offset_commits_do_not_rebuild_views_but_config_changes_do(cluster, monkeypatch):
    raft, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1", "w2"], {"a": 2, "b": 1})
    first = coordinator.heartbeat("w1", MEMBER, {})
    key = next(iter(first["tasks"]))
    name, num = first["tasks"][key]["connector"], first["tasks"][key]["task"]
    generation = first["tasks"][key]["generation"]
    built = _counting(coordinator, monkeypatch)

    # the log moves (a status, an offset commit), the views do not
    store.put_status(name, num, {"state": "RUNNING", "trace": None}, worker_id="w1", generation=generation)
    store.commit_offsets(ConnectorTaskId(name, num), [SourceOffset({"f": "x"}, {"position": 3})], worker_id="w1",
                         generation=generation)
    again = coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})
    assert again["unchanged"] is True and again["digest"] == first["digest"]
    assert built == []

    # new task configs of a connector of w1 are in its next view
    owner = a["connectors"][name]
    store.put_task_configs(name, [{"task.index": str(i), "v": "2"} for i in range(2)], worker_id=owner,
                           generation=a["assigned_at"][name])
    changed = coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})
    assert "unchanged" not in changed and changed["digest"] != first["digest"]
    assert changed["tasks"][key]["config"]["v"] == "2"
    assert built == ["w1"]

    # so is a restart request of its task
    raft.commands.request_restart(name=name, connector=False, tasks=[num])
    restarted = coordinator.heartbeat("w1", MEMBER, {"view_digest": changed["digest"]})
    assert restarted["tasks"][key]["restart"] == 1
    assert built == ["w1", "w1"]


def test_a_heartbeat_after_no_change_skips_even_the_marker_and_one_after_another_workers_change_skips_the_build(
        cluster, monkeypatch):
    """The marker looks up every connector and task of the worker; it is computed only when the assignment,
    a poke, or a connector of the worker's view moved since the cached view was checked (benchmarks/scale:
    a third of the leader's time was heartbeats that changed nothing, and while connectors were created,
    18% was markers of views that no create touched)."""
    raft, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1", "w2"], {"a": 1, "b": 1})
    mine = next(n for n, w in a["connectors"].items() if w == "w1")
    other = next(n for n, w in a["connectors"].items() if w == "w2")
    first = coordinator.heartbeat("w1", MEMBER, {})
    built = _counting(coordinator, monkeypatch)
    markers: list[str] = []
    real = coordinator._worker_marker
    monkeypatch.setattr(coordinator, "_worker_marker", lambda worker_id, *a: markers.append(worker_id) or real(worker_id, *a))

    store.put_status(mine, 0, {"state": "RUNNING", "trace": None}, worker_id="w1",
                     generation=raft.state.assignment["generation"])
    assert coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})["unchanged"] is True
    assert (markers, built) == ([], [])  # nothing a view is made of moved: not even the marker

    # (a change of task configs grants the connector's tasks anew at a new generation, which every view
    # names: a config change of another worker's connector moves the state without one)
    store.put_connector_config(other, {"connector.class": "X", "tasks.max": "1", "v": "2"})
    coordinator.poke(other)  # as the Herder does after each write
    raft.commands.register_member(node_id="w3", info=MEMBER)  # moves view_version too, names no connector
    assert coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})["unchanged"] is True
    assert (markers, built) == ([], [])  # the state moved for another worker's connector: not the marker
    assert coordinator.heartbeat("w2", MEMBER, {})["connectors"][other]["config"]["v"] == "2"
    markers.clear(), built.clear()  # (w2's view holds it: checked and rebuilt)

    # a change of a connector w1's view holds is seen, from its config (that part made again, from the
    # logs: no marker) ...
    store.put_connector_config(mine, {"connector.class": "X", "tasks.max": "1", "v": "2"})
    changed = coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})
    assert markers == [] and built == ["w1"] and changed["connectors"][mine]["config"]["v"] == "2"
    assert coordinator.heartbeat("w1", MEMBER, {"view_digest": changed["digest"]})["unchanged"] is True
    assert built == ["w1"]  # and made once

    # ... and from a restart request of its task (a restart counter, no record)
    raft.commands.request_restart(name=mine, connector=False, tasks=[0])
    restarted = coordinator.heartbeat("w1", MEMBER, {"view_digest": changed["digest"]})
    assert built == ["w1", "w1"] and restarted["tasks"][f"{mine}-0"]["restart"] == 1

    # a poke alone (a store other than Raft changes without a Raft write) for its connector, or for any
    # (which the log cannot narrow: the marker decides)
    coordinator.poke(mine)
    coordinator.heartbeat("w1", MEMBER, {"view_digest": restarted["digest"]})
    assert built == ["w1"] * 3 and markers == []
    coordinator.poke()
    coordinator.heartbeat("w1", MEMBER, {"view_digest": restarted["digest"]})
    assert markers == ["w1"]


def test_a_heartbeat_checks_the_marker_when_the_log_of_changes_does_not_reach_back(cluster, monkeypatch):
    """Past VIEW_CHANGES_KEPT changes, or after a change that may touch every view, the state cannot say
    which connectors moved: the marker is computed, and decides."""
    raft, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1", "w2"], {"a": 1, "b": 1})
    other = next(n for n, w in a["connectors"].items() if w == "w2")
    first = coordinator.heartbeat("w1", MEMBER, {})
    markers: list[str] = []
    real = coordinator._worker_marker
    monkeypatch.setattr(coordinator, "_worker_marker", lambda worker_id, *a: markers.append(worker_id) or real(worker_id, *a))
    monkeypatch.setattr(raft.state._view_changes, "kept", 2)
    assignment, before = raft.state.assignment, raft.state.view_version
    for v in range(3):
        store.put_connector_config(other, {"connector.class": "X", "tasks.max": "1", "v": str(v)})
    assert raft.state.view_changes_since(before) is None
    assert raft.state.view_changes_since(raft.state.view_version - 1) == {other}
    assert coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})["unchanged"] is True
    assert markers == ["w1"] and raft.state.assignment is assignment  # the log, not a new generation

    raft.state._views_changed()  # what imports, clears and the active store's changes call
    assert raft.state.view_changes_since(raft.state.view_version - 1) is None
    coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})
    assert markers == ["w1", "w1"]


def test_a_poke_rebuilds_views(cluster, monkeypatch):
    """A store other than Raft changes without a Raft write: the Herder's poke must still be seen."""
    _, store, coordinator = cluster
    _setup(store, coordinator, ["w1"], {"a": 1})
    first = coordinator.heartbeat("w1", MEMBER, {})
    built = _counting(coordinator, monkeypatch)
    reads = _reads(coordinator, monkeypatch)
    coordinator.poke()
    again = coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})
    assert built == ["w1"] and set(reads) == {"a"}
    assert again["unchanged"] is True  # rebuilt, and the same content gives the same digest


def test_a_poke_for_one_connector_rereads_that_connector_in_the_views_naming_it_only(cluster, monkeypatch):
    _, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1", "w2"], {"a": 2, "b": 2, "c": 2, "d": 2})
    first = {w: coordinator.heartbeat(w, MEMBER, {}) for w in ("w1", "w2")}
    name = next(n for n, o in a["connectors"].items() if o == "w1")
    named = {w for w, v in first.items() if name in v["connectors"] or any(
        t["connector"] == name for t in v["tasks"].values())}
    built, reads = _counting(coordinator, monkeypatch), _reads(coordinator, monkeypatch)
    coordinator.poke(name)
    again = {w: coordinator.heartbeat(w, MEMBER, {"view_digest": first[w]["digest"]}) for w in ("w1", "w2")}
    assert set(reads) == {name}  # read again for the views naming it, not once per view
    assert sorted(built) == sorted(named)
    assert all(v["unchanged"] is True for v in again.values())


def test_a_new_generation_reassembles_views_from_the_fragments_it_has(cluster, monkeypatch):
    """At 10,000 connectors every generation moved every view, and each rebuild copied every record of
    the worker out of the store (half of the leader's time in benchmarks/scale)."""
    raft, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1"], {"a": 2, "b": 1})
    first = coordinator.heartbeat("w1", MEMBER, {})
    reads = _reads(coordinator, monkeypatch)
    store.put_connector_config("z", {"connector.class": "X", "tasks.max": "1"})
    coordinator.rebalance()
    after = raft.state.assignment
    assert after["generation"] > a["generation"] and after["connectors"]["z"] == "w1"
    view = coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})
    assert set(reads) == {"z"}  # the new connector only, by the rebalance or the view: not a nor b again
    assert "unchanged" not in view and view["generation"] == after["generation"]
    assert set(view["connectors"]) == {"a", "b", "z"} and set(view["tasks"]) == set(first["tasks"])
    # the reassembled view is the one a fresh builder makes from nothing
    coordinator.views.clear()
    coordinator._views.clear()
    fresh = coordinator.heartbeat("w1", MEMBER, {})
    assert fresh["digest"] == view["digest"]
    assert {k: fresh[k] for k in ("connectors", "tasks")} == {k: view[k] for k in ("connectors", "tasks")}


def test_views_cut_the_assignment_into_disjoint_complete_parts(cluster):
    raft, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1", "w2", "w3"], {"a": 3, "b": 2, "c": 4})
    views = {w: coordinator.heartbeat(w, MEMBER, {}) for w in ("w1", "w2", "w3")}
    tasks = [k for v in views.values() for k in v["tasks"]]
    assert sorted(tasks) == sorted(a["tasks"])  # every task once
    assert sorted(c for v in views.values() for c in v["connectors"]) == sorted(a["connectors"])
    for w, v in views.items():
        for key, t in v["tasks"].items():
            assert a["tasks"][key] == w
            assert t["config"] == {"connector.class": "X", "tasks.max": store.get_connector(t["connector"]).config[
                "tasks.max"], "task.index": str(t["task"])}
            assert t["generation"] == a["assigned_at"][key]
    # a worker leaves: the next generation's views are cut from the new assignment, not a stale index
    coordinator.leave("w3")
    after = raft.state.assignment
    assert after["generation"] > a["generation"]
    views = {w: coordinator.heartbeat(w, MEMBER, {}) for w in ("w1", "w2")}
    assert sorted(k for v in views.values() for k in v["tasks"]) == sorted(after["tasks"])
    assert all(after["tasks"][k] == w for w, v in views.items() for k in v["tasks"])


def test_a_new_coordinator_gives_grace_to_workers_with_work_not_to_every_registered_member(cluster):
    """Members stay registered after their session expired: a new leader that counted them live moved
    tasks onto dead workers and back again once their grace ran out."""
    raft, store, coordinator = cluster
    _setup(store, coordinator, ["w1", "w2", "w3"], {"a": 3, "b": 3})
    coordinator.leave("w3")  # as an expired session: still a registered member, owns nothing now
    before = dict(raft.state.assignment["tasks"])
    assert "w3" in raft.state.members and "w3" not in before.values()
    assert {"w1", "w2"} == set(before.values())

    coordinator.on_leader_change(False, raft.term)  # a leader change: the next activation starts afresh
    coordinator.on_leader_change(True, raft.term)
    wait_for(lambda: coordinator.active, 15, interval=0.02, what="the coordinator to become active again")
    assert set(coordinator.live_workers()) == {"w1", "w2"}
    coordinator.rebalance()
    assert raft.state.assignment["tasks"] == before  # nothing moved onto w3

    # a live worker that owns nothing joins with its next heartbeat, and gets work then
    coordinator.heartbeat("w3", MEMBER, {})
    assert "w3" in set(raft.state.assignment["tasks"].values())


def test_a_connector_change_rebuilds_only_the_views_that_name_it(cluster, monkeypatch):
    raft, store, coordinator = cluster
    workers = ["w1", "w2", "w3"]
    a = _setup(store, coordinator, workers, {f"s{i}": 1 for i in range(6)})
    views = {w: coordinator.heartbeat(w, MEMBER, {}) for w in workers}

    def named(view, name):
        return name in view["connectors"] or any(t["connector"] == name for t in view["tasks"].values())

    # a one-task connector is in at most two views (its instance's and its task's)
    name = next(n for n in (f"s{i}" for i in range(6)) if sum(named(v, n) for v in views.values()) < 3)
    built = _counting(coordinator, monkeypatch)
    # (new task configs grant the connector's tasks anew at a new generation, which every view names)
    store.put_connector_config(name, {"connector.class": "X", "tasks.max": "1", "v": "2"})
    after = {w: coordinator.heartbeat(w, MEMBER, {"view_digest": views[w]["digest"]}) for w in workers}
    concerned = {w for w in workers if named(views[w], name)}
    assert sorted(built) == sorted(concerned)
    for w in workers:
        assert ("unchanged" in after[w]) is (w not in concerned)
    task_owner = a["tasks"][f"{name}-0"]
    assert after[task_owner]["tasks"][f"{name}-0"]["config"]["v"] == "2"


def test_cached_records_and_pokes_of_a_deleted_connector_are_dropped_with_the_next_generation(cluster):
    """The view caches are bounded by the assignment: connectors created and deleted under one leader
    leave nothing behind."""
    raft, store, coordinator = cluster
    _setup(store, coordinator, ["w1"], {"a": 1, "b": 1})
    coordinator.heartbeat("w1", MEMBER, {})
    coordinator.poke("a")
    assert {"a", "b"} <= set(coordinator.views._records) and "a" in coordinator.views._pokes
    store.remove_connector_config("a")
    coordinator.rebalance()
    view = coordinator.heartbeat("w1", MEMBER, {})
    assert set(view["connectors"]) == {"b"}
    assert "a" not in coordinator.views._records and "a" not in coordinator.views._pokes


def test_a_rebalance_reads_only_changed_connectors_and_commits_only_what_moved(cluster, monkeypatch):
    """At 10,000 connectors × 10 tasks each rebalance copied every record out of the store (0.3 s) and
    committed the whole assignment (a 4 MB entry every member applied) after every create."""
    raft, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1", "w2"], {f"s{i}": 3 for i in range(8)})
    committed = []
    real = raft.commands.set_assignment

    def set_assignment(**kwargs):
        committed.append(kwargs)
        return real(**kwargs)

    monkeypatch.setattr(raft.commands, "set_assignment", set_assignment)
    reads = _reads(coordinator, monkeypatch)
    store.put_connector_config("new", {"connector.class": "X", "tasks.max": "2"})
    coordinator.rebalance()
    wait_for(lambda: raft.state.assignment["generation"] > a["generation"], 15, interval=0.02,
             what="the generation with the new connector")
    assert set(reads) == {"new"}
    first = committed[0]
    assert first["base_generation"] == a["generation"]
    assert first["connectors"] == {"new": raft.state.assignment["connectors"]["new"]} and first["tasks"] == {}
    # its task configs: two new task keys; dropping a connector: its keys leave, as None
    owner = raft.state.assignment["connectors"]["new"]
    store.put_task_configs("new", [{"task.index": "0"}, {"task.index": "1"}], worker_id=owner,
                           generation=raft.state.assignment["assigned_at"]["new"])
    coordinator.rebalance()
    wait_for(lambda: "new-1" in raft.state.assignment["tasks"], 15, interval=0.02, what="the new tasks assigned")
    assert set(committed[-1]["tasks"]) == {"new-0", "new-1"} and committed[-1]["connectors"] == {}
    store.remove_connector_config("s0")
    coordinator.rebalance()
    wait_for(lambda: "s0" not in raft.state.assignment["connectors"], 15, interval=0.02, what="s0 unassigned")
    last = committed[-1]
    # the dropped keys as None, plus what the new quotas moved (a few items, never the whole assignment)
    assert {k for k, w in last["connectors"].items() if w is None} == {"s0"}
    assert {k for k, w in last["tasks"].items() if w is None} == {"s0-0", "s0-1", "s0-2"}
    assert len(last["connectors"]) + len(last["tasks"]) <= 4 + 2
    assert set(reads) == {"new"}  # s0 is gone: no longer listed, so not read
    # the committed state is the one a whole assignment gives
    assert sorted(raft.state.assignment["tasks"]) == sorted(
        [f"s{i}-{t}" for i in range(1, 8) for t in range(3)] + ["new-0", "new-1"])
    assert set(raft.state.assignment["assigned_at"]) == set(raft.state.assignment["tasks"]) | set(
        raft.state.assignment["connectors"])


def test_heartbeats_and_reports_are_answered_while_a_generation_is_being_committed(cluster, monkeypatch):
    """The rebalance held the coordinator's lock across its Raft commit, so every heartbeat, status report
    and offset commit of every worker waited behind it (0.5 s heartbeats at 10,000 connectors)."""
    import threading

    raft, store, coordinator = cluster
    _setup(store, coordinator, ["w1", "w2"], {"a": 2})
    committing, release = threading.Event(), threading.Event()
    real = raft.commands.set_assignment

    def set_assignment(**kwargs):
        committing.set()
        assert release.wait(30), "the test never released the commit"
        return real(**kwargs)

    monkeypatch.setattr(raft.commands, "set_assignment", set_assignment)
    store.put_connector_config("b", {"connector.class": "X", "tasks.max": "1"})
    rebalancing = threading.Thread(target=coordinator.rebalance)
    rebalancing.start()
    try:
        assert committing.wait(15), "the rebalance did not reach its commit"
        answered = threading.Event()

        def worker():
            coordinator.touch("w1")
            coordinator.heartbeat("w2", MEMBER, {})
            answered.set()

        threading.Thread(target=worker, daemon=True).start()
        assert answered.wait(15), "a heartbeat waited for the generation's commit"
        assert not release.is_set()  # still committing when it was answered
    finally:
        release.set()
        rebalancing.join(30)
    wait_for(lambda: "b" in raft.state.assignment["connectors"], 15, interval=0.02, what="the generation with b")


def test_the_raft_thread_never_waits_for_the_coordinator(cluster):
    """on_leader_change runs on the Raft thread: it took the lock a rebalance held across its commit, so
    a leader losing its leadership mid-commit stopped answering Raft for the commit's 10 s timeout."""
    import threading

    raft, store, coordinator = cluster
    held, release = threading.Event(), threading.Event()

    def hold_everything():
        with coordinator._rebalance_lock, coordinator._lock:
            held.set()
            release.wait(30)

    holder = threading.Thread(target=hold_everything)
    holder.start()
    try:
        assert held.wait(15)
        done = threading.Event()

        def raft_thread():
            coordinator.on_leader_change(False, raft.term)
            done.set()

        threading.Thread(target=raft_thread, daemon=True).start()
        assert done.wait(15), "on_leader_change waited for a coordinator lock"
        assert coordinator.epoch is None and not coordinator.active
    finally:
        release.set()
        holder.join(30)


def test_a_new_coordinator_waits_two_sessions_for_the_workers_of_the_assignment(tmp_path):
    """After a leader change every worker must find the new leader while all rejoin at once: one session
    was too short at 100 workers (4,324 tasks moved away and back in benchmarks/scale)."""
    raft = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "raft"),
                               password="test-secret"))
    now = [1000.0]
    coordinator = GroupCoordinator(raft=raft, store=RaftMetadataStore(raft), node_id="n1", clock=lambda: now[0],
                                   session_timeout_ms=5000)
    try:
        assert raft.wait_ready(15)
        store = coordinator.store
        raft.commands.become_coordinator(epoch=raft.term, leader="n1")
        raft.commands.register_member(node_id="w1", info=MEMBER)
        store.put_connector_config("a", {"connector.class": "X"})
        raft.commands.set_assignment(epoch=raft.term, generation=1, connectors={"a": "w1"}, tasks={})
        coordinator._activate(raft.term)
        now[0] += 1.5 * coordinator.session_timeout  # silent past one session: still in its grace
        assert coordinator.expire_sessions() == [] and "w1" in coordinator.live_workers()
        now[0] += coordinator.session_timeout  # past two sessions: expired
        assert coordinator.expire_sessions() == ["w1"]
    finally:
        raft.destroy()


def _lead_again(raft, coordinator) -> None:
    """A leader change back to this member: a new coordinator epoch (as after a lost and regained election)."""
    coordinator.on_leader_change(False, raft.term)
    coordinator.on_leader_change(True, raft.term)
    wait_for(lambda: coordinator.active, 15, interval=0.02, what="the coordinator to become active again")


def test_a_new_epoch_keeps_the_cached_records_on_the_raft_store_unless_a_snapshot_replaced_the_state(
        cluster, monkeypatch):
    """Record keys are replicated versions, right on every member: a new leader rebuilt every view cold
    (~4 s of CPU at 10,000 connectors, at each election). Not after a snapshot replaced the state."""
    raft, store, coordinator = cluster
    _setup(store, coordinator, ["w1", "w2"], {"a": 2, "b": 1})
    first = {w: coordinator.heartbeat(w, MEMBER, {}) for w in ("w1", "w2")}
    reads = _reads(coordinator, monkeypatch)
    _lead_again(raft, coordinator)
    again = {w: coordinator.heartbeat(w, MEMBER, {}) for w in ("w1", "w2")}
    assert reads == []  # reassembled from the fragments it had
    for w in ("w1", "w2"):
        assert {k: again[w][k] for k in ("connectors", "tasks")} == {k: first[w][k] for k in ("connectors", "tasks")}
    # a snapshot installed while following replaces the state's dicts: everything is read again
    raft.state.connectors = dict(raft.state.connectors)
    _lead_again(raft, coordinator)
    coordinator.heartbeat("w1", MEMBER, {})
    assert reads and set(reads) <= {"a", "b"}, "the records were not read again after the state was replaced"
    # another store active: its writes on another leader never poked this member, nothing is kept
    assert coordinator.views.still_valid(raft_store_active=True)
    assert not coordinator.views.still_valid(raft_store_active=False)


def test_a_task_config_is_the_connector_config_overlaid_with_the_task_config(cluster):
    """The view's task config is ``{**connector config, **task config}``; a task config that already holds
    every connector key (as most connectors' do) is sent as it is, its own values winning."""
    raft, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1"], {"partial": 1, "whole": 1})
    connector = {"connector.class": "X", "tasks.max": "1"}
    store.put_task_configs("whole", [dict(connector, **{"tasks.max": "override", "task.index": "0"})],
                           worker_id="w1", generation=a["assigned_at"]["whole"])
    coordinator.rebalance()
    view = coordinator.worker_view("w1")
    assert view["tasks"]["partial-0"]["config"] == {**connector, "task.index": "0"}
    assert view["tasks"]["whole-0"]["config"] == {"connector.class": "X", "tasks.max": "override", "task.index": "0"}
    assert view["connectors"]["whole"]["config"] == connector


# ------------------------------------------------------------------ instances granted anew
def _commit(store, key, view, generation, position):
    """Commit ``position`` for file ``f`` as task ``key`` of ``view`` at ``generation``."""
    t = view["tasks"][key]
    store.commit_offsets(ConnectorTaskId(t["connector"], t["task"]), [SourceOffset({"f": "f"}, {"position": position})],
                         worker_id=view["worker_id"], generation=generation)


def test_a_worker_back_as_a_new_process_is_granted_its_instances_anew_before_its_view(cluster):
    from webapp.storage.base import FencedWrite

    raft, store, coordinator = cluster
    _setup(store, coordinator, ["w1", "w2"], {"a": 2, "b": 2})
    other = coordinator.heartbeat("w2", {**MEMBER, "incarnation": "x"}, {})
    old = coordinator.heartbeat("w1", {**MEMBER, "incarnation": "one"}, {})
    key = next(iter(old["tasks"]))
    # the same process again: nothing is granted anew
    assert coordinator.heartbeat("w1", {**MEMBER, "incarnation": "one"}, {})["generation"] == old["generation"]
    # killed and back within its session: its first heartbeat already answers with every instance re-granted
    new = coordinator.heartbeat("w1", {**MEMBER, "incarnation": "two"}, {})
    assert new["generation"] == old["generation"] + 1
    assert set(new["tasks"]) == set(old["tasks"]) and set(new["connectors"]) == set(old["connectors"])
    assert all(t["generation"] == new["generation"] for t in new["tasks"].values())
    assert all(c["generation"] == new["generation"] for c in new["connectors"].values())
    assert raft.state.members["w1"]["incarnation"] == "two"
    # what the old process left in flight is refused; the new process and the other worker write
    with pytest.raises(FencedWrite, match="stale generation"):
        _commit(store, key, old, old["tasks"][key]["generation"], 5)
    _commit(store, key, new, new["tasks"][key]["generation"], 5)
    other_key = next(iter(other["tasks"]))
    _commit(store, other_key, other, other["tasks"][other_key]["generation"], 6)
    assert coordinator.heartbeat("w2", {**MEMBER, "incarnation": "x"}, {})["tasks"][other_key]["generation"] \
        == other["tasks"][other_key]["generation"]


def test_an_agent_that_sends_no_incarnation_is_never_granted_anew(cluster):
    raft, store, coordinator = cluster
    _setup(store, coordinator, ["w1"], {"a": 1})
    first = coordinator.heartbeat("w1", {**MEMBER, "incarnation": "one"}, {})
    assert coordinator.heartbeat("w1", MEMBER, {})["generation"] == first["generation"]
    assert raft.state.members["w1"]["incarnation"] == "one"


def test_changed_task_configs_reach_the_views_with_every_task_of_the_connector_granted_anew(cluster):
    from webapp.storage.base import FencedWrite

    raft, store, coordinator = cluster
    a = _setup(store, coordinator, ["w1", "w2"], {"a": 3, "b": 1})
    before = {w: coordinator.heartbeat(w, MEMBER, {}) for w in ("w1", "w2")}
    store.put_task_configs("a", [{"task.index": str(2 - i)} for i in range(3)], worker_id=a["connectors"]["a"],
                           generation=a["assigned_at"]["a"])
    after = {w: coordinator.heartbeat(w, MEMBER, {}) for w in ("w1", "w2")}
    generation = raft.state.assignment["generation"]
    assert generation == a["generation"] + 1
    for w in ("w1", "w2"):
        for key, t in after[w]["tasks"].items():
            assert t["generation"] == (generation if t["connector"] == "a" else before[w]["tasks"][key]["generation"])
    w, key = next((w, k) for w in ("w1", "w2") for k in before[w]["tasks"] if k.startswith("a-"))
    with pytest.raises(FencedWrite, match="stale generation"):
        _commit(store, key, before[w], before[w]["tasks"][key]["generation"], 1)


def test_threads_meeting_a_new_assignment_build_its_owner_index_once(cluster):
    """Every heartbeat thread that met a new generation built the owner index of 100,000 tasks itself,
    10% of the leader's time while tasks were being started (benchmarks/scale)."""
    import threading
    import time

    raft, store, coordinator = cluster
    walks: list[int] = []

    class Slow(dict):
        def items(self):
            walks.append(1)
            time.sleep(0.05)  # a long walk, for the other threads to arrive meanwhile
            return super().items()

    assignment = {"generation": 7, "epoch": 1, "connectors": Slow(a="w1", b="w2"),
                  "tasks": {"a-0": "w2", "b-0": "w1", "b-1": "w1"}, "assigned_at": {}}
    barrier = threading.Barrier(8)
    got = []

    def ask():
        barrier.wait()
        got.append(coordinator._owned(assignment))

    threads = [threading.Thread(target=ask) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(10)
    assert len(got) == 8 and all(index is got[0] for index in got)
    assert got[0] == {
        "w1": Owned(["a"], ["b-0", "b-1"], ["a", "b"], frozenset("ab"), frozenset("a"), {"b": (0, 1)}),
        "w2": Owned(["b"], ["a-0"], ["a", "b"], frozenset("ab"), frozenset("b"), {"a": (0,)}),
    }
    assert len(walks) == 1


def test_a_generation_that_places_instances_on_a_worker_makes_only_their_connectors_parts_again(cluster, monkeypatch):
    """While 100,000 tasks were placed, each generation gave most workers a few instances, and each of
    their views was checked and built by looking up every connector and task it held (benchmarks/scale)."""
    raft, store, coordinator = cluster
    coordinator.stop()  # this test drives the rebalances itself
    _setup(store, coordinator, ["w1"], {"a": 2, "b": 1, "c": 1})
    first = coordinator.heartbeat("w1", MEMBER, {})
    store.put_connector_config("z", {"connector.class": "X", "tasks.max": "1"})
    assert coordinator.rebalance() and raft.state.assignment["connectors"]["z"] == "w1"
    looked_up: list[str] = []
    real_key = coordinator.views.record_key
    monkeypatch.setattr(coordinator.views, "record_key", lambda name: looked_up.append(name) or real_key(name))
    markers: list[str] = []
    real_marker = coordinator._worker_marker
    monkeypatch.setattr(coordinator, "_worker_marker", lambda worker_id, *a: markers.append(worker_id)
                        or real_marker(worker_id, *a))
    view = coordinator.heartbeat("w1", MEMBER, {"view_digest": first["digest"]})
    assert set(looked_up) == {"z"} and markers == []
    assert set(view["connectors"]) == {"a", "b", "c", "z"} and set(view["tasks"]) == set(first["tasks"])
    # the view made from parts is the one a fresh builder makes from nothing
    coordinator.views.clear()
    coordinator._views.clear()
    fresh = coordinator.heartbeat("w1", MEMBER, {})
    assert fresh["digest"] == view["digest"]
    assert {k: fresh[k] for k in ("connectors", "tasks")} == {k: view[k] for k in ("connectors", "tasks")}


def test_the_rest_after_a_rebalance_keeps_the_loop_to_a_quarter_of_the_time():
    from webapp.coordinator.coordinator import REBALANCE_REST_MAX_S, rest_after

    assert rest_after(0.1) == pytest.approx(0.3)  # 0.1 s of work in every 0.4 s
    assert rest_after(0.002) == pytest.approx(0.006)
    assert rest_after(10.0) == REBALANCE_REST_MAX_S
    assert rest_after(-1.0) == 0.0  # a clock that went back


def test_the_loop_rests_after_a_costly_rebalance_and_gathers_what_came_meanwhile(cluster, monkeypatch):
    """While 10,000 connectors were created, cheaper views let the loop start each generation as soon as
    the last was dispatched: generations came twice as often and the bring-up took longer
    (benchmarks/scale). A rebalance that cost its thread CPU makes the loop rest three times as long
    (at most REBALANCE_REST_MAX_S), and what comes meanwhile waits for the end of the rest."""
    import time

    raft, store, coordinator = cluster
    cpu = iter(range(0, 10**9, 1000))  # every rebalance and dispatch "costs" 1,000 s of CPU: the longest rest
    calls: list[tuple[float, float]] = []  # (when the loop's rebalance began, the rest it was under)
    real = coordinator.rebalance

    def counted() -> bool:
        calls.append((time.monotonic(), coordinator._rest_until))
        return real()

    coordinator.heartbeat("w1", MEMBER, {})
    monkeypatch.setattr(coordinator, "cpu_clock", lambda: next(cpu))
    monkeypatch.setattr(coordinator, "rebalance", counted)
    for name in ("a", "b"):
        store.put_connector_config(name, {"connector.class": "X", "tasks.max": "1"})
        coordinator.poke(name)
        wait_for(lambda: name in raft.state.assignment["connectors"], 10, interval=0.02, what=f"{name} assigned")
    rested = [(began, until) for began, until in calls if until > 0]
    assert rested and all(began >= until for began, until in rested)
