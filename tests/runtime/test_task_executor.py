"""The worker's task executor: many tasks on a bounded pool, one step at a time each, no Spark, no Kafka."""
from __future__ import annotations

import threading

import pytest

from tools.launcher import wait_for
from webapp.runtime import registry
from webapp.plugin import BatchResult, SourceConnector, SourceOffset, Task
from webapp.runtime import worker as worker_mod
from webapp.runtime.worker import Worker

LIVE: dict[str, dict] = {}  # task id -> counters, written by the tasks
LOCK = threading.Lock()


class CountingTask(Task):
    """Moves ``records`` records in batches of 10, then idles; records overlapping steps."""

    def start(self):
        with LOCK:
            LIVE[str(self.context.task_id)] = {"batches": 0, "inside": 0, "overlap": False, "stopped": False}
        self.left = int(self.config.get("records", "0"))

    def run_batch(self):
        me = LIVE[str(self.context.task_id)]
        with LOCK:
            me["inside"] += 1
            me["overlap"] |= me["inside"] > 1
        try:
            if self.left <= 0:
                return None
            self.left -= 10
            me["batches"] += 1
            return BatchResult(10, (SourceOffset({"t": str(self.context.task_id)}, {"left": self.left}),))
        finally:
            with LOCK:
                me["inside"] -= 1

    def idle_delay(self):
        return float(self.config["idle"]) if "idle" in self.config else None

    def stop(self):
        LIVE[str(self.context.task_id)]["stopped"] = True


class CountingConnector(SourceConnector):
    task_class = CountingTask
    version = "test"

    def task_configs(self, max_tasks):
        return [dict(self.config)]


class Client:
    def __init__(self):
        self.lock = threading.Lock()
        self.states: dict[str, str] = {}
        self.commits: dict[str, int] = {}

    def report_status(self, connector, task, generation, state, trace=None):
        with self.lock:
            self.states[f"{connector}-{task}"] = state

    def get_offsets(self, connector):
        return []

    def start_task(self, task_id, generation):
        return self.get_offsets(task_id.connector)

    def commit_offsets(self, task_id, generation, offsets, topics=()):
        with self.lock:
            self.commits[str(task_id)] = self.commits.get(str(task_id), 0) + 1


@pytest.fixture(autouse=True)
def counting_plugin(monkeypatch):
    desc = registry.PluginDesc("CountingConnector", "source", "test", CountingConnector)
    monkeypatch.setattr(worker_mod.registry, "resolve", lambda name: desc)
    LIVE.clear()


def view(n: int, state: str = "STARTED", **config):
    cfg = {"connector.class": "CountingConnector", "records": "30", **config}
    return {"generation": 1, "connectors": {},
            "tasks": {f"c{i}-0": {"connector": f"c{i}", "task": 0, "config": cfg, "target_state": state,
                                  "generation": 1} for i in range(n)}}


def make_worker(tmp_path):
    client = Client()
    w = Worker(worker_id="w1", client=client, member={}, kafka_config={"bootstrap.servers": "127.0.0.1:1"},
               data_dir=str(tmp_path), spark_factory=lambda: pytest.fail("no batch here needs Spark"))
    return w, client


def test_five_hundred_tasks_run_on_a_bounded_pool(tmp_path):
    w, client = make_worker(tmp_path)
    before = threading.active_count()
    try:
        w.reconcile(view(500))
        wait_for(lambda: len(client.commits) == 500 and all(v == 3 for v in client.commits.values()), 60,
                 what="every task to move its 30 records in 3 batches")
        assert all(s == "RUNNING" for s in client.states.values()) and len(client.states) == 500
        # a thread per task would be 500 more; the executor has its pool plus one timer thread
        assert threading.active_count() - before <= w.executor.threads + 2
        assert not any(v["overlap"] for v in LIVE.values())  # a task never runs two steps at once
        assert all(t.is_alive() for t in w.tasks.values())  # idle tasks are parked, not ended
    finally:
        w.stop_all(10)
        w.executor.shutdown()
    assert all(v["stopped"] for v in LIVE.values())  # Task.stop ran for every one


def test_pause_resume_and_stop_reach_a_parked_task(tmp_path):
    w, client = make_worker(tmp_path)
    try:
        w.reconcile(view(1, idle="3600"))  # once idle, it would not run again for an hour unless woken
        wait_for(lambda: client.commits.get("c0-0") == 3, 10, what="the task's three batches")
        w.reconcile({**view(1, "PAUSED", idle="3600"), "generation": 1})
        wait_for(lambda: client.states.get("c0-0") == "PAUSED", 10, what="PAUSED")
        w.reconcile(view(1, idle="3600"))
        wait_for(lambda: client.states.get("c0-0") == "RUNNING", 10, what="RUNNING again")
        task = w.tasks["c0-0"]
        task.stop()
        task.join(10)
        assert not task.is_alive() and LIVE["c0-0"]["stopped"]
    finally:
        w.stop_all(10)
        w.executor.shutdown()


def test_a_failing_task_reports_failed_and_frees_its_slot(tmp_path, monkeypatch):
    def broken(self):
        raise RuntimeError("source unreachable")

    monkeypatch.setattr(CountingTask, "run_batch", broken)
    w, client = make_worker(tmp_path)
    try:
        w.reconcile(view(3))
        wait_for(lambda: sum(s == "FAILED" for s in client.states.values()) == 3, 10, what="three FAILED")
        assert all(not t.is_alive() for t in w.tasks.values())
    finally:
        w.stop_all(10)
        w.executor.shutdown()
