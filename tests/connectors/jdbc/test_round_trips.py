"""JDBC connectors against the real PostgreSQL and MariaDB servers, real Kafka (Tansu) and Spark.

Each module run uses its own databases (``i6jdbc_<random>``) on both servers and
drops them at the end. Tasks are driven directly (no node), as the runtime does:
``start()``, ``run_batch()`` until ``None``, offsets kept in a dict.
"""
from __future__ import annotations

import base64
import datetime as dt
import decimal
import itertools
import json
import uuid

import psycopg
import pyarrow as pa
import pymysql
import pytest

from webapp.connectors.jdbc import dbio
from webapp.connectors.jdbc.dbio import write as dbio_write
from webapp.plugin import ConnectException, ConnectorTaskId, TaskContext, partition_key
from webapp.connectors.jdbc import (
    JdbcSinkConnector,
    JdbcSinkTask,
    JdbcSourceConnector,
    JdbcSourceTask,
    parse_connection_url,
)
from tests.connectors.support import ENGINE
from tests.kafka_helpers import read_topic

_names = (f"t{i}" for i in itertools.count())



pytestmark = pytest.mark.usefixtures("engine")  # every test runs with both batch engines


def unique(prefix: str) -> str:
    return f"{prefix}_{next(_names)}_{uuid.uuid4().hex[:6]}"


# --------------------------------------------------------------------------------------
# fixtures: one database per server for the module
# --------------------------------------------------------------------------------------
def pg_url(db: str) -> str:
    return f"jdbc:postgresql://127.0.0.1:5432/{db}"


def my_url(db: str, flavour: str = "mariadb") -> str:
    return f"jdbc:{flavour}://127.0.0.1:3306/{db}"


def pg(db: str):
    return psycopg.connect(f"host=127.0.0.1 user=postgres dbname={db}", autocommit=True,
                           options="-c TimeZone=UTC")


def my(db: str):
    return pymysql.connect(host="127.0.0.1", user="root", password="", database=db, autocommit=True,
                           charset="utf8mb4", init_command="SET time_zone='+00:00'")


def rows(conn, sql: str, args=()) -> list[tuple]:
    cur = conn.cursor()
    cur.execute(sql, args)
    out = list(cur.fetchall())
    cur.close()
    return out


# --------------------------------------------------------------------------------------
# driving tasks as the runtime does
# --------------------------------------------------------------------------------------
def context(spark, kafka, name: str, task: int, tmp, offsets=None) -> TaskContext:
    work = tmp / f"work-{name}-{task}"
    work.mkdir(parents=True, exist_ok=True)
    return TaskContext(ConnectorTaskId(name, task), spark, kafka.client_config(), str(work), dict(offsets or {}),
                       engine=ENGINE[0])


def drain(task, store: dict, max_batches: int = 1000) -> int:
    total = 0
    for _ in range(max_batches):
        result = task.run_batch()
        if result is None:
            return total
        total += result.records
        for o in result.offsets:
            store[partition_key(o.partition)] = o
    raise AssertionError("task did not run dry")


def run_connector(connector_cls, spark, kafka, config, tmp, name, store=None) -> int:
    conn = connector_cls()
    conn.start(config)
    configs = conn.task_configs(int(config.get("tasks.max", 1)))
    store = {} if store is None else store
    total = 0
    for i, cfg in enumerate(configs):
        task = connector_cls.task_class(context(spark, kafka, name, i, tmp, store), cfg)
        task.start()
        try:
            total += drain(task, store)
        finally:
            task.stop()
    return total


# --------------------------------------------------------------------------------------
# unit checks
# --------------------------------------------------------------------------------------
def test_connection_urls_in_jdbc_and_plain_forms():
    p = parse_connection_url("jdbc:postgresql://db.example:6543/sales?user=u&password=p")
    assert p == {"dialect": "postgresql", "host": "db.example", "port": 6543, "database": "sales",
                 "user": "u", "password": "p"}
    m = parse_connection_url("jdbc:mariadb://10.0.0.5/shop", "root", "secret")
    assert (m["dialect"], m["port"], m["database"], m["user"], m["password"]) == ("mysql", 3306, "shop", "root",
                                                                                  "secret")
    assert parse_connection_url("jdbc:mysql://h:3307/x")["port"] == 3307
    with pytest.raises(ConnectException, match="Unsupported connection.url"):
        parse_connection_url("jdbc:sqlserver://h;databaseName=x")


def test_validation_reports_per_key_errors():
    src = JdbcSourceConnector().validate({"connection.url": "jdbc:oracle:thin:@h:1521/x", "mode": "incrementing",
                                          "topic.prefix": "p-"})
    assert src["connection.url"] and "Unsupported" in src["connection.url"][0]
    assert src["incrementing.column.name"]
    assert not src["topic.prefix"]
    sink = JdbcSinkConnector().validate({"connection.url": "jdbc:postgresql://h/db", "topics": "t",
                                         "insert.mode": "upsert", "delete.enabled": "true"})
    assert sink["pk.mode"] and sink["delete.enabled"]
    assert JdbcSinkConnector().validate({"connection.url": "jdbc:postgresql://h/db"})["topics"]
    assert JdbcSourceConnector.config_def.keys[2].type == "PASSWORD"


def test_validation_reports_a_bad_boolean_once_and_reads_values_as_the_plugin_api_parses_them():
    sink = JdbcSinkConnector().validate({"connection.url": "jdbc:postgresql://h/db", "topics": "t",
                                         "delete.enabled": "yes", "auto.create": " TRUE "})
    assert sink["delete.enabled"] == ["Invalid value yes for configuration delete.enabled: "
                                      "Expected value to be either true or false"]
    assert sink["auto.create"] == []
    src = JdbcSourceConnector().validate({"connection.url": "jdbc:postgresql://h/db", "mode": "timestamp",
                                          "topic.prefix": "p-", "timestamp.column.name": " , "})
    assert src["timestamp.column.name"] == ["timestamp.column.name is required in mode timestamp"]


