"""Connect's connector lifecycle endpoints on an in-process node: PATCH config, task status, restarts,
active topics, offsets alter/reset. A fake worker (signed internal requests, as an agent sends them)
joins the group so connectors and tasks have owners and statuses."""
from __future__ import annotations

import json

import pytest

from tools.launcher import wait_for
from webapp.coordinator.signing import signed_headers

from .test_rest import SOURCE, post, put, source_config

SINK = "raftconnect.connectors.file.FileSinkConnector"
STOP_FIRST = ("Connectors must be in the STOPPED state before their offsets can be modified. This can be done for "
              "the specified connector by issuing a 'PUT' request to the '/connectors/{}/stop' endpoint")


def patch(client, path, body):
    return client.patch(path, data=json.dumps(body) if not isinstance(body, (str, bytes)) else body,
                        content_type="application/json")


def internal(api, node, method, path, payload=None):
    """``method path`` signed with the cluster secret, as an agent sends it; ``payload`` as its JSON body
    (``None``: no body, as the agent's reads)."""
    body = json.dumps(payload).encode() if payload is not None else b""
    headers = {f"HTTP_{k.upper().replace('-', '_')}": v for k, v in signed_headers(node.secret, method, path, body).items()}
    if payload is None:
        return getattr(api, method.lower())(path, **headers)
    return getattr(api, method.lower())(path, data=body, content_type="application/json", **headers)


class FakeWorker:
    """Speaks the agent's internal protocol: heartbeat, task configs, statuses, offset commits."""

    def __init__(self, api, node, worker_id="w9"):
        self.api, self.node, self.id = api, node, worker_id

    def view(self):
        resp = internal(self.api, self.node, "POST", "/raftconnect/v1/internal/heartbeat",
                        {"worker_id": self.id, "member": {"rest_address": "127.0.0.1:1"}, "running": {}})
        assert resp.status_code == 200, resp.json()
        return resp.json()

    def run_connector(self, name, tasks):
        """Own ``name``, give it ``tasks`` task configs and wait until the tasks are assigned here."""
        c = wait_for(lambda: self.view()["connectors"].get(name), 15, what=f"{name} assigned")
        resp = internal(self.api, self.node, "POST", f"/raftconnect/v1/internal/connectors/{name}/tasks",
                        {"worker_id": self.id, "generation": c["generation"],
                         "configs": [{"task.index": str(i)} for i in range(tasks)]})
        assert resp.status_code == 204, resp.json()
        wait_for(lambda: len([k for k in self.view()["tasks"] if k.startswith(f"{name}-")]) == tasks, 15,
                 what=f"{name}'s tasks assigned")

    def report(self, name, task, state, trace=None):
        v = self.view()
        gen = v["connectors"][name]["generation"] if task is None else v["tasks"][f"{name}-{task}"]["generation"]
        resp = internal(self.api, self.node, "POST", f"/raftconnect/v1/internal/connectors/{name}/status",
                        {"worker_id": self.id, "generation": gen, "task": task, "state": state, "trace": trace})
        assert resp.status_code == 204, resp.json()

    def commit(self, name, task, offsets, topics=None):
        gen = self.view()["tasks"][f"{name}-{task}"]["generation"]
        body = {"worker_id": self.id, "generation": gen, "task": task, "offsets": offsets}
        if topics is not None:
            body["topics"] = topics
        resp = internal(self.api, self.node, "POST", f"/raftconnect/v1/internal/connectors/{name}/offsets", body)
        assert resp.status_code == 204, resp.json()


@pytest.fixture
def worker(api, node):
    return FakeWorker(api, node)


@pytest.fixture
def running_source(api, worker, tmp_path):
    """Connector ``src`` RUNNING with task 0 FAILED and task 1 RUNNING on the fake worker."""
    assert post(api, "/connectors", {"name": "src", "config": source_config(tmp_path, **{"tasks.max": "2"})}).status_code == 201
    worker.run_connector("src", 2)
    worker.report("src", None, "RUNNING")
    worker.report("src", 0, "FAILED", "Traceback: boom")
    worker.report("src", 1, "RUNNING")
    return "src"


# ------------------------------------------------------------------ PATCH /connectors/{name}/config
def test_patch_config_merges_and_null_removes(api, tmp_path):
    cfg = source_config(tmp_path, **{"csv.delimiter": ";"})
    post(api, "/connectors", {"name": "src", "config": cfg})
    resp = patch(api, "/connectors/src/config", {"topic": "t2", "csv.delimiter": None, "batch.max.rows": 100})
    assert resp.status_code == 200, resp.json()
    body = resp.json()
    assert set(body) == {"name", "config", "tasks", "type"} and body["name"] == "src"
    expected = {**cfg, "topic": "t2", "batch.max.rows": "100", "name": "src"}
    del expected["csv.delimiter"]
    assert body["config"] == expected
    assert api.get("/connectors/src/config").json() == expected


