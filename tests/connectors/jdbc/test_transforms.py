"""JDBC connectors with SMTs, predicates, errors.tolerance and a dead letter queue (issue 15, item 1).

Real PostgreSQL and MariaDB, real Kafka (Tansu) and Spark, tasks driven directly
as in ``test_round_trips.py`` (whose fixtures and helpers this module reuses, with both
batch engines: every batch a Spark job, and the in-process engine).
"""
from __future__ import annotations

import datetime as dt
import json

import pytest
from confluent_kafka import Producer

from webapp.plugin import ConnectException
from webapp.connectors.jdbc import JdbcSinkConnector, JdbcSinkTask, JdbcSourceConnector
from webapp.kafka.topics import ensure_topic
from tests.connectors.jdbc.test_round_trips import (  # noqa: F401 - fixtures are used by name
    _kv,
    _produce,
    context,
    drain,
    my,
    my_url,
    pg,
    pg_url,
    rows,
    run_connector,
    unique,
)
from tests.connect.conftest import api, node  # noqa: F401 - fixtures (a node whose /metrics is read)
from tests.kafka_helpers import read_messages

pytestmark = pytest.mark.usefixtures("engine")  # every test runs with both batch engines

INSERT_FIELD = "org.apache.kafka.connect.transforms.InsertField$Value"
SCHEMA = {"type": "struct", "optional": False, "name": "order", "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "qty", "type": "int32", "optional": True},
    {"field": "placed", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp",
     "version": 1}]}
PLACED = dt.datetime(2024, 3, 1, 12, 30, tzinfo=dt.timezone.utc)


def envelope(payload: dict, schema: dict = SCHEMA) -> bytes:
    return json.dumps({"schema": schema, "payload": payload}, separators=(",", ":")).encode()


def order(i: int, **extra) -> bytes:
    ms = int(PLACED.timestamp() * 1000) + i * 60_000
    return envelope({"id": i, "name": f"n{i}", "qty": i * 10, "placed": ms, **extra})


def produce(kafka, topic: str, records: list, partitions: int = 1) -> None:
    """``records``: (partition, value bytes, headers list or None)."""
    ensure_topic(kafka.client_config(), topic, partitions)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for part, value, headers in records:
        p.produce(topic, value, partition=part, headers=headers or None)
    assert p.flush(30) == 0


def read_all(kafka, topic: str, timeout: float = 60.0) -> list:
    """Every message of ``topic`` (partition, offset, key, value, headers as a list), to the end."""
    return [(m.partition(), m.offset(), m.key(), m.value(), list(m.headers() or []))
            for m in read_messages(kafka.bootstrap_servers, topic, timeout)]


def sink_task(spark, kafka, tmp, name, config, offsets=None) -> JdbcSinkTask:
    conn = JdbcSinkConnector()
    conn.start(config)
    task = JdbcSinkTask(context(spark, kafka, name, 0, tmp, offsets), conn.task_configs(1)[0])
    task.start()
    return task


def target_offsets(conn, connector: str, topic: str) -> dict:
    return {(t, p): n for t, p, n in rows(conn, "SELECT topic, kafka_partition, next_offset FROM "
                                                "__raftconnect_offsets WHERE connector = %s AND topic = %s",
                                          (connector, topic))}


# --------------------------------------------------------------------------------------
# validation
# --------------------------------------------------------------------------------------
def test_transforms_tolerance_and_dlq_are_accepted():
    base = {"connection.url": "jdbc:postgresql://127.0.0.1:5432/x", "topics": "t", "table.whitelist": "t",
            "mode": "bulk", "topic.prefix": "p-"}
    smt = {"transforms": "ins", "transforms.ins.type": INSERT_FIELD, "transforms.ins.static.field": "f",
           "transforms.ins.static.value": "v", "errors.tolerance": "all", "errors.log.enable": "true"}
    assert not any(JdbcSourceConnector().validate({**base, **smt}).values())
    assert not any(JdbcSinkConnector().validate({**base, **smt, "errors.deadletterqueue.topic.name": "dlq",
                                                 "errors.deadletterqueue.context.headers.enable": "true"}).values())
    assert not any(JdbcSinkConnector().validate({**base, **smt, "pk.mode": "record_key",
                                                 "delete.enabled": "true"}).values())