# --------------------------------------------------------------------------------------
# end to end
# --------------------------------------------------------------------------------------
def test_postgres_to_kafka_to_mariadb_incrementing_picks_up_new_rows(spark, kafka_broker, tmp_path, pg_db, my_db):
    table = unique("orders")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" (id BIGSERIAL PRIMARY KEY, customer TEXT, amount NUMERIC(10,2), '
                  "placed TIMESTAMP)")
        c.execute(f'INSERT INTO "{table}" (customer, amount, placed) SELECT \'c\' || g, g * 1.25, '
                  "TIMESTAMP '2024-01-01' + g * INTERVAL '1 minute' FROM generate_series(1, 2500) g")
        other = unique("ignored")
        c.execute(f'CREATE TABLE "{other}" (id INT)')
    prefix = unique("pg") + "-"
    src = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db), "connection.user": "postgres",
           "mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": table,
           "topic.prefix": prefix, "batch.max.rows": "1000", "poll.interval.ms": "0", "tasks.max": "2",
           "topic.creation.default.partitions": "2"}
    src_offsets: dict = {}
    assert run_connector(JdbcSourceConnector, spark, kafka_broker, src, tmp_path, "src", src_offsets) == 2500
    assert src_offsets[partition_key({"table": table})].offset == {"incrementing": 2500}
    values = [json.loads(v) for v in read_topic(kafka_broker.bootstrap_servers, prefix + table)]
    assert len(values) == 2500
    first = min(values, key=lambda v: v["payload"]["id"])
    assert first["schema"]["name"] == table
    amount = next(f for f in first["schema"]["fields"] if f["field"] == "amount")
    assert amount["name"] == "org.apache.kafka.connect.data.Decimal" and amount["parameters"]["scale"] == "2"
    assert int.from_bytes(base64.b64decode(first["payload"]["amount"]), "big", signed=True) == 125
    assert first["payload"]["placed"] == int(dt.datetime(2024, 1, 1, 0, 1, tzinfo=dt.timezone.utc).timestamp() * 1000)

    sink = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "connection.url": my_url(my_db),
            "connection.user": "root", "topics": prefix + table, "auto.create": "true", "tasks.max": "2",
            "table.name.format": "copy_${topic}".replace("-", "_"), "insert.mode": "insert", "pk.mode": "none"}
    sink_offsets: dict = {}
    assert run_connector(JdbcSinkConnector, spark, kafka_broker, sink, tmp_path, "sink", sink_offsets) == 2500
    target = f"copy_{prefix}{table}"
    with my(my_db) as m:
        got = rows(m, f"SELECT id, customer, amount, placed FROM `{target}` ORDER BY id")
    assert len(got) == 2500
    assert got[0] == (1, "c1", decimal.Decimal("1.25"), dt.datetime(2024, 1, 1, 0, 1))
    assert got[-1] == (2500, "c2500", decimal.Decimal("3125.00"), dt.datetime(2024, 1, 1) + dt.timedelta(minutes=2500))

    # new rows while running are picked up from the committed offsets; nothing is copied twice
    with pg(pg_db) as c:
        c.execute(f'INSERT INTO "{table}" (customer, amount, placed) VALUES (%s, 7.5, NULL)', ("ünï 🚀 漢字",))
    assert run_connector(JdbcSourceConnector, spark, kafka_broker, src, tmp_path, "src", src_offsets) == 1
    assert run_connector(JdbcSinkConnector, spark, kafka_broker, sink, tmp_path, "sink", sink_offsets) == 1
    with my(my_db) as m:
        assert rows(m, f"SELECT COUNT(*), COUNT(DISTINCT id) FROM `{target}`")[0] == (2501, 2501)
        assert rows(m, f"SELECT customer, placed FROM `{target}` WHERE id = 2501")[0] == ("ünï 🚀 漢字", None)


def test_timestamp_incrementing_mode_sees_updates_and_sink_upserts(spark, kafka_broker, tmp_path, pg_db, my_db):
    table = unique("items")
    with my(my_db) as m:
        m.cursor().execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, name VARCHAR(50), "
                           "modified DATETIME(6) NOT NULL)")
        m.cursor().executemany(f"INSERT INTO `{table}` VALUES (%s, %s, %s)",
                               [(i, f"n{i}", dt.datetime(2024, 5, 1, 12, 0, 0, i)) for i in range(1, 301)])
    topic = unique("ts")
    src = {"connector.class": "JdbcSource", "connection.url": my_url(my_db, "mysql"), "connection.user": "root",
           "mode": "timestamp+incrementing", "timestamp.column.name": "modified", "incrementing.column.name": "id",
           "query": f"SELECT id, name, modified FROM `{table}`", "topic.prefix": topic, "batch.max.rows": "120",
           "poll.interval.ms": "0", "topic.creation.default.partitions": "1"}
    src_offsets: dict = {}
    assert run_connector(JdbcSourceConnector, spark, kafka_broker, src, tmp_path, "ts-src", src_offsets) == 300
    off = src_offsets[partition_key({"query": "query"})].offset
    assert off["incrementing"] == 300 and off["timestamp_nanos"] == 300_000
    assert off["timestamp"] == int(dt.datetime(2024, 5, 1, 12, tzinfo=dt.timezone.utc).timestamp() * 1000)

    with my(my_db) as m:  # an update moves the row's timestamp: it is copied again
        m.cursor().execute(f"UPDATE `{table}` SET name = 'renamed', modified = '2024-05-02 00:00:00' WHERE id = 7")
    assert run_connector(JdbcSourceConnector, spark, kafka_broker, src, tmp_path, "ts-src", src_offsets) == 1

    sink = {"connector.class": "JdbcSinkConnector", "connection.url": pg_url(pg_db), "topics": topic,
            "auto.create": "true", "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "id",
            "table.name.format": "${topic}_copy"}
    assert run_connector(JdbcSinkConnector, spark, kafka_broker, sink, tmp_path, "ts-sink") == 301
    with pg(pg_db) as c:
        got = rows(c, f'SELECT COUNT(*), MAX(modified) FROM "{topic}_copy"')[0]
        assert got == (300, dt.datetime(2024, 5, 2))
        assert rows(c, f'SELECT name FROM "{topic}_copy" WHERE id = 7') == [("renamed",)]


def _produce(kafka, topic: str, records: list[tuple[bytes | None, bytes | None]], partitions: int = 2) -> None:
    """Produce ``records``; a record goes to partition ``id % partitions`` of its key (same key, same partition)."""
    from confluent_kafka import Producer

    from webapp.kafka.topics import ensure_topic

    ensure_topic(kafka.client_config(), topic, partitions)
    p = Producer({"bootstrap.servers": kafka.bootstrap_servers})
    for k, v in records:
        p.produce(topic, v, key=k, partition=json.loads(k)["payload"]["id"] % partitions)
    assert p.flush(30) == 0


def _kv(i: int, name: str | None) -> tuple[bytes, bytes | None]:
    key = json.dumps({"schema": {"type": "struct", "optional": False, "fields": [
        {"field": "id", "type": "int32", "optional": False}]}, "payload": {"id": i}}).encode()
    if name is None:
        return key, None
    value = json.dumps({"schema": {"type": "struct", "optional": False, "fields": [
        {"field": "id", "type": "int32", "optional": False}, {"field": "name", "type": "string", "optional": True}]},
        "payload": {"id": i, "name": name}}).encode()
    return key, value


