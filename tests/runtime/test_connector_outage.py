"""A connector instance whose task configs or state the control plane does not take is started again, not FAILED.

The worker's reconcile (``Worker.reconcile``, what the reconcile thread runs for each view) on a recording
client (no cluster): the first application of the view meets an
unreachable leader, the next one (as each heartbeat's re-application of the view does) starts the
connector for good.
"""
from __future__ import annotations

from webapp.runtime.client import ControlPlaneUnavailable
from webapp.runtime.worker import Worker


class FlakyClient:
    """Records task configs and statuses; every call fails as an unreachable control plane while ``down``."""

    def __init__(self):
        self.down = True
        self.task_configs: list[list[dict]] = []
        self.statuses: list[tuple] = []

    def _gate(self):
        if self.down:
            raise ControlPlaneUnavailable("no node answered")

    def put_task_configs(self, connector, generation, configs):
        self._gate()
        self.task_configs.append(configs)

    def report_status(self, connector, task, generation, state, trace=None):
        self._gate()
        self.statuses.append((connector, task, state, trace))


def test_a_connector_the_control_plane_does_not_take_starts_with_the_next_view(tmp_path):
    data = tmp_path / "in.csv"
    data.write_text("id\n1\n")
    view = {"generation": 1, "tasks": {}, "connectors": {"src": {
        "config": {"connector.class": "raftconnect.connectors.file.FileSourceConnector", "name": "src",
                   "path": str(data), "format": "csv", "topic": "t", "tasks.max": "1"},
        "generation": 1, "target_state": "STARTED", "tasks": []}}}
    client = FlakyClient()
    worker = Worker(worker_id="w1", client=client, member={}, kafka_config={}, data_dir=str(tmp_path),
                    spark_factory=lambda: None)
    worker.reconcile(view)
    assert client.statuses == [] and "src" not in worker.connectors  # nothing FAILED; left to start again
    client.down = False
    worker.reconcile(view)  # the same view again, as the next heartbeat applies it
    assert [s[2] for s in client.statuses] == ["RUNNING"]
    assert len(client.task_configs) == 1 and worker.connectors["src"]["generation"] == 1
