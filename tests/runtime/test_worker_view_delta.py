"""The agent's side of view deltas (``webapp.coordinator.viewdelta``): it asks for them, rebuilds the
whole view from the one it holds, and drops a delta that is not from that view, naming the view it
holds next so that the coordinator answers in full."""
from __future__ import annotations

import logging
import threading

from tools.launcher import wait_for
from webapp.coordinator.viewdelta import DELTA_FROM
from webapp.runtime.worker import Worker

from .test_worker_join import heartbeat_once, make_worker

TASK = {"connector": "a", "task": 0, "config": {"k": "v"}, "target_state": "STARTED", "generation": 2, "restart": 0}


class ScriptedClient:
    """Answers heartbeats from ``answers`` in turn and keeps the reports it was sent."""

    def __init__(self, answers: list[dict]):
        self.answers = answers
        self.reports: list[dict] = []

    def heartbeat(self, member, running, timeout=2.0):
        self.reports.append(dict(running))
        return self.answers[len(self.reports) - 1]


def _whole(digest, generation, tasks):
    return {"worker_id": "w1", "generation": generation, "epoch": 1, "connectors": {}, "tasks": tasks,
            "digest": digest, "session_timeout_ms": 5000}


def _delta(since, digest, generation, tasks, removed=()):
    return {"worker_id": "w1", "generation": generation, "epoch": 1, "digest": digest, DELTA_FROM: since,
            "session_timeout_ms": 5000, "connectors": {}, "tasks": tasks, "removed_connectors": [],
            "removed_tasks": list(removed)}


def _heartbeat_unanswered(w: Worker, client: ScriptedClient) -> None:
    """One turn of the heartbeat loop whose answer is not applied: stop once the client was called."""
    calls = len(client.reports)
    thread = threading.Thread(target=w._heartbeat_loop, daemon=True)
    thread.start()
    wait_for(lambda: len(client.reports) > calls, 10, interval=0.01, what="a heartbeat")
    w._stop.set()
    thread.join(10)
    w._stop.clear()


def test_the_agent_asks_for_deltas_rebuilds_its_view_from_them_and_drops_one_from_another_view(tmp_path):
    other = {**TASK, "connector": "b", "task": 0}
    client = ScriptedClient([
        _whole("d1", 2, {"a-0": TASK, "b-0": other}),
        _delta("d1", "d2", 3, {"a-1": {**TASK, "task": 1, "generation": 3}}, removed=["b-0"]),
        _delta("d9", "d10", 4, {"c-0": {**TASK, "connector": "c"}}),  # from a view this agent never held
    ])
    w = make_worker(tmp_path, client)
    heartbeat_once(w, client)
    assert client.reports[0]["view_deltas"] is True and "view_digest" not in client.reports[0]
    assert w._last_view["digest"] == "d1"

    heartbeat_once(w, client)
    assert client.reports[1]["view_digest"] == "d1"
    held = w._last_view
    assert held["digest"] == "d2" and held["generation"] == 3 and DELTA_FROM not in held
    assert sorted(held["tasks"]) == ["a-0", "a-1"] and held["tasks"]["a-0"] == TASK
    assert w._pending is held  # applied as any whole view is

    _heartbeat_unanswered(w, client)
    assert client.reports[2]["view_digest"] == "d2"
    assert w._last_view is held and w._pending is held  # the delta from d9 changed nothing


def test_a_delta_by_celery_is_made_whole_dropped_when_held_already_or_from_another_view(tmp_path, caplog):
    client = ScriptedClient([_whole("d1", 2, {"a-0": TASK})])
    w = make_worker(tmp_path, client)
    heartbeat_once(w, client)  # joined, holding d1
    w.apply_assignment(_delta("d1", "d2", 3, {"a-1": {**TASK, "task": 1}}), via="celery")
    held = w._last_view
    assert held["digest"] == "d2" and sorted(held["tasks"]) == ["a-0", "a-1"] and w._pending is held
    w.apply_assignment(_delta("d1", "d2", 3, {"a-1": {**TASK, "task": 1}}), via="heartbeat")  # the same view again
    assert w._last_view is held and w._pending is held
    caplog.set_level(logging.INFO, logger="webapp.runtime.worker")
    w.apply_assignment(_delta("d0", "d1", 2, {}), via="celery")  # older than the view held: overtaken, not news
    assert w._last_view is held and w._pending is held
    assert not [r for r in caplog.records if "not from the view held" in r.getMessage()]
    w.apply_assignment(_delta("d5", "d6", 4, {}), via="celery")  # one before it was lost on the way
    assert w._last_view is held and w._pending is held
    assert [r.getMessage() for r in caplog.records if "not from the view held" in r.getMessage()] == [
        "view delta of generation 4 by celery is not from the view held: dropped"]


def test_a_delta_by_celery_from_a_view_a_heartbeat_named_applies_after_a_newer_view_came(tmp_path, caplog):
    """The coordinator dispatches from the view the newest report it received named (d1 here) while the
    heartbeat answer to that report (d2) reaches the agent first: the message still applies."""
    client = ScriptedClient([
        _whole("d1", 2, {"a-0": TASK}),
        _delta("d1", "d2", 3, {"a-1": {**TASK, "task": 1, "generation": 3}}),
    ])
    w = make_worker(tmp_path, client)
    heartbeat_once(w, client)
    heartbeat_once(w, client)  # names d1, holds d2
    assert client.reports[1]["view_digest"] == "d1" and w._last_view["digest"] == "d2"
    w.apply_assignment(_delta("d1", "d3", 4, {"a-2": {**TASK, "task": 2, "generation": 4}}), via="celery")
    held = w._last_view
    assert held["digest"] == "d3" and sorted(held["tasks"]) == ["a-0", "a-2"] and w._pending is held
    assert w.first_delivered_by.get("celery") == 1
    assert w.view_deltas == {"applied": {"celery": 1, "heartbeat": 1}, "dropped": {"celery": 0, "heartbeat": 0}}

    # a view held but never named is no base: the coordinator never starts from it
    caplog.set_level(logging.INFO, logger="webapp.runtime.worker")
    w.apply_assignment(_delta("d2", "d4", 5, {}), via="celery")
    assert w._last_view is held
    # only the newest NAMED_VIEWS_KEPT named views are kept
    for i in range(Worker.NAMED_VIEWS_KEPT):
        w._name_view(_whole(f"n{i}", 3, {}))
    w.apply_assignment(_delta("d1", "d5", 6, {}), via="celery")
    assert w._last_view is held
    # after the agent stopped everything (coordinator lost), nothing named is a base any more
    w._name_view(_whole("n9", 3, {}))
    w.fence_all()
    w._joined = True
    w.apply_assignment(_delta("n9", "d6", 7, {}), via="celery")
    assert w._last_view is None
    assert len([r for r in caplog.records if "not from the view held" in r.getMessage()]) == 3
    assert w.view_deltas["dropped"] == {"celery": 3, "heartbeat": 0}
