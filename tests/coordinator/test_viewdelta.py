"""Heartbeat answers as view deltas (``webapp.coordinator.viewdelta``): a delta applied to the view the
worker holds is exactly the whole view, and one that does not fit the view held is refused."""
from __future__ import annotations

import copy
import threading

from webapp.coordinator.viewdelta import DELTA_FROM, apply_view_delta, delta_answer

from .test_coordinator import MEMBER, _setup, cluster  # noqa: F401 - the fixture


def _view(digest, generation, connectors, tasks):
    return {"worker_id": "w1", "generation": generation, "epoch": 3, "digest": digest,
            "connectors": connectors, "tasks": tasks}


def test_a_delta_applied_to_the_view_it_is_from_gives_the_whole_view_and_holds_only_what_changed():
    shared = {"connector": "b", "task": 0, "config": {"k": "v"}, "generation": 4}
    before = _view("d1", 7, {"a": {"config": {"x": "1"}}, "gone": {"config": {}}},
                   {"a-0": {"connector": "a", "task": 0, "generation": 5}, "b-0": shared,
                    "gone-0": {"connector": "gone", "task": 0, "generation": 5}})
    after = _view("d2", 9, {"a": {"config": {"x": "2"}}, "new": {"config": {"y": "1"}}},
                  {"a-0": {"connector": "a", "task": 0, "generation": 5},  # equal, another object
                   "b-0": shared, "new-0": {"connector": "new", "task": 0, "generation": 9},
                   "new-1": {"connector": "new", "task": 1, "generation": 9}})
    held = copy.deepcopy(before)
    answer = delta_answer(before, after, {"worker_id": "w1", "generation": 9, "epoch": 3, "digest": "d2",
                                          DELTA_FROM: "d1", "session_timeout_ms": 5000})
    assert answer["connectors"] == {"a": {"config": {"x": "2"}}, "new": {"config": {"y": "1"}}}
    assert sorted(answer["tasks"]) == ["new-0", "new-1"]  # a-0 is equal, b-0 the same object
    assert answer["removed_connectors"] == ["gone"] and answer["removed_tasks"] == ["gone-0"]

    whole = apply_view_delta(held, answer)
    assert whole == {**after, "session_timeout_ms": 5000}
    assert held == before  # the view held is not changed


def test_a_delta_is_refused_by_any_view_but_the_one_it_is_from():
    answer = {"worker_id": "w1", "generation": 9, "epoch": 3, "digest": "d2", DELTA_FROM: "d1",
              "connectors": {}, "tasks": {}, "removed_connectors": [], "removed_tasks": []}
    assert apply_view_delta(None, answer) is None
    assert apply_view_delta(_view("d0", 6, {}, {}), answer) is None
    assert apply_view_delta(_view("d1", 7, {}, {}), answer)["generation"] == 9


def test_the_coordinator_answers_a_worker_that_asks_with_deltas_that_rebuild_its_whole_view(cluster):  # noqa: F811
    raft, store, coordinator = cluster
    _setup(store, coordinator, ["w1", "w2"], {"a": 2, "b": 1})
    held = coordinator.heartbeat("w1", MEMBER, {"view_deltas": True})  # the join: a whole view
    assert DELTA_FROM not in held and held["tasks"]
    assert coordinator.heartbeat("w1", MEMBER, {"view_deltas": True, "view_digest": held["digest"]})["unchanged"]

    for step in range(3):  # new connectors: each generation moves w1's view a little
        name = f"c{step}"
        store.put_connector_config(name, {"connector.class": "X", "tasks.max": "2"})
        coordinator.rebalance()
        a = raft.state.assignment
        store.put_task_configs(name, [{"task.index": "0"}, {"task.index": "1"}], worker_id=a["connectors"][name],
                               generation=a["assigned_at"][name])
        coordinator.rebalance()
        answer = coordinator.heartbeat("w1", MEMBER, {"view_deltas": True, "view_digest": held["digest"]})
        assert answer[DELTA_FROM] == held["digest"] and answer["digest"] != held["digest"]
        view, digest = coordinator._cached_view("w1")
        assert len(answer["tasks"]) < len(view["tasks"]) or len(view["tasks"]) <= 2  # only what changed
        held = apply_view_delta(held, answer)
        assert held == {**view, "digest": digest, "session_timeout_ms": answer["session_timeout_ms"]}

    # a worker naming a view it was not last answered with, or not asking, gets the whole view
    store.put_connector_config("late", {"connector.class": "X", "tasks.max": "1"})
    coordinator.rebalance()
    stale = coordinator.heartbeat("w1", MEMBER, {"view_deltas": True, "view_digest": "not-a-view-it-was-given"})
    assert DELTA_FROM not in stale and stale["tasks"] == coordinator._cached_view("w1")[0]["tasks"]
    # an agent that does not ask (an older one) gets whole views, as before
    key = next(iter(stale["tasks"]))
    name = stale["tasks"][key]["connector"]
    a = raft.state.assignment
    count = len(store.get_connector(name).tasks)
    store.put_task_configs(name, [{"task.index": str(i), "v": "2"} for i in range(count)],
                           worker_id=a["connectors"][name], generation=a["assigned_at"][name])
    old_agent = coordinator.heartbeat("w1", MEMBER, {"view_digest": stale["digest"]})
    assert DELTA_FROM not in old_agent and "removed_tasks" not in old_agent
    assert old_agent["tasks"][key]["config"]["v"] == "2" and len(old_agent["tasks"]) == len(stale["tasks"])


