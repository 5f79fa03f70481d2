"""offset.flush.interval.ms: when a task commits its offsets (every batch, on an interval, at pause and stop);
offset.flush.timeout.ms: a commit that cannot reach the control plane holds the task instead of failing it.

WorkerTask on a real TaskExecutor with an in-process task and a recording control-plane client: no Spark,
no Kafka, no leader.
"""
from __future__ import annotations

import threading

import pytest

from tools.launcher import wait_for
from webapp import environment
from webapp.connect import workerconfig
from webapp.plugin import BatchResult, ConnectorTaskId, SourceConnector, SourceOffset, Task
from webapp.runtime import registry
from webapp.runtime.client import ControlPlaneClient, ControlPlaneUnavailable, Fenced
from webapp.runtime.worker_task import TaskExecutor, WorkerTask
from webapp.states import TargetState


class StepTask(Task):
    """``batches`` batches of one record, alternating partitions ``p0`` / ``p1`` (offset = batch number),
    then idle for an hour; raises at batch ``fail_at`` when set."""

    def start(self):
        self.done = 0

    def run_batch(self):
        limit = int(self.config["batches"])
        if self.done >= limit:
            return None
        self.done += 1
        if str(self.done) == self.config.get("fail_at"):
            raise RuntimeError("batch failed")
        return BatchResult(1, (SourceOffset({"p": self.done % 2}, {"n": self.done}),))

    def idle_delay(self):
        return 3600.0


class StepConnector(SourceConnector):
    task_class = StepTask
    version = "test"

    def task_configs(self, max_tasks):
        return [dict(self.config)]


class Client:
    """Records commits ``(generation, {partition p: offset n}, topics)`` and the last reported state."""

    def __init__(self, fence_commits: bool = False):
        self.lock = threading.Lock()
        self.commits: list[tuple[int, dict[int, int], list[str]]] = []
        self.states: list[str] = []
        self.fence_commits = fence_commits
        #: calls (``start_task``, ``report_status``, ``commit_offsets``) that fail as an unreachable control
        #: plane makes them fail while they are named here; the refusals are counted
        self.unreachable: set[str] = set()
        self.refused = 0

    def _gate(self, call: str) -> None:
        if call in self.unreachable:
            with self.lock:
                self.refused += 1
            raise ControlPlaneUnavailable("no node answered")

    def report_status(self, connector, task, generation, state, trace=None):
        self._gate("report_status")
        with self.lock:
            self.states.append(state)

    def start_task(self, task_id, generation):
        self._gate("start_task")
        return []

    def commit_offsets(self, task_id, generation, offsets, topics=None):
        if self.fence_commits:
            raise Fenced(f"{task_id} is owned at a newer generation")
        self._gate("commit_offsets")
        with self.lock:
            self.commits.append((generation, {o.partition["p"]: o.offset["n"] for o in offsets}, list(topics or [])))


@pytest.fixture(autouse=True)
def step_plugin(monkeypatch):
    desc = registry.PluginDesc("StepConnector", "source", "test", StepConnector)
    monkeypatch.setattr(registry, "resolve", lambda name: desc)


@pytest.fixture
def executor():
    ex = TaskExecutor(threads=2)
    yield ex
    ex.shutdown()


def make_task(executor, client, tmp_path, interval, **config):
    cfg = {"connector.class": "StepConnector", "topic": "t1", **{k: str(v) for k, v in config.items()}}
    task = WorkerTask(task_id=ConnectorTaskId("c", 0), config=cfg, generation=7, target_state=TargetState.STARTED,
                      client=client, spark=None, kafka_config={}, work_dir=str(tmp_path), executor=executor,
                      offset_flush_interval=interval)
    task.COMMIT_RETRY_S = 0.05  # a held task tries again every 50 ms
    return task


def run_batches(executor, client, tmp_path, interval, batches):
    """A started task once it has run its ``batches`` batches."""
    t = make_task(executor, client, tmp_path, interval, batches=batches)
    t.start()
    wait_for(lambda: t._task is not None and t._task.done == batches, timeout=10)
    return t


def test_default_interval_commits_after_every_batch(executor, tmp_path, monkeypatch):
    monkeypatch.delenv("RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS", raising=False)
    client = Client()
    t = make_task(executor, client, tmp_path, None, batches=4)
    assert t.offset_flush_interval == 0.0
    t.start()
    wait_for(lambda: len(client.commits) == 4, timeout=10)
    assert [c[1] for c in client.commits] == [{1: 1}, {0: 2}, {1: 3}, {0: 4}]
    t.stop()
    t.join(10)
    assert not t.is_alive() and len(client.commits) == 4  # nothing left to commit at stop


