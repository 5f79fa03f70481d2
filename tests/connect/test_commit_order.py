"""Task starts and numbered commits over the internal endpoints, as an agent sends them (signed requests).

A task's start is committed through Raft before it reads its offsets, and each commit carries the
agent's number for it: a late copy of an earlier commit, or a commit of an earlier instance that
arrives after a start, is refused (409) instead of moving the offsets back.
"""
from __future__ import annotations

import threading

from tools.launcher import wait_for
from webapp.plugin import ConnectorTaskId
from webapp.runtime.client import STARTS_PATH, ControlPlaneClient, Fenced, _NoSuchEndpoint

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


def _starts(worker, *starts):
    return internal(worker.api, worker.node, "POST", "/raftconnect/v1/internal/starts",
                    {"worker_id": worker.id, "starts": list(starts)})


def test_many_starts_share_one_request_each_fenced_alone_and_answer_each_connectors_offsets(api, node, worker):
    node.store.put_connector_config("src", {"connector.class": "X", "tasks.max": "2"})
    worker.run_connector("src", 2)
    generation = worker.view()["tasks"]["src-0"]["generation"]
    assert _commit(worker, "src", 1, generation, 1, 10).status_code == 204
    answer = _starts(worker, {"connector": "src", "task": 0, "generation": generation, "seq": 5},
                     {"connector": "src", "task": 1, "generation": generation - 1, "seq": 6})
    assert answer.status_code == 200
    body = answer.json()
    assert body["results"][0] is None and body["results"][1]["error_code"] == 409
    assert "stale generation" in body["results"][1]["message"]
    assert body["offsets"] == {"src": [[{"file": "f"}, {"position": 10}]]}
    assert _commit(worker, "src", 0, generation, 4, 20).status_code == 409  # below task 0's start
    assert _commit(worker, "src", 1, generation, 2, 20).status_code == 204  # task 1's start was refused
    # a malformed start fails the whole request, and nothing of it is recorded
    bad = _starts(worker, {"connector": "src", "task": 1, "generation": generation, "seq": 50},
                  {"connector": "src", "task": 0, "generation": generation})
    assert bad.status_code == 400 and "seq" in bad.json()["message"]
    assert _commit(worker, "src", 1, generation, 3, 30).status_code == 204  # no floor at 50
    assert _starts(worker).json() == {"results": [], "offsets": {}}


def test_starts_made_together_share_one_request_numbered_in_order(monkeypatch):
    client = ControlPlaneClient(["127.0.0.1:9"], "secret", "w1")
    calls, release = [], threading.Event()

    def call(method, path, payload=None, **kw):
        calls.append((path, payload))
        if path.endswith("/start"):  # the first, alone: held until the others queue behind it
            release.wait(10)
            return {"offsets": [[{"file": "a"}, {"position": 1}]]}
        assert path == STARTS_PATH
        return {"results": [{"error_code": 409, "message": "stale"} if s["task"] == 2 else None
                            for s in payload["starts"]],
                "offsets": {"a": [[{"file": "a"}, {"position": 1}]], "b": [[{"file": "b"}, {"position": 7}]]}}

    monkeypatch.setattr(client, "call", call)
    outcomes = {}

    def start(name, task):
        try:
            outcomes[(name, task)] = [o.offset for o in client.start_task(ConnectorTaskId(name, task), 4)]
        except Fenced as exc:
            outcomes[(name, task)] = exc

    first = threading.Thread(target=start, args=("a", 0))
    first.start()
    wait_for(lambda: len(calls) == 1, 5, what="the first start sent")
    others = [threading.Thread(target=start, args=key) for key in (("a", 1), ("b", 0), ("a", 2))]
    for t in others:
        t.start()
    wait_for(lambda: len(client._starts._queue) == 3, 5, what="three starts queued")
    release.set()
    for t in [first, *others]:
        t.join(10)
    assert [path for path, _ in calls] == ["/raftconnect/v1/internal/connectors/a/tasks/0/start", STARTS_PATH]
    assert calls[0][1]["seq"] == 1
    assert [(s["connector"], s["task"], s["seq"]) for s in calls[1][1]["starts"]] == [("a", 1, 2), ("b", 0, 3), ("a", 2, 4)]
    assert outcomes[("a", 0)] == outcomes[("a", 1)] == [{"position": 1}] and outcomes[("b", 0)] == [{"position": 7}]
    assert isinstance(outcomes[("a", 2)], Fenced)


def test_against_a_node_without_the_batch_endpoint_starts_go_one_per_request(monkeypatch):
    client = ControlPlaneClient(["127.0.0.1:9"], "secret", "w1")
    calls = []

    def call(method, path, payload=None, **kw):
        calls.append(path)
        if path == STARTS_PATH:
            raise _NoSuchEndpoint(f"{method} {path} failed: 404")
        return {"offsets": []}

    monkeypatch.setattr(client, "call", call)
    assert client._send_starts([{"connector": "a", "task": 0, "generation": 1},
                                {"connector": "a", "task": 1, "generation": 1}]) == [[], []]
    assert calls == [STARTS_PATH, "/raftconnect/v1/internal/connectors/a/tasks/0/start",
                     "/raftconnect/v1/internal/connectors/a/tasks/1/start"]
    calls.clear()
    client.start_task(ConnectorTaskId("a", 2), 1)  # remembered: not asked again
    assert calls == ["/raftconnect/v1/internal/connectors/a/tasks/2/start"]
