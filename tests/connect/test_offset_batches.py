"""Offset commits in batches: ``POST /raftconnect/v1/internal/offsets`` and the agent's client that gathers
the commits its task threads make at the same time into it (one request and one Raft log entry for many
commits, each still fenced on its own)."""
from __future__ import annotations

from webapp.plugin import ConnectorTaskId, SourceOffset
from webapp.runtime.client import ControlPlaneClient, Fenced, _NoSuchEndpoint

from .test_rest_lifecycle import internal
from .test_status_batches import HoldingLeader, six_concurrent_calls, source_run_by_a_worker

PATH = "/raftconnect/v1/internal/offsets"


def stored(api, name: str) -> dict[str, dict]:
    """``GET /connectors/{name}/offsets`` as {file partition: offset}."""
    return {o["partition"]["f"]: o["offset"] for o in api.get(f"/connectors/{name}/offsets").json()["offsets"]}


def test_the_endpoint_commits_each_batch_and_refuses_a_fenced_one_alone(api, node, tmp_path):
    worker, view = source_run_by_a_worker(api, node, tmp_path)
    gen0, gen1 = view["tasks"]["src-0"]["generation"], view["tasks"]["src-1"]["generation"]
    body = {"worker_id": worker.id, "commits": [
        {"connector": "src", "task": 0, "generation": gen0, "offsets": [[{"f": "a"}, {"pos": 1}], [{"f": "a"}, {"pos": 4}]],
         "topics": ["orders"]},
        {"connector": "src", "task": 1, "generation": gen1 - 1, "offsets": [[{"f": "b"}, {"pos": 9}]]},  # stale
        {"connector": "src", "task": 1, "generation": gen1, "offsets": [[{"f": "c"}, {"pos": 2}]], "topics": ["skipped"]},
    ]}
    resp = internal(api, node, "POST", PATH, body)
    assert resp.status_code == 200, resp.content
    results = resp.json()["results"]
    assert results[0] is None and results[2] is None
    assert results[1]["error_code"] == 409 and "stale generation" in results[1]["message"]
    assert stored(api, "src") == {"a": {"pos": 4}, "c": {"pos": 2}}  # the fenced batch wrote nothing
    assert set(api.get("/connectors/src/topics").json()["src"]["topics"]) == {"orders", "skipped"}

    fenced_only = dict(body, commits=[body["commits"][1]])
    assert internal(api, node, "POST", PATH, fenced_only).json()["results"][0]["error_code"] == 409

    bad = internal(api, node, "POST", PATH, {"worker_id": worker.id, "commits": [
        {"connector": "src", "task": 0, "generation": gen0, "offsets": [[{"f": "a"}, {"pos": 99}]]},
        {"connector": "src", "task": 0, "generation": gen0, "offsets": [[{"f": "a"}]]}]})
    assert bad.status_code == 400 and "[partition, offset] pair" in bad.json()["message"]
    assert stored(api, "src")["a"] == {"pos": 4}  # a malformed request writes none of its commits
    unsigned = api.post(PATH, data=b"{}", content_type="application/json")
    assert unsigned.status_code in (401, 403)


def test_a_malformed_single_commit_is_a_400_naming_the_pair_and_writes_nothing(api, node, tmp_path):
    worker, view = source_run_by_a_worker(api, node, tmp_path)
    gen0 = view["tasks"]["src-0"]["generation"]
    path = "/raftconnect/v1/internal/connectors/src/offsets"
    good = {"worker_id": worker.id, "task": 0, "generation": gen0, "offsets": [[{"f": "a"}, {"pos": 1}]]}
    assert internal(api, node, "POST", path, good).status_code == 204
    for offsets in ([[{"f": "a"}]], [[{"f": "a"}, 5]], [["a", {"pos": 2}]], [{"f": "a"}], "a"):
        resp = internal(api, node, "POST", path, dict(good, offsets=offsets))
        assert resp.status_code == 400, (offsets, resp.content)
        assert resp.json()["error_code"] == 400 and resp.json()["message"]
    assert stored(api, "src") == {"a": {"pos": 1}}


