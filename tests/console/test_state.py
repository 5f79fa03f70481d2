"""The console's server-side truth: connector health, root causes, worker names, task history, the Kafka view."""
from __future__ import annotations

import json

import pytest
from confluent_kafka import Producer

from webapp.console.history import TaskHistory
from webapp.console.kafka import kafka_cluster
from webapp.console.state import connector_health, kafka_hint, root_cause, worker_names
from webapp.kafka.embedded import free_port
from webapp.runtime.task_metrics import TaskMetrics

SOURCE = "raftconnect.connectors.file.FileSourceConnector"

PY_TRACE = """Traceback (most recent call last):
  File "/app/webapp/runtime/worker.py", line 440, in _step
    result = self._task.run_batch()
  File "/app/webapp/connectors/file.py", line 630, in _next_batch
    raise ConnectException(f"Cannot read {split.filename}")
webapp.plugin.errors.ConnectException: Cannot read /data/bad.csv at position 10: CSV parse error: Expected 2 columns, got 4
"""

CHAINED = """Traceback (most recent call last):
  File "x.py", line 1, in f
KeyError: 'a'

During handling of the above exception, another exception occurred:

Traceback (most recent call last):
  File "x.py", line 3, in g
    raise KafkaIOError("producing failed")
webapp.kafka.spark_io.KafkaIOError: producing to topic 't' failed: KafkaError{code=_TRANSPORT,val=-195,str="Local: Broker transport failure"}
"""


def status(connector_state: str, *task_states: str, trace: str | None = None) -> dict:
    tasks = [{"id": i, "state": s, "worker_id": "127.0.0.1:8083", **({"trace": trace} if s == "FAILED" and trace
                                                                      else {})}
             for i, s in enumerate(task_states)]
    return {"name": "c", "type": "source", "connector": {"state": connector_state, "worker_id": "127.0.0.1:8083"},
            "tasks": tasks}


@pytest.mark.parametrize("connector, tasks, health", [
    ("RUNNING", ("RUNNING", "RUNNING"), "healthy"),
    ("RUNNING", ("FAILED", "FAILED"), "failed"),  # the "every task FAILED shows RUNNING" case
    ("FAILED", (), "failed"),
    ("RUNNING", ("RUNNING", "FAILED"), "degraded"),
    ("RUNNING", ("RUNNING", "UNASSIGNED"), "degraded"),
    ("RUNNING", ("UNASSIGNED", "UNASSIGNED"), "unassigned"),
    ("UNASSIGNED", (), "unassigned"),
    ("RUNNING", (), "unassigned"),  # started, but no task yet
    ("PAUSED", ("PAUSED",), "healthy"),
    ("STOPPED", (), "healthy"),
])
def test_health_is_derived_from_the_tasks(connector, tasks, health):
    got = connector_health(status(connector, *tasks))
    assert got["health"] == health
    assert got["tasks_total"] == len(tasks)
    assert sum(got["task_counts"].values()) == len(tasks)


def test_root_cause_is_the_exception_line_and_names_kafka():
    assert root_cause(PY_TRACE).startswith("webapp.plugin.errors.ConnectException: Cannot read /data/bad.csv")
    line = root_cause(CHAINED)
    assert line.startswith("webapp.kafka.spark_io.KafkaIOError") and "Broker transport failure" in line
    assert kafka_hint(line, "10.0.0.7:9092").endswith("(Kafka bootstrap servers: 10.0.0.7:9092)")
    assert kafka_hint("ValueError: bad", "10.0.0.7:9092") == "ValueError: bad"  # not a Kafka error: unchanged
    assert root_cause(None) is None and root_cause("  \n") is None
    assert root_cause("just a message") == "just a message"

    got = connector_health(status("RUNNING", "FAILED", "RUNNING", trace=CHAINED), bootstrap_servers="10.0.0.7:9092")
    assert got["health"] == "degraded"
    assert "10.0.0.7:9092" in got["root_cause"] and got["tasks"][0]["root_cause"] == got["root_cause"]
    assert got["tasks"][0]["trace"] == CHAINED and "trace" not in got["tasks"][1]


def test_one_name_per_worker():
    names = worker_names({"n1": {"rest_address": "127.0.0.1:8083"}, "n2": {"rest_address": "127.0.0.1:8084"}})
    assert names("127.0.0.1:8084") == {"node_id": "n2", "rest_address": "127.0.0.1:8084"}
    assert names("n1") == {"node_id": "n1", "rest_address": "127.0.0.1:8083"}
    assert names("10.9.9.9:1") == {"node_id": None, "rest_address": "10.9.9.9:1"}
    assert names(None) is None
    got = connector_health(status("RUNNING", "RUNNING"), names=names)
    assert got["worker"]["node_id"] == "n1" and got["tasks"][0]["worker"]["node_id"] == "n1"


