"""The file sink task (:mod:`webapp.connectors.file.sink_task`): malformed records, empty or missing topics,
schema changes and tombstones in one batch. Real Kafka (Tansu) and Spark; every test runs with both batch engines.
"""
from __future__ import annotations

import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from webapp.plugin import ConnectException, partition_key
from webapp.connectors.file import FileSinkConnector, FileSinkTask
from webapp.kafka.topics import ensure_topic
from tests.connectors.file.support import (
    context,
    data_files,
    run_sink,
    unique,
)

#: every test here runs with both batch engines (Spark per batch, and in-process)
pytestmark = pytest.mark.usefixtures("engine")


@pytest.mark.parametrize("schemas_enable", ["true", "false"])
def test_malformed_records_fail_the_sink_batch_and_write_nothing(spark, kafka_broker, tmp_path, schemas_enable):
    topic, out = unique("malformed"), tmp_path / "out"
    ensure_topic(kafka_broker.client_config(), topic, 1)
    p = Producer(kafka_broker.client_config())
    p.produce(topic, b'{"a": 1}')
    p.produce(topic, b"{not json")
    assert p.flush(10) == 0
    conn = FileSinkConnector()
    conn.start({"topics": topic, "path": str(out), "value.converter.schemas.enable": schemas_enable})
    task = FileSinkTask(context(spark, kafka_broker, "bad-sink", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    with pytest.raises(ConnectException, match="schemas.enable|JSON|alformed"):
        task.run_batch()
    assert data_files(out) == []


def test_sink_without_topic_or_records_does_nothing(spark, kafka_broker, tmp_path):
    conn = FileSinkConnector()
    conn.start({"topics": unique("absent"), "path": str(tmp_path / "out")})
    task = FileSinkTask(context(spark, kafka_broker, "idle", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    assert task.run_batch() is None
    empty = unique("empty")
    ensure_topic(kafka_broker.client_config(), empty, 2)
    conn.start({"topics": empty, "path": str(tmp_path / "out")})
    task = FileSinkTask(context(spark, kafka_broker, "idle", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    assert task.run_batch() is None


def test_sink_handles_schema_change_and_tombstones_within_a_batch(spark, kafka_broker, tmp_path):
    """Records 0-149 have schema A, 150-199 schema B (one more field), plus tombstones.

    The sink plans from the first records, notices the unplanned schema in the same
    job and redoes the batch with the merged schema; tombstones move offsets only.
    """
    from webapp.runtime.converters import encode_value, struct_schema

    topic, out = unique("evolve"), tmp_path / "out"
    ensure_topic(kafka_broker.client_config(), topic, 1)
    a = struct_schema([{"field": "id", "type": "int64", "optional": False},
                       {"field": "name", "type": "string", "optional": True}], name="rec")
    b = struct_schema([*a["fields"], {"field": "score", "type": "double", "optional": True}], name="rec")
    p = Producer(kafka_broker.client_config())
    for i in range(200):
        schema, row = (a, {"id": i, "name": f"n{i}"}) if i < 150 else (b, {"id": i, "name": None, "score": i / 2})
        p.produce(topic, encode_value(row, schema))
        if i % 50 == 0:
            p.produce(topic, None)  # tombstone
    assert p.flush(10) == 0
    total, offsets = run_sink(spark, kafka_broker, {"topics": topic, "path": str(out)}, tmp_path, "evolve")
    assert total == 204
    assert offsets[partition_key({"kafka_topic": topic, "kafka_partition": 0})].offset == {"kafka_offset": 204}
    got = pq.read_table(out).sort_by("id")
    assert got.column_names == ["id", "name", "score"]
    assert got.column("id").to_pylist() == list(range(200))
    assert got.column("name").to_pylist() == [f"n{i}" for i in range(150)] + [None] * 50
    assert got.column("score").to_pylist() == [None] * 150 + [i / 2 for i in range(150, 200)]
