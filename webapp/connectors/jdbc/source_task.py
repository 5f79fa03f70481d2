"""The JDBC source task: each batch reads one table's next rows and produces them to its topic.

Owns :class:`JdbcSourceTask`: the tables it polls in turn, planning a batch's upper
bound with one indexed query per ``mode`` (and splitting an ``incrementing`` range
over the cores), the rows a PostgreSQL value cannot leave in Connect's types
(refused as record errors), and the three ways a batch runs: in-process on the
engine, as a Spark job encoding in the JVM, or through the SMT chain
(``SourcePipeline``). Offsets: partition ``{"table"}`` or ``{"query"}``, offset
``{"incrementing"}`` and/or ``{"timestamp", "timestamp_nanos"}``.

Must not touch: the sink's code; the database I/O itself (:mod:`.dbio`); the
offset store (the runtime commits what ``run_batch`` returns).
"""
from __future__ import annotations

import functools
import json
import logging
import time
from dataclasses import dataclass
from typing import Any, Mapping

from webapp.kafka.client_overrides import client_overrides, with_admin_overrides
from webapp.kafka.topics import is_valid_topic_name
from webapp.plugin import (
    AbstractConfig,
    BatchResult,
    ConnectException,
    SourceOffset,
    Task,
    partition_key,
)

from . import dbio
from .config import TASK_TABLES, _checked_params, shown_url, topic_creation_config
from .connectors import JdbcSourceConnector
from .dialects import _describe, _kind_schema
from .jobs import _register_by_value, _spark_error

__all__ = ["JdbcSourceTask"]

log = logging.getLogger(__name__)


@dataclass
class _Source:
    """One table (or the query) a source task polls."""

    name: str
    partition: dict[str, Any]
    topic: str
    select: str  # SELECT ... FROM ... (no WHERE): the rows of the table/query
    offset: dict[str, Any]
    next_poll: float = 0.0