def test_history_is_bounded_and_gives_rates_across_restarts():
    h = TaskHistory(keep_seconds=60, interval=5)
    t0 = 1_000_000.0
    for i in range(40):  # 200 s of samples, 60 s kept
        records = 100 * i if i < 30 else 50 * (i - 30)  # the task restarted at i == 30
        h.sample(t0 + 5 * i, {"w1": {"tasks": {"src-0": {"records": records, "lag": i,
                                                           "errors": {"total_record_errors": 2 * i}}},
                                      "other": {"tasks": {"x-0": "garbage"}}}})
    body = h.series("src", now=t0 + 5 * 39)
    (task,) = body["tasks"]
    assert task["worker"] == "w1" and task["connector"] == "src" and task["task"] == 0
    points = task["points"]
    assert len(points) <= 13 and points[-1][0] == t0 + 5 * 39
    rates = {round(p[0] - t0): p[1] for p in points}
    assert rates[5 * 30] is None  # the counter went down: no rate across the restart
    assert rates[5 * 39] == 10.0 and rates[5 * 29] == 20.0
    assert points[-1][2] == 39 and points[-1][3] == 0.4
    assert h.series("nope", now=t0 + 5 * 39)["tasks"] == []
    h.sample(t0 + 10_000, {})  # everything aged out
    assert h.series(now=t0 + 10_000)["tasks"] == []


def test_history_of_many_tasks_is_sampled_less_often_within_its_sample_budget():
    """At 100,000 tasks a sample every 5 s for 15 min grew the leader towards 1.8 GB (benchmarks/scale):
    past ``max_samples`` the history samples less often and still covers ``keep_seconds``."""
    h = TaskHistory(keep_seconds=60, interval=5, max_samples=240)  # 40 tasks x 13 samples would need 520
    t0 = 1_000_000.0
    reported = {"w1": {"tasks": {f"c-{i}": {"records": 0, "lag": None} for i in range(40)}}}
    for i in range(120):  # 600 s, one tick every 5 s as the sampler makes them
        for m in reported["w1"]["tasks"].values():
            m["records"] = 100 * i
        h.sample(t0 + 5 * i, reported)
    assert h.interval == 60 * 40 / 240  # 10 s
    body = h.series(now=t0 + 5 * 119)
    assert body["interval"] == 10.0 and len(body["tasks"]) == 40
    kept = sum(len(t["points"]) for t in body["tasks"])
    assert kept <= 240
    points = body["tasks"][0]["points"]
    assert points[-1][0] - points[0][0] >= 50  # still the last minute, at 10 s steps
    assert {p[1] for p in points[1:]} == {20.0} and points[-1][2] is None  # 100 records per 5 s; no lag
    small = TaskHistory(keep_seconds=60, interval=5, max_samples=240)
    for i in range(20):
        small.sample(t0 + 5 * i, {"w1": {"tasks": {"one-0": {"records": i, "lag": 7}}}})
    assert small.interval == 5 and len(small.series(now=t0 + 95)["tasks"][0]["points"]) == 13


def test_task_metrics_count_skipped_records_for_the_heartbeat():
    m = TaskMetrics()
    assert "errors" not in m.as_json()
    m.record_errors(failed=3, skipped=3, logged=3, dlq_sent=3)
    m.record_errors(failed=1, logged=0, dlq_failed=1)
    e = m.as_json()["errors"]
    assert e["total_records_skipped"] == 3 and e["total_record_errors"] == 4 and e["total_errors_logged"] == 3
    assert e["deadletterqueue_produce_requests"] == 4 and e["deadletterqueue_produce_failures"] == 1


def test_kafka_view_names_the_address_it_could_not_reach():
    servers = f"127.0.0.1:{free_port()}"
    body = kafka_cluster(servers, timeout=1.0)
    assert body["state"] == "unreachable" and body["brokers"] == [] and servers in body["error"]


def test_kafka_view_lists_brokers_topics_and_end_offsets(kafka_broker):
    p = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(7):  # one request each (the embedded broker numbers a batch's records its own way)
        p.produce("console-kafka-view", value=b"x", partition=0)
        assert p.flush(10) == 0
    body = kafka_cluster(kafka_broker.bootstrap_servers, timeout=10)
    assert body["state"] == "ok" and body["brokers"] and body["brokers"][0]["port"]
    topic = next(t for t in body["topics"] if t["name"] == "console-kafka-view")
    assert topic["partitions"][0]["end_offset"] == 7


