"""The agent's status file: what the writer records is what the node's reader sees, at most ~once a second;
and the SparkSession state it records, read without starting the session."""
from __future__ import annotations

import os
import threading

import pytest

from webapp.agent_tasks import AgentTasksWriter, read_agent_tasks, tasks_path
from webapp.runtime.agent_status import AgentStatusWriter, read_agent_status, status_path


class Clock:
    def __init__(self, now: float = 1_000.0):
        self.now = now

    def __call__(self) -> float:
        return self.now


def test_written_status_reads_back_and_unchanged_beats_are_throttled(tmp_path):
    data_dir = str(tmp_path / "node")
    assert read_agent_status(data_dir) is None
    clock = Clock()
    w = AgentStatusWriter(data_dir, "w1", min_interval=1.0, clock=clock)
    w.started()
    st = read_agent_status(data_dir)
    assert (st["pid"], st["worker_id"], st["started_at"], st["last_heartbeat_at"]) == (os.getpid(), "w1", 1000.0, None)
    assert st["spark"] == {"state": "not_started"}

    clock.now = 1000.5
    w.heartbeat(ok=True, session_timeout_s=5.0, generation=3, connectors=1, tasks=2, spark={"state": "not_started"})
    st = read_agent_status(data_dir)
    assert (st["last_heartbeat_at"], st["generation"], st["tasks"], st["session_timeout_s"]) == (1000.5, 3, 2, 5.0)

    clock.now = 1000.9  # only the time changed, within min_interval: not written
    w.heartbeat(ok=True, session_timeout_s=5.0, generation=3, connectors=1, tasks=2, spark={"state": "not_started"})
    assert read_agent_status(data_dir)["last_heartbeat_at"] == 1000.5
    clock.now = 1001.6
    w.heartbeat(ok=True)
    assert read_agent_status(data_dir)["last_heartbeat_at"] == 1001.6

    clock.now = 1001.7  # a failure changes more than the time: written at once, last success kept
    w.heartbeat(ok=False, error="ControlPlaneUnavailable: 127.0.0.1:8083 refused")
    st = read_agent_status(data_dir)
    assert st["last_heartbeat_at"] == 1001.6 and st["last_error"].endswith("refused")
    clock.now = 1001.8
    w.heartbeat(ok=True, spark={"state": "ok"})
    st = read_agent_status(data_dir)
    assert (st["last_error"], st["spark"], st["written_at"]) == (None, {"state": "ok"}, 1001.8)
    assert os.listdir(data_dir) == ["agent-status.json"]  # the temporary file was renamed into place


def test_a_malformed_file_reads_as_none(tmp_path):
    path = status_path(str(tmp_path))
    with open(path, "w") as fh:
        fh.write('{"pid": 1, "trunc')
    assert read_agent_status(str(tmp_path)) is None
    with open(path, "w") as fh:
        fh.write("[1, 2]")
    assert read_agent_status(str(tmp_path)) is None


def test_lazy_spark_health_never_starts_the_session():
    from webapp.runtime.engine import LazySpark  # imports pyarrow; the status file itself needs nothing

    entered, release = threading.Event(), threading.Event()

    def factory():
        entered.set()
        release.wait(10)
        raise RuntimeError("Java gateway process exited before sending its port number")

    lazy = LazySpark(factory)
    assert lazy.health() == {"state": "not_started"} and not lazy.started
    errors = []
    t = threading.Thread(target=lambda: errors.append(pytest.raises(RuntimeError, lazy.session)))
    t.start()
    assert entered.wait(10)
    assert lazy.health() == {"state": "starting"}
    release.set()
    t.join(10)
    health = lazy.health()
    assert health["state"] == "down" and "Java gateway process exited" in health["error"]


def test_tasks_file_reads_back_throttled_and_goes_stale(tmp_path):
    """What the agent writes of its tasks is what the node reads, at most every ``min_interval``; a file not
    rewritten for ``max_age`` (the agent hung or exited) or written by another process than the agent reads
    as nothing."""
    data_dir = str(tmp_path / "node")
    assert read_agent_tasks(data_dir) is None
    clock = Clock()
    w = AgentTasksWriter(data_dir, "w1", min_interval=2.0, clock=clock)
    a = {"state": "RUNNING", "connector": "c", "task": 0, "type": "sink", "records": 5}
    assert w.due()
    w.write({"c-0": a})
    assert read_agent_tasks(data_dir, clock=clock) == ("w1", {"c-0": a})
    assert read_agent_tasks(data_dir, pid=os.getpid(), clock=clock) == ("w1", {"c-0": a})
    assert read_agent_tasks(data_dir, pid=os.getpid() + 1, clock=clock) is None

    clock.now = 1001.0  # within min_interval: not written
    assert not w.due()
    w.write({"c-0": {**a, "records": 6}})
    assert read_agent_tasks(data_dir, clock=clock)[1]["c-0"]["records"] == 5
    w.write({}, force=True)  # the agent stopping: at once
    assert read_agent_tasks(data_dir, clock=clock) == ("w1", {})
    clock.now = 1003.0
    w.write({"c-0": {**a, "records": 7}})
    assert read_agent_tasks(data_dir, clock=clock)[1]["c-0"]["records"] == 7

    clock.now = 1003.0 + 15.0
    assert read_agent_tasks(data_dir, clock=clock, max_age=15.0) is not None
    clock.now += 0.1
    assert read_agent_tasks(data_dir, clock=clock, max_age=15.0) is None
    assert os.listdir(data_dir) == ["agent-tasks.json"]


def test_a_malformed_tasks_file_reads_as_none(tmp_path):
    path = tasks_path(str(tmp_path))
    for text in ('{"pid": 1, "trunc', '[1, 2]', '{"pid": 1, "tasks": [], "written_at": 1}',
                 '{"pid": 1, "tasks": {}, "written_at": "soon"}'):
        with open(path, "w") as fh:
            fh.write(text)
        assert read_agent_tasks(str(tmp_path)) is None, text


def test_the_worker_records_its_tasks_with_their_connector_type(tmp_path):
    """The heartbeat loop's record of the running tasks carries each task's connector type (what the
    Connect groups need to tell a source's series from a sink's) and goes to the node's tasks file."""
    from types import SimpleNamespace

    from webapp.runtime.worker import Worker

    agent = SimpleNamespace(_snapshot_lock=threading.Lock(), tasks={"s-0": SimpleNamespace(kind="sink")},
                            tasks_file=AgentTasksWriter(str(tmp_path), "w3"))
    running = {"generation": 4, "connectors": ["s"], "tasks": {
        "s-0": {"state": "RUNNING", "connector": "s", "task": 0, "records": 3},
        "gone-0": {"state": "RUNNING", "connector": "gone", "task": 0, "records": 1}}}
    Worker._record_tasks(agent, running)
    worker, tasks = read_agent_tasks(str(tmp_path))
    assert worker == "w3"
    assert tasks == {"s-0": {**running["tasks"]["s-0"], "type": "sink"},
                     "gone-0": {**running["tasks"]["gone-0"], "type": "unknown"}}
    assert "type" not in running["tasks"]["s-0"]  # the heartbeat's own entries are left as they were