@pytest.mark.parametrize("server", ["postgresql", "mariadb"])
def test_sink_upsert_delete_and_offsets_in_the_target(spark, kafka_broker, tmp_path, pg_db, my_db, server):
    topic = unique("kv")
    # writes, an update of key 1 and a tombstone for key 2, all interleaved over 2 partitions
    records = [_kv(i, f"v{i}") for i in range(10)] + [_kv(1, "updated"), _kv(2, None), _kv(2, None)]
    _produce(kafka_broker, topic, records)
    url = pg_url(pg_db) if server == "postgresql" else my_url(my_db)
    cfg = {"connector.class": "JdbcSinkConnector", "connection.url": url, "topics": topic, "auto.create": "true",
           "insert.mode": "upsert", "pk.mode": "record_key", "delete.enabled": "true", "batch.max.rows": "4"}
    name = unique("sink")
    assert run_connector(JdbcSinkConnector, spark, kafka_broker, cfg, tmp_path, name) == 13
    conn = pg(pg_db) if server == "postgresql" else my(my_db)
    q = '"' if server == "postgresql" else "`"
    try:
        assert rows(conn, f"SELECT id, name FROM {q}{topic}{q} ORDER BY id") == \
            [(i, "updated" if i == 1 else f"v{i}") for i in range(10) if i != 2]
        stored = rows(conn, f"SELECT topic, kafka_partition, next_offset FROM {q}__raftconnect_offsets{q} "
                            "WHERE connector = %s ORDER BY kafka_partition", (name,))
        assert stored == [(topic, 0, 7), (topic, 1, 6)]  # keys 0,2,4,6,8 + 2 tombstones | 1,3,5,7,9 + update
        # a task that lost the metadata store's offsets resumes from the target's: nothing is written twice
        cfg_insert = dict(cfg, **{"insert.mode": "insert", "pk.mode": "kafka", "delete.enabled": "false",
                                  "table.name.format": "${topic}_log"})
        log_name = unique("log")
        assert run_connector(JdbcSinkConnector, spark, kafka_broker, cfg_insert, tmp_path, log_name) == 13
        _produce(kafka_broker, topic, [_kv(20, "late"), _kv(21, "late")])
        assert run_connector(JdbcSinkConnector, spark, kafka_broker, cfg_insert, tmp_path, log_name, store={}) == 2
        # 11 values + 2 late ones (tombstones are skipped without delete.enabled), each exactly once
        assert rows(conn, f"SELECT COUNT(*) FROM (SELECT DISTINCT {q}__connect_partition{q}, "
                          f"{q}__connect_offset{q} FROM {q}{topic}_log{q}) d") == [(13,)]
        assert rows(conn, f"SELECT COUNT(*) FROM {q}{topic}_log{q}") == [(13,)]
    finally:
        conn.close()


def test_nested_fields_are_written_as_json_text(spark, kafka_broker, tmp_path, pg_db):
    """Values with a struct field take the JVM decoding path (from_json keeps nested JSON as text)."""
    topic = unique("nested")
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "id", "type": "int32", "optional": False},
        {"field": "attrs", "type": "struct", "optional": True, "fields": [{"field": "a", "type": "int32"}]}]}
    records = [(_kv(i, None)[0], json.dumps({"schema": schema, "payload": {"id": i, "attrs": {"a": i * 10}}},
                                            separators=(",", ":")).encode()) for i in range(4)]
    _produce(kafka_broker, topic, records)
    cfg = {"connector.class": "JdbcSinkConnector", "connection.url": pg_url(pg_db), "topics": topic,
           "auto.create": "true", "pk.mode": "record_value", "pk.fields": "id"}
    assert run_connector(JdbcSinkConnector, spark, kafka_broker, cfg, tmp_path, unique("sink")) == 4
    conn = pg(pg_db)
    try:
        got = rows(conn, f'SELECT id, attrs FROM "{topic}" ORDER BY id')
    finally:
        conn.close()
    assert [(i, json.loads(a)) for i, a in got] == [(i, {"a": i * 10}) for i in range(4)]


def test_a_stale_writer_is_fenced_by_the_target_offsets(spark, kafka_broker, tmp_path, pg_db):
    topic = unique("fence")
    _produce(kafka_broker, topic, [_kv(i, f"v{i}") for i in range(6)], partitions=1)
    cfg = {"connector.class": "JdbcSinkConnector", "connection.url": pg_url(pg_db), "topics": topic,
           "auto.create": "true", "pk.mode": "kafka"}
    stale = JdbcSinkTask(context(spark, kafka_broker, "fenced", 0, tmp_path), cfg)
    stale.start()  # reads the target's offsets now (none yet)
    fresh = JdbcSinkTask(context(spark, kafka_broker, "fenced", 0, tmp_path), cfg)
    fresh.start()
    try:
        assert drain(fresh, {}) == 6
        assert stale.run_batch() is None  # its batch rolled back: the target moved on
        assert stale.run_batch() is None  # and it continues from the target's offset
    finally:
        stale.stop()
        fresh.stop()
    with pg(pg_db) as c:
        assert rows(c, f'SELECT COUNT(*), COUNT(DISTINCT "__connect_offset") FROM "{topic}"') == [(6, 6)]


def test_bulk_mode_copies_the_whole_table_each_poll(spark, kafka_broker, tmp_path, pg_db):
    table = unique("bulk")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" (k TEXT)')
        c.execute(f'INSERT INTO "{table}" VALUES (\'a\'), (\'b\'), (NULL)')
    cfg = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db), "mode": "bulk",
           "table.whitelist": table, "topic.prefix": "bulk-", "poll.interval.ms": "60000"}
    task = JdbcSourceTask(context(spark, kafka_broker, "bulk", 0, tmp_path), cfg)
    task.start()
    try:
        r = task.run_batch()
        assert r.records == 3 and r.offsets == ()
        assert task.run_batch() is None  # next copy only after poll.interval.ms
    finally:
        task.stop()
    values = sorted((json.loads(v)["payload"]["k"] or "") for v in read_topic(kafka_broker.bootstrap_servers,
                                                                               "bulk-" + table))
    assert values == ["", "a", "b"]


# --------------------------------------------------------------------------------------
# types: PostgreSQL -> Kafka -> MariaDB -> Kafka -> PostgreSQL, every value compared
# --------------------------------------------------------------------------------------
_TYPES_DDL = ("id INT PRIMARY KEY, i16 SMALLINT, i32 INTEGER, i64 BIGINT, dec NUMERIC(20,5), dec0 NUMERIC(38,0), "
              "f32 REAL, f64 DOUBLE PRECISION, flag BOOLEAN, txt TEXT, vc VARCHAR(40), d DATE, t TIME(3), "
              "ts TIMESTAMP(3), tstz TIMESTAMPTZ(3), blob BYTEA, js JSON, jsb JSONB, u UUID")
