"""Status reports in batches: ``POST /raftconnect/v1/internal/statuses`` and the agent's client that
gathers concurrent reports into it (a thousand tasks starting made a thousand requests, most of what
the leader did at 100,000 tasks in benchmarks/scale)."""
from __future__ import annotations

import threading

from tools.launcher import wait_for
from webapp.runtime.client import ControlPlaneClient, Fenced

from .test_rest import post, source_config
from .test_rest_lifecycle import FakeWorker, internal


def test_the_endpoint_records_each_status_and_refuses_a_fenced_one_alone(api, node, tmp_path):
    worker = FakeWorker(api, node)
    assert post(api, "/connectors", {"name": "src", "config": source_config(tmp_path, **{"tasks.max": "2"})}
                ).status_code == 201
    worker.run_connector("src", 2)
    view = worker.view()
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


class _Leader:
    """Stands in for the cluster: answers batch requests, holding the first one until told to go on."""

    def __init__(self):
        self.requests: list[list[dict]] = []
        self.first_in = threading.Event()
        self.go_on = threading.Event()

    def call(self, method, path, payload=None, retry_for=15.0, timeout=None):
        assert (method, path) == ("POST", "/raftconnect/v1/internal/statuses")
        self.requests.append(payload["statuses"])
        if len(self.requests) == 1:
            self.first_in.set()
            assert self.go_on.wait(30)
        return {"results": [{"error_code": 409, "message": "fenced"} if s["task"] == 3 else None
                            for s in payload["statuses"]]}


def test_concurrent_reports_share_a_request_and_each_caller_gets_its_own_outcome(monkeypatch):
    client = ControlPlaneClient(["127.0.0.1:1"], "secret", "w1")
    leader = _Leader()
    monkeypatch.setattr(client, "call", leader.call)
    outcomes: dict[int, str] = {}

    def report(task):
        try:
            client.report_status("c", task, 7, "RUNNING")
            outcomes[task] = "ok"
        except Fenced:
            outcomes[task] = "fenced"

    first = threading.Thread(target=report, args=(0,))
    first.start()
    assert leader.first_in.wait(30)  # the lone report went out at once, alone
    others = [threading.Thread(target=report, args=(t,)) for t in range(1, 6)]
    for t in others:
        t.start()
    wait_for(lambda: len(client._statuses._queue) == 5, 30, interval=0.01, what="the other reports to queue")
    leader.go_on.set()
    for t in [first, *others]:
        t.join(30)
    assert [len(r) for r in leader.requests] == [1, 5]  # the five that came meanwhile: one request
    assert sorted(s["task"] for s in leader.requests[1]) == [1, 2, 3, 4, 5]
    assert outcomes == {0: "ok", 1: "ok", 2: "ok", 3: "fenced", 4: "ok", 5: "ok"}
    assert client._statuses._queue == [] and client._statuses._sending is False


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