def test_patch_config_hostile_inputs_change_nothing(api, tmp_path):
    missing = patch(api, "/connectors/nope/config", {"topic": "x"})
    assert missing.status_code == 404 and missing.json() == {"error_code": 404, "message": "Connector nope not found"}
    post(api, "/connectors", {"name": "src", "config": source_config(tmp_path)})
    before = api.get("/connectors/src/config").json()
    for body, fragment in [("{not json", "deserialize"), ([1, 2], "JSON object"), ({"topic": ["a"]}, "must be a string"),
                           ({"name": "other"}, "doesn't match"), ({"path": None}, "path"),
                           ({"tasks.max": "zero"}, "tasks.max"),
                           ({"raftconnect.auto.restart": "maybe"}, "raftconnect.auto.restart")]:
        resp = patch(api, "/connectors/src/config", body)
        assert resp.status_code == 400 and fragment in resp.json()["message"], (body, resp.json())
    assert api.get("/connectors/src/config").json() == before


# ------------------------------------------------------------------ task status
def test_task_status_and_unknown_tasks(api, running_source):
    st = api.get("/connectors/src/tasks/0/status").json()
    assert st == {"id": 0, "state": "FAILED", "worker_id": "127.0.0.1:1", "trace": "Traceback: boom"}
    assert api.get("/connectors/src/tasks/1/status").json()["state"] == "RUNNING"
    unknown = api.get("/connectors/src/tasks/7/status")
    assert unknown.status_code == 404 and unknown.json()["message"] == "No status found for task src-7"
    assert api.get("/connectors/nope/tasks/0/status").status_code == 404
    assert api.get("/connectors/src/tasks/x/status").status_code == 404


# ------------------------------------------------------------------ restarts
def test_restart_connector_only_is_204_and_reaches_the_worker_view(api, worker, running_source):
    assert worker.view()["connectors"]["src"]["restart"] == 0
    resp = api.post("/connectors/src/restart")
    assert resp.status_code == 204 and not resp.content
    view = worker.view()
    assert view["connectors"]["src"]["restart"] == 1
    assert [view["tasks"][f"src-{i}"]["restart"] for i in (0, 1)] == [0, 0]  # tasks untouched


def test_restart_only_failed_tasks_is_202_with_restarting_states(api, worker, running_source):
    resp = api.post("/connectors/src/restart?includeTasks=true&onlyFailed=true")
    assert resp.status_code == 202, resp.json()
    body = resp.json()
    assert body["name"] == "src" and body["type"] == "source"
    assert body["connector"]["state"] == "RUNNING"  # not failed: not restarted
    assert [(t["id"], t["state"]) for t in body["tasks"]] == [(0, "RESTARTING"), (1, "RUNNING")]
    view = worker.view()
    assert (view["connectors"]["src"]["restart"], view["tasks"]["src-0"]["restart"],
            view["tasks"]["src-1"]["restart"]) == (0, 1, 0)
    everything = api.post("/connectors/src/restart?includeTasks=TRUE").json()
    assert everything["connector"]["state"] == "RESTARTING"
    assert [t["state"] for t in everything["tasks"]] == ["RESTARTING", "RESTARTING"]
    view = worker.view()
    assert (view["connectors"]["src"]["restart"], view["tasks"]["src-0"]["restart"],
            view["tasks"]["src-1"]["restart"]) == (1, 2, 1)


def test_restart_one_task(api, worker, running_source):
    assert api.post("/connectors/src/tasks/1/restart").status_code == 204
    assert worker.view()["tasks"]["src-1"]["restart"] == 1
    unknown = api.post("/connectors/src/tasks/5/restart")
    assert unknown.status_code == 404 and unknown.json()["message"] == "Unknown task: src-5"
    missing = api.post("/connectors/nope/tasks/0/restart")
    assert missing.status_code == 404 and missing.json()["message"] == "Unknown connector: nope"


def test_restart_hostile_inputs(api, node, running_source):
    missing = api.post("/connectors/nope/restart?includeTasks=true")
    assert missing.status_code == 404 and missing.json() == {"error_code": 404, "message": "Unknown connector: nope"}
    bad = api.post("/connectors/src/restart?includeTasks=maybe")
    assert bad.status_code == 400 and "includeTasks" in bad.json()["message"]
    assert node.raft.state.restarts == {}  # nothing was requested


def test_restart_before_any_status_is_404(api, tmp_path):
    post(api, "/connectors", {"name": "fresh", "config": source_config(tmp_path)})
    resp = api.post("/connectors/fresh/restart?onlyFailed=true")
    assert resp.status_code == 404 and resp.json()["message"] == "Status for connector fresh not found"


