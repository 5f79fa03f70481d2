"""The JDBC sink on a real node: ``kill -9`` in the middle of its batches, restart, exactly once.

The sink writes each partition's batch and the partition's next offset in one
PostgreSQL transaction. The node is killed while batches are being written
(some transactions are cut off, some batches are committed in the target but
not yet in the metadata store); after the restart every record is in the table
exactly once.
"""
from __future__ import annotations

import json
import uuid

import psycopg
import pytest
from confluent_kafka import Producer

from tools.databases import scratch_database
from tools.launcher import NodeProcess, wait_for
from webapp.kafka.embedded import free_port
from webapp.kafka.topics import ensure_topic
from tests.kafka_helpers import read_messages

pytestmark = pytest.mark.integration

RECORDS = 30_000
BATCH = 1_000


@pytest.fixture
def pg_db():
    with scratch_database("postgresql", "i6jdbc") as name:
        yield name


def start_node(tmp_path, kafka, name="n1", ports=None) -> NodeProcess:
    rest_port, raft_port = ports or (free_port(), free_port())
    node = NodeProcess(node_id=name, rest_port=rest_port, raft_port=raft_port, data_dir=str(tmp_path / name),
                       bootstrap_servers=kafka.bootstrap_servers)
    return node.start(timeout=90)


def count(db: str, table: str) -> tuple[int, int]:
    with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={db}") as c:
        try:
            return c.execute(f'SELECT COUNT(*), COUNT(DISTINCT id) FROM "{table}"').fetchone()
        except psycopg.errors.UndefinedTable:
            return 0, 0