# --------------------------------------------------------------------------------------
# source: the chain runs in the source's job
# --------------------------------------------------------------------------------------
def test_source_chain_keys_casts_converts_and_routes(spark, kafka_broker, tmp_path, pg_db):
    table = unique("goods")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" (id BIGSERIAL PRIMARY KEY, name TEXT, price NUMERIC(10,2), '
                  "placed TIMESTAMP)")
        c.execute(f'INSERT INTO "{table}" (name, price, placed) SELECT \'g\' || g, g * 1.5, '
                  "TIMESTAMP '2024-01-01' + g * INTERVAL '1 day' FROM generate_series(1, 300) g")
    prefix = unique("smt") + "-"
    src = {"connection.url": pg_url(pg_db), "connection.user": "postgres", "mode": "incrementing",
           "incrementing.column.name": "id", "table.whitelist": table, "topic.prefix": prefix,
           "batch.max.rows": "120", "poll.interval.ms": "0", "topic.creation.default.partitions": "1",
           "transforms": "key,extract,cast,day,route",
           "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey", "transforms.key.fields": "id",
           "transforms.extract.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
           "transforms.extract.field": "id",
           "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
           "transforms.cast.spec": "price:float64",
           "transforms.day.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
           "transforms.day.field": "placed", "transforms.day.target.type": "string",
           "transforms.day.format": "yyyy-MM-dd",
           "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
           "transforms.route.regex": "(.*)goods(.*)", "transforms.route.replacement": "$1wares$2"}
    offsets: dict = {}
    assert run_connector(JdbcSourceConnector, spark, kafka_broker, src, tmp_path, "smt-src", offsets) == 300
    assert next(iter(offsets.values())).offset == {"incrementing": 300}  # every row read advances the offset
    routed = prefix + table.replace("goods", "wares")
    msgs = read_all(kafka_broker, routed)
    assert len(msgs) == 300
    first = min(msgs, key=lambda m: json.loads(m[2])["payload"])
    key, value = json.loads(first[2]), json.loads(first[3])
    assert key["schema"]["type"] == "int64" and key["payload"] == 1
    fields = {f["field"]: f for f in value["schema"]["fields"]}
    assert fields["price"]["type"] == "double" and fields["placed"]["type"] == "string"
    assert value["payload"] == {"id": 1, "name": "g1", "price": 1.5, "placed": "2024-01-02"}