def test_console_endpoints_derive_health_and_require_authentication(api, node, client, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("a\n1\n")
    created = api.post("/connectors", data=json.dumps({"name": "h1", "config": {
        "connector.class": SOURCE, "path": str(f), "format": "csv", "topic": "t", "tasks.max": "1"}}),
        content_type="application/json")
    assert created.status_code == 201, created.json()
    body = api.get("/raftconnect/v1/console/connectors").json()
    (h1,) = body["connectors"]
    assert h1["name"] == "h1" and h1["health"] in ("unassigned", "healthy")  # no agent here: nothing runs
    assert sum(body["health"].values()) == 1
    one = api.get("/raftconnect/v1/console/connectors/h1").json()
    assert one["name"] == "h1" and one["health"] == h1["health"]
    assert api.get("/raftconnect/v1/console/connectors/nope").status_code == 404
    # Connect's own status body is unchanged: no console fields in it
    assert set(api.get("/connectors/h1/status").json()) == {"name", "connector", "tasks", "type"}

    node.coordinator.heartbeat("w1", {"rest_address": "127.0.0.1:9999", "roles": ["worker"]}, {
        "generation": 1, "connectors": ["h1"],
        "tasks": {"h1-0": {"state": "RUNNING", "records": 10, "batches": 1, "last_batch_seconds": 0.1,
                           "records_per_second": 1.0, "errors": {"total_records_skipped": 4}}}})
    from webapp.console.history import history_for
    history = history_for(node)
    history.sample(1.0, dict(node.coordinator.reported))
    hist = api.get("/raftconnect/v1/console/history?connector=h1").json()
    assert hist["keep_seconds"] == 900 and [t["task"] for t in hist["tasks"]] == [0]
    metrics = api.get("/raftconnect/v1/connectors/h1/metrics").json()["tasks"][0]
    assert metrics["worker"] == {"node_id": "w1", "rest_address": "127.0.0.1:9999"}
    assert metrics["errors"]["total_records_skipped"] == 4

    for path in ("/raftconnect/v1/console/connectors", "/raftconnect/v1/console/kafka",
                 "/raftconnect/v1/console/history"):
        assert client.get(path, HTTP_AUTHORIZATION="").status_code == 401, path


def test_offsets_view_gives_a_sinks_lag_per_partition_and_the_offset_for_a_timestamp(kafka_broker):
    from webapp.console.offsets import connector_offsets_view

    p = Producer({"bootstrap.servers": kafka_broker.bootstrap_servers})
    for i in range(5):
        p.produce("console-offsets", value=b"x", partition=0)
        assert p.flush(10) == 0
    offsets = [{"partition": {"kafka_topic": "console-offsets", "kafka_partition": 0}, "offset": {"kafka_offset": 2}}]
    body = connector_offsets_view(offsets=offsets, config={"topics": "console-offsets"}, connector_type="sink",
                                  kafka_config={"bootstrap.servers": kafka_broker.bootstrap_servers},
                                  partitions_of=lambda t: 2, timestamp=0)
    assert body["kind"] == "sink"
    first, second = body["partitions"]
    assert (first["topic"], first["partition"], first["committed"], first["end_offset"], first["lag"]) == \
        ("console-offsets", 0, 2, 5, 3)
    assert first["start_offset"] == 0 and first["offset_for_timestamp"] == 0
    # a partition of its topics with nothing committed: the lag is all of it (a sink starts at the beginning)
    assert second["partition"] == 1 and second["committed"] is None and second["lag"] == 0


def test_offsets_view_of_a_file_source_says_progress_and_is_served(api, node, tmp_path):
    f = tmp_path / "in.csv"
    f.write_text("a\n" + "1\n" * 50)
    created = api.post("/connectors", data=json.dumps({"name": "prog", "config": {
        "connector.class": SOURCE, "path": str(f), "format": "csv", "topic": "t"}}), content_type="application/json")
    assert created.status_code == 201
    from webapp.plugin import SourceOffset
    node.store.alter_offsets("prog", [SourceOffset({"filename": str(f)}, {"position": 40})])
    body = api.get("/raftconnect/v1/console/connectors/prog/offsets").json()
    assert body["kind"] == "source"
    (row,) = body["partitions"]
    assert row["position"] == 40 and row["unit"] == "bytes" and row["size"] == f.stat().st_size
    assert api.get("/raftconnect/v1/console/connectors/prog/offsets?timestamp=soon").status_code == 400
    assert api.get("/raftconnect/v1/console/connectors/nope/offsets").status_code == 404
