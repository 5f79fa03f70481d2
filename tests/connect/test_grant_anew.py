"""Changed task configs fence the connector's older task instances, whichever store holds the configs.

On the Raft store the grant shares the configs' log entry (tests/raftnode/test_grant_anew.py). A
relational store keeps task configs outside Raft: the internal endpoint that writes them grants the
connector's tasks anew right after the write. Signed internal requests, as an agent sends them.
"""
from __future__ import annotations

import uuid

from tools.launcher import wait_for
from webapp.connect.node import ConnectNode, NodeOptions
from webapp.kafka.embedded import free_port

from .test_rest_lifecycle import FakeWorker, internal


def _offsets_commit(worker, name, task, generation, position):
    body = {"worker_id": worker.id, "generation": generation, "task": task,
            "offsets": [[{"file": "part-2"}, {"position": position}]]}
    return internal(worker.api, worker.node, "POST", f"/raftconnect/v1/internal/connectors/{name}/offsets", body)


def _changed_configs_fence_the_older_tasks(client, node):
    node.store.put_connector_config("files", {"connector.class": "X", "tasks.max": "3"})
    worker = FakeWorker(client, node)
    worker.run_connector("files", 3)  # the first configs: nothing to fence yet
    before = worker.view()
    generation = before["tasks"]["files-1"]["generation"]
    assert _offsets_commit(worker, "files", 1, generation, 100).status_code == 204
    resp = internal(client, node, "POST", "/raftconnect/v1/internal/connectors/files/tasks",
                    {"worker_id": worker.id, "generation": before["connectors"]["files"]["generation"],
                     "configs": [{"task.index": str(2 - i)} for i in range(3)]})
    assert resp.status_code == 204, resp.json()
    after = worker.view()
    assert {t["generation"] for t in after["tasks"].values()} == {after["generation"]}
    assert after["generation"] > generation
    late = _offsets_commit(worker, "files", 1, generation, 150)  # the old instance of task 1, late
    assert late.status_code == 409 and "stale generation" in late.json()["message"]
    assert _offsets_commit(worker, "files", 1, after["generation"], 120).status_code == 204


def test_on_a_relational_store_changed_task_configs_are_followed_by_a_grant_anew(client, tmp_path,
                                                                                  django_db_blocker):
    from tests.storage.conftest import PG_URL, drop_database

    db = f"raftconnect_test_{uuid.uuid4().hex[:10]}"
    with django_db_blocker.unblock():  # the store manages its own connections on a runtime alias
        node = ConnectNode(NodeOptions(node_id="n1", raft_address=f"127.0.0.1:{free_port()}",
                                       rest_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "node"),
                                       roles=("raft",), metadata_store="pg", store_urls={"pg": PG_URL.format(db=db)}))
        node.start_control_plane()
        try:
            wait_for(lambda: node.coordinator.active, 15, what="coordinator to become active")
            assert node.raft.state.active_store == "pg"
            _changed_configs_fence_the_older_tasks(client, node)
        finally:
            node.stop()
            drop_database("postgresql", db)


def test_on_the_raft_store_the_same_holds(client, node):
    _changed_configs_fence_the_older_tasks(client, node)