# --------------------------------------------------------------------------------------
# sink: the chain decides the table, its columns and its key
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("server", ["postgresql", "mariadb"])
def test_sink_chain_decides_table_columns_and_key_and_auto_evolves(spark, kafka_broker, tmp_path, pg_db, my_db,
                                                                   server):
    topic = unique("orders")
    produce(kafka_broker, topic, [(i % 2, order(i), None) for i in range(40)], partitions=2)
    url = pg_url(pg_db) if server == "postgresql" else my_url(my_db)
    cfg = {"connection.url": url, "connection.user": "postgres" if server == "postgresql" else "root",
           "topics": topic, "table.name.format": "t_${topic}", "auto.create": "true", "auto.evolve": "true",
           "insert.mode": "upsert", "pk.mode": "record_key", "pk.fields": "order_id",
           "transforms": "key,extract,rename,cast,day,route",
           "transforms.key.type": "org.apache.kafka.connect.transforms.ValueToKey", "transforms.key.fields": "id",
           "transforms.extract.type": "org.apache.kafka.connect.transforms.ExtractField$Key",
           "transforms.extract.field": "id",
           "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
           "transforms.rename.renames": "name:label", "transforms.rename.exclude": "id",
           "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
           "transforms.cast.spec": "qty:float64",
           "transforms.day.type": "org.apache.kafka.connect.transforms.TimestampConverter$Value",
           "transforms.day.field": "placed", "transforms.day.target.type": "string",
           "transforms.day.format": "yyyy-MM-dd HH:mm",
           "transforms.route.type": "org.apache.kafka.connect.transforms.RegexRouter",
           "transforms.route.regex": "orders_(.*)", "transforms.route.replacement": "routed_$1"}
    offsets: dict = {}
    assert drain(sink_task(spark, kafka_broker, tmp_path, "smt-sink", cfg, offsets), offsets) == 40
    table = "t_" + topic.replace("orders_", "routed_")
    with (pg(pg_db) if server == "postgresql" else my(my_db)) as c:
        q = '"' if server == "postgresql" else "`"
        got = rows(c, f"SELECT order_id, label, qty, placed FROM {q}{table}{q} ORDER BY order_id")
        assert len(got) == 40 and got[3] == (3, "n3", 30.0, "2024-03-01 12:33")
        assert isinstance(got[3][2], float)  # the Cast decided the column's type (not an integer column)
        assert target_offsets(c, "smt-sink", topic) == {(topic, 0): 20, (topic, 1): 20}
    # a new field in the records: auto.evolve adds its (transformed) column; upsert by the extracted key
    extra = {**SCHEMA, "fields": SCHEMA["fields"] + [{"field": "note", "type": "string", "optional": True}]}
    produce(kafka_broker, topic, [(1, envelope({"id": 3, "name": "again", "qty": 1, "placed": 0, "note": "x"},
                                               extra), None)], partitions=2)
    assert drain(sink_task(spark, kafka_broker, tmp_path, "smt-sink", cfg, offsets), offsets) == 1
    with (pg(pg_db) if server == "postgresql" else my(my_db)) as c:
        got = rows(c, f"SELECT order_id, label, note FROM {q}{table}{q} WHERE order_id = 3")
        assert got == [(3, "again", "x")]
        assert rows(c, f"SELECT COUNT(*) FROM {q}{table}{q}")[0][0] == 40


# --------------------------------------------------------------------------------------
# error tolerance and the dead letter queue
# --------------------------------------------------------------------------------------
BAD_TYPE = envelope({"id": 3, "name": "bad", "qty": "not a number", "placed": None})
NOT_JSON = b"this is not json"


def test_tolerance_all_skips_bad_records_and_still_advances_the_offset(spark, kafka_broker, tmp_path, pg_db):
    topic = unique("tol")
    # the bad records are in the middle and at the end: the committed offset must pass them
    produce(kafka_broker, topic, [(0, order(1), None), (0, order(2), None), (0, BAD_TYPE, None),
                                  (0, order(4), None), (0, NOT_JSON, None)])
    cfg = {"connection.url": pg_url(pg_db), "connection.user": "postgres", "topics": topic, "auto.create": "true",
           "errors.tolerance": "all", "errors.log.enable": "true", "errors.log.include.messages": "true"}
    offsets: dict = {}
    assert drain(sink_task(spark, kafka_broker, tmp_path, "tol-sink", cfg, offsets), offsets) == 5
    with pg(pg_db) as c:
        assert rows(c, f'SELECT id, name FROM "{topic}" ORDER BY id') == [(1, "n1"), (2, "n2"), (4, "n4")]
        assert target_offsets(c, "tol-sink", topic) == {(topic, 0): 5}
    assert next(iter(offsets.values())).offset == {"kafka_offset": 5}

    # without tolerance (on the transforming path) the same records fail the task; nothing is committed
    strict = {**cfg, "errors.tolerance": "none", "table.name.format": "strict_${topic}", "transforms": "ins",
              "transforms.ins.type": INSERT_FIELD, "transforms.ins.static.field": "origin",
              "transforms.ins.static.value": "kafka"}
    task = sink_task(spark, kafka_broker, tmp_path, "strict-sink", strict)
    with pytest.raises(ConnectException, match="Tolerance exceeded"):
        task.run_batch()
    with pg(pg_db) as c:
        assert target_offsets(c, "strict-sink", topic) == {}