_UTC = dt.timezone.utc
_TYPE_ROWS = [
    (1, -32768, -2147483648, -9223372036854775808, decimal.Decimal("-123456789012345.12345"),
     decimal.Decimal("-" + "9" * 38), -3.25, -1.7976931348623157e308, False, "", "a", dt.date(1900, 1, 1),
     dt.time(0, 0), dt.datetime(1969, 12, 31, 23, 59, 59, 999000), dt.datetime(1000, 1, 1, tzinfo=_UTC),
     b"", '{"a": [1, 2.5, null]}', '{"z": "\u00e9", "n": {"k": true}}', uuid.UUID(int=0)),
    (2, 32767, 2147483647, 9223372036854775807, decimal.Decimal("0.00001"), decimal.Decimal("9" * 38), 1.5e10,
     5e-324, True, "emoji 🚀👩‍👩‍👧 CJK 漢字かな 한글 combining e\u0301 a\u0308 zero\u200bwidth",
     "ünïcödé ✓", dt.date(2100, 12, 31), dt.time(23, 59, 59, 999000),
     dt.datetime(2024, 2, 29, 12, 34, 56, 789000), dt.datetime(2038, 1, 19, 3, 14, 8, 1000, tzinfo=_UTC),
     bytes(range(256)), '"text"', '[1, "two", {"3": 4}]', uuid.UUID("12345678-1234-5678-9abc-def012345678")),
    (3, 0, 0, 0, decimal.Decimal("0.00000"), decimal.Decimal("0"), 0.0, 0.1, False, "line\nbreak\ttab 'q' \"dq\" \\",
     "", dt.date(1970, 1, 1), dt.time(12, 0, 0, 1000), dt.datetime(1970, 1, 1), dt.datetime(1970, 1, 1, tzinfo=_UTC),
     b"\x00\xff\x00", "{}", "{}", uuid.uuid4()),
    (4,) + (None,) * 18,
    # the largest float32 and float64: a shortest float32 text of FLT_MAX is out of FLOAT's range in MariaDB
    (5, 1, 1, 1, decimal.Decimal("1.00000"), decimal.Decimal("1"), 3.4028234663852886e+38, 1.7976931348623157e308,
     True, "x", "y", dt.date(2000, 1, 1), dt.time(1, 2, 3), dt.datetime(2000, 1, 1), dt.datetime(2000, 1, 1, tzinfo=_UTC),
     b"x", "{}", "{}", uuid.UUID(int=5)),
]


def test_types_round_trip_postgres_mariadb_postgres(spark, kafka_broker, tmp_path, pg_db, my_db):
    from webapp.runtime.converters import decode_value

    table = unique("types")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" ({_TYPES_DDL})')
        with c.cursor() as cur:
            cur.executemany(f'INSERT INTO "{table}" VALUES ({", ".join(["%s"] * 19)})', _TYPE_ROWS)
        original = rows(c, f'SELECT * FROM "{table}" ORDER BY id')
    topic_a = f"a-{table}"
    run_connector(JdbcSourceConnector, spark, kafka_broker, {
        "connection.url": pg_url(pg_db), "mode": "incrementing", "incrementing.column.name": "id",
        "table.whitelist": table, "topic.prefix": "a-", "poll.interval.ms": "0",
        "topic.creation.default.partitions": "1"}, tmp_path, "types-a")

    # Kafka holds JsonConverter values: check every value of every record against PostgreSQL's
    decoded = sorted((decode_value(v)[1] for v in read_topic(kafka_broker.bootstrap_servers, topic_a)),
                     key=lambda p: p["id"])
    schema = decode_value(read_topic(kafka_broker.bootstrap_servers, topic_a)[0])[0]
    types = {f["field"]: (f["type"], f.get("name")) for f in schema["fields"]}
    assert types["i16"] == ("int16", None) and types["i64"] == ("int64", None) and types["f32"] == ("float", None)
    assert types["dec"] == ("bytes", "org.apache.kafka.connect.data.Decimal")
    assert types["t"] == ("int32", "org.apache.kafka.connect.data.Time")
    assert types["tstz"] == ("int64", "org.apache.kafka.connect.data.Timestamp")
    assert types["blob"] == ("bytes", None) and types["u"] == ("string", None)
    names = [f["field"] for f in schema["fields"]]
    for want, got in zip(original, decoded):
        for name, w in zip(names, want):
            g = got[name]
            if w is None:
                assert g is None, name
            elif name == "t":
                assert g == w.hour * 3_600_000 + w.minute * 60_000 + w.second * 1000 + w.microsecond // 1000
            elif name in ("ts", "tstz"):
                assert g == (w if w.tzinfo else w.replace(tzinfo=_UTC)), name
            elif name == "d":
                assert g == w
            elif name in ("js", "jsb"):
                assert json.loads(g) == w
            elif name == "u":
                assert g == str(w)
            elif name == "f32":
                assert g == pytest.approx(w, rel=1e-7)
            else:
                assert g == w, name

    # -> MariaDB (tables created by the sink) -> Kafka -> PostgreSQL (original DDL)
    mid = f"mid_{table}"
    run_connector(JdbcSinkConnector, spark, kafka_broker, {
        "connection.url": my_url(my_db), "topics": topic_a, "table.name.format": mid, "auto.create": "true",
        "pk.mode": "record_value", "pk.fields": "id", "insert.mode": "upsert"}, tmp_path, "types-mid")
    run_connector(JdbcSourceConnector, spark, kafka_broker, {
        "connection.url": my_url(my_db), "mode": "incrementing", "incrementing.column.name": "id",
        "table.whitelist": mid, "topic.prefix": "b-", "poll.interval.ms": "0",
        "topic.creation.default.partitions": "1"}, tmp_path, "types-b")
    final = f"final_{table}"
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{final}" ({_TYPES_DDL})')
    run_connector(JdbcSinkConnector, spark, kafka_broker, {
        "connection.url": pg_url(pg_db), "topics": f"b-{mid}", "table.name.format": final}, tmp_path, "types-final")
    with pg(pg_db) as c:
        back = rows(c, f'SELECT * FROM "{final}" ORDER BY id')
    assert len(back) == len(original)
    for want, got in zip(original, back):
        assert want == got


_HOSTILE = ["it's", "back\\slash", "\\'; DROP TABLE victims; --", "nul\x00byte", "\\", "'", "\"dq\"", "%s %% ?",
            "end\\"]