@pytest.mark.chaos  # make test kills the same pipeline with filter and DLQ below; this plain case runs in make chaos
def test_kill_9_mid_batch_then_every_record_exactly_once(tmp_path, kafka, pg_db):
    topic = f"eos-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka.client_config(), topic, 2)
    schema = {"type": "struct", "optional": False, "name": "event", "fields": [
        {"field": "id", "type": "int64", "optional": False}, {"field": "note", "type": "string", "optional": True}]}
    prefix = '{"schema":' + json.dumps(schema, separators=(",", ":")) + ',"payload":'
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20})
    for i in range(RECORDS):
        producer.produce(topic, (prefix + json.dumps({"id": i, "note": f"n{i} ✓"}) + "}").encode(), partition=i % 2)
        if i % 10_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    del producer

    node = start_node(tmp_path, kafka)
    c = node.client()
    cfg = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
           "connection.url": f"jdbc:postgresql://127.0.0.1:5432/{pg_db}", "connection.user": "postgres",
           "topics": topic, "table.name.format": "events", "auto.create": "true", "insert.mode": "insert",
           "pk.mode": "none", "tasks.max": "2", "batch.max.rows": str(BATCH)}
    c.create_connector("eos-sink", cfg)
    wait_for(lambda: 0 < count(pg_db, "events")[0] < RECORDS // 2, 240, interval=0.05,
             what="the sink to be in the middle of the data")
    node.kill()
    node = start_node(tmp_path, kafka, name="n1", ports=(node.rest_port, node.raft_port))
    try:
        c = node.client()

        def complete() -> bool:
            assert not c.failures("eos-sink")
            return count(pg_db, "events")[0] >= RECORDS and c.sink_offsets_total("eos-sink") >= RECORDS

        wait_for(complete, 300, interval=1.0, what="every record to reach PostgreSQL after the crash")
        assert count(pg_db, "events") == (RECORDS, RECORDS)  # no record lost, none twice
        with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={pg_db}") as conn:
            stored = conn.execute('SELECT kafka_partition, next_offset FROM "__raftconnect_offsets" '
                                  "WHERE connector = 'eos-sink' ORDER BY 1").fetchall()
        assert stored == [(0, RECORDS // 2), (1, RECORDS // 2)]
    finally:
        node.stop()


FILTER_DLQ_RECORDS = 20_000


def _dlq_messages(bootstrap: str, topic: str) -> list:
    """(key, value, headers dict) of every record of the dead letter queue topic."""
    return [(m.key(), m.value(), dict(m.headers() or [])) for m in read_messages(bootstrap, topic)]


def test_kill_9_mid_batch_with_filter_and_dlq_exactly_once(tmp_path, kafka, pg_db):
    """Filter (by header) + errors.tolerance=all + DLQ: after a kill -9 mid-batch and a restart every good
    record is in the table once, the offsets reach the end of both partitions, and every bad record is in
    the DLQ (at least once: a batch cut off after its DLQ flush is produced again) with its context headers."""
    topic, dlq = f"fdlq-{uuid.uuid4().hex[:8]}", f"fdlq-dead-{uuid.uuid4().hex[:8]}"
    ensure_topic(kafka.client_config(), topic, 2)
    schema = {"type": "struct", "optional": False, "name": "event", "fields": [
        {"field": "id", "type": "int64", "optional": False}, {"field": "qty", "type": "int32", "optional": True}]}
    prefix = '{"schema":' + json.dumps(schema, separators=(",", ":")) + ',"payload":'
    producer = Producer({"bootstrap.servers": kafka.bootstrap_servers, "linger.ms": 20})
    good, bad = set(), set()
    for i in range(FILTER_DLQ_RECORDS):
        headers = None
        if i % 7 == 0:
            headers = [("skip", b"1")]  # dropped by the filter
            payload = {"id": i, "qty": i % 1000}
        elif i % 11 == 0:
            payload = {"id": i, "qty": f"bad {i}"}  # does not match the schema: DLQ
            bad.add(i)
        else:
            payload = {"id": i, "qty": i % 1000}
            good.add(i)
        producer.produce(topic, (prefix + json.dumps(payload) + "}").encode(), partition=i % 2, headers=headers)
        if i % 5_000 == 0:
            producer.poll(0)
    assert producer.flush(60) == 0
    del producer

    node = start_node(tmp_path, kafka)
    c = node.client()
    cfg = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector",
           "connection.url": f"jdbc:postgresql://127.0.0.1:5432/{pg_db}", "connection.user": "postgres",
           "topics": topic, "table.name.format": "kept", "auto.create": "true", "tasks.max": "2",
           "batch.max.rows": "500",
           "transforms": "drop", "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
           "transforms.drop.predicate": "skipped", "predicates": "skipped",
           "predicates.skipped.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
           "predicates.skipped.name": "skip", "errors.tolerance": "all",
           "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.topic.replication.factor": "1",
           "errors.deadletterqueue.context.headers.enable": "true"}
    c.create_connector("fdlq-sink", cfg)
    wait_for(lambda: 0 < count(pg_db, "kept")[0] < len(good) // 2, 240, interval=0.05,
             what="the sink to be in the middle of the data")
    node.kill()
    node = start_node(tmp_path, kafka, name="n1", ports=(node.rest_port, node.raft_port))
    try:
        c = node.client()

        def complete() -> bool:
            assert not c.failures("fdlq-sink")
            return c.sink_offsets_total("fdlq-sink") >= FILTER_DLQ_RECORDS

        wait_for(complete, 300, interval=1.0, what="every record to be consumed after the crash")
        with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={pg_db}") as conn:
            ids = [r[0] for r in conn.execute('SELECT id FROM "kept"').fetchall()]
            stored = conn.execute('SELECT kafka_partition, next_offset FROM "__raftconnect_offsets" '
                                  "WHERE connector = 'fdlq-sink' ORDER BY 1").fetchall()
        assert len(ids) == len(good) and set(ids) == good  # none lost, none twice, none filtered or bad
        assert stored == [(0, FILTER_DLQ_RECORDS // 2), (1, FILTER_DLQ_RECORDS // 2)]
        dead = _dlq_messages(kafka.bootstrap_servers, dlq)
        seen = {json.loads(v)["payload"]["id"] for _, v, _ in dead}
        assert seen == bad  # every bad record reached the DLQ (a replayed batch may add duplicates)
        for _, value, h in dead:
            i = json.loads(value)["payload"]["id"]
            assert h["__connect.errors.topic"] == topic.encode()
            assert h["__connect.errors.partition"] == str(i % 2).encode()
            assert h["__connect.errors.offset"] == str(i // 2).encode()
            assert h["__connect.errors.stage"] == b"VALUE_CONVERTER"
            assert h["__connect.errors.connector.name"] == b"fdlq-sink"
    finally:
        node.stop()