@pytest.mark.parametrize("server", ["postgresql", "mariadb"])
def test_filter_and_dead_letter_queue_with_context_headers(spark, kafka_broker, tmp_path, pg_db, my_db, server):
    topic, dlq = unique("dlq_in"), unique("dlq")
    skip = [("skip", b"1")]
    records = [(0, order(1), None), (0, order(2), skip), (0, BAD_TYPE, [("trace", b"t3")]), (0, order(4), None),
               (0, NOT_JSON, None), (0, order(6), skip)]  # the last record is filtered: its offset still counts
    produce(kafka_broker, topic, records)
    url = pg_url(pg_db) if server == "postgresql" else my_url(my_db)
    cfg = {"connection.url": url, "connection.user": "postgres" if server == "postgresql" else "root",
           "topics": topic, "auto.create": "true", "table.name.format": "${topic}_out",
           "transforms": "drop", "transforms.drop.type": "org.apache.kafka.connect.transforms.Filter",
           "transforms.drop.predicate": "skipped", "predicates": "skipped",
           "predicates.skipped.type": "org.apache.kafka.connect.transforms.predicates.HasHeaderKey",
           "predicates.skipped.name": "skip",
           "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
           "errors.deadletterqueue.topic.replication.factor": "1",
           "errors.deadletterqueue.context.headers.enable": "true"}
    offsets: dict = {}
    assert drain(sink_task(spark, kafka_broker, tmp_path, "dlq-sink", cfg, offsets), offsets) == 6
    with (pg(pg_db) if server == "postgresql" else my(my_db)) as c:
        q = '"' if server == "postgresql" else "`"
        assert rows(c, f"SELECT id FROM {q}{topic}_out{q} ORDER BY id") == [(1,), (4,)]
        assert target_offsets(c, "dlq-sink", topic) == {(topic, 0): 6}
    dead = read_all(kafka_broker, dlq)
    assert [m[3] for m in dead] == [BAD_TYPE, NOT_JSON]  # the original bytes, in order
    bad = dict(dead[0][4])
    assert bad["trace"] == b"t3"  # the record's own headers come first, then the context
    assert bad["__connect.errors.topic"] == topic.encode()
    assert bad["__connect.errors.partition"] == b"0" and bad["__connect.errors.offset"] == b"2"
    assert bad["__connect.errors.connector.name"] == b"dlq-sink" and bad["__connect.errors.task.id"] == b"0"
    assert bad["__connect.errors.stage"] == b"VALUE_CONVERTER"
    assert b"DataException" in bad["__connect.errors.exception.class.name"]
    assert dict(dead[1][4])["__connect.errors.offset"] == b"4"


