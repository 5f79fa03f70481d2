"""File connectors with single message transforms and error handling, through Spark and real Kafka.

* source: InsertField + RegexRouter run inside the source's Spark job, records land
  in the routed topic (created on the fly) with the inserted fields;
* sink: a Filter with a predicate drops records inside the sink's Spark job;
* errors: with ``errors.tolerance=all`` a poison record (unparsable JSON) and a
  record a Cast cannot convert go to the dead letter queue with Kafka's
  ``__connect.errors.*`` headers while the good records are written and the
  offsets move on; with ``errors.tolerance=none`` the batch fails and writes nothing.
"""
from __future__ import annotations

import json

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from webapp.plugin import ConnectException, partition_key
from webapp.connectors.file import FileSinkConnector, FileSinkTask
from webapp.kafka.topics import ensure_topic
from webapp.runtime.converters import decode_value, encode_value, struct_schema
from tests.connectors.file.support import context, data_files, run_sink, run_source, unique
from tests.connect.conftest import api, node  # noqa: F401 - fixtures (a node whose /metrics is read)
from tests.kafka_helpers import read_messages, read_topic

pytestmark = pytest.mark.integration
P = "org.apache.kafka.connect.transforms."


def test_source_insert_field_and_regex_router_then_sink_filter(spark, kafka_broker, tmp_path):
    src = tmp_path / "people.csv"
    src.write_text("id,name,city\n" + "".join(f"{i},n{i},{'Paris' if i % 3 else 'Oslo'}\n" for i in range(30)))
    base = unique("people")
    raw_topic, routed = base + "-raw", base + "-clean"
    records, _, _ = run_source(spark, kafka_broker, {
        "path": str(src), "format": "csv", "topic": raw_topic, "topic.creation.default.partitions": "1",
        "transforms": "tag,route",
        "transforms.tag.type": P + "InsertField$Value", "transforms.tag.static.field": "origin",
        "transforms.tag.static.value": "csv", "transforms.tag.topic.field": "from_topic",
        "transforms.route.type": P + "RegexRouter", "transforms.route.regex": "(.*)-raw",
        "transforms.route.replacement": "$1-clean"}, tmp_path, "smt-src")
    assert records == 30
    values = read_topic(kafka_broker.bootstrap_servers, routed)
    assert len(values) == 30
    schema, first = decode_value(values[0])
    assert first == {"id": first["id"], "name": f"n{first['id']}", "city": first["city"], "origin": "csv",
                     "from_topic": raw_topic}
    # Kafka's InsertField adds topic, partition, offset, timestamp, then the static field
    assert [f["field"] for f in schema["fields"]] == ["id", "name", "city", "from_topic", "origin"]

    out2 = tmp_path / "out2"
    sunk, offsets = run_sink(spark, kafka_broker, {
        "topics": routed, "path": str(out2), "format": "parquet",
        "transforms": "onlyOslo,keep", "transforms.onlyOslo.type": P + "Filter",
        "transforms.onlyOslo.predicate": "isRouted", "transforms.onlyOslo.negate": "true",
        "transforms.keep.type": "ReplaceField$Value", "transforms.keep.include": "id,city",
        "predicates": "isRouted", "predicates.isRouted.type": "TopicNameMatches",
        "predicates.isRouted.pattern": ".*-clean"}, tmp_path, "smt-sink")
    assert sunk == 30  # every record consumed and its offset committed
    assert offsets[partition_key({"kafka_topic": routed, "kafka_partition": 0})].offset == {"kafka_offset": 30}
    table = pq.read_table(out2)
    assert table.column_names == ["id", "city"] and table.num_rows == 30

    out3 = tmp_path / "out3"
    run_sink(spark, kafka_broker, {
        "topics": routed, "path": str(out3), "format": "json", "transforms": "f",
        "transforms.f.type": "Filter", "transforms.f.predicate": "p", "predicates": "p",
        "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": ".*-clean"}, tmp_path, "smt-sink-all")
    assert data_files(out3) == []  # every record filtered out, offsets still moved