@pytest.mark.parametrize("server_mode", ["", "NO_BACKSLASH_ESCAPES"])
def test_hostile_values_stay_values_whatever_the_servers_sql_mode(my_db, server_mode):
    """The sink's string literals use backslash escapes; a session that starts with NO_BACKSLASH_ESCAPES (a
    server's sql_mode) is pinned without it, so no record value can end its literal early."""
    params = {"dialect": "mysql", "host": "127.0.0.1", "port": 3306, "database": my_db, "user": "root",
              "password": "", "options": {"sql_mode": server_mode}}
    conn = dbio.connect(params, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute("SELECT @@SESSION.sql_mode")
            assert "NO_BACKSLASH_ESCAPES" not in cur.fetchone()[0]
            table = unique("hostile")
            cur.execute(f"CREATE TABLE `{table}` (id INT PRIMARY KEY, v TEXT)")
            cur.execute("CREATE TABLE IF NOT EXISTS victims (id INT)")
            literals = dbio_write._literals(pa.array(_HOSTILE, pa.string()), "string", "mysql").to_pylist()
            values = ", ".join(f"({i}, {lit})" for i, lit in enumerate(literals))
            cur.execute(f"INSERT INTO `{table}` (id, v) VALUES {values}")
            cur.execute(f"SELECT v FROM `{table}` ORDER BY id")
            assert [r[0] for r in cur.fetchall()] == _HOSTILE
            cur.execute("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = DATABASE() "
                        "AND table_name = 'victims'")
            assert cur.fetchone()[0] == 1
    finally:
        conn.close()


# --------------------------------------------------------------------------------------
# large records: Connect's override keys raise Kafka's limits (issue 15, items 3 and 4)
# --------------------------------------------------------------------------------------
_BIG = 5 * 1024 * 1024
#: the keys a source of records over 1 MB needs (Connect's names); 16 MiB: a 5 MiB bytea is 6.7 MiB of base64
_BIG_SOURCE_KEYS = {"producer.override.max.request.size": "16777216",
                    "topic.creation.default.max.message.bytes": "16777216"}
_BIG_SINK_KEYS = {"consumer.override.max.partition.fetch.bytes": "16777216",
                  "consumer.override.fetch.max.bytes": "33554432"}


def test_five_megabyte_rows_need_connects_override_keys_and_reach_both_sinks_intact(
        spark, kafka_broker, tmp_path, pg_db, my_db):
    """5 MiB text (4-byte UTF-8 included; read by COPY) and bytea (read by a cursor) rows: without the
    producer key the source fails naming the keys to raise; with them every byte reaches PostgreSQL and
    MariaDB (tables created by the sinks: TEXT/BYTEA, LONGTEXT/LONGBLOB)."""
    import random

    from confluent_kafka.admin import ConfigResource

    from webapp.kafka.topics import admin_client

    texts, blobs = unique("bigtext"), unique("bigblob")
    body = ("a🚀漢" * (_BIG // 8))[:-1] + "\u00e9"  # 8 bytes a repeat: 5 MiB of 1-, 4- and 3-byte characters
    blob = random.Random(15).randbytes(_BIG)
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{texts}" (id INT PRIMARY KEY, body TEXT)')
        c.execute(f'CREATE TABLE "{blobs}" (id INT PRIMARY KEY, data BYTEA)')
        c.execute(f'INSERT INTO "{texts}" VALUES (1, %s), (2, \'small\'), (3, NULL)', (body,))
        c.execute(f'INSERT INTO "{blobs}" VALUES (1, %s), (2, \'\\x00ff\'::bytea)', (blob,))
    src = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db), "mode": "incrementing",
           "incrementing.column.name": "id", "table.whitelist": f"{texts},{blobs}", "poll.interval.ms": "0",
           "topic.creation.default.partitions": "1"}

    # without the keys: librdkafka's 1,000,000-byte limit, and a message that says which keys raise it
    refused = dict(src, **{"topic.prefix": unique("small") + "-"})
    task = JdbcSourceTask(context(spark, kafka_broker, "big-refused", 0, tmp_path), refused)
    task.start()
    try:
        with pytest.raises(ConnectException) as info:
            drain(task, {})
    finally:
        task.stop()
    assert "producer.override.max.request.size" in str(info.value)
    assert "max.message.bytes" in str(info.value)

    prefix = unique("big") + "-"
    offsets: dict = {}
    assert run_connector(JdbcSourceConnector, spark, kafka_broker, dict(src, **_BIG_SOURCE_KEYS,
                                                                       **{"topic.prefix": prefix}),
                         tmp_path, "big-src", offsets) == 5
    # the topics the source created carry the topic.creation.default.* topic config, as in Connect
    admin = admin_client(kafka_broker.client_config())
    described = admin.describe_configs([ConfigResource("topic", prefix + texts)])
    assert next(iter(described.values())).result(30)["max.message.bytes"].value == "16777216"

    for server in ("postgresql", "mariadb"):
        url = pg_url(pg_db) if server == "postgresql" else my_url(my_db)
        sink = {"connector.class": "JdbcSinkConnector", "connection.url": url, "topics": f"{prefix}{texts},{prefix}{blobs}",
                "auto.create": "true", "pk.mode": "record_value", "pk.fields": "id", "insert.mode": "upsert",
                "table.name.format": "copy_${topic}".replace("-", "_"), **_BIG_SINK_KEYS}
        assert run_connector(JdbcSinkConnector, spark, kafka_broker, sink, tmp_path, unique("big-sink")) == 5
        conn = pg(pg_db) if server == "postgresql" else my(my_db)
        q = '"' if server == "postgresql" else "`"
        try:
            got_texts = rows(conn, f"SELECT id, body FROM {q}copy_{prefix}{texts}{q} ORDER BY id")
            got_blobs = [(i, bytes(b)) for i, b in rows(conn, f"SELECT id, data FROM {q}copy_{prefix}{blobs}{q} "
                                                               "ORDER BY id")]
        finally:
            conn.close()
        assert got_texts == [(1, body), (2, "small"), (3, None)], server
        assert got_blobs == [(1, blob), (2, b"\x00\xff")], server


# --------------------------------------------------------------------------------------
# values at the edges of MariaDB's types (issue 15, item 2): PostgreSQL -> Kafka -> MariaDB
# --------------------------------------------------------------------------------------
_FLT_MAX, _FLT_MIN_NORMAL = 3.4028234663852886e+38, 1.1754943508222875e-38
_FLT_TRUE_MIN, _FLT_MAX_SUBNORMAL = 1.401298464324817e-45, 1.1754942106924411e-38
_DEC_38_10 = decimal.Decimal("9" * 28 + "." + "9" * 10)
_DEC_38_10_MIN = decimal.Decimal("-" + str(_DEC_38_10))  # not -_DEC_38_10: that rounds to 28 digits
_EDGE_DDL = ("id INT PRIMARY KEY, ts TIMESTAMP(3), tstz TIMESTAMPTZ(3), d DATE, t TIME(3), dec NUMERIC(38,10), "
             "f32 REAL, f64 DOUBLE PRECISION, txt TEXT, bin BYTEA")
_BIG_TEXT = "𝄞漢é!" * 70_000  # 700 KB of 4-, 3-, 2- and 1-byte characters: past TEXT's 64 KB
_EDGE_ROWS = [
    (1, dt.datetime(1, 1, 1), dt.datetime(1, 1, 1, tzinfo=_UTC), dt.date(1, 1, 1), dt.time(0, 0, 0, 1000),
     _DEC_38_10, _FLT_MAX, 1.7976931348623157e308, _BIG_TEXT, bytes(range(256)) * 256),  # 64 KiB: past BLOB's
    (2, dt.datetime(999, 12, 31, 23, 59, 59, 999000),
     dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=dt.timezone(dt.timedelta(hours=-8))),
     dt.date(9999, 12, 31), dt.time(23, 59, 59, 999000), _DEC_38_10_MIN, -_FLT_MAX, -1.7976931348623157e308, "", b""),
    (3, dt.datetime(9999, 12, 31, 23, 59, 59, 999000), dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=_UTC),
     dt.date(1000, 1, 1), dt.time(12, 0), decimal.Decimal("0.0000000001"), _FLT_TRUE_MIN, 5e-324, "'",
     b"\x00"),
    (4, dt.datetime(1969, 12, 31, 23, 59, 59, 1000),
     dt.datetime(1900, 1, 1, 0, 0, 0, 1000, tzinfo=dt.timezone(dt.timedelta(hours=5, minutes=30))),
     dt.date(1969, 12, 31), dt.time(0, 0), decimal.Decimal("-0.0000000001"), _FLT_MIN_NORMAL,
     2.2250738585072014e-308, "\\", None),
    (5, dt.datetime(1970, 1, 1), None, None, None, decimal.Decimal(0), _FLT_MAX_SUBNORMAL, -5e-324, None, None),
    (6,) + (None,) * 9,
]