@pytest.mark.parametrize("server", ["postgresql", "mariadb"])
def test_a_record_the_table_cannot_hold_is_skipped_with_tolerance_or_named_without(spark, kafka_broker, tmp_path,
                                                                                   pg_db, my_db, server):
    topic, dlq = unique("narrow"), unique("narrow_dlq")
    too_long = order(2, name="far too long for five")
    too_big = order(3, qty=100_000)  # over SMALLINT
    produce(kafka_broker, topic, [(0, order(1), None), (0, too_long, None), (0, too_big, None), (0, order(4), None)])
    table = f"{topic}_t"
    pgsql = server == "postgresql"
    with (pg(pg_db) if pgsql else my(my_db)) as c:
        q = '"' if pgsql else "`"
        for t in (table, f"{topic}_s", f"{topic}_f"):
            c.cursor().execute(f"CREATE TABLE {q}{t}{q} (id BIGINT PRIMARY KEY, name VARCHAR(5), qty SMALLINT, "
                               f"placed {'TIMESTAMP' if pgsql else 'DATETIME(3)'})")
    cfg = {"connection.url": pg_url(pg_db) if pgsql else my_url(my_db),
           "connection.user": "postgres" if pgsql else "root", "topics": topic, "table.name.format": "${topic}_t",
           "errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
           "errors.deadletterqueue.topic.replication.factor": "1",
           "errors.deadletterqueue.context.headers.enable": "true"}
    offsets: dict = {}
    assert drain(sink_task(spark, kafka_broker, tmp_path, "narrow-sink", cfg, offsets), offsets) == 4
    with (pg(pg_db) if pgsql else my(my_db)) as c:
        assert rows(c, f"SELECT id, name FROM {q}{table}{q} ORDER BY id") == [(1, "n1"), (4, "n4")]
        assert target_offsets(c, "narrow-sink", topic) == {(topic, 0): 4}
    dead = read_all(kafka_broker, dlq)
    assert [m[3] for m in dead] == [too_long, too_big]
    headers = [dict(m[4]) for m in dead]
    assert [h["__connect.errors.offset"] for h in headers] == [b"1", b"2"]
    assert all(h["__connect.errors.stage"] == b"TASK_PUT" for h in headers)
    assert all(b"DataError" in h["__connect.errors.exception.class.name"] or
               b"OutOfRange" in h["__connect.errors.exception.class.name"] or
               b"Truncation" in h["__connect.errors.exception.class.name"] for h in headers), headers

    # without tolerance (transforming path) the task fails naming the record instead of an opaque driver error
    strict = {**cfg, "errors.tolerance": "none", "errors.deadletterqueue.topic.name": "",
              "table.name.format": "${topic}_s",
              "transforms": "keep", "transforms.keep.type": "org.apache.kafka.connect.transforms.Filter",
              "transforms.keep.predicate": "none", "predicates": "none",
              "predicates.none.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
              "predicates.none.pattern": "no-such-topic"}
    task = sink_task(spark, kafka_broker, tmp_path, "narrow-strict", strict)
    with pytest.raises(ConnectException, match=r"Tolerance exceeded.*TASK_PUT.*offset=1"):
        task.run_batch()
    with (pg(pg_db) if pgsql else my(my_db)) as c:
        assert target_offsets(c, "narrow-strict", topic) == {}
        assert rows(c, f"SELECT COUNT(*) FROM {q}{topic}_s{q}") == [(0,)]  # the good record 0 rolled back too
    # and on the fast path (no transforms, no tolerance): the same clear failure, nothing committed
    fast = {k: v for k, v in cfg.items() if not k.startswith("errors.")}
    task = sink_task(spark, kafka_broker, tmp_path, "narrow-fast", {**fast, "table.name.format": "${topic}_f"})
    with pytest.raises(ConnectException, match=r"cannot hold the record at .*\[0\] offset 1 \(errors.tolerance=all"):
        task.run_batch()
    with (pg(pg_db) if pgsql else my(my_db)) as c:
        assert target_offsets(c, "narrow-fast", topic) == {}


@pytest.mark.parametrize("server", ["postgresql", "mariadb"])
def test_tombstones_delete_through_the_transforms(spark, kafka_broker, tmp_path, pg_db, my_db, server):
    topic = unique("kvt")
    records = [_kv(i, f"v{i}") for i in range(8)] + [_kv(1, "updated"), _kv(2, None), _kv(5, None), _kv(5, "back")]
    _produce(kafka_broker, topic, records)
    pgsql = server == "postgresql"
    cfg = {"connection.url": pg_url(pg_db) if pgsql else my_url(my_db),
           "connection.user": "postgres" if pgsql else "root", "topics": topic, "auto.create": "true",
           "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true",
           "transforms": "rename", "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
           "transforms.rename.renames": "name:label"}
    offsets: dict = {}
    assert drain(sink_task(spark, kafka_broker, tmp_path, "kvt-sink", cfg, offsets), offsets) == len(records)
    with (pg(pg_db) if pgsql else my(my_db)) as c:
        q = '"' if pgsql else "`"
        assert rows(c, f"SELECT id, label FROM {q}{topic}{q} ORDER BY id") == [
            (0, "v0"), (1, "updated"), (3, "v3"), (4, "v4"), (5, "back"), (6, "v6"), (7, "v7")]


