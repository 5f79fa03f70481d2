"""Task starts and numbered commits over the internal endpoints, as an agent sends them (signed requests).

A task's start is committed through Raft before it reads its offsets, and each commit carries the
agent's number for it: a late copy of an earlier commit, or a commit of an earlier instance that
arrives after a start, is refused (409) instead of moving the offsets back.
"""
from __future__ import annotations

from webapp.plugin import ConnectorTaskId
from webapp.runtime.client import ControlPlaneClient, _NoSuchEndpoint

from .test_rest_lifecycle import internal, worker  # noqa: F401 - the fixture


def _start(worker, name, task, generation, seq):
    return internal(worker.api, worker.node, "POST", f"/raftconnect/v1/internal/connectors/{name}/tasks/{task}/start",
                    {"worker_id": worker.id, "generation": generation, "seq": seq})


def _commit(worker, name, task, generation, seq, position):
    return internal(worker.api, worker.node, "POST", f"/raftconnect/v1/internal/connectors/{name}/offsets",
                    {"worker_id": worker.id, "generation": generation, "task": task, "seq": seq,
                     "offsets": [[{"file": "f"}, {"position": position}]]})


def test_a_start_answers_the_offsets_and_fences_the_late_commits_before_it(api, node, worker):
    node.store.put_connector_config("src", {"connector.class": "X", "tasks.max": "1"})
    worker.run_connector("src", 1)
    generation = worker.view()["tasks"]["src-0"]["generation"]
    first = _start(worker, "src", 0, generation, 1)
    assert first.status_code == 200 and first.json() == {"offsets": []}
    assert _commit(worker, "src", 0, generation, 2, 10).status_code == 204
    assert _commit(worker, "src", 0, generation, 3, 20).status_code == 204
    late = _commit(worker, "src", 0, generation, 2, 10)  # a copy of commit 2, forwarded again
    assert late.status_code == 409 and "older than commit 3" in late.json()["message"]
    # restarted by the same agent: the start answers what is committed, and an old commit after it is refused
    again = _start(worker, "src", 0, generation, 9)
    assert again.json() == {"offsets": [[{"file": "f"}, {"position": 20}]]}
    batch = internal(api, node, "POST", "/raftconnect/v1/internal/offsets", {"worker_id": worker.id, "commits": [
        {"connector": "src", "task": 0, "generation": generation, "seq": 4, "offsets": [[{"file": "f"}, {"position": 30}]]},
        {"connector": "src", "task": 0, "generation": generation, "seq": 10, "offsets": [[{"file": "f"}, {"position": 25}]]},
    ]})
    assert batch.status_code == 200
    [refused, applied] = batch.json()["results"]
    assert refused["error_code"] == 409 and "older than commit 9" in refused["message"] and applied is None
    offsets = internal(api, node, "GET", "/raftconnect/v1/internal/connectors/src/offsets").json()["offsets"]
    assert offsets == [[{"file": "f"}, {"position": 25}]]
    # a start at a generation the task is no longer granted at is fenced
    stale = _start(worker, "src", 0, generation - 1, 11)
    assert stale.status_code == 409 and "stale generation" in stale.json()["message"]


def test_the_client_numbers_starts_and_commits_in_order_and_reads_offsets_from_an_older_node(monkeypatch):
    client = ControlPlaneClient(["127.0.0.1:9"], "secret", "w1")
    calls, older = [], []

    def call(method, path, payload=None, **kw):
        calls.append((method, path, payload))
        if path.endswith("/start"):
            if older:
                raise _NoSuchEndpoint(f"{method} {path} failed: 404")
            return {"offsets": [[{"file": "f"}, {"position": 3}]]}
        return {"offsets": [[{"file": "f"}, {"position": 2}]]}

    monkeypatch.setattr(client, "call", call)
    [offset] = client.start_task(ConnectorTaskId("src", 0), 4)
    assert offset.offset == {"position": 3} and calls[-1][2] == {"worker_id": "w1", "generation": 4, "seq": 1}
    client.commit_offsets(ConnectorTaskId("src", 0), 4, [])  # numbered when made, sent by the request group
    client.commit_offsets(ConnectorTaskId("src", 0), 4, [])
    assert sorted(p["seq"] for m, path, p in calls if path.endswith("/offsets") and m == "POST") == [2, 3]
    older.append(True)
    [offset] = client.start_task(ConnectorTaskId("src", 0), 4)
    assert offset.offset == {"position": 2} and calls[-1][:2] == ("GET", "/raftconnect/v1/internal/connectors/src/offsets")
    calls.clear()
    client.start_task(ConnectorTaskId("src", 0), 4)  # not asked again
    assert [c[0] for c in calls] == ["GET"]
