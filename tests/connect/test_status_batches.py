"""Status reports in batches: ``POST /raftconnect/v1/internal/statuses`` and the agent's client that
gathers concurrent reports into it (a thousand tasks starting made a thousand requests, most of what
the leader did at 100,000 tasks in benchmarks/scale)."""
from __future__ import annotations

import threading

from tools.launcher import wait_for
from webapp.runtime.client import ControlPlaneClient, Fenced

from .test_rest import post, source_config
from .test_rest_lifecycle import FakeWorker, internal


def source_run_by_a_worker(api, node, tmp_path) -> tuple[FakeWorker, dict]:
    """A file source "src" of 2 tasks, its connector and tasks assigned to a FakeWorker; (worker, its view)."""
    worker = FakeWorker(api, node)
    assert post(api, "/connectors", {"name": "src", "config": source_config(tmp_path, **{"tasks.max": "2"})}
                ).status_code == 201
    worker.run_connector("src", 2)
    return worker, worker.view()


def test_the_endpoint_records_each_status_and_refuses_a_fenced_one_alone(api, node, tmp_path):
    worker, view = source_run_by_a_worker(api, node, tmp_path)
    gen0, gen1 = view["tasks"]["src-0"]["generation"], view["tasks"]["src-1"]["generation"]
    body = {"worker_id": worker.id, "statuses": [
        {"connector": "src", "task": None, "generation": view["connectors"]["src"]["generation"], "state": "RUNNING"},
        {"connector": "src", "task": 0, "generation": gen0, "state": "RUNNING", "trace": None},
        {"connector": "src", "task": 1, "generation": gen1 - 1, "state": "RUNNING"},  # stale generation
        {"connector": "gone", "task": 0, "generation": gen0, "state": "RUNNING"},
    ]}
    resp = internal(api, node, "POST", "/raftconnect/v1/internal/statuses", body)
    assert resp.status_code == 200, resp.content
    results = resp.json()["results"]
    assert results[:2] == [None, None]
    assert results[2]["error_code"] == 409 and "stale generation" in results[2]["message"]
    assert results[3]["error_code"] == 404
    status = api.get("/connectors/src/status").json()
    assert status["connector"]["state"] == "RUNNING"
    states = {t["id"]: t["state"] for t in status["tasks"]}
    assert states[0] == "RUNNING" and states.get(1) != "RUNNING"  # the fenced report recorded nothing

    bad = internal(api, node, "POST", "/raftconnect/v1/internal/statuses",
                   {"worker_id": worker.id, "statuses": [{"connector": "src", "task": 0, "generation": gen0,
                                                          "state": "SLEEPING"}]})
    assert bad.status_code == 400 and "Unknown state SLEEPING" in bad.json()["message"]
    unsigned = api.post("/raftconnect/v1/internal/statuses", data=b"{}", content_type="application/json")
    assert unsigned.status_code in (401, 403)


class HoldingLeader:
    """Stands in for the cluster at the batch endpoint ``path``: answers each item of the body's ``field``
    (409 for task 3, else recorded), holding the first request until told to go on. ``single``: the path
    prefix of the one-item endpoint a lone call may use instead (its body is the item; 409 raises Fenced)."""

    def __init__(self, path: str, field: str, single: str | None = None):
        self.path, self.field, self.single = path, field, single
        self.requests: list[list[dict]] = []
        self.paths: list[str] = []
        self.first_in = threading.Event()
        self.go_on = threading.Event()

    def call(self, method, path, payload=None, retry_for=15.0, timeout=None):
        assert method == "POST" and (path == self.path or self.single and path.startswith(self.single)), path
        items = payload[self.field] if path == self.path else [payload]
        self.paths.append(path)
        self.requests.append(items)
        if len(self.requests) == 1:
            self.first_in.set()
            assert self.go_on.wait(30)
        results = [{"error_code": 409, "message": "fenced"} if item["task"] == 3 else None for item in items]
        if path != self.path:
            if results[0] is not None:
                raise Fenced("fenced")
            return None
        return {"results": results}