def test_source_tolerance_skips_a_row_a_transformation_rejects(spark, kafka_broker, tmp_path, pg_db):
    table = unique("codes")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" (id INT PRIMARY KEY, code TEXT)')
        c.execute(f"INSERT INTO \"{table}\" VALUES (1, '10'), (2, '20'), (3, 'x30'), (4, '40')")
    prefix = unique("tol") + "-"
    src = {"connection.url": pg_url(pg_db), "connection.user": "postgres", "mode": "incrementing",
           "incrementing.column.name": "id", "table.whitelist": table, "topic.prefix": prefix,
           "poll.interval.ms": "0", "topic.creation.default.partitions": "1",
           "transforms": "cast", "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
           "transforms.cast.spec": "code:int32"}
    with pytest.raises(ConnectException, match="Tolerance exceeded"):  # errors.tolerance=none: the task fails
        run_connector(JdbcSourceConnector, spark, kafka_broker, src, tmp_path, "tol-src-strict", {})
    offsets: dict = {}
    tolerant = {**src, "errors.tolerance": "all", "errors.log.enable": "true"}
    run_connector(JdbcSourceConnector, spark, kafka_broker, tolerant, tmp_path, "tol-src", offsets)
    assert next(iter(offsets.values())).offset == {"incrementing": 4}  # the rejected row is passed, not retried
    values = [json.loads(m[3])["payload"] for m in read_all(kafka_broker, prefix + table)]
    assert sorted((v["id"], v["code"]) for v in values) == [(1, 10), (2, 20), (4, 40)]


def test_source_skips_are_task_error_metrics_in_metrics(spark, kafka_broker, tmp_path, pg_db, api, node):  # noqa: F811
    """errors.tolerance=all on a JDBC source: a row a Cast rejects (in the Spark job's workers) and a row
    PostgreSQL holds a value of that Connect cannot (decided on the driver, whichever engine runs the batch)
    are skipped, counted in the task's metrics and shown by /metrics as Connect's task-error-metrics."""
    from webapp.connectors.jdbc import JdbcSourceTask
    from webapp.runtime.task_metrics import TaskMetrics
    from tests.metrics_helpers import assert_source_skips, report_a_task

    table = unique("skips")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" (id INT PRIMARY KEY, code TEXT, ts TIMESTAMP(3))')
        c.execute(f"INSERT INTO \"{table}\" VALUES (1, '10', NULL), (2, '20', NULL), (3, 'x30', NULL), "
                  "(4, '40', 'infinity'), (5, '50', '2024-01-01'), (6, '60', NULL)")
    prefix = unique("skm") + "-"
    base = {"connection.url": pg_url(pg_db), "connection.user": "postgres", "mode": "incrementing",
            "incrementing.column.name": "id", "table.whitelist": table, "topic.prefix": prefix,
            "poll.interval.ms": "0", "topic.creation.default.partitions": "1", "errors.tolerance": "all"}
    cast = {"transforms": "cast", "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
            "transforms.cast.spec": "code:int32", "errors.log.enable": "true"}
    for name, config, skipped, logged in (("jdbc-skip", {**base, **cast}, 2, 2), ("jdbc-skip-plain", base, 1, 0)):
        conn = JdbcSourceConnector()
        conn.start(config)
        task = JdbcSourceConnector.task_class(context(spark, kafka_broker, name, 0, tmp_path),
                                              conn.task_configs(1)[0])
        assert isinstance(task, JdbcSourceTask)
        task.context.metrics = TaskMetrics()  # what the worker hands a task
        task.start()
        try:
            written = drain(task, {})
        finally:
            task.stop()
        assert written == 6 - skipped
        task.context.metrics.batch_done(written, 0.1)
        report_a_task(node, task.context.metrics, name, {"connector.class": "JdbcSourceConnector", **config})
        assert_source_skips(api, name, written=written, skipped=skipped, logged=logged)