def test_concurrent_commits_share_a_request_and_each_caller_gets_its_own_outcome(monkeypatch):
    client = ControlPlaneClient(["127.0.0.1:1"], "secret", "w1")
    leader = HoldingLeader(PATH, "commits", single="/raftconnect/v1/internal/connectors/")
    monkeypatch.setattr(client, "call", leader.call)

    def commit(task):
        client.commit_offsets(ConnectorTaskId("c", task), 7, [SourceOffset({"f": str(task)}, {"pos": task})],
                              topics=["t", "t"] if task == 2 else None)

    outcomes = six_concurrent_calls(client._commits, leader, commit)
    assert outcomes == {0: "ok", 1: "ok", 2: "ok", 3: "fenced", 4: "ok", 5: "ok"}
    # the lone first commit went alone to its connector's endpoint, as before the batch endpoint
    assert leader.paths == ["/raftconnect/v1/internal/connectors/c/offsets", PATH]
    second = sorted(leader.requests[1], key=lambda c: c["task"])
    assert {k: v for k, v in second[1].items() if k != "seq"} == {
        "connector": "c", "task": 2, "generation": 7, "offsets": [[{"f": "2"}, {"pos": 2}]], "topics": ["t"]}
    # each commit numbered when it was made: six numbers, none twice
    assert sorted(c["seq"] for request in leader.requests for c in request) == list(range(1, 7))
    assert (client._commits.requests, client._commits.items) == (2, 6)


def test_a_node_without_the_batch_endpoint_gets_one_commit_per_request(monkeypatch):
    client = ControlPlaneClient(["127.0.0.1:1"], "secret", "w1")
    calls: list[tuple[str, dict]] = []

    def call(method, path, payload=None, retry_for=15.0, timeout=None):
        calls.append((path, payload))
        if path == PATH:
            raise _NoSuchEndpoint(f"{method} {path} failed: 404")
        if payload["task"] == 1:
            raise Fenced("task c-1 is not assigned to worker w1")

    monkeypatch.setattr(client, "call", call)
    a = {"connector": "c", "task": 0, "generation": 3, "offsets": [[{"f": "a"}, {"pos": 1}]], "topics": ["t"]}
    b = {"connector": "c", "task": 1, "generation": 3, "offsets": [[{"f": "b"}, {"pos": 1}]]}
    outcomes = client._send_commits([a, b])  # two commits that queued together
    assert outcomes[0] is None and isinstance(outcomes[1], Fenced)
    client.commit_offsets(ConnectorTaskId("c", 2), 3, [SourceOffset({"f": "c"}, {"pos": 1})])
    assert [p for p, _ in calls] == [PATH] + ["/raftconnect/v1/internal/connectors/c/offsets"] * 3
    assert calls[1][1] == {"worker_id": "w1", "task": 0, "generation": 3, "offsets": [[{"f": "a"}, {"pos": 1}]],
                           "topics": ["t"]}  # the body the single-commit endpoint has always taken
    assert PATH in client._unbatched  # remembered: no batch request any more


def test_offset_reads_are_current_or_503_never_an_older_view_of_the_replica(api, node, tmp_path, monkeypatch):
    """A task's starting offsets and ``GET /connectors/{name}/offsets`` go through a Raft read barrier
    (``latest_offsets``); a member that cannot catch up answers 503, which sends the agent's client to
    another member, instead of offsets older than an acknowledged commit (tests/raftnode/test_read_barrier)."""
    from raftnode import RaftUnavailable

    worker, view = source_run_by_a_worker(api, node, tmp_path)
    path = "/raftconnect/v1/internal/connectors/src/offsets"
    commit = {"worker_id": worker.id, "task": 0, "generation": view["tasks"]["src-0"]["generation"],
              "offsets": [[{"f": "a"}, {"pos": 7}]]}
    assert internal(api, node, "POST", path, commit).status_code == 204

    def read_for_a_task():
        return internal(api, node, "GET", path)

    barriers = []
    real = node.raft.read_barrier
    monkeypatch.setattr(node.raft, "read_barrier", lambda timeout=5.0: barriers.append(timeout) or real(timeout))
    assert read_for_a_task().json() == {"offsets": [[{"f": "a"}, {"pos": 7}]]}
    assert stored(api, "src") == {"a": {"pos": 7}}
    assert len(barriers) == 2

    def behind(timeout=5.0):
        raise RaftUnavailable("Raft command _zzz_apply_batch not committed: no leader accepted it within 5 s")

    monkeypatch.setattr(node.raft, "read_barrier", behind)
    refused = read_for_a_task()
    assert refused.status_code == 503 and "could not catch up with the Raft log" in refused.json()["message"]
    public = api.get("/connectors/src/offsets")
    assert public.status_code == 503 and public.json()["error_code"] == 503
