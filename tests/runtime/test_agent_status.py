"""The agent's status file: what the writer records is what the node's reader sees, at most ~once a second;
and the SparkSession state it records, read without starting the session."""
from __future__ import annotations

import os
import threading

import pytest

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