@pytest.mark.parametrize("sink_path", ["direct", "pipeline"])
def test_edge_values_reach_mariadb_exactly_in_the_tables_the_sink_creates(spark, kafka_broker, tmp_path, pg_db,
                                                                          my_db, sink_path):
    """Dates and timestamps from 0001 to 9999 (MariaDB documents 1000 as DATETIME's low end; it stores
    earlier ones), numeric(38,10) bounds, float32 max/min/subnormals, float64 extremes, text and bytes
    past TEXT's and BLOB's 64 KB: each value read back from MariaDB equals PostgreSQL's."""
    table = unique("edges")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" ({_EDGE_DDL})')
        with c.cursor() as cur:
            cur.executemany(f'INSERT INTO "{table}" VALUES ({", ".join(["%s"] * 10)})', _EDGE_ROWS)
        # REAL as the double it converts to exactly (psycopg reads it as its shortest float32 text)
        original = rows(c, f'SELECT id, ts, tstz, d, t, dec, f32::float8, f64, txt, bin FROM "{table}" ORDER BY id')
    assert original[0][6] == _FLT_MAX and original[2][6] == _FLT_TRUE_MIN
    prefix = unique("edge") + "-"
    assert run_connector(JdbcSourceConnector, spark, kafka_broker, {
        "connection.url": pg_url(pg_db), "mode": "incrementing", "incrementing.column.name": "id",
        "table.whitelist": table, "topic.prefix": prefix, "poll.interval.ms": "0",
        "topic.creation.default.partitions": "1"}, tmp_path, unique("edge-src")) == len(_EDGE_ROWS)
    target = f"to_my_{table}"
    assert run_connector(JdbcSinkConnector, spark, kafka_broker, {
        "connection.url": my_url(my_db), "topics": prefix + table, "table.name.format": target,
        "auto.create": "true", "pk.mode": "record_value", "pk.fields": "id", "insert.mode": "upsert",
        # errors.tolerance=all takes the sink through SinkPipeline (decode, transform, write); nothing is skipped
        **({"errors.tolerance": "all"} if sink_path == "pipeline" else {})},
        tmp_path, unique("edge-sink")) == len(_EDGE_ROWS)
    with my(my_db) as m:
        # FLOAT read as the DOUBLE it converts to exactly (MariaDB prints a FLOAT with 6 digits)
        back = rows(m, f"SELECT id, ts, tstz, d, t, `dec`, CAST(f32 AS DOUBLE), f64, txt, bin FROM `{target}` "
                       "ORDER BY id")
        types = dict(rows(m, "SELECT column_name, column_type FROM information_schema.columns "
                             "WHERE table_schema = DATABASE() AND table_name = %s", (target,)))
    assert types["dec"] == "decimal(38,10)" and types["txt"] == "longtext" and types["bin"] == "longblob"
    assert len(back) == len(original)
    for want, got in zip(original, back):
        i = want[0]
        for name, w, g in zip(("id", "ts", "tstz", "d", "t", "dec", "f32", "f64", "txt", "bin"), want, got):
            if w is None:
                assert g is None, (i, name)
            elif name == "tstz":  # DATETIME keeps the UTC instant
                assert g == w.astimezone(_UTC).replace(tzinfo=None), (i, name)
            elif name == "t":  # PyMySQL reads TIME as a timedelta
                assert g == dt.timedelta(hours=w.hour, minutes=w.minute, seconds=w.second,
                                         microseconds=w.microsecond), (i, name)
            elif name == "bin":
                assert bytes(g) == bytes(w), (i, name)
            else:
                assert g == w and type(g) is type(w), (i, name, w, g)


_NARROW_SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int32", "optional": False},
    {"field": "amount", "type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
     "version": 1, "parameters": {"scale": "36", "connect.decimal.precision": "38"}},
    {"field": "at", "type": "int64", "optional": True, "name": "org.apache.kafka.connect.data.Timestamp",
     "version": 1}]}


def _narrow(i: int, unscaled: int, at_ms: int) -> tuple[bytes, bytes]:
    amount = base64.b64encode(unscaled.to_bytes(16, "big", signed=True)).decode()
    return _kv(i, None)[0], json.dumps({"schema": _NARROW_SCHEMA, "payload": {"id": i, "amount": amount,
                                                                              "at": at_ms}}).encode()