class Recorder:
    """A dispatcher that keeps what it sends, in order; ``reachable``: the workers a message can reach."""

    def __init__(self, reachable: set[str]):
        self.reachable = reachable
        self.sent: list[tuple[str, dict]] = []
        self._lock = threading.Lock()

    def reaches(self, worker_id: str) -> bool:
        return worker_id in self.reachable

    def send(self, worker_id: str, view: dict) -> None:
        if worker_id in self.reachable:
            with self._lock:
                self.sent.append((worker_id, view))


def _create(raft, store, coordinator, name, tasks):
    """Create connector ``name`` with ``tasks`` task configs through two generations (each dispatches)."""
    store.put_connector_config(name, {"connector.class": "X", "tasks.max": str(tasks)})
    coordinator.rebalance()
    a = raft.state.assignment
    store.put_task_configs(name, [{"task.index": str(i)} for i in range(tasks)], worker_id=a["connectors"][name],
                           generation=a["assigned_at"][name])
    coordinator.rebalance()


def test_dispatched_views_are_deltas_from_the_view_the_last_report_named(cluster):  # noqa: F811
    raft, store, coordinator = cluster
    _setup(store, coordinator, ["w1", "w2", "w3"], {"a": 2, "b": 1})
    recorder = Recorder({"w1", "w2"})
    coordinator.dispatcher = recorder
    named = coordinator.heartbeat("w1", MEMBER, {"view_deltas": True})  # w1 holds this view and names it next
    coordinator.heartbeat("w1", MEMBER, {"view_deltas": True, "view_digest": named["digest"]})
    coordinator.heartbeat("w2", MEMBER, {})  # an agent that does not ask for deltas
    coordinator.heartbeat("w3", MEMBER, {"view_deltas": True})  # not reachable by the dispatcher
    for step in range(6):  # more dispatches than GIVEN_KEPT: the named view must stay the base
        _create(raft, store, coordinator, f"c{step}", 3)
    with recorder._lock:
        sent = list(recorder.sent)
    to_w1 = [v for w, v in sent if w == "w1"]
    to_w2 = [v for w, v in sent if w == "w2"]
    assert len(to_w1) >= 6 and to_w2 and all(w != "w3" for w, _ in sent)
    assert all(DELTA_FROM not in v for v in to_w2)
    # every message to w1 starts from the view it named, however many came since; each is exactly the view
    # the coordinator held for w1 when it was sent, and the last is the current one
    assert all(v[DELTA_FROM] == named["digest"] for v in to_w1)
    whole = [apply_view_delta(named, v) for v in to_w1]
    assert all(w is not None and w["digest"] == v["digest"] for w, v in zip(whole, to_w1))
    assert len(to_w1[-1]["tasks"]) < len(whole[-1]["tasks"])  # a delta holds less than the view
    view, digest = coordinator._cached_view("w1")
    assert {k: whole[-1][k] for k in view} == view and whole[-1]["digest"] == digest

    # a heartbeat naming a dispatched view is answered from it, and later dispatches start from it
    coordinator.heartbeat("w1", MEMBER, {"view_deltas": True, "view_digest": to_w1[-1]["digest"]})
    _create(raft, store, coordinator, "late", 4)
    with recorder._lock:
        last = [v for w, v in recorder.sent if w == "w1"][-1]
    view, digest = coordinator._cached_view("w1")
    assert last["digest"] == digest and last[DELTA_FROM] == to_w1[-1]["digest"]
    made = apply_view_delta(whole[-1], last)
    assert {k: made[k] for k in view} == view

    # a worker that named the very view to send gets an empty delta (its agent passes over it), not the view
    coordinator.heartbeat("w1", MEMBER, {"view_deltas": True, "view_digest": digest})
    coordinator._sent_views.pop("w1")
    coordinator.dispatch()
    with recorder._lock:
        again = [v for w, v in recorder.sent if w == "w1"][-1]
    assert again[DELTA_FROM] == again["digest"] == digest
    assert not (again["tasks"] or again["connectors"] or again["removed_tasks"] or again["removed_connectors"])

    # forced dispatches (a new coordinator's first) are whole
    coordinator.dispatch(force=True)
    with recorder._lock:
        forced = [v for w, v in recorder.sent if w == "w1"][-1]
    assert DELTA_FROM not in forced and forced["digest"] == digest