def _sink_task(spark, kafka, tmp_path, name, config):
    conn = FileSinkConnector()
    conn.start(config)
    task = FileSinkTask(context(spark, kafka, name, 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    return task


def _produce_poison(kafka, topic):
    schema = struct_schema([{"field": "id", "type": "int64", "optional": False},
                            {"field": "amount", "type": "string", "optional": True}], name="payment")
    p = Producer(kafka.client_config())
    for i in range(6):
        amount = "oops" if i == 4 else str(i * 10)
        p.produce(topic, encode_value({"id": i, "amount": amount}, schema), key=f"k{i}".encode(),
                  headers=[("trace", f"t{i}".encode())])
        if i == 1:
            p.produce(topic, b'{"schema": {"type": "struct"', key=b"poison")  # unparsable JSON
    assert p.flush(10) == 0


def test_poison_records_go_to_the_dead_letter_queue_with_context_headers(spark, kafka_broker, tmp_path):
    topic, dlq, out = unique("payments"), unique("payments-dlq"), tmp_path / "out"
    ensure_topic(kafka_broker.client_config(), topic, 1)
    _produce_poison(kafka_broker, topic)
    task = _sink_task(spark, kafka_broker, tmp_path, "pay-sink", {
        "topics": topic, "path": str(out), "format": "json",
        "transforms": "cast", "transforms.cast.type": P + "Cast$Value", "transforms.cast.spec": "amount:int32",
        "errors.tolerance": "all", "errors.log.enable": "true", "errors.log.include.messages": "true",
        "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1",
        "errors.deadletterqueue.context.headers.enable": "true"})
    from webapp.runtime.task_metrics import TaskMetrics

    task.context.metrics = TaskMetrics()  # what the worker hands a task: skipped records are counted there
    result = task.run_batch()
    assert result.records == 7  # the task keeps running: every record consumed
    errors = task.context.metrics.as_json()["errors"]
    assert errors["total_records_skipped"] == 2 and errors["total_errors_logged"] == 2
    assert errors["deadletterqueue_produce_requests"] == 2
    assert [o.offset for o in result.offsets] == [{"kafka_offset": 7}]
    rows = [json.loads(line) for f in data_files(out) for line in open(out / f)]
    assert sorted(r["id"] for r in rows) == [0, 1, 2, 3, 5]
    assert {r["id"]: r["amount"] for r in rows}[5] == 50

    dead = read_messages(kafka_broker.bootstrap_servers, dlq)
    assert [m.key() for m in dead] == [b"poison", b"k4"]
    assert dead[0].value() == b'{"schema": {"type": "struct"'
    assert decode_value(dead[1].value())[1] == {"id": 4, "amount": "oops"}
    h0, h1 = dict(dead[0].headers()), dict(dead[1].headers())
    e = "__connect.errors."
    assert (h0[e + "topic"], h0[e + "partition"], h0[e + "offset"]) == (topic.encode(), b"0", b"2")
    assert h0[e + "stage"] == b"VALUE_CONVERTER"
    assert h0[e + "class.name"] == b"org.apache.kafka.connect.json.JsonConverter"
    assert h0[e + "exception.class.name"] == b"org.apache.kafka.connect.errors.DataException"
    assert (h0[e + "connector.name"], h0[e + "task.id"]) == (b"pay-sink", b"0")
    assert h1["trace"] == b"t4"  # the original headers are kept
    assert (h1[e + "stage"], h1[e + "offset"]) == (b"TRANSFORMATION", b"5")
    assert h1[e + "class.name"] == (P + "Cast$Value").encode()
    assert b"oops" in h1[e + "exception.message"] and h1[e + "exception.stacktrace"]


def test_dead_letter_queue_producer_and_topic_creation_take_the_connectors_override_keys(
        spark, kafka_broker, tmp_path, monkeypatch):
    """Issue 15 item 3: as the JDBC sink, the file sink's DLQ producer gets ``producer.override.*`` and its
    topic creation ``admin.override.*`` (Java names mapped), and the file source's topic creation too."""
    import webapp.kafka.spark_io as spark_io
    import webapp.kafka.topics as topics

    admin_configs, producer_configs = [], []
    real_admin, real_client = topics._admin_config, spark_io._client_config

    def spy_admin(kafka_config):
        conf = real_admin(kafka_config)
        admin_configs.append(conf)
        return conf

    def spy_client(base, defaults, drop, overrides):
        conf = real_client(base, defaults, drop, overrides)
        if drop is spark_io._CONSUMER_ONLY_PREFIXES:
            producer_configs.append(conf)
        return conf

    monkeypatch.setattr(topics, "_admin_config", spy_admin)
    monkeypatch.setattr(spark_io, "_client_config", spy_client)
    topic, dlq, out = unique("payments-ov"), unique("payments-ov-dlq"), tmp_path / "out"
    ensure_topic(kafka_broker.client_config(), topic, 1)
    _produce_poison(kafka_broker, topic)
    admin_configs.clear()
    task = _sink_task(spark, kafka_broker, tmp_path, "pay-sink-ov", {
        "topics": topic, "path": str(out), "format": "json",
        "transforms": "cast", "transforms.cast.type": P + "Cast$Value", "transforms.cast.spec": "amount:int32",
        "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
        "errors.deadletterqueue.topic.replication.factor": "1",
        "producer.override.linger.ms": "7", "producer.override.max.request.size": "2000000",
        "admin.override.request.timeout.ms": "7000", "consumer.override.fetch.max.wait.ms": "50"})
    assert admin_configs and all(c["socket.timeout.ms"] == "7000" for c in admin_configs)
    result = task.run_batch()
    assert result.records == 7
    assert len(read_messages(kafka_broker.bootstrap_servers, dlq)) == 2
    assert len(producer_configs) == 1  # the DLQ's producer, nothing else produced
    dlq_conf = producer_configs[0]
    assert (dlq_conf["linger.ms"], dlq_conf["message.max.bytes"]) == ("7", "2000000")
    assert "fetch.wait.max.ms" not in dlq_conf and "socket.timeout.ms" not in dlq_conf
    assert dlq_conf["bootstrap.servers"] == kafka_broker.bootstrap_servers

    admin_configs.clear()
    data = tmp_path / "in"
    data.mkdir()
    (data / "a.json").write_text('{"id": 1}\n')
    routed = unique("ov-source")
    run_source(spark, kafka_broker, {"path": str(data), "topic": routed, "format": "json",
                                     "admin.override.request.timeout.ms": "6000"}, tmp_path, "ov-src")
    assert admin_configs and admin_configs[0]["socket.timeout.ms"] == "6000"


def test_tolerance_none_fails_the_batch_and_writes_nothing(spark, kafka_broker, tmp_path):
    topic, out = unique("payments-strict"), tmp_path / "out"
    ensure_topic(kafka_broker.client_config(), topic, 1)
    _produce_poison(kafka_broker, topic)
    task = _sink_task(spark, kafka_broker, tmp_path, "strict-sink", {
        "topics": topic, "path": str(out), "format": "json",
        "transforms": "cast", "transforms.cast.type": "Cast$Value", "transforms.cast.spec": "amount:int32"})
    with pytest.raises(ConnectException, match="Tolerance exceeded in error handler"):
        task.run_batch()
    assert data_files(out) == []


def test_invalid_transform_config_fails_task_start(spark, kafka_broker, tmp_path):
    with pytest.raises(ConnectException, match="transforms.x.type"):
        _sink_task(spark, kafka_broker, tmp_path, "bad-config", {
            "topics": unique("t"), "path": str(tmp_path / "o"), "transforms": "x",
            "transforms.x.type": "com.example.Missing"})


def test_source_records_a_transformation_rejects_are_skipped_and_shown_in_metrics(
        spark, kafka_broker, tmp_path, api, node):  # noqa: F811 - fixtures
    """errors.tolerance=all on a file source: the rows a Cast cannot convert are skipped in the Spark job's
    Python workers, and counted (accumulator) into the task's metrics, which /metrics shows as Connect's
    task-error-metrics of that task (issue 17 item 6)."""
    from webapp.connectors.file import FileSourceConnector, FileSourceTask
    from webapp.runtime.task_metrics import TaskMetrics
    from tests.connectors.file.support import context
    from tests.metrics_helpers import assert_source_skips, report_a_task

    src = tmp_path / "payments.csv"
    amounts = ["10", "20", "oops", "40", "4O", "60", "70"]  # two a Cast to int32 rejects
    src.write_text("id,amount\n" + "".join(f"{i},{a}\n" for i, a in enumerate(amounts)))
    topic = unique("skips")
    config = {"path": str(src), "format": "csv", "topic": topic, "topic.creation.default.partitions": "1",
              "transforms": "cast", "transforms.cast.type": P + "Cast$Value", "transforms.cast.spec": "amount:int32",
              "errors.tolerance": "all", "errors.log.enable": "true"}
    conn = FileSourceConnector()
    conn.start(config)
    task = FileSourceTask(context(spark, kafka_broker, "skip-src", 0, tmp_path), conn.task_configs(1)[0])
    task.context.metrics = TaskMetrics()  # what the worker hands a task
    task.start()
    try:
        records = 0
        while (result := task.run_batch()) is not None:
            records += result.records
            task.context.metrics.batch_done(result.records, 0.1)
    finally:
        task.stop()
    assert records == 5
    assert sorted(decode_value(v)[1]["amount"] for v in read_topic(kafka_broker.bootstrap_servers, topic)) == \
        [10, 20, 40, 60, 70]
    report_a_task(node, task.context.metrics, "skip-src", {"connector.class": "FileSourceConnector",
                                                            "path": str(src), "topic": topic})
    assert_source_skips(api, "skip-src", written=5, skipped=2, logged=2)