# --------------------------------------------------------------------------------------
# nested fields (issue 15, item 3): not written, as in Kafka Connect's JDBC sink; a record error
# --------------------------------------------------------------------------------------
def nested(i: int, field: dict, value) -> bytes:
    schema = {**SCHEMA, "fields": SCHEMA["fields"] + [field]}
    return envelope({"id": i, "name": f"n{i}", "qty": i, "placed": None, field["field"]: value}, schema)


ATTRS = {"field": "attrs", "type": "struct", "optional": True, "fields": [
    {"field": "colour", "type": "string", "optional": True}]}
TAGS = {"field": "tags", "type": "array", "optional": True, "items": {"type": "string", "optional": False}}


@pytest.mark.parametrize("server", ["postgresql", "mariadb"])
def test_records_with_nested_fields_are_record_errors_that_tolerance_skips(spark, kafka_broker, tmp_path, pg_db,
                                                                           my_db, server):
    """A value with a struct/array/map field cannot be written to a column (Connect's JDBC sink refuses it
    too): on the transforming path it is that record's converter error -- named, skipped to the dead letter
    queue with errors.tolerance=all (the offset passes it), else the task fails saying so."""
    topic, only_nested, dlq = unique("nest"), unique("allnest"), unique("nest_dlq")
    with_struct, with_array = nested(2, ATTRS, {"colour": "red"}), nested(4, TAGS, ["a", "b"])
    produce(kafka_broker, topic, [(0, order(1), None), (0, with_struct, None), (0, order(3), None),
                                  (0, with_array, None)])
    produce(kafka_broker, only_nested, [(0, nested(5, ATTRS, None), None)])
    pgsql = server == "postgresql"
    cfg = {"connection.url": pg_url(pg_db) if pgsql else my_url(my_db), "topics": f"{topic},{only_nested}",
           "auto.create": "true", "table.name.format": "${topic}_out", "errors.tolerance": "all",
           "errors.deadletterqueue.topic.name": dlq, "errors.deadletterqueue.context.headers.enable": "true"}
    offsets: dict = {}
    assert drain(sink_task(spark, kafka_broker, tmp_path, "nest-sink", cfg, offsets), offsets) == 5
    q = '"' if pgsql else "`"
    with (pg(pg_db) if pgsql else my(my_db)) as c:
        assert rows(c, f"SELECT id, name FROM {q}{topic}_out{q} ORDER BY id") == [(1, "n1"), (3, "n3")]
        assert target_offsets(c, "nest-sink", topic) == {(topic, 0): 4}
        assert target_offsets(c, "nest-sink", only_nested) == {(only_nested, 0): 1}
    dead = read_all(kafka_broker, dlq)
    assert sorted(m[3] for m in dead) == sorted([with_struct, with_array, nested(5, ATTRS, None)])
    reasons = {m[3]: dict(m[4])["__connect.errors.exception.message"].decode() for m in dead}
    assert "nested field attrs (struct)" in reasons[with_struct] and "Kafka Connect's JDBC sink" in reasons[with_struct]
    assert "nested field tags (array)" in reasons[with_array]
    assert {dict(m[4])["__connect.errors.stage"] for m in dead} == {b"VALUE_CONVERTER"}

    # without tolerance (a transformation keeps the sink on this path) the task fails naming the field
    strict = {k: v for k, v in cfg.items() if not k.startswith("errors.")}
    strict.update({"topics": topic, "table.name.format": "${topic}_strict", "transforms": "ins",
                   "transforms.ins.type": INSERT_FIELD, "transforms.ins.static.field": "origin",
                   "transforms.ins.static.value": "kafka"})
    task = sink_task(spark, kafka_broker, tmp_path, "nest-strict", strict)
    try:
        with pytest.raises(ConnectException, match=r"Tolerance exceeded.*nested field attrs \(struct\)"):
            task.run_batch()
    finally:
        task.stop()