@pytest.mark.parametrize("server", ["postgresql", "mariadb"])
def test_a_value_the_target_type_cannot_hold_fails_its_record_clearly_and_tolerance_skips_it(
        spark, kafka_broker, tmp_path, pg_db, my_db, server):
    """Decimal(38,36) and a timestamp of year 10000: PostgreSQL's auto-created NUMERIC(38,36) and TIMESTAMP hold
    both; MariaDB's widest DECIMAL keeps 30 decimal places (it would round 1E-36 to 0 with only a note) and
    DATETIME ends at 9999. There, the record fails naming its offset, its column and errors.tolerance (nothing of
    the batch is written); with errors.tolerance=all it goes to the dead letter queue and the rest is written."""
    from confluent_kafka import Consumer, TopicPartition

    y2024 = int(dt.datetime(2024, 1, 1, tzinfo=_UTC).timestamp() * 1000)
    year_10000 = int((dt.datetime(9999, 12, 31, 23, 59, 59, 999000, tzinfo=_UTC)).timestamp() * 1000) + 1
    year_1 = int(dt.datetime(1, 1, 1, tzinfo=_UTC).timestamp() * 1000)
    one_and_half = 15 * 10 ** 35
    records = [_narrow(1, one_and_half, y2024), _narrow(2, 1, y2024), _narrow(3, one_and_half, year_10000),
               _narrow(4, -(10 ** 37), year_1), _narrow(5, 0, y2024)]
    topic = unique("narrow")
    _produce(kafka_broker, topic, records, partitions=1)
    url = pg_url(pg_db) if server == "postgresql" else my_url(my_db)
    base = {"connector.class": "JdbcSinkConnector", "connection.url": url, "topics": topic, "auto.create": "true",
            "pk.mode": "record_value", "pk.fields": "id", "table.name.format": "${topic}_strict"}
    q = '"' if server == "postgresql" else "`"

    def written(table: str) -> list[tuple]:
        conn = pg(pg_db) if server == "postgresql" else my(my_db)
        try:
            return rows(conn, f"SELECT id, amount FROM {q}{table}{q} ORDER BY id")
        finally:
            conn.close()

    if server == "postgresql":  # the auto-created types hold every value
        assert run_connector(JdbcSinkConnector, spark, kafka_broker, base, tmp_path, unique("narrow")) == 5
        got = written(f"{topic}_strict")
        assert [i for i, _ in got] == [1, 2, 3, 4, 5] and got[1][1] == decimal.Decimal("1E-36")
        return

    with pytest.raises(ConnectException) as info:
        run_connector(JdbcSinkConnector, spark, kafka_broker, base, tmp_path, unique("narrow"))
    message = str(info.value)
    assert f"{topic}[0] offset 1" in message and "'amount'" in message and "30 decimal places" in message
    assert "errors.tolerance" in message
    assert written(f"{topic}_strict") == []  # the batch rolled back

    dlq = unique("narrow-dlq")
    tolerant = dict(base, **{"errors.tolerance": "all", "errors.deadletterqueue.topic.name": dlq,
                             "errors.deadletterqueue.context.headers.enable": "true",
                             "table.name.format": "${topic}_tolerant"})
    assert run_connector(JdbcSinkConnector, spark, kafka_broker, tolerant, tmp_path, unique("narrow-all")) == 5
    assert written(f"{topic}_tolerant") == [(1, decimal.Decimal("1.5")), (4, decimal.Decimal("-10")),
                                            (5, decimal.Decimal(0))]
    c = Consumer({"bootstrap.servers": kafka_broker.bootstrap_servers, "group.id": "narrow",
                  "enable.partition.eof": True})
    try:
        c.assign([TopicPartition(dlq, 0, 0)])
        dead = []
        while True:  # up to the partition's end
            m = c.poll(30)
            assert m is not None, "no end of the dead letter queue seen"
            if m.error():
                break
            dead.append(m)
    finally:
        c.close()
    assert [m.value() for m in dead] == [records[1][1], records[2][1]]
    reasons = [dict(m.headers())["__connect.errors.exception.message"].decode() for m in dead]
    assert "'amount'" in reasons[0] and "DATETIME holds years 1 to 9999" in reasons[1]


def test_nan_and_infinities_are_refused_per_record_by_mariadb_floats_and_kept_by_postgresql(pg_db, my_db):
    """MariaDB's FLOAT/DOUBLE hold no NaN or infinity (the rendered ``nan`` would be read as a column name):
    such a record is refused as data, found by halving the batch; PostgreSQL stores all of them."""
    nan, inf = float("nan"), float("inf")
    batch = pa.record_batch([pa.array([10, 11, 12, 13, 14], pa.int64()), pa.array([False] * 5),
                             pa.array([1, 2, 3, 4, 5], pa.int32()),
                             pa.array([1.5, nan, -inf, 2.5, None], pa.float32()),
                             pa.array([0.5, 1.0, 2.0, inf, None], pa.float64())],
                            names=["__offset", "__tombstone", "v0", "v1", "v2"])
    cols = [["id", "int32", "v0"], ["f32", "float32", "v1"], ["f64", "float64", "v2"]]
    for dialect, db in (("mysql", my_db), ("postgresql", pg_db)):
        params = {"dialect": dialect, "host": "127.0.0.1", "port": 3306 if dialect == "mysql" else 5432,
                  "database": db, "user": "root" if dialect == "mysql" else "postgres", "password": ""}
        table = unique("floats")
        conn = dbio.connect(params)
        try:
            cur = conn.cursor()
            cur.execute(f"CREATE TABLE {dbio.quote(dialect, table)} (id INT PRIMARY KEY, "
                        + ("f32 FLOAT, f64 DOUBLE)" if dialect == "mysql" else "f32 REAL, f64 DOUBLE PRECISION)"))
            plan = {"dialect": dialect, "table": dbio.quote(dialect, table), "insert_mode": "insert",
                    "columns": cols, "pk": [], "batch_size": 100}
            refused: list = []
            dbio_write._write_isolating(cur, dbio_write._TableWriter(cur, plan, "t", 0), batch, table,
                                     lambda key, offset, error: refused.append((offset, str(error))))
            conn.commit()
            cur.execute(f"SELECT id FROM {dbio.quote(dialect, table)} ORDER BY id")
            ids = [r[0] for r in cur.fetchall()]
        finally:
            conn.close()
        if dialect == "mysql":
            assert ids == [1, 5] and [o for o, _ in refused] == [11, 12, 13]
            assert "column 'f32' cannot hold nan" in refused[0][1] and "FLOAT holds no NaN" in refused[0][1]
            assert "column 'f64' cannot hold inf" in refused[2][1] and "DOUBLE" in refused[2][1]
        else:
            assert ids == [1, 2, 3, 4, 5] and refused == []


def test_a_string_key_longer_than_its_mariadb_column_names_the_record(spark, kafka_broker, tmp_path, my_db):
    """A string key column is VARCHAR(256) on MariaDB (an index cannot take LONGTEXT): a longer key is that
    record's refusal (error 1406, a DataError), found by halving and named with errors.tolerance in the message;
    the records before it are not committed either."""
    topic = unique("longkey")
    schema = {"type": "struct", "optional": False, "fields": [{"field": "code", "type": "string", "optional": False},
                                                              {"field": "n", "type": "int32", "optional": True}]}
    values = [json.dumps({"schema": schema, "payload": {"code": code, "n": i}}).encode()
              for i, code in enumerate(["a", "b" * 256, "c" * 257, "d"])]
    _produce(kafka_broker, topic, [(json.dumps({"payload": {"id": 0}}).encode(), v) for v in values], partitions=1)
    cfg = {"connector.class": "JdbcSinkConnector", "connection.url": my_url(my_db), "topics": topic,
           "auto.create": "true", "insert.mode": "upsert", "pk.mode": "record_value", "pk.fields": "code"}
    with pytest.raises(ConnectException) as info:
        run_connector(JdbcSinkConnector, spark, kafka_broker, cfg, tmp_path, unique("longkey"))
    assert f"{topic}[0] offset 2" in str(info.value) and "errors.tolerance" in str(info.value)
    assert "Data too long for column 'code'" in str(info.value)
    with my(my_db) as m:
        assert rows(m, f"SELECT COUNT(*) FROM `{topic}`") == [(0,)]


