"""A stopped task whose batch outlives the graceful stop timeout has its Spark jobs cancelled (real Spark)."""
from __future__ import annotations

import threading
import time

import pytest

from tools.launcher import wait_for
from webapp.runtime import registry
from webapp.plugin import BatchResult, SourceConnector, SourceOffset, Task
from webapp.runtime import worker as worker_mod
from webapp.runtime.worker import Worker

pytestmark = pytest.mark.integration

STARTED = threading.Event()


class SlowTask(Task):
    """Each batch is one Spark job whose partitions sleep 120 s, then write a marker file."""

    def run_batch(self):
        marker = self.config["marker"]

        def slow(batches):
            import time as _t

            for b in batches:
                _t.sleep(120)
                open(marker, "w").close()
                yield b

        STARTED.set()
        self.context.spark.range(0, 2, 1, 2).mapInArrow(slow, "id long").collect()
        return BatchResult(1, (SourceOffset({"p": 0}, {"o": 1}),))


class SlowConnector(SourceConnector):
    task_class = SlowTask
    version = "test"

    def start(self, config):
        self.config = dict(config)

    def task_configs(self, max_tasks):
        return [dict(self.config)]


class Client:
    def __init__(self):
        self.reports, self.commits = [], []

    def report_status(self, connector, task, generation, state, trace=None):
        self.reports.append((task, state, trace))

    def get_offsets(self, connector):
        return []

    def start_task(self, task_id, generation):
        return self.get_offsets(task_id.connector)

    def commit_offsets(self, *args, **kwargs):
        self.commits.append(args)


def view(generation, marker, tasks=True):
    cfg = {"connector.class": "SlowConnector", "marker": str(marker)}
    return {"generation": generation, "connectors": {}, "tasks": {} if not tasks else {
        "slow-0": {"connector": "slow", "task": 0, "config": cfg, "target_state": "STARTED", "generation": 1}}}


@pytest.fixture
def slow_plugin(monkeypatch):
    desc = registry.PluginDesc("SlowConnector", "source", "test", SlowConnector)
    monkeypatch.setattr(worker_mod.registry, "resolve", lambda name: desc)


def start_slow_task(spark, tmp_path):
    """``(worker, client, task, marker)``: the slow task runs its first batch's Spark job."""
    client = Client()
    w = Worker(worker_id="w1", client=client, member={}, kafka_config={}, data_dir=str(tmp_path),
               spark_factory=lambda: spark)
    marker = tmp_path / "batch-finished"
    STARTED.clear()
    w.reconcile(view(1, marker))
    task = w.tasks["slow-0"]
    assert STARTED.wait(60)
    wait_for(lambda: spark.sparkContext.statusTracker().getJobIdsForGroup(task.job_group), 30,
             what="the batch's Spark job to run")
    return w, client, task, marker


def test_a_task_busy_past_the_graceful_timeout_is_cancelled_not_failed(spark, tmp_path, slow_plugin):
    w, client, task, marker = start_slow_task(spark, tmp_path)
    w.graceful_stop_timeout = 1.0
    w.reconcile(view(2, marker, tasks=False))  # the task moved away: stop, then cancel after 1 s
    assert not task.is_alive() and "slow-0" not in w.tasks
    assert not marker.exists()  # the batch did not finish
    assert client.commits == []  # nothing of the cancelled batch was committed
    assert all(state != "FAILED" for _, state, _ in client.reports), client.reports


def test_fence_all_cancels_the_batch_in_flight(spark, tmp_path, slow_plugin):
    w, client, task, marker = start_slow_task(spark, tmp_path)
    w.fence_all()  # session expired: the work belongs to others already
    task.join(60)
    assert not task.is_alive() and not marker.exists() and client.commits == []
    assert all(state != "FAILED" for _, state, _ in client.reports), client.reports


ENTERED, RELEASE = threading.Event(), threading.Event()


class InProcessTask(Task):
    """A batch that runs in the agent (no Spark job to cancel) until the test releases it."""

    def run_batch(self):
        ENTERED.set()
        assert RELEASE.wait(60)
        return BatchResult(1, (SourceOffset({"p": 0}, {"o": 1}),))


class InProcessConnector(SlowConnector):
    task_class = InProcessTask


def test_a_fenced_in_process_batch_runs_out_but_commits_nothing(tmp_path, monkeypatch):
    """The in-process path cannot be interrupted: the batch ends, and its offsets are dropped."""
    desc = registry.PluginDesc("InProcessConnector", "source", "test", InProcessConnector)
    monkeypatch.setattr(worker_mod.registry, "resolve", lambda name: desc)
    ENTERED.clear()
    RELEASE.clear()
    client = Client()
    w = Worker(worker_id="w1", client=client, member={}, kafka_config={}, data_dir=str(tmp_path),
               spark_factory=lambda: None)
    try:
        w.reconcile(view(1, tmp_path / "unused"))
        task = w.tasks["slow-0"]
        assert ENTERED.wait(30)
        w.fence_all()  # session expired while the batch is in flight
        RELEASE.set()
        task.join(30)
        assert not task.is_alive()
        assert client.commits == []
        assert all(state != "FAILED" for _, state, _ in client.reports), client.reports
    finally:
        RELEASE.set()
        w.shutdown(timeout=5)
