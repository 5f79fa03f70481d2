"""The JDBC sink task: plans each topic's table and writes each partition's batch with its offset.

Owns :class:`JdbcSinkTask`: the offsets kept in the target's ``__raftconnect_offsets``
(taken at start when higher than the worker's, re-read after a stale write), planning a
topic's value/key schema and columns from a peek, creating and evolving tables, and
the three write paths (decode in the Python worker, ``from_json`` in the JVM for
nested values, the SMT / tolerance / DLQ stage of :mod:`.sink_records`). Reading
the assignment's offset ranges is the runtime's :class:`~webapp.runtime.sink_task.SinkTask`.

About 600 lines, nearly all the one class: its paths share one plan (columns, table,
offsets) and splitting them would spread it over modules.

Must not touch: the source's code; rows inside a transaction (:mod:`.dbio.write`).
"""
from __future__ import annotations

import dataclasses
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

from webapp.kafka.client_overrides import client_overrides
from webapp.plugin import (
    AbstractConfig,
    ConnectException,
)
from webapp.runtime.sink_task import PartitionDone, SinkTask

from . import dbio
from .config import _KAFKA_PK, _SCHEMA_PREFIX, STRING_CONVERTER, _checked_params, shown_url
from .connectors import JdbcSinkConnector
from .dialects import _create_if_missing, _ddl_type, _is_decimal_column, _schema_kind, _wire_spark_type
from .jobs import _LocalJob, _register_by_value, _spark_error
from .sink_records import (
    _NESTED_WHY,
    _canonical,
    _envelope_schema,
    _make_read_write_fn,
    _make_transform_write_fn,
    _make_write_fn,
    _nested_field,
    _peeked_batch,
    _reads_metadata,
    _TransformSpec,
    _whole_envelope_schema,
)

__all__ = ["JdbcSinkTask"]

log = logging.getLogger(__name__)


#: the stats rows a write job returns per partition (see dbio.write_partition)
_STATS_SCHEMA = "kafka_partition int, first long, last long, count long, next_offset long, replan boolean"


@dataclass
class _TopicPlan:
    """What the sink decided for one topic from the peeked records."""

    value_schema: dict
    value_prefixes: list[str] | None
    key_schema: dict | None
    key_prefixes: list[str] | None