def six_concurrent_calls(group, leader: HoldingLeader, call) -> dict[int, str]:
    """``call(0)`` alone, then ``call(1)`` .. ``call(5)`` while its request is held; each call's outcome
    (``"ok"`` or ``"fenced"``) by task. ``group``: the client's request group the calls go through."""
    outcomes: dict[int, str] = {}

    def run(task):
        try:
            call(task)
            outcomes[task] = "ok"
        except Fenced:
            outcomes[task] = "fenced"

    first = threading.Thread(target=run, args=(0,))
    first.start()
    assert leader.first_in.wait(30)  # the lone call went out at once, alone
    others = [threading.Thread(target=run, args=(t,)) for t in range(1, 6)]
    for t in others:
        t.start()
    wait_for(lambda: len(group._queue) == 5, 30, interval=0.01, what="the other calls to queue")
    leader.go_on.set()
    for t in [first, *others]:
        t.join(30)
    assert [len(r) for r in leader.requests] == [1, 5]  # the five that came meanwhile: one request
    assert sorted(item["task"] for item in leader.requests[1]) == [1, 2, 3, 4, 5]
    assert group._queue == [] and group._sending is False
    return outcomes


def test_concurrent_reports_share_a_request_and_each_caller_gets_its_own_outcome(monkeypatch):
    client = ControlPlaneClient(["127.0.0.1:1"], "secret", "w1")
    leader = HoldingLeader("/raftconnect/v1/internal/statuses", "statuses")
    monkeypatch.setattr(client, "call", leader.call)
    outcomes = six_concurrent_calls(client._statuses, leader, lambda task: client.report_status("c", task, 7, "RUNNING"))
    assert outcomes == {0: "ok", 1: "ok", 2: "ok", 3: "fenced", 4: "ok", 5: "ok"}


def test_report_statuses_sends_in_requests_of_at_most_the_batch_size(monkeypatch):
    client = ControlPlaneClient(["127.0.0.1:1"], "secret", "w1")
    sent: list[list[dict]] = []

    def call(method, path, payload=None, retry_for=15.0, timeout=None):
        sent.append(payload["statuses"])
        return {"results": [{"error_code": 404, "message": "gone"} if s["connector"] == "gone" else None
                            for s in payload["statuses"]]}

    monkeypatch.setattr(client, "call", call)
    monkeypatch.setattr(ControlPlaneClient, "MAX_STATUS_BATCH", 2)
    items = [{"connector": "c", "task": i, "generation": 1, "state": "RUNNING"} for i in range(4)]
    items.append({"connector": "gone", "task": 0, "generation": 1, "state": "RUNNING"})
    outcomes = client.report_statuses(items)
    assert [len(r) for r in sent] == [2, 2, 1] and all(s["trace"] is None for r in sent for s in r)
    assert outcomes[:4] == [None] * 4 and isinstance(outcomes[4], RuntimeError) and "404 gone" in str(outcomes[4])


def test_a_node_without_the_batch_endpoint_gets_one_report_per_request(monkeypatch):
    from webapp.runtime.client import _NoSuchEndpoint

    client = ControlPlaneClient(["127.0.0.1:1"], "secret", "w1")
    paths: list[str] = []

    def call(method, path, payload=None, retry_for=15.0, timeout=None):
        paths.append(path)
        if path.endswith("/internal/statuses"):
            raise _NoSuchEndpoint(f"{method} {path} failed: 404")
        if payload["task"] == 1:
            raise Fenced("task c-1 is not assigned to worker w1")

    monkeypatch.setattr(client, "call", call)
    outcomes = client.report_statuses([{"connector": "c", "task": t, "generation": 1, "state": "RUNNING"}
                                       for t in (0, 1)])
    assert outcomes[0] is None and isinstance(outcomes[1], Fenced)
    client.report_status("c", 0, 1, "RUNNING")  # remembered: no batch request any more
    assert paths == ["/raftconnect/v1/internal/statuses"] + ["/raftconnect/v1/internal/connectors/c/status"] * 3