def test_long_interval_commits_newest_offsets_once_at_stop(executor, tmp_path):
    client = Client()
    t = make_task(executor, client, tmp_path, 3600.0, batches=5)
    t.start()
    wait_for(lambda: t._task is not None and t._task.done == 5, timeout=10)
    assert client.commits == []  # within the interval: held
    t.stop()
    t.join(10)
    assert not t.is_alive()
    # one commit, the newest offset of each partition, generation-fenced, with the topics the batches used
    assert client.commits == [(7, {0: 4, 1: 5}, ["t1"])]


def test_idle_task_commits_when_the_interval_is_due(executor, tmp_path):
    # the task idles for an hour after its batches: the commit must not wait for another batch
    client = Client()
    t = make_task(executor, client, tmp_path, 0.3, batches=3)
    t.start()
    wait_for(lambda: len(client.commits) >= 1, timeout=10)
    assert client.commits[-1][1] == {1: 3, 0: 2}
    assert sum(len(c[1]) for c in client.commits) <= 3  # batches were gathered or committed alone, none twice
    t.stop()
    t.join(10)
    assert client.commits[-1][1][1] == 3


def test_pause_commits_what_is_held(executor, tmp_path):
    client = Client()
    t = make_task(executor, client, tmp_path, 3600.0, batches=2)
    t.start()
    wait_for(lambda: t._task is not None and t._task.done == 2, timeout=10)
    t.set_target_state(TargetState.PAUSED)
    wait_for(lambda: "PAUSED" in client.states, timeout=10)
    assert client.commits == [(7, {1: 1, 0: 2}, ["t1"])]
    t.stop()
    t.join(10)
    assert len(client.commits) == 1


def test_failed_task_commits_the_batches_before_the_failure(executor, tmp_path):
    client = Client()
    t = make_task(executor, client, tmp_path, 3600.0, batches=5, fail_at=3)
    t.start()
    t.join(10)
    assert not t.is_alive()
    assert client.states[-1] == "FAILED"
    assert client.commits == [(7, {1: 1, 0: 2}, ["t1"])]  # batch 3 failed: its offset is not committed


def test_cancelled_task_commits_nothing_more(executor, tmp_path):
    client = Client()
    t = make_task(executor, client, tmp_path, 3600.0, batches=2)
    t.start()
    wait_for(lambda: t._task is not None and t._task.done == 2, timeout=10)
    t.cancel()
    t.join(10)
    assert not t.is_alive() and client.commits == []


def test_fenced_commit_at_stop_ends_the_task_quietly(executor, tmp_path):
    client = Client(fence_commits=True)
    t = make_task(executor, client, tmp_path, 3600.0, batches=2)
    t.start()
    wait_for(lambda: t._task is not None and t._task.done == 2, timeout=10)
    t.stop()
    t.join(10)
    assert not t.is_alive() and "FAILED" not in client.states


def start_unreachable(executor, tmp_path, batches):
    """A task committing after every batch, started while no commit gets through; retries every 50 ms."""
    client = Client()
    client.unreachable = {"commit_offsets"}
    t = make_task(executor, client, tmp_path, None, batches=batches)
    t.start()
    return client, t


def test_an_unreachable_control_plane_holds_the_task_until_its_offsets_commit(executor, tmp_path):
    client, t = start_unreachable(executor, tmp_path, batches=5)
    wait_for(lambda: client.refused >= 3, timeout=10)  # tried again, and again
    # held, not failed: no new batch runs while batch 1's offset is not committed
    assert t.is_alive() and "FAILED" not in client.states and t._task.done == 1
    assert t.metrics.as_json()["commit_failures"] >= 3
    client.unreachable = set()
    wait_for(lambda: len(client.commits) == 5, timeout=10)
    # batch 1's offset was committed first, and every batch after it ran and committed in order
    assert [c[1] for c in client.commits] == [{1: 1}, {0: 2}, {1: 3}, {0: 4}, {1: 5}]
    assert t.metrics.as_json()["commits"] == 5 and client.states[-1] == "RUNNING"
    t.stop()
    t.join(10)
    assert not t.is_alive() and "FAILED" not in client.states