class JdbcSourceTask(Task):
    """Polls its tables in turn; each batch is one Spark job reading and producing one table's next rows.

    ``run_batch`` returns after every record of the batch was acknowledged, with
    the table's new offset; ``None`` when no table had new rows (each table is
    polled again ``poll.interval.ms`` after it had none; in ``bulk`` mode after
    each full copy).

    Raises (from ``start``/``run_batch``): ConnectException for bad config, database
    errors (with the message of the server) and Kafka failures.
    """

    config_def = JdbcSourceConnector.config_def

    def start(self) -> None:
        cfg, cd = self.config, self.config_def
        self.params = _checked_params(cfg, cd, "JdbcSourceTask")
        self.dialect = self.params["dialect"]
        conf = AbstractConfig(cd, cfg)
        self.mode = conf.get_string("mode")
        self.inc_col = cfg.get("incrementing.column.name") or None
        self.ts_cols = conf.get_list("timestamp.column.name")
        self.batch_rows = max(1, conf.get_int("batch.max.rows"))
        self.poll_interval = max(0, conf.get_int("poll.interval.ms")) / 1000.0
        self.delay_ms = max(0, conf.get_long("timestamp.delay.interval.ms"))
        self.schemas_enable = conf.get_bool("value.converter.schemas.enable")
        self.producer_overrides = client_overrides(cfg, "producer")
        from webapp.runtime.pipeline import error_handling

        self._transforming, self._operator = error_handling(cfg, sink=False)
        self._pipelines: dict[Any, Any] = {}
        prefix = cfg.get("topic.prefix") or ""
        q = lambda n: dbio.quote(self.dialect, n)  # noqa: E731
        self.sources: list[_Source] = []
        if cfg.get("query"):
            part = {"query": "query"}
            self.sources.append(_Source("query", part, prefix, f"SELECT * FROM ({cfg['query']}) raftconnect_q",
                                        self._resume(part)))
        else:
            raw = cfg.get(TASK_TABLES)
            if raw is None:
                conn = JdbcSourceConnector()
                conn.start(cfg)
                tables = conn.tables()
            else:
                tables = json.loads(raw)
            for t in tables:
                part = {"table": t}
                self.sources.append(_Source(t, part, prefix + t, f"SELECT * FROM {q(t)}", self._resume(part)))
        for s in self.sources:
            if not is_valid_topic_name(s.topic):
                raise ConnectException(f"Invalid topic name {s.topic!r} for {s.name}: use up to 249 of [a-zA-Z0-9._-]")
        self._turn = 0
        if self.context.spark is None:
            from webapp.runtime.spark import get_spark_session

            self.context.spark = get_spark_session()
        _register_by_value()
        from webapp.kafka.clients import ensure_topic_cached
        from webapp.kafka.topics import TopicError

        for s in self.sources:
            try:
                ensure_topic_cached(with_admin_overrides(self.context.kafka_config, cfg), s.topic,
                                    conf.get_int("topic.creation.default.partitions"),
                                    conf.get_int("topic.creation.default.replication.factor"),
                                    topic_creation_config(cfg))
            except TopicError as e:
                raise ConnectException(str(e)) from e

    def _resume(self, partition: Mapping[str, Any]) -> dict[str, Any]:
        entry = self.context.offsets.get(partition_key(partition))
        return dict(entry.offset) if entry is not None else {}

    def run_batch(self) -> BatchResult | None:
        now = time.monotonic()
        n = len(self.sources)
        for i in range(n):
            s = self.sources[(self._turn + i) % n]
            if now < s.next_poll:
                continue
            result = self._poll(s)
            if result is None:
                s.next_poll = time.monotonic() + self.poll_interval
                continue
            self._turn = (self._turn + i + 1) % n
            if self.mode == "bulk":
                s.next_poll = time.monotonic() + self.poll_interval
            return result
        return None

    # -- planning one batch ------------------------------------------------------------
    def _ts_expr(self) -> str:
        q = lambda n: dbio.quote(self.dialect, n)  # noqa: E731
        cols = [q(c) for c in self.ts_cols]
        return cols[0] if len(cols) == 1 else f"COALESCE({', '.join(cols)})"

    def _now_expr(self) -> str:
        if self.dialect == "postgresql":
            now = "CURRENT_TIMESTAMP"
            return now if not self.delay_ms else f"({now} - INTERVAL '{self.delay_ms} milliseconds')"
        now = "UTC_TIMESTAMP(6)"
        return now if not self.delay_ms else f"({now} - INTERVAL {self.delay_ms * 1000} MICROSECOND)"

    def _ts_param(self, offset: Mapping[str, Any]):
        import datetime as dt

        ms = int(offset["timestamp"])
        nanos = int(offset.get("timestamp_nanos", (ms % 1000) * 1_000_000))
        value = dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc) + dt.timedelta(seconds=ms // 1000,
                                                                             microseconds=nanos // 1000)
        return value if self.dialect == "postgresql" else value.replace(tzinfo=None)

    @staticmethod
    def _ts_offset(value) -> dict[str, int]:
        import datetime as dt

        if value.tzinfo is None:
            value = value.replace(tzinfo=dt.timezone.utc)
        delta = value - dt.datetime(1970, 1, 1, tzinfo=dt.timezone.utc)
        seconds = delta.days * 86400 + delta.seconds
        return {"timestamp": seconds * 1000 + delta.microseconds // 1000,
                "timestamp_nanos": delta.microseconds * 1000}

    def _scalar(self, conn, sql: str, args: list) -> tuple | None:
        cur = conn.cursor()
        try:
            cur.execute(sql, args)
            return cur.fetchone()
        finally:
            cur.close()

    def _plan(self, conn, s: _Source, names: list[str]):
        """(pieces [(where, args)], new offset) for the next batch, or None when there is nothing new."""
        q = lambda n: dbio.quote(self.dialect, n)  # noqa: E731
        sel, limit = s.select, self.batch_rows
        if self.mode == "bulk":
            return [("", [])], None
        inc = q(self.inc_col) if self.inc_col else None
        for col in ([self.inc_col] if self.inc_col else []) + self.ts_cols:
            if col not in names:
                raise ConnectException(f"{s.name}: column {col!r} not found (columns: {', '.join(names)})")
        base = f"SELECT * FROM ({sel}) raftconnect_s"
        if self.mode == "incrementing":
            last = int(s.offset.get("incrementing", -1))
            row = self._scalar(conn, f"SELECT {inc} FROM ({base} WHERE {inc} > %s ORDER BY {inc} LIMIT 1 OFFSET %s) b",
                               [last, limit - 1])
            full = row is not None
            if row is None:
                row = self._scalar(conn, f"SELECT MAX({inc}) FROM ({base} WHERE {inc} > %s) b", [last])
            if row is None or row[0] is None:
                return None
            hi = int(row[0])
            k = self._parallelism() if full else 1
            k = max(1, min(k, hi - last))
            bounds = [last + (hi - last) * i // k for i in range(k)] + [hi]
            pieces = [(f"{inc} > %s AND {inc} <= %s", [bounds[i], bounds[i + 1]]) for i in range(k)]
            return pieces, {"incrementing": hi}
        ts = self._ts_expr()
        now = self._now_expr()
        if self.dialect == "postgresql":  # offsets are Python datetimes: plan over years 1..9999 only
            base += f" WHERE {_pg_in_range(ts)}"
            base = f"SELECT * FROM ({base}) raftconnect_r"
        if self.mode == "timestamp":
            lo_sql, lo_args = (f"{ts} > %s AND ", [self._ts_param(s.offset)]) if "timestamp" in s.offset else ("", [])
            row = self._scalar(conn, f"SELECT {ts} FROM ({base} WHERE {lo_sql}{ts} < {now} ORDER BY {ts} "
                                     f"LIMIT 1 OFFSET %s) b", lo_args + [limit - 1])
            if row is None:
                row = self._scalar(conn, f"SELECT MAX({ts}) FROM ({base} WHERE {lo_sql}{ts} < {now}) b", lo_args)
            if row is None or row[0] is None:
                return None
            return [(f"{lo_sql}{ts} <= %s", lo_args + [row[0]])], self._ts_offset(row[0])
        # timestamp+incrementing: (ts, inc) is a total order
        if "timestamp" in s.offset:
            lts = self._ts_param(s.offset)
            linc = int(s.offset.get("incrementing", -1))
            lo_sql, lo_args = f"(({ts} = %s AND {inc} > %s) OR {ts} > %s) AND ", [lts, linc, lts]
        else:
            lo_sql, lo_args = "", []
        row = self._scalar(conn, f"SELECT {ts}, {inc} FROM ({base} WHERE {lo_sql}{ts} < {now} ORDER BY {ts}, {inc} "
                                 f"LIMIT 1 OFFSET %s) b", lo_args + [limit - 1])
        if row is None:
            row = self._scalar(conn, f"SELECT {ts}, {inc} FROM ({base} WHERE {lo_sql}{ts} < {now} "
                                     f"ORDER BY {ts} DESC, {inc} DESC LIMIT 1) b", lo_args)
        if row is None or row[0] is None:
            return None
        hts, hinc = row
        where = f"{lo_sql}({ts} < %s OR ({ts} = %s AND {inc} <= %s))"
        return [(where, lo_args + [hts, hts, hinc])], {**self._ts_offset(hts), "incrementing": int(hinc)}

    def _refuse_unreadable(self, conn, s: _Source, pieces, unreadable: list[tuple[str, str, str]]) -> int:
        """Report each row of the batch holding a value Connect's types cannot hold, as a record error;
        returns how many rows were skipped (each one record error, whatever its number of such values).

        Stage ``VALUE_CONVERTER``: skipped (and logged with ``errors.log.enable``) under
        ``errors.tolerance=all``; otherwise the task fails naming table, row, column and value —
        never a batch that fails the same way forever without saying why. In timestamp modes a row
        whose timestamp column is itself ``-infinity`` or BC falls in the first batch (before any
        offset), one at ``infinity`` never comes due, as with Connect's JDBC source.
        """
        from webapp.runtime.errors import ProcessingError, Stage

        q = lambda n: dbio.quote(self.dialect, n)  # noqa: E731
        ident = [c for c in [self.inc_col, *self.ts_cols] if c]
        shown = ", ".join([f"{q(c)}::text" for c in ident] +
                          [f"CASE WHEN {p} THEN {q(c)}::text END" for c, _, p in unreadable])
        any_bad = " OR ".join(p for _, _, p in unreadable)
        skipped = 0
        for where, args in pieces:
            cur = conn.cursor()
            try:
                cur.execute(f"SELECT {shown} FROM ({s.select}) raftconnect_s WHERE "
                            + (f"({where}) AND " if where else "") + f"({any_bad})", args)
                rows = cur.fetchall()
            finally:
                cur.close()
            for row in rows:
                at = ", ".join(f"{c}={v}" for c, v in zip(ident, row)) or "a row"
                for (col, kind, _), value in zip(unreadable, row[len(ident):]):
                    if value is None:
                        continue
                    message = f"{s.name}: {at}: column {col} holds {value}, which Connect's {_UNREADABLE_WHY[kind]}"
                    self._operator.tolerate(ProcessingError(
                        Stage.VALUE_CONVERTER, type(self).__name__, "org.apache.kafka.connect.errors.DataException",
                        message))
                skipped += 1
        return skipped

    def _parallelism(self) -> int:
        engine = self.context.engine
        if engine is None:
            return max(1, int(self.context.spark.sparkContext.defaultParallelism))
        # called for a full poll only (batch.max.rows rows)
        self._batch_full = True
        return engine.parallelism(engine.would_use_spark(self.config, self.batch_rows))

    def idle_delay(self) -> float | None:
        """Seconds until the next table is due for a poll (``poll.interval.ms``)."""
        if not self.sources:
            return None
        return max(0.0, min(s.next_poll for s in self.sources) - time.monotonic())

    # -- one batch -------------------------------------------------------------------
    def _poll(self, s: _Source) -> BatchResult | None:
        try:
            conn = dbio.connect(self.params)
        except Exception as e:
            raise ConnectException(f"Cannot connect to {shown_url(self.config.get('connection.url'))}: {e}") from e
        try:
            names, kinds = _describe(conn, self.dialect, s.select)
            planned = self._plan(conn, s, names)
            unreadable = _pg_unreadable(names, kinds) if self.dialect == "postgresql" else []
            skipped = 0
            if planned is not None and unreadable:
                skipped = self._refuse_unreadable(conn, s, planned[0], unreadable)
            conn.rollback()
        except ConnectException:
            raise
        except Exception as e:
            raise ConnectException(f"{s.name}: {e}") from e
        finally:
            conn.close()
        if planned is None:
            return None
        pieces, new_offset = planned
        if unreadable:  # the rows reported above are left out of the batch
            skip = " OR ".join(p for _, _, p in unreadable)
            pieces = [((f"({w}) AND " if w else "") + f"NOT ({skip})", a) for w, a in pieces]
        records = self._operator.execute(lambda: self._produce(s, names, kinds, pieces), "KAFKA_PRODUCE",
                                         type(self).__name__)
        if skipped and self.context.metrics is not None:  # counted once the batch is produced (else it is re-read)
            self.context.metrics.record_errors(failed=skipped, skipped=skipped,
                                               logged=skipped if self._operator.config.log_enable else 0)
        if new_offset is None:  # bulk: nothing to resume from
            return BatchResult(records, ())
        s.offset = dict(new_offset)
        return BatchResult(records, (SourceOffset(dict(s.partition), dict(new_offset)),))

    def _produce(self, s: _Source, names: list[str], kinds: list[str], pieces) -> int:
        import pyarrow as pa
        from pyspark.sql.pandas.types import from_arrow_schema

        from webapp.kafka.spark_io import KafkaIOError, produce_dataframe
        from webapp.runtime.converters import encode_value_column

        connect_schema = {"type": "struct", "fields": [_kind_schema(n, k) for n, k in zip(names, kinds)],
                          "optional": False, "name": s.name if s.partition.get("table") else "query"}
        q = lambda n: dbio.quote(self.dialect, n)  # noqa: E731
        # MySQL/MariaDB print a FLOAT with 6 significant digits (3.40282e38 for FLT_MAX): read it as the
        # DOUBLE it converts to exactly, which the float32 parse turns back into the very same float
        cols = ", ".join(f"CAST({q(n)} AS DOUBLE) AS {q(n)}" if self.dialect != "postgresql" and k == "float32"
                         else q(n) for n, k in zip(names, kinds))
        sqls = [(f"SELECT {cols} FROM ({s.select}) raftconnect_s" + (f" WHERE {w}" if w else ""), a)
                for w, a in pieces]
        arrow_schema = pa.schema([pa.field(n, dbio.arrow_wire_type(k)) for n, k in zip(names, kinds)])
        fn = _make_read_fn(self.params, sqls, names, kinds)
        n = len(sqls)
        engine = self.context.engine
        full, self._batch_full = getattr(self, "_batch_full", False), False
        if self._transforming:
            return self._produce_transformed(s, names, kinds, fn, n, connect_schema)
        if engine is not None and not engine.use_spark(self.config, self.batch_rows if full else len(pieces)):
            from webapp.runtime.engine import encode_values

            # a partial of a module function: the pieces may run in the engine's worker processes
            encode = functools.partial(encode_values, schemas_enable=self.schemas_enable,
                                       connect_schema=connect_schema)

            try:
                return self.context.engine.produce_pieces(fn, n, topic=s.topic, kafka_config=self.context.kafka_config,
                                                          producer_config=self.producer_overrides, encode=encode)
            except KafkaIOError as e:
                raise ConnectException(f"{s.name}: {e}") from e
        df = self.context.spark.range(0, n, 1, n).mapInArrow(fn, from_arrow_schema(arrow_schema))
        value = encode_value_column(df.schema, self.schemas_enable, connect_schema=connect_schema)
        try:
            return produce_dataframe(df.select(value.alias("value")), s.topic, self.context.kafka_config,
                                     producer_config=self.producer_overrides)
        except KafkaIOError as e:
            raise ConnectException(f"{s.name}: {_spark_error(e)}") from e


    def _produce_transformed(self, s: _Source, names: list[str], kinds: list[str], read_fn, n: int,
                             connect_schema: dict) -> int:
        """Like the Spark path of :meth:`_produce`, with the SMT chain applied to the rows in the same job.

        The rows are handed to the chain in the transforms' logical Arrow types
        (Timestamp, Date, Decimal), so every SMT sees what it would see in Connect.
        Returns the records produced (a filter's dropped rows are not counted).
        """
        import pyarrow as pa

        from webapp.kafka.spark_io import KafkaIOError
        from webapp.runtime.pipeline import SourcePipeline

        key = (s.name, tuple(names), tuple(kinds))
        pipeline = self._pipelines.get(key)
        if pipeline is None:
            logical = pa.schema([pa.field(nm, _logical_type(k)) for nm, k in zip(names, kinds)])
            pipeline = SourcePipeline.plan(self.config, logical, connect_schema, self.context.task_id)
            self._pipelines = {key: pipeline}  # one table's schema at a time is enough to reuse
        now_ms = int(time.time() * 1000)  # a source record's timestamp: when it was read
        skipped = pipeline.skip_counter(self.context.spark)
        df = self.context.spark.range(0, n, 1, n).mapInArrow(
            pipeline.wrap(_make_logical_read_fn(read_fn, kinds), s.topic, now_ms, skipped), pipeline.spark_schema())
        conf, cfg = AbstractConfig(self.config_def, self.config), self.config
        try:
            produced = pipeline.produce(df, s.topic, self.context.kafka_config, cfg,
                                        producer_config=self.producer_overrides,
                                        partitions=conf.get_int("topic.creation.default.partitions"),
                                        replication_factor=conf.get_int("topic.creation.default.replication.factor"))
        except KafkaIOError as e:
            raise ConnectException(f"{s.name}: {_spark_error(e)}") from e
        pipeline.record_skipped(self.context.metrics, skipped.value)
        return produced


#: why a PostgreSQL value has no Connect form, by column kind (the source's per-record error)
_UNREADABLE_WHY = {
    "timestamp": "Timestamp cannot hold here: the JDBC source reads timestamps of years 1 to 9999 "
                 "(not infinity, -infinity or BC)",
    "date": "Date cannot hold here: the JDBC source reads dates of years 1 to 9999 (not infinity, -infinity or BC)",
    "time": "Time cannot hold: a time of day is below 24:00:00",
}


def _pg_in_range(expr: str) -> str:
    """PostgreSQL predicate: ``expr`` (a date or timestamp) lies in years 1..9999 (false for NULL)."""
    return f"COALESCE({expr} >= '0001-01-01' AND {expr} < '10000-01-01', false)"


def _pg_unreadable(names: list[str], kinds: list[str]) -> list[tuple[str, str, str]]:
    """``[(column, kind, predicate)]``: the predicate is true when that PostgreSQL column's value has no Connect form.

    Dates and timestamps outside years 1..9999 (``infinity``, ``-infinity``, BC, year 10000 on)
    and the time ``24:00:00``; NULL is fine. Empty when no column can hold such a value.
    """
    out = []
    for name, kind in zip(names, kinds):
        col = dbio.quote("postgresql", name)
        if kind in ("date", "timestamp"):
            out.append((name, kind, f"({col} IS NOT NULL AND NOT {_pg_in_range(col)})"))
        elif kind == "time":
            out.append((name, kind, f"COALESCE({col} >= '24:00:00', false)"))
    return out


def _logical_type(kind: str):
    """Arrow type the transforms see for a column kind (see :func:`dbio.wire_to_logical`)."""
    import pyarrow as pa

    return dbio.wire_to_logical(pa.array([], dbio.arrow_wire_type(kind)), kind).type


def _make_logical_read_fn(read_fn, kinds: list[str]):
    """``read_fn``'s wire-form batches with each column in its logical Arrow type."""
    wire_to_logical = dbio.wire_to_logical
    kinds = list(kinds)

    def read(batches):
        import pyarrow as pa

        for b in read_fn(batches):
            yield pa.RecordBatch.from_arrays([wire_to_logical(c, k) for c, k in zip(b.columns, kinds)],
                                             names=b.schema.names)

    return read


def _make_read_fn(params: Mapping[str, Any], sqls: list, names: list[str], kinds: list[str]):
    """mapInArrow function: Spark partition ``i`` runs ``sqls[i]`` and yields its rows in wire form."""
    read_rows = dbio.read_rows
    params, names, kinds = dict(params), list(names), list(kinds)

    def read(batches):
        ids = [i for b in batches for i in b.column(0).to_pylist()]
        for i in ids:
            sql, args = sqls[i]
            yield from read_rows(params, sql, args, names, kinds)

    return read
