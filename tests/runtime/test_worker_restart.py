"""The Worker's restart paths without Spark: a task whose plugin cannot load fails at once in its thread."""
from __future__ import annotations

import threading

from tools.launcher import wait_for
from webapp.runtime.restart import AUTO_RESTART, BACKOFF_MAX_MS, BACKOFF_MS
from webapp.runtime.worker import Worker


class RecordingClient:
    """Stands in for the control plane: records status reports."""

    def __init__(self):
        self.reports: list[tuple] = []
        self.lock = threading.Lock()

    def report_status(self, connector, task, generation, state, trace=None):
        with self.lock:
            self.reports.append((connector, task, state))

    def states(self):
        with self.lock:
            return [r[2] for r in self.reports]


def view(restart=0, **config):
    cfg = {"connector.class": "NoSuchConnectorClass", "name": "c", **config}
    return {"generation": 1, "connectors": {},
            "tasks": {"c-0": {"connector": "c", "task": 0, "config": cfg, "target_state": "STARTED",
                              "generation": 1, "restart": restart}}}


def make_worker(tmp_path):
    client = RecordingClient()
    w = Worker(worker_id="w1", client=client, member={}, kafka_config={}, data_dir=str(tmp_path),
               spark_factory=lambda: None)
    return w, client


def failed(w):
    t = w.tasks.get("c-0")
    return t is not None and not t.is_alive() and t.state == "FAILED"


def test_failed_task_stays_failed_until_its_restart_counter_changes(tmp_path):
    w, client = make_worker(tmp_path)
    w.reconcile(view())
    wait_for(lambda: failed(w), 10, what="the task to fail")
    first = w.tasks["c-0"]
    w.reconcile(view())  # the same view again: not restarted silently
    assert w.tasks["c-0"] is first and client.states() == ["FAILED"]
    w.reconcile(view(restart=1))  # an operator's restart request reached the view
    assert w.tasks["c-0"] is not first and w.tasks["c-0"].restart_seq == 1
    wait_for(lambda: failed(w), 10, what="the restarted task to fail again")
    assert client.states() == ["FAILED", "RESTARTING", "FAILED"]


def test_auto_restart_waits_for_its_backoff(tmp_path):
    w, client = make_worker(tmp_path)
    slow = {AUTO_RESTART: "true", BACKOFF_MS: "3600000"}
    w.reconcile(view(**slow))
    wait_for(lambda: failed(w), 10, what="the task to fail")
    first = w.tasks["c-0"]
    w.reconcile(view(**slow))
    assert w.tasks["c-0"] is first  # an hour of backoff has not passed
    fast = {AUTO_RESTART: "true", BACKOFF_MS: "0", BACKOFF_MAX_MS: "0"}
    w.reconcile(view(**fast))  # new config: a new task, which fails too
    wait_for(lambda: failed(w) and w.tasks["c-0"].config.get(BACKOFF_MS) == "0", 10, what="the new task to fail")
    second = w.tasks["c-0"]
    w.reconcile(view(**fast))  # no backoff: restarted at once
    assert w.tasks["c-0"] is not second
    wait_for(lambda: failed(w), 10, what="the auto-restarted task to fail")
    assert client.states()[-2:] == ["RESTARTING", "FAILED"]
    assert w.restart_tracker.failures("c-0") == 1


def test_failed_connector_instance_restarts_only_when_its_counter_changes(tmp_path):
    w, client = make_worker(tmp_path)

    def cview(restart):
        return {"generation": 1, "tasks": {},
                "connectors": {"c": {"config": {"connector.class": "NoSuchConnectorClass", "name": "c"},
                                     "target_state": "STARTED", "generation": 1, "tasks": [], "restart": restart}}}

    w.reconcile(cview(0))
    w.reconcile(cview(0))  # unchanged view: the failed connector is left alone
    assert client.states() == ["FAILED"]
    w.reconcile(cview(1))
    assert client.states() == ["FAILED", "RESTARTING", "FAILED"]