class JdbcSinkTask(SinkTask):
    """Reads its topic partitions and writes each partition's batch in one transaction with its offset.

    Its assignment, offsets and batch loop are :class:`~webapp.runtime.sink_task.SinkTask`'s; the offsets
    it starts from are the higher of the worker's and those committed in the target.

    Raises (from ``start``/``run_batch``): ConnectException for bad config, a missing
    table without ``auto.create``, missing columns without ``auto.evolve``, records
    without schemas, database and Kafka errors.
    """

    config_def = JdbcSinkConnector.config_def

    def start(self) -> None:
        cfg, cd = self.config, self.config_def
        self.params = _checked_params(cfg, cd, "JdbcSinkTask")
        self.dialect = self.params["dialect"]
        conf = AbstractConfig(cd, cfg)
        self.table_format = conf.get_string("table.name.format") or "${topic}"
        self.insert_mode = conf.get_string("insert.mode")
        self.pk_mode = conf.get_string("pk.mode")
        self.pk_fields = conf.get_list("pk.fields")
        self.auto_create = conf.get_bool("auto.create")
        self.auto_evolve = conf.get_bool("auto.evolve")
        self.delete_enabled = conf.get_bool("delete.enabled")
        self.batch_size = conf.get_int("batch.size")
        self.batch_ms = max(1, conf.get_long("batch.max.ms"))
        self.key_converter = conf.get_class("key.converter")
        self.key_schemas = conf.get_bool("key.converter.schemas.enable")
        self.connector = self.context.task_id.connector
        self._pipelines: dict[str, Any] = {}
        self._tables: dict[str, set[str]] = {}
        self._scales: dict[str, dict[str, int | None]] = {}  # table -> DECIMAL column -> its scale
        self.start_sink(conf.get_list("topics"), conf.get_int("batch.max.rows"))
        self._load_target_offsets()
        if self.context.spark is None:
            from webapp.runtime.spark import get_spark_session

            self.context.spark = get_spark_session()
        _register_by_value()

    # -- offsets in the target ---------------------------------------------------------
    def _load_target_offsets(self) -> None:
        """Create the offsets table if needed and take the max of its offsets and the metadata store's."""
        t = dbio.quote(self.dialect, dbio.OFFSETS_TABLE)
        try:
            conn = dbio.connect(self.params, autocommit=True)
        except Exception as e:
            raise ConnectException(f"Cannot connect to {shown_url(self.config.get('connection.url'))}: {e}") from e
        try:
            cur = conn.cursor()
            _create_if_missing(cur, f"CREATE TABLE IF NOT EXISTS {t} (connector VARCHAR(255) NOT NULL, "
                                    "topic VARCHAR(255) NOT NULL, kafka_partition INTEGER NOT NULL, "
                                    "next_offset BIGINT NOT NULL, PRIMARY KEY (connector, topic, kafka_partition))",
                               f"SELECT 1 FROM {t} WHERE 1 = 0")
            cur.execute(f"SELECT topic, kafka_partition, next_offset FROM {t} WHERE connector = %s", (self.connector,))
            for topic, p, nxt in cur.fetchall():
                if topic in self.topics:
                    key = (topic, int(p))
                    self._next[key] = max(int(nxt), self._next.get(key, -1))
        finally:
            conn.close()

    def _target_offset(self, topic: str, partition: int) -> int | None:
        t = dbio.quote(self.dialect, dbio.OFFSETS_TABLE)
        conn = dbio.connect(self.params, autocommit=True)
        try:
            cur = conn.cursor()
            cur.execute(f"SELECT next_offset FROM {t} WHERE connector = %s AND topic = %s AND kafka_partition = %s",
                        (self.connector, topic, partition))
            row = cur.fetchone()
            return None if row is None else int(row[0])
        finally:
            conn.close()

    # -- batches -----------------------------------------------------------------------
    def put_topic(self, topic: str, ranges: list) -> list[PartitionDone]:
        """Write one topic's ranges (:meth:`_sink_topic`, offsets in the same transactions)."""
        return [PartitionDone(p, count, nxt) for p, first, last, count, nxt in self._sink_topic(topic, ranges)]

    def _peek(self, ranges) -> list:
        """Up to 100 records from the ranges' start offsets, read on the driver (:meth:`SinkTask.peek`)."""
        return self.peek(ranges, 100, timeout=min(10.0, self.batch_ms / 1000.0))[0]

    @staticmethod
    def _schemas(blobs: list[bytes], what: str, topic: str) -> tuple[dict, list[str] | None]:
        """(merged Connect schema, envelope prefixes or None when the layout is not schema-first)."""
        from webapp.runtime.converters import SchemaConversionError, merge_connect_schemas

        prefixes: list[str] = []
        schemas: list[dict] = []
        layout_ok = True
        for b in blobs:
            text = b.decode("utf-8", "replace")
            cut = text.find(',"payload":')
            if layout_ok and text.startswith(_SCHEMA_PREFIX) and cut > 0:
                if text[:cut] in prefixes:
                    continue
                prefixes.append(text[:cut])
            else:
                layout_ok = False
            try:
                obj = json.loads(text)
            except ValueError as e:
                raise ConnectException(f"Topic {topic}: a record {what} is not valid JSON: {e}") from e
            if not isinstance(obj, dict) or set(obj) != {"schema", "payload"} or obj["schema"] is None:
                raise ConnectException(
                    f"Topic {topic}: the JDBC sink needs record {what}s with schemas (JsonConverter with "
                    f"schemas.enable=true); a {what} is not a {{\"schema\",\"payload\"}} envelope")
            if obj["schema"] not in schemas:
                schemas.append(obj["schema"])
        if not schemas:
            raise ConnectException(f"Topic {topic}: no record {what} schema found")
        try:
            if all(s.get("type") == "struct" for s in schemas):
                merged = merge_connect_schemas(schemas)
            elif len({json.dumps(s, sort_keys=True) for s in schemas}) == 1:
                merged = schemas[0]
            else:
                raise SchemaConversionError(f"different {what} schemas in one batch")
        except SchemaConversionError as e:
            raise ConnectException(f"Topic {topic}: incompatible {what} schemas: {e}") from e
        return merged, (prefixes if layout_ok else None)

    def _plan_topic(self, topic: str, peeked) -> _TopicPlan | None:
        values = [r.value for r in peeked if r.value is not None]
        if not values:
            value_schema, value_prefixes = {"type": "struct", "fields": [], "optional": True}, []
        else:
            value_schema, value_prefixes = self._schemas(values, "value", topic)
            if value_schema.get("type") != "struct":
                raise ConnectException(f"Topic {topic}: record values must be structs, got {value_schema.get('type')}")
        key_schema = key_prefixes = None
        if self.pk_mode == "record_key":
            keys = [r.key for r in peeked if r.key is not None]
            if self.key_converter == STRING_CONVERTER:
                key_schema, key_prefixes = {"type": "string", "optional": False}, None
            elif not keys:
                raise ConnectException(f"Topic {topic}: pk.mode=record_key but the records have no keys")
            elif not self.key_schemas:
                raise ConnectException("pk.mode=record_key with JsonConverter keys needs key.converter.schemas.enable=true")
            else:
                key_schema, key_prefixes = self._schemas(keys, "key", topic)
        if not values and self.pk_mode != "record_key":
            return None if not peeked else _TopicPlan(value_schema, value_prefixes, None, None)
        return _TopicPlan(value_schema, value_prefixes, key_schema, key_prefixes)

    def _columns(self, topic: str, plan: _TopicPlan) -> tuple[list[list[str]], list[str]]:
        """``[[name, kind, source]]`` and the primary key columns for ``plan``."""
        vfields = plan.value_schema.get("fields", [])
        cols: list[list[str]] = []
        pk: list[str] = []
        if self.pk_mode == "kafka":
            names = self.pk_fields or list(_KAFKA_PK)
            if len(names) != 3:
                raise ConnectException("pk.mode=kafka needs 3 pk.fields (topic, partition, offset columns) or none")
            cols += [[names[0], "string", "kafka_topic"], [names[1], "int32", "kafka_partition"],
                     [names[2], "int64", "kafka_offset"]]
            pk = list(names)
        elif self.pk_mode == "record_key":
            ks = plan.key_schema or {}
            if ks.get("type") == "struct":
                kf = {f["field"]: (i, f) for i, f in enumerate(ks.get("fields", []))}
                names = self.pk_fields or list(kf)
                for n in names:
                    if n not in kf:
                        raise ConnectException(f"Topic {topic}: pk.fields {n!r} is not a field of the record key")
                    cols.append([n, _schema_kind(kf[n][1]), f"k{kf[n][0]}"])
            else:
                if len(self.pk_fields) > 1:
                    raise ConnectException("A primitive record key needs exactly one pk.fields name")
                names = self.pk_fields or ["__connect_key"]
                cols.append([names[0], _schema_kind(ks), "k0"])
            pk = list(names)
        elif self.pk_mode == "record_value":
            names = self.pk_fields or [f["field"] for f in vfields]
            known = {f["field"] for f in vfields}
            for n in names:
                if n not in known:
                    raise ConnectException(f"Topic {topic}: pk.fields {n!r} is not a field of the record value")
            pk = list(names)
        taken = {c[0] for c in cols}
        for i, f in enumerate(vfields):
            if f["field"] not in taken:
                cols.append([f["field"], _schema_kind(f), f"v{i}"])
        return cols, pk

    def _table(self, topic: str) -> str:
        return self.table_format.replace("${topic}", topic)

    def _ensure_table(self, table: str, cols: list[list[str]], pk: list[str], optional: Mapping[str, bool]) -> None:
        """CREATE (auto.create) or ALTER ... ADD (auto.evolve) so ``table`` has every column."""
        q = lambda n: dbio.quote(self.dialect, n)  # noqa: E731
        have = self._tables.get(table)
        if have is not None and all(c[0] in have for c in cols):
            return
        conn = dbio.connect(self.params, autocommit=True)

        def described() -> set[str]:
            cur.execute(f"SELECT * FROM {q(table)} WHERE 1 = 0")
            desc = cur.description
            cur.fetchall()
            # the scale of each DECIMAL/NUMERIC column (None: unconstrained), for the writers' rounding check
            self._scales[table] = {d[0]: d[5] for d in desc if _is_decimal_column(self.dialect, d)}
            return {d[0] for d in desc}

        try:
            cur = conn.cursor()
            try:
                have = described()
            except Exception:
                have = None
            if have is None:
                if not self.auto_create:
                    raise ConnectException(f"Table {table} is missing and auto.create is disabled")
                defs = [f"{q(n)} {_ddl_type(self.dialect, k, n in pk)}"
                        + (" NOT NULL" if n in pk or not optional.get(n, True) else " NULL") for n, k, _ in cols]
                if pk:
                    defs.append(f"PRIMARY KEY ({', '.join(q(n) for n in pk)})")
                suffix = "" if self.dialect == "postgresql" else " DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"
                _create_if_missing(cur, f"CREATE TABLE IF NOT EXISTS {q(table)} ({', '.join(defs)}){suffix}",
                                   f"SELECT 1 FROM {q(table)} WHERE 1 = 0")
                have = described()
            missing = [c for c in cols if c[0] not in have]
            if missing:
                if not self.auto_evolve:
                    raise ConnectException(f"Table {table} lacks columns {[c[0] for c in missing]} and auto.evolve "
                                           "is disabled")
                for n, k, _ in missing:
                    try:
                        cur.execute(f"ALTER TABLE {q(table)} ADD COLUMN {q(n)} {_ddl_type(self.dialect, k, False)} NULL")
                    except Exception:  # another task may have added it meanwhile
                        if n not in described():
                            raise
                have = described()
        finally:
            conn.close()
        self._tables[table] = have

    def _narrower_scales(self, table: str, cols: list[list[str]]) -> dict[str, int]:
        """``{column: scale}`` of the Decimal columns of ``table`` that keep fewer decimal places than the
        records' schema carries (see ``scales`` in :func:`dbio.write_partition`)."""
        scales = self._scales.get(table, {})
        out = {}
        for name, kind, _ in cols:
            if kind.startswith("decimal:") and scales.get(name) is not None:
                if int(scales[name]) < int(kind.split(":")[2]):
                    out[name] = int(scales[name])
        return out

    def _table_plan(self, topic: str, table: str, cols: list[list[str]], pk: list[str], deletes: bool,
                    **extra: Any) -> dict[str, Any]:
        """What :func:`.dbio.write_partition` / ``write_routed_partition`` need to write ``topic``'s records
        into ``table``: dialect, quoted table, columns ``[[name, kind, ...]]``, key, mode, deletes (a null
        value deletes its key's row), statement size and narrower Decimal scales; plus ``extra``
        (``record_topic`` for a routed topic)."""
        return {"dialect": self.dialect, "table": dbio.quote(self.dialect, table), "connector": self.connector,
                "topic": topic, **extra, "insert_mode": self.insert_mode, "columns": cols, "pk": pk,
                "delete_enabled": deletes, "batch_size": self.batch_size,
                "scales": self._narrower_scales(table, cols)}

    def _sink_topic(self, topic: str, ranges) -> list[tuple[int, int | None, int | None, int, int | None]]:
        """One Spark job writing ``ranges``; returns ``(partition, first, last, count, next)`` per range."""
        from webapp.kafka.spark_io import partition_reader

        if self._transforming:
            return self._sink_topic_transformed(topic, ranges)
        t0 = time.monotonic()
        peeked = self._peek(ranges)
        if not peeked:
            return []
        t_peek = time.monotonic() - t0
        plan = self._plan_topic(topic, peeked)
        if plan is None:  # only tombstones and deletes disabled: skip them
            plan = _TopicPlan({"type": "struct", "fields": [], "optional": True}, [], None, None)
        cols, pk = self._columns(topic, plan)
        table = self._table(topic)
        optional = {f["field"]: f.get("optional", True) for f in plan.value_schema.get("fields", [])}
        if cols:
            self._ensure_table(table, cols, pk, optional)
        write_plan = self._table_plan(topic, table, cols, pk, self.delete_enabled and self.pk_mode == "record_key")
        spans = [(r.topic, r.partition, r.start) for r in ranges]
        schema = _STATS_SCHEMA
        decode = self._decode_plan(plan, cols)
        engine = self.context.engine
        if decode is not None and engine is not None and not engine.use_spark(self.config, None):
            # in-process: each partition read, decoded and written on the engine's piece pool
            from webapp.runtime.engine import timed

            reader = partition_reader(ranges, self.context.kafka_config, consumer_config=self.consumer_overrides,
                                      timeout=self.batch_ms / 1000.0)
            fn = _make_read_write_fn(self.params, write_plan, spans,
                                     lambda batches: timed(reader(batches), "consume"), decode)
            job = _LocalJob(engine, lambda batches: timed(fn(batches), "_sink"), len(ranges))
        elif decode is not None:  # one Python stage: read, decode and write in each Spark partition
            reader = partition_reader(ranges, self.context.kafka_config, consumer_config=self.consumer_overrides,
                                      timeout=self.batch_ms / 1000.0)
            job = self.context.spark.range(0, len(ranges), 1, len(ranges)).mapInArrow(
                _make_read_write_fn(self.params, write_plan, spans, reader, decode), schema)
        else:  # nested values (written as JSON text): decoded by from_json in the JVM
            job = self._jvm_decoded(plan, cols, ranges).mapInArrow(_make_write_fn(self.params, write_plan, spans),
                                                                   schema)
        rows = self._collect(job, topic, ranges, f"table {table}")
        if rows is None:
            return []
        log.info("sink %s: topic %s, %d records: peek %.2f s, job %.2f s", self.context.task_id, topic,
                 sum(r["count"] for r in rows), t_peek, time.monotonic() - t0 - t_peek)
        return [(r.kafka_partition, r.first, r.last, r["count"], r.next_offset) for r in rows]

    def _decode_plan(self, plan: _TopicPlan, cols: list[list[str]]) -> dict[str, Any] | None:
        """What :func:`dbio.decode_batch` needs for ``plan``, or ``None`` when a field is nested."""
        used = {c[2] for c in cols}
        nested = ("struct", "array", "map")
        vfields = plan.value_schema.get("fields", [])
        out: dict[str, Any] = {"value_prefixes": plan.value_prefixes, "key_prefixes": plan.key_prefixes,
                               "value_fields": [(f"v{i}", f["field"], _schema_kind(f)) for i, f in enumerate(vfields)
                                                if f"v{i}" in used]}
        if any(f.get("type") in nested for f in vfields):
            return None
        if self.pk_mode == "record_key":
            ks = plan.key_schema or {}
            if self.key_converter == STRING_CONVERTER:
                out["key_string"] = "k0"
            elif ks.get("type") == "struct":
                if any(f.get("type") in nested for f in ks.get("fields", [])):
                    return None
                out["key_fields"] = [(f"k{i}", f["field"], _schema_kind(f)) for i, f in enumerate(ks["fields"])
                                     if f"k{i}" in used]
            elif ks.get("type") in nested:
                return None
            else:
                out["key_fields"], out["key_primitive"] = [("k0", None, _schema_kind(ks))], True
        kinds = [k for _, _, k in out["value_fields"] + out.get("key_fields", [])]
        return out if dbio.decodable(kinds) else None

    def _jvm_decoded(self, plan: _TopicPlan, cols: list[list[str]], ranges):
        """The records of ``ranges`` decoded by ``from_json`` in the JVM, in :func:`dbio.write_partition`'s input form."""
        from functools import reduce

        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from webapp.kafka.spark_io import read_partitions

        raw = read_partitions(self.context.spark, ranges, self.context.kafka_config,
                              consumer_config=self.consumer_overrides, timeout=self.batch_ms / 1000.0)
        value, key = F.col("value"), F.col("key")
        vtext, ktext = value.cast("string"), key.cast("string")
        planned = F.lit(True)
        if plan.value_prefixes is not None and plan.value_prefixes:
            planned = value.isNull() | reduce(lambda a, b: a | b, [vtext.startswith(p) for p in plan.value_prefixes])
        if plan.key_prefixes:
            planned = planned & (key.isNull() | reduce(lambda a, b: a | b, [ktext.startswith(p) for p in plan.key_prefixes]))
        planned = F.coalesce(planned, F.lit(False))
        vfields = plan.value_schema.get("fields", [])
        # Each envelope is parsed once into a struct column (__v / __k) and the fields are taken from
        # it in a second projection: Spark keeps the two projections apart because from_json is not
        # cheap, whereas one projection with a field per column evaluated from_json once per column
        # (conditional expressions are not shared) -- 10x the cost of the whole rest of the job.
        base = [F.col("kafka_offset").alias("__offset"), value.isNull().alias("__tombstone"),
                planned.alias("__planned")]
        out = [F.col("__offset"), F.col("__tombstone"), F.col("__planned")]
        used = {c[2] for c in cols}
        if vfields:
            wire = T.StructType([T.StructField(f["field"], _wire_spark_type(_schema_kind(f)), True) for f in vfields])
            base.append(F.when(planned & value.isNotNull(), F.from_json(
                vtext, T.StructType([T.StructField("payload", wire, True)]), {"mode": "FAILFAST"}).getField("payload"))
                .alias("__v"))
            out += [F.col("__v").getField(f["field"]).alias(f"v{i}") for i, f in enumerate(vfields) if f"v{i}" in used]
        if self.pk_mode == "record_key":
            ks = plan.key_schema or {}
            if self.key_converter == STRING_CONVERTER:
                base.append(ktext.alias("__k"))
                out.append(F.col("__k").alias("k0"))
            elif ks.get("type") == "struct":
                wire = T.StructType([T.StructField(f["field"], _wire_spark_type(_schema_kind(f)), True)
                                     for f in ks["fields"]])
                base.append(F.when(planned & key.isNotNull(), F.from_json(
                    ktext, T.StructType([T.StructField("payload", wire, True)]), {"mode": "FAILFAST"})
                    .getField("payload")).alias("__k"))
                out += [F.col("__k").getField(f["field"]).alias(f"k{i}") for i, f in enumerate(ks["fields"])
                        if f"k{i}" in used]
            else:
                base.append(F.when(planned & key.isNotNull(), F.from_json(
                    ktext, T.StructType([T.StructField("payload", _wire_spark_type(_schema_kind(ks)), True)]),
                    {"mode": "FAILFAST"}).getField("payload")).alias("__k"))
                out.append(F.col("__k").alias("k0"))
        return raw.select(*base).select(*out)

    # -- transforms / error tolerance / DLQ ------------------------------------------------
    def _value_plan(self, topic: str, values: list[bytes]) -> tuple[dict, list[str], list[dict]]:
        """(merged value schema, compact schema prefixes, every schema) of the peeked values whose
        envelope names a struct schema.

        Values that are not such envelopes, or whose schema has a nested struct/array/map
        field (:data:`_NESTED`), are left to the workers, where they fail in the converter
        stage (and ``errors.tolerance`` decides); the payloads are not parsed here for the same reason. Envelopes not in JsonConverter's compact
        schema-first layout are parsed whole (here and in the workers).
        """
        from webapp.runtime.converters import SchemaConversionError, merge_connect_schemas

        prefixes: list[str] = []
        schemas: list[dict] = []
        for b in values:
            text = b.decode("utf-8", "replace")
            schema = _envelope_schema(text)
            if schema is not None and _nested_field(schema) is None:
                prefix = text[:text.find(',"payload":')]
                if prefix in prefixes:
                    continue
                prefixes.append(prefix)
            else:
                schema = schema or _whole_envelope_schema(text)
                if schema is None or _nested_field(schema) is not None:
                    continue  # the workers' converter error (see _TransformSpec.transformed)
            if schema not in schemas:
                schemas.append(schema)
        if not schemas:
            return {"type": "struct", "fields": [], "optional": True}, [], []
        try:
            return merge_connect_schemas(schemas), prefixes, schemas
        except SchemaConversionError as e:
            raise ConnectException(f"Topic {topic}: incompatible value schemas: {e}") from e

    def _sink_pipeline(self, decode_schema: dict):
        from webapp.runtime.pipeline import SinkPipeline

        key = json.dumps(decode_schema, sort_keys=True)
        pipeline = self._pipelines.get(key)
        if pipeline is None:
            pipeline = SinkPipeline.plan(self.config, decode_schema, self.context.task_id, schemaless=False)
            self._pipelines = {key: pipeline}
        return pipeline

    def _sink_topic_transformed(self, topic: str, ranges) -> list[tuple[int, int | None, int | None, int, int | None]]:
        """One Spark job (or in-process pieces): read → decode → SMTs → write each partition with its offset.

        The driver plans from a peek: the value schema to decode with, the chain's
        output schemas (which decide the columns), and the tables the peeked records
        are routed to (``table.name.format`` applied to each routed topic). Each
        partition then runs :meth:`_TransformSpec.unit` on its batches and
        :func:`dbio.write_routed_partition`: one transaction with every routed
        table's rows and the partition's next offset, which counts records dropped
        by a filter or sent to the dead letter queue (produced, and flushed, before
        the commit). A record routed to a table or carrying a schema the driver did
        not plan ends the partition's batch there; the next batch plans again.
        """
        from webapp.kafka.spark_io import partition_reader

        t0 = time.monotonic()
        peeked = self._peek(ranges)
        if not peeked:
            return []
        values = [r.value for r in peeked if r.value is not None]
        decode_schema, prefixes, schemas = self._value_plan(topic, values)
        vfields = decode_schema.get("fields", [])  # never nested: those records are the workers' errors
        nested = ("struct", "array", "map")
        pipeline = self._sink_pipeline(decode_schema)
        out_value = pipeline.out.value_schema
        if not out_value or out_value.get("type") != "struct":
            raise ConnectException(f"Topic {topic}: the transformations must give struct values with a schema "
                                   f"to be written to a table, got {out_value and out_value.get('type')}")
        if _nested_field(out_value) is not None:
            raise ConnectException(f"Topic {topic}: the transformations give values with a nested field "
                                   f"({_nested_field(out_value)}); {_NESTED_WHY}")
        transformed_key = pipeline.arrow_out.get_field_index(pipeline.KEY) >= 0
        key_schema = key_prefixes = None
        key_mode = None
        if self.pk_mode == "record_key":
            if transformed_key:
                key_schema, key_mode = pipeline.out.key_schema, "transformed"
                if key_schema is None:
                    raise ConnectException(f"Topic {topic}: pk.mode=record_key needs keys with a schema")
            elif self.key_converter == STRING_CONVERTER:
                key_schema, key_mode = {"type": "string", "optional": False}, "string"
            else:
                keys = [r.key for r in peeked if r.key is not None]
                if not keys:
                    raise ConnectException(f"Topic {topic}: pk.mode=record_key but the records have no keys")
                if not self.key_schemas:
                    raise ConnectException("pk.mode=record_key with JsonConverter keys needs "
                                           "key.converter.schemas.enable=true")
                key_schema, key_prefixes = self._schemas(keys, "key", topic)
                key_mode = "decoded"
            if any(f.get("type") in nested for f in (key_schema or {}).get("fields", [])) or \
                    (key_schema or {}).get("type") in nested[1:]:
                raise ConnectException(f"Topic {topic}: record keys with nested fields cannot be written yet")
        plan = _TopicPlan(out_value, None, key_schema, key_prefixes)
        cols, pk = self._columns(topic, plan)
        ofields = out_value.get("fields", [])
        ks = key_schema or {}
        if key_mode == "string":
            key_fields = [("k0", None, "string")]
        elif ks.get("type") == "struct":
            key_fields = [(f"k{i}", f["field"], _schema_kind(f)) for i, f in enumerate(ks.get("fields", []))]
        elif key_mode:
            key_fields = [("k0", None, _schema_kind(ks))]
        else:
            key_fields = []
        spec = _TransformSpec(
            pipeline=pipeline, payload_type=pipeline.payload_type(),
            value_fields=[(f"v{i}", f["field"], _schema_kind(f)) for i, f in enumerate(vfields)],
            value_prefixes=list(prefixes), value_schemas=frozenset(_canonical(x) for x in schemas), out_fields=[(f"v{i}", f["field"], _schema_kind(f))
                                                       for i, f in enumerate(ofields)],
            key_mode=key_mode, key_fields=key_fields, key_prefixes=key_prefixes, routes=frozenset(),
            deletes=self.delete_enabled and self.pk_mode == "record_key")
        routed = spec.routes_of(_peeked_batch(topic, peeked))
        optional = {f["field"]: f.get("optional", True) for f in ofields}
        plans: dict[str, dict[str, Any]] = {}
        for r in sorted(routed):
            table = self._table(r)
            if cols:
                self._ensure_table(table, cols, pk, optional)
            plans[r] = self._table_plan(topic, table, cols, pk, spec.deletes, record_topic=r)
        spec = dataclasses.replace(spec, routes=frozenset(plans))
        spans = [(r.topic, r.partition, r.start) for r in ranges]
        schema = _STATS_SCHEMA
        dlq = self._operator.config.dlq_topic
        dlq_conf = None
        if dlq:
            from webapp.kafka.spark_io import producer_config

            # as Connect's DLQ reporter: the worker's producer settings and the connector's producer.override.*
            dlq_conf = producer_config(self.context.kafka_config, client_overrides(self.config, "producer"))
        reader = partition_reader(ranges, self.context.kafka_config, consumer_config=self.consumer_overrides,
                                  timeout=self.batch_ms / 1000.0, with_metadata=bool(dlq) or _reads_metadata(pipeline))
        engine = self.context.engine
        t_plan = time.monotonic() - t0
        if engine is not None and not engine.use_spark(self.config, None):
            from webapp.runtime.engine import timed

            fn = _make_transform_write_fn(self.params, plans, self.connector, spans,
                                          lambda batches: timed(reader(batches), "consume"), spec, dlq, dlq_conf)
            job = _LocalJob(engine, lambda batches: timed(fn(batches), "_sink"), len(ranges))
        else:
            job = self.context.spark.range(0, len(ranges), 1, len(ranges)).mapInArrow(
                _make_transform_write_fn(self.params, plans, self.connector, spans, reader, spec, dlq, dlq_conf),
                schema)
        rows = self._collect(job, topic, ranges, f"tables {sorted(plans) or '(none yet)'}")
        if rows is None:
            return []
        log.info("sink %s: topic %s, %d records through the transforms: plan %.2f s, job %.2f s",
                 self.context.task_id, topic, sum(r["count"] for r in rows), t_plan, time.monotonic() - t0 - t_plan)
        return [(r.kafka_partition, r.first, r.last, r["count"], r.next_offset) for r in rows]

    def _collect(self, job, topic: str, ranges, target: str) -> list | None:
        """The stats rows of a write ``job``; ``None`` when another writer had moved an offset in the target
        (then resynced from it). Raises ConnectException naming ``topic`` and ``target`` for any other failure."""
        try:
            return job.collect()
        except Exception as e:
            msg = _spark_error(e)
            if "StaleOffsetError" in msg or "the target holds offset" in msg:
                self._resync(topic, ranges)
                return None
            raise ConnectException(f"Topic {topic} -> {target}: {msg}") from e

    def _resync(self, topic: str, ranges) -> None:
        """Another writer moved a partition's offset in the target: continue from the target's offsets."""
        for r in ranges:
            stored = self._target_offset(topic, r.partition)
            if stored is not None:
                self._next[(topic, r.partition)] = stored


#: the class Connect names for a write the database refused (stage TASK_PUT)