# ------------------------------------------------------------------ active topics
def test_active_topics_recorded_from_commits_and_reset(api, worker, running_source):
    assert api.get("/connectors/src/topics").json() == {"src": {"topics": []}}
    worker.commit("src", 1, [[{"filename": "f"}, {"position": 10}]], topics=["flights"])
    worker.commit("src", 1, [[{"filename": "f"}, {"position": 20}]], topics=["flights", "audit"])
    assert api.get("/connectors/src/topics").json() == {"src": {"topics": ["audit", "flights"]}}
    reset = api.put("/connectors/src/topics/reset")
    assert reset.status_code == 202
    assert api.get("/connectors/src/topics").json() == {"src": {"topics": []}}
    # as in Connect, a connector that does not exist has no active topics (not 404)
    assert api.get("/connectors/nope/topics").json() == {"nope": {"topics": []}}
    worker.commit("src", 1, [[{"filename": "f"}, {"position": 30}]], topics=["again"])
    assert api.delete("/connectors/src").status_code == 204
    assert api.get("/connectors/src/topics").json() == {"src": {"topics": []}}


def test_topic_tracking_flags(api, settings):
    settings.TOPIC_TRACKING_ALLOW_RESET = False
    reset = api.put("/connectors/src/topics/reset")
    assert reset.status_code == 403 and reset.json()["message"] == "Topic tracking reset is disabled."
    settings.TOPIC_TRACKING_ENABLE = False
    for resp in (api.get("/connectors/src/topics"), api.put("/connectors/src/topics/reset")):
        assert resp.status_code == 403 and resp.json() == {"error_code": 403, "message": "Topic tracking is disabled."}


# ------------------------------------------------------------------ offsets
def sink_config(tmp_path):
    return {"connector.class": SINK, "topics": "t", "path": str(tmp_path / "out"), "tasks.max": "1"}


def test_offsets_change_only_when_stopped(api, tmp_path):
    post(api, "/connectors", {"name": "sink", "config": sink_config(tmp_path)})
    body = {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": 5}}]}
    for resp in (patch(api, "/connectors/sink/offsets", body), api.delete("/connectors/sink/offsets")):
        assert resp.status_code == 400 and resp.json()["message"] == STOP_FIRST.format("sink")
    assert put(api, "/connectors/sink/stop").status_code == 204
    altered = patch(api, "/connectors/sink/offsets", {"offsets": body["offsets"] + [
        {"partition": {"kafka_topic": "t", "kafka_partition": "1"}, "offset": {"kafka_offset": 7}}]})
    assert altered.status_code == 200
    assert altered.json() == {"message": "The offsets for this connector have been altered successfully"}
    got = {(o["partition"]["kafka_partition"], o["offset"]["kafka_offset"])
           for o in api.get("/connectors/sink/offsets").json()["offsets"]}
    assert got == {(0, 5), (1, 7)}
    removed = patch(api, "/connectors/sink/offsets",
                    {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": None}]})
    assert removed.status_code == 200
    assert [o["partition"]["kafka_partition"] for o in api.get("/connectors/sink/offsets").json()["offsets"]] == [1]
    reset = api.delete("/connectors/sink/offsets")
    assert reset.status_code == 200
    assert reset.json() == {"message": "The offsets for this connector have been reset successfully"}
    assert api.get("/connectors/sink/offsets").json() == {"offsets": []}


@pytest.mark.parametrize("body, fragment", [
    ("{not json", "deserialize"),
    ({}, "Partitions / offsets need to be provided"),
    ({"offsets": []}, "Partitions / offsets need to be provided"),
    ({"offsets": [{"partition": {"kafka_topic": "t"}, "offset": {"kafka_offset": 1}}]}, "'kafka_partition'"),
    ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": "x"}, "offset": {"kafka_offset": 1}}]},
     "Kafka partitions must be valid numbers"),
    ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"position": 1}}]},
     "'kafka_offset'"),
    ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": {"kafka_offset": -1}}]},
     "greater than or equal to 0"),
    ({"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 0}, "offset": "5"}]}, "JSON object or null"),
])
def test_bad_sink_offsets_are_400_and_write_nothing(api, tmp_path, body, fragment):
    post(api, "/connectors", {"name": "sink", "config": sink_config(tmp_path)})
    put(api, "/connectors/sink/stop")
    good = {"partition": {"kafka_topic": "t", "kafka_partition": 3}, "offset": {"kafka_offset": 1}}
    if isinstance(body, dict) and body.get("offsets"):
        body = {"offsets": [good] + body["offsets"]}  # a valid entry first: nothing may be written
    resp = patch(api, "/connectors/sink/offsets", body)
    assert resp.status_code == 400 and fragment in resp.json()["message"], resp.json()
    assert api.get("/connectors/sink/offsets").json() == {"offsets": []}


def test_source_offsets_are_free_form_maps_and_unknown_connector_is_404(api, tmp_path):
    assert patch(api, "/connectors/nope/offsets", {"offsets": []}).status_code == 404
    assert api.delete("/connectors/nope/offsets").status_code == 404
    post(api, "/connectors", {"name": "src", "config": source_config(tmp_path)})
    put(api, "/connectors/src/stop")
    entry = {"partition": {"filename": "/data/a.csv"}, "offset": {"position": 42}}
    assert patch(api, "/connectors/src/offsets", {"offsets": [entry]}).status_code == 200
    assert api.get("/connectors/src/offsets").json() == {"offsets": [entry]}