def test_a_held_task_stops_without_failing_and_keeps_its_offsets_for_its_successor(executor, tmp_path):
    client, t = start_unreachable(executor, tmp_path, batches=3)
    wait_for(lambda: client.refused >= 1, timeout=10)
    assert t._task.done == 1
    t.stop()
    t.join(10)
    # stopped with its last attempt refused too: nothing committed, so its successor redoes batch 1
    assert not t.is_alive() and client.commits == [] and "FAILED" not in client.states
    assert client.refused >= 2


def test_a_held_task_whose_work_moved_meanwhile_stops_quietly_at_its_next_try(executor, tmp_path):
    client, t = start_unreachable(executor, tmp_path, batches=3)
    wait_for(lambda: client.refused >= 1, timeout=10)
    client.fence_commits = True  # the leader answers again, and the task is another worker's now
    client.unreachable = set()
    t.join(10)
    assert not t.is_alive() and t.state == "FENCED" and client.commits == [] and "FAILED" not in client.states


@pytest.mark.parametrize("call", ["commit_offsets", "report_status"])
def test_a_pause_the_control_plane_does_not_take_is_reported_once_it_does(executor, tmp_path, call):
    # the offsets to commit at the pause, or the PAUSED report after them, get no answer for a while
    client = Client()
    t = run_batches(executor, client, tmp_path, 3600.0, 2)
    client.unreachable = {call}
    t.set_target_state(TargetState.PAUSED)
    wait_for(lambda: client.refused >= 2, timeout=10)
    assert t.is_alive() and client.states == ["RUNNING"]  # held: PAUSED not reported yet, nothing FAILED
    assert client.commits == ([] if call == "commit_offsets" else [(7, {1: 1, 0: 2}, ["t1"])])
    client.unreachable = set()
    wait_for(lambda: client.states == ["RUNNING", "PAUSED"], timeout=10)
    assert client.commits == [(7, {1: 1, 0: 2}, ["t1"])]  # committed once, before the pause was reported
    t.stop()
    t.join(10)
    assert "FAILED" not in client.states


def test_a_start_the_control_plane_does_not_take_holds_the_task_until_it_does(executor, tmp_path):
    client = Client()
    client.unreachable = {"start_task", "report_status"}
    t = make_task(executor, client, tmp_path, None, batches=2)
    t.start()
    wait_for(lambda: client.refused >= 3, timeout=10)
    assert t.is_alive() and t._task is None and client.states == []  # not started, not FAILED
    client.unreachable = set()
    wait_for(lambda: len(client.commits) == 2, timeout=10)
    assert client.states == ["RUNNING"]


def test_the_commit_timeout_bounds_each_commit_attempt():
    client = ControlPlaneClient(["127.0.0.1:1"], "secret", "w1", timeout=0.5, commit_timeout=0.2)
    seen: list[float | None] = []
    real = client.call

    def call(*args, **kwargs):
        seen.append(kwargs.get("retry_for"))
        return real(*args, **kwargs)

    client.call = call
    with pytest.raises(ControlPlaneUnavailable):
        client.commit_offsets(ConnectorTaskId("c", 0), 1, [SourceOffset({"p": 0}, {"n": 1})])
    assert seen == [0.2]  # not the 15 s other internal calls retry for


@pytest.mark.parametrize("key, variable", [("offset.flush.interval.ms", "RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS"),
                                           ("offset.flush.timeout.ms", "RAFTCONNECT_OFFSET_FLUSH_TIMEOUT_MS")])
def test_worker_property_maps_to_the_environment(key, variable):
    cfg = workerconfig.worker_config({"bootstrap.servers": "k:9092", key: "10000"}, environ={})
    assert cfg.env[variable] == "10000"
    assert key not in cfg.ignored
    for bad in ("-5", "ten"):
        with pytest.raises(workerconfig.PropertiesError, match=key):
            workerconfig.worker_config({key: bad}, environ={})


def test_environment_timeout(monkeypatch):
    monkeypatch.delenv("RAFTCONNECT_OFFSET_FLUSH_TIMEOUT_MS", raising=False)
    assert environment.offset_flush_timeout_s() == 5.0  # Connect's default
    monkeypatch.setenv("RAFTCONNECT_OFFSET_FLUSH_TIMEOUT_MS", "1500")
    assert environment.offset_flush_timeout_s() == 1.5


def test_environment_interval(monkeypatch):
    monkeypatch.setenv("RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS", "2500")
    assert environment.offset_flush_interval_s() == 2.5
    monkeypatch.setenv("RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS", "-1")
    with pytest.raises(ValueError, match=">= 0"):
        environment.offset_flush_interval_s()