# --------------------------------------------------------------------------------------
# PostgreSQL values Connect's types cannot hold: per-record errors, never a stuck task (issue 15 item 2)
# --------------------------------------------------------------------------------------
_UNREADABLE_ROWS = [  # (id, ts, tstz, d, t): rows 2..6 each hold one value with no Connect form
    (1, "2020-01-01 00:00:00.5", "2020-01-01 00:00:00+02", "2020-01-01", "23:59:59.999"),
    (2, "infinity", None, None, None),
    (3, None, "-infinity", None, None),
    (4, None, None, "0044-03-15 BC", None),
    (5, None, None, "-infinity", "24:00:00"),
    (6, "10000-01-01 00:00:00", None, None, None),
    (7, "1969-12-31 23:59:59.001", None, "0001-01-01", "00:00:00"),
]


def test_postgres_infinity_bc_and_2400_are_record_errors_that_tolerance_skips(spark, kafka_broker, tmp_path, pg_db):
    table = unique("unreadable")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" (id INT PRIMARY KEY, ts TIMESTAMP(3), tstz TIMESTAMPTZ, d DATE, t TIME(3))')
        for row in _UNREADABLE_ROWS:
            c.execute(f'INSERT INTO "{table}" VALUES (%s, %s, %s, %s, %s)', row)
    cfg = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db), "mode": "incrementing",
           "incrementing.column.name": "id", "table.whitelist": table, "topic.prefix": "unr-"}
    task = JdbcSourceTask(context(spark, kafka_broker, "unr", 0, tmp_path), cfg)
    task.start()
    try:  # without tolerance: the task fails naming the row, the column and the value; nothing is produced
        with pytest.raises(ConnectException, match=r"Tolerance exceeded.*id=2: column ts holds infinity"):
            task.run_batch()
    finally:
        task.stop()
    store: dict = {}
    task = JdbcSourceTask(context(spark, kafka_broker, "unr", 0, tmp_path, store),
                          {**cfg, "errors.tolerance": "all", "errors.log.enable": "true"})
    task.start()
    try:
        assert drain(task, store) == 2
        assert task._operator.total_errors_tolerated == 6  # row 5 has two such values
    finally:
        task.stop()
    assert [o.offset for o in store.values()] == [{"incrementing": 7}]
    payloads = sorted((json.loads(v)["payload"] for v in read_topic(kafka_broker.bootstrap_servers, "unr-" + table)),
                      key=lambda p: p["id"])
    assert [(p["id"], p["ts"], p["tstz"], p["d"], p["t"]) for p in payloads] == [
        (1, 1577836800500, 1577829600000, 18262, 86399999), (7, -999, None, -719162, 0)]

    # timestamp mode: the timestamp column itself at -infinity / BC is reported, +infinity never comes due
    ts_table = unique("unreadable_ts")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{ts_table}" (id INT, ts TIMESTAMP(3))')
        c.execute(f"INSERT INTO \"{ts_table}\" VALUES (1, '-infinity'), (2, '0001-01-01 00:00:00 BC'), "
                  f"(3, '2001-02-03 04:05:06.007'), (4, 'infinity')")
    store = {}
    task = JdbcSourceTask(context(spark, kafka_broker, "unr-ts", 0, tmp_path, store),
                          {**cfg, "mode": "timestamp", "timestamp.column.name": "ts", "table.whitelist": ts_table,
                           "errors.tolerance": "all"})
    task.start()
    try:
        assert drain(task, store) == 1 and task._operator.total_errors_tolerated == 2
    finally:
        task.stop()
    assert [json.loads(v)["payload"]["id"] for v in read_topic(kafka_broker.bootstrap_servers, "unr-" + ts_table)] == [3]


def test_nan_and_infinities_travel_as_jsonconverter_strings_and_back_into_postgres(
        spark, kafka_broker, tmp_path, pg_db, my_db, engine):
    """Both task engines write Connect's bytes ("NaN", "Infinity", "-Infinity"); the sink reads them back:
    PostgreSQL stores them, MariaDB's FLOAT/DOUBLE cannot and errors.tolerance=all skips those records."""
    table = unique("nonfinite")
    with pg(pg_db) as c:
        c.execute(f'CREATE TABLE "{table}" (id INT PRIMARY KEY, f32 REAL, f64 DOUBLE PRECISION)')
        c.execute(f"INSERT INTO \"{table}\" VALUES (1, 'NaN', 'Infinity'), (2, '-Infinity', 'NaN'), (3, 1.5, 0.1), "
                  "(4, NULL, '-Infinity')")
    prefix = unique("nf") + "-"
    src = {"connector.class": "JdbcSourceConnector", "connection.url": pg_url(pg_db), "mode": "incrementing",
           "incrementing.column.name": "id", "table.whitelist": table, "topic.prefix": prefix}
    assert run_connector(JdbcSourceConnector, spark, kafka_broker, src, tmp_path, "nf-src") == 4
    raw = sorted(v[v.index(b'"payload":'):] for v in read_topic(kafka_broker.bootstrap_servers, prefix + table))
    assert raw == [b'"payload":{"id":1,"f32":"NaN","f64":"Infinity"}}',
                   b'"payload":{"id":2,"f32":"-Infinity","f64":"NaN"}}',
                   b'"payload":{"id":3,"f32":1.5,"f64":0.1}}',
                   b'"payload":{"id":4,"f32":null,"f64":"-Infinity"}}'], engine

    sink = {"connector.class": "JdbcSinkConnector", "topics": prefix + table, "auto.create": "true",
            "table.name.format": "copy_${topic}".replace("-", "_"), "pk.mode": "record_value", "pk.fields": "id",
            "insert.mode": "upsert"}
    target = f"copy_{prefix}{table}"
    assert run_connector(JdbcSinkConnector, spark, kafka_broker, {**sink, "connection.url": pg_url(pg_db)},
                         tmp_path, "nf-pg") == 4
    with pg(pg_db) as c:
        got = rows(c, f'SELECT id, f32::text, f64::text FROM "{target}" ORDER BY id')
    assert got == [(1, "NaN", "Infinity"), (2, "-Infinity", "NaN"), (3, "1.5", "0.1"), (4, None, "-Infinity")]
    run_connector(JdbcSinkConnector, spark, kafka_broker, {**sink, "connection.url": my_url(my_db),
                                                            "errors.tolerance": "all"}, tmp_path, "nf-my")
    with my(my_db) as m:
        assert rows(m, f"SELECT id, f32, f64 FROM `{target}` ORDER BY id") == [(3, 1.5, 0.1)]
