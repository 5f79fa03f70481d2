"""JDBC connectors on Spark: PostgreSQL and MySQL/MariaDB tables ⇄ Kafka topics.

Configs use the keys of Confluent's ``io.confluent.connect.jdbc.JdbcSourceConnector``
and ``JdbcSinkConnector`` (``connection.url`` in its ``jdbc:postgresql://``,
``jdbc:mysql://`` or ``jdbc:mariadb://`` form), so they migrate unchanged. No JDBC
driver is involved: the database is read and written with psycopg and PyMySQL
inside Spark's Python workers (``webapp.connectors.jdbc_io``).

Source (:class:`JdbcSourceConnector`): the tables of ``table.whitelist`` (or all
tables minus ``table.blacklist``), or one ``query``, split over the tasks. Per
micro-batch the driver finds the batch's upper bound with one indexed query
(the ``batch.max.rows``-th next row in ``mode`` order); Spark tasks then read
the rows up to that bound (an ``incrementing`` range split into value ranges,
one per core), convert them to the JsonConverter wire form in Arrow, the JVM
encodes each row (``to_json``) and the workers produce them idempotently. Only
after every record is acknowledged does the batch return its offset, which the
runtime commits through the leader. Offsets (Confluent's shapes): partition
``{"table": name}`` or ``{"query": "query"}``; offset ``{"incrementing": n}``,
``{"timestamp": ms, "timestamp_nanos": ns}`` or both. Delivery: at least once
(a batch interrupted after some acknowledgements is produced again).

Sink (:class:`JdbcSinkConnector`): explicit offset ranges of the assigned topic
partitions are read in Spark tasks (one per partition) and decoded with the
schema planned from a driver-side peek — in the same Python worker, by pyarrow's
JSON reader (``jdbc_io.decode_batch``), or, when a field is a nested
struct/array/map written as JSON text, by ``from_json`` in the JVM — and each Spark
task writes its partition's records in **one database transaction** together
with the partition's next offset in ``__raftconnect_offsets`` of the target
database. The transaction first locks that row and checks that it still holds
the offset the batch started from, so a replayed or concurrent (zombie) batch
rolls back. On start the task resumes from the maximum of the metadata store's
and the target's offsets. Delivery: exactly once into the target table.

Transforms, ``errors.tolerance=all`` and (sink) a dead letter queue run through
:mod:`webapp.runtime.pipeline`: the source hands its rows to ``SourcePipeline`` in
their logical Arrow types; the sink decodes, transforms (``SinkPipeline.transform``)
and writes each partition in one Python stage (:class:`_TransformSpec`,
``jdbc_io.write_routed_partition``), so records a filter drops or the DLQ takes
still advance the offset stored in the target transaction. Without them both keep
the paths above.
"""
from __future__ import annotations

import dataclasses
import functools
import fnmatch
import json
import logging
import os
import time
import urllib.parse
from dataclasses import dataclass
from typing import Any, Mapping

from webapp.kafka.client_overrides import client_overrides, with_admin_overrides
from webapp.kafka.topics import is_valid_topic_name
from webapp.runtime.sink_task import PartitionDone, SinkTask

from . import jdbc_io
from webapp.plugin import (
    BatchResult,
    AbstractConfig,
    ConfigDef,
    ConfigException,
    ConfigKey,
    ConnectException,
    SinkConnector,
    SourceConnector,
    SourceOffset,
    Task,
    TaskContext,
    merge_errors,
    partition_key,
    raise_if_errors,
)

__all__ = [
    "JdbcSourceConnector",
    "JdbcSourceTask",
    "JdbcSinkConnector",
    "JdbcSinkTask",
    "parse_connection_url",
    "shown_url",
    "allowed_hosts",
    "ALLOWED_HOSTS_ENV",
    "topic_creation_config",
    "MODES",
]

log = logging.getLogger(__name__)

MODES = ("bulk", "incrementing", "timestamp", "timestamp+incrementing")
INSERT_MODES = ("insert", "upsert", "update")
PK_MODES = ("none", "kafka", "record_key", "record_value")
JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
TIMESTAMP = "org.apache.kafka.connect.data.Timestamp"
DATE = "org.apache.kafka.connect.data.Date"
TIME = "org.apache.kafka.connect.data.Time"
DECIMAL = "org.apache.kafka.connect.data.Decimal"
_SCHEMA_PREFIX = '{"schema":'
_KAFKA_PK = ("__connect_topic", "__connect_partition", "__connect_offset")
TASK_TABLES = "tables"

_COMMON = (
    ConfigKey("connection.url", "STRING", None, required=True, importance="HIGH",
              documentation="jdbc:postgresql://host:port/db, jdbc:mysql://host:port/db or jdbc:mariadb://... "
                            "(user and password may also be URL parameters)."),
    ConfigKey("connection.user", "STRING", None, importance="HIGH", documentation="Database user."),
    ConfigKey("connection.password", "PASSWORD", None, importance="HIGH", documentation="Database password."),
    ConfigKey("tasks.max", "INT", "1", importance="HIGH", documentation="Maximum number of tasks."),
    ConfigKey("value.converter", "CLASS", JSON_CONVERTER, importance="HIGH",
              documentation="Record value format; Connect's JsonConverter.", allowed=(JSON_CONVERTER,)),
    ConfigKey("value.converter.schemas.enable", "BOOLEAN", "true", importance="HIGH",
              documentation="Values are {\"schema\",\"payload\"} envelopes; the JDBC connectors need schemas."),
    ConfigKey("key.converter", "CLASS", JSON_CONVERTER, importance="LOW",
              documentation="Record key format (sink pk.mode=record_key).", allowed=(JSON_CONVERTER, STRING_CONVERTER)),
    ConfigKey("key.converter.schemas.enable", "BOOLEAN", "true", importance="LOW"),
)

_SOURCE = (
    ConfigKey("mode", "STRING", None, required=True, importance="HIGH", allowed=MODES,
              documentation="bulk (whole table each poll), incrementing, timestamp or timestamp+incrementing."),
    ConfigKey("incrementing.column.name", "STRING", None, importance="MEDIUM",
              documentation="Strictly increasing integer column (modes incrementing, timestamp+incrementing)."),
    ConfigKey("timestamp.column.name", "LIST", None, importance="MEDIUM",
              documentation="Timestamp column(s) (COALESCE of several) for the timestamp modes."),
    ConfigKey("table.whitelist", "LIST", None, importance="MEDIUM", documentation="Tables to copy (default all)."),
    ConfigKey("table.blacklist", "LIST", None, importance="MEDIUM", documentation="Tables not to copy."),
    ConfigKey("query", "STRING", None, importance="MEDIUM",
              documentation="Copy the result of this query instead of tables (one task)."),
    ConfigKey("topic.prefix", "STRING", None, required=True, importance="HIGH",
              documentation="Topic = prefix + table name; with query, the topic itself."),
    ConfigKey("poll.interval.ms", "INT", "5000", importance="HIGH",
              documentation="How often a table without new rows is polled again."),
    ConfigKey("batch.max.rows", "INT", "10000", importance="LOW",
              documentation="Rows per micro-batch per table (Confluent's default is 100; a Spark job per 100 rows "
                            "would be slow, so the default here is 10000)."),
    ConfigKey("timestamp.delay.interval.ms", "LONG", "0", importance="HIGH",
              documentation="Rows are read only once their timestamp is this much older than the database's now."),
    ConfigKey("topic.creation.default.partitions", "INT", "4", importance="MEDIUM",
              documentation="Partitions when the source creates a missing topic."),
    ConfigKey("topic.creation.default.replication.factor", "INT", "-1", importance="LOW"),
)

_SINK = (
    ConfigKey("topics", "LIST", None, required=True, importance="HIGH", documentation="Comma-separated topics."),
    ConfigKey("table.name.format", "STRING", "${topic}", importance="MEDIUM",
              documentation="Destination table name; ${topic} is replaced by the topic name."),
    ConfigKey("insert.mode", "STRING", "insert", importance="HIGH", allowed=INSERT_MODES,
              documentation="insert, upsert (insert or update by primary key) or update."),
    ConfigKey("pk.mode", "STRING", "none", importance="HIGH", allowed=PK_MODES,
              documentation="none, kafka (__connect_topic/partition/offset), record_key or record_value."),
    ConfigKey("pk.fields", "LIST", None, importance="MEDIUM", documentation="Primary key field names."),
    ConfigKey("auto.create", "BOOLEAN", "false", importance="MEDIUM",
              documentation="CREATE TABLE when the destination table is missing."),
    ConfigKey("auto.evolve", "BOOLEAN", "false", importance="MEDIUM",
              documentation="ALTER TABLE ADD COLUMN for fields the table lacks."),
    ConfigKey("delete.enabled", "BOOLEAN", "false", importance="MEDIUM",
              documentation="A tombstone (null value) deletes the row of its key (needs pk.mode=record_key)."),
    ConfigKey("batch.size", "INT", "3000", importance="MEDIUM",
              documentation="Rows per INSERT/UPDATE statement batch."),
    ConfigKey("batch.max.rows", "INT", "50000", importance="LOW",
              documentation="Records per micro-batch over all assigned partitions."),
    ConfigKey("batch.max.ms", "LONG", "30000", importance="LOW",
              documentation="Time budget for reading one batch from Kafka."),
)


# --------------------------------------------------------------------------------------
# Config helpers
# --------------------------------------------------------------------------------------
def shown_url(url: Any) -> str:
    """``connection.url`` fit for messages, status traces and logs: a password in it (``user:pw@`` or
    ``?password=``) replaced by ``[hidden]``, as Connect shows PASSWORD values."""
    from webapp.runtime.config_providers import hide_url_password

    return hide_url_password(str(url or ""))


def parse_connection_url(url: str, user: str | None = None, password: str | None = None) -> dict[str, Any]:
    """Connection parameters from a JDBC URL (or a plain ``postgresql://`` / ``mysql://`` URL).

    Returns ``{"dialect": "postgresql"|"mysql", "host", "port", "database", "user",
    "password"}``; ``user``/``password`` arguments win over URL parameters
    (``?user=..&password=..``) and URL credentials.

    Raises:
        ConnectException: not a PostgreSQL, MySQL or MariaDB URL.
    """
    raw = (url or "").strip()
    if raw.startswith("jdbc:"):
        raw = raw[5:]
    scheme, sep, rest = raw.partition("://")
    scheme = scheme.lower()
    if not sep or scheme not in ("postgresql", "postgres", "mysql", "mariadb"):
        raise ConnectException(f"Unsupported connection.url {shown_url(url)!r}: expected jdbc:postgresql://host:port/db, "
                               "jdbc:mysql://host:port/db or jdbc:mariadb://host:port/db")
    parsed = urllib.parse.urlsplit("x://" + rest)
    query = dict(urllib.parse.parse_qsl(parsed.query))
    dialect = "postgresql" if scheme.startswith("postgres") else "mysql"
    try:
        port = parsed.port
    except ValueError:
        raise ConnectException(f"Invalid port in connection.url {shown_url(url)!r}") from None
    return {
        "dialect": dialect,
        "host": parsed.hostname or "localhost",
        "port": port or (5432 if dialect == "postgresql" else 3306),
        "database": urllib.parse.unquote(parsed.path.lstrip("/")),
        "user": user or query.get("user") or (urllib.parse.unquote(parsed.username) if parsed.username else None),
        "password": password or query.get("password")
        or (urllib.parse.unquote(parsed.password) if parsed.password else None),
    }


#: the worker setting limiting the database hosts JDBC connectors may reach (optional; unset: any host)
ALLOWED_HOSTS_ENV = "RAFTCONNECT_JDBC_ALLOWED_HOSTS"


def allowed_hosts(environ: Mapping[str, str] | None = None) -> list[str]:
    """The entries of ``raftconnect.jdbc.allowed.hosts`` (``RAFTCONNECT_JDBC_ALLOWED_HOSTS``, set by
    ``runnode --jdbc-allowed-hosts`` or the worker properties), read at each call; ``[]``: any host.

    Entry forms: see :func:`webapp.connectors.jdbc_io.host_violation`.
    """
    env = os.environ if environ is None else environ
    return [e.strip() for e in (env.get(ALLOWED_HOSTS_ENV) or "").split(",") if e.strip()]


def _params(config: Mapping[str, str]) -> dict[str, Any]:
    """Connection parameters of a connector config, with this node's allowed hosts, checked against them.

    Errors: ConnectException for an unsupported URL or a host outside ``raftconnect.jdbc.allowed.hosts``
    (:func:`jdbc_io.connect` checks the same list again before every connection).
    """
    params = parse_connection_url(config.get("connection.url", ""), config.get("connection.user") or None,
                                  config.get("connection.password") or None)
    params["allowed_hosts"] = allowed_hosts()
    problem = jdbc_io.host_violation(params["host"], params["port"], params["allowed_hosts"])
    if problem is not None:
        raise ConnectException(problem)
    return params


def _checked_params(config: Mapping[str, str], config_def: ConfigDef, what: str) -> dict[str, Any]:
    """A task config's connection parameters (:func:`_params`) once it is valid.

    Raises ConnectException naming ``what`` and listing every invalid key.
    """
    raise_if_errors(merge_errors(config_def.validate(config), _common_errors(config)), what)
    return _params(config)


def _register_by_value() -> None:
    """Ship ``jdbc_io`` to Spark's workers by value (they never import this project)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(jdbc_io)


def _spark_error(e: BaseException) -> str:
    text = str(e)
    for marker in ("[jdbc] ", "[source] ", "[sink] ", "[kafka] ", "StaleOffsetError", "SparkException: "):
        idx = text.find(marker)
        if idx >= 0:
            return text[idx:].splitlines()[0][:2000]
    return (text.splitlines()[0] if text else repr(e))[:2000]


# --------------------------------------------------------------------------------------
# Types: database columns -> kinds -> Connect schemas, and back to DDL
# --------------------------------------------------------------------------------------
_PG_KINDS = {21: "int16", 23: "int32", 20: "int64", 26: "int64", 700: "float32", 701: "float64", 16: "boolean",
             25: "string", 1043: "string", 1042: "string", 19: "string", 18: "string", 2950: "string",
             114: "string", 3802: "string", 17: "bytes", 1082: "date", 1083: "time", 1114: "timestamp",
             1184: "timestamp"}


def _pg_kind(col) -> str:
    if col.type_code == 1700:
        if col.precision is not None and col.scale is not None and col.precision > 0:
            return f"decimal:{col.precision}:{col.scale}"
        return "string"  # unconstrained NUMERIC: no fixed scale for Connect's Decimal; carried as text
    return _PG_KINDS.get(col.type_code, "string")


def _mysql_kind(desc, field) -> str:
    code, length, scale = desc[1], desc[3] or 0, desc[5] or 0
    unsigned = bool(field.flags & 32)
    binary = field.charsetnr == 63
    if code == 1:
        return "boolean" if length == 1 and not unsigned else ("int16" if unsigned else "int8")
    if code == 2:
        return "int32" if unsigned else "int16"
    if code == 9:
        return "int32"
    if code == 3:
        return "int64" if unsigned else "int32"
    if code == 8:
        return "decimal:20:0" if unsigned else "int64"
    if code == 4:
        return "float32"
    if code == 5:
        return "float64"
    if code in (0, 246):
        precision = length - (1 if scale > 0 else 0) - (0 if unsigned else 1)
        return f"decimal:{max(precision, 1)}:{scale}"
    if code == 16:
        return "boolean" if length == 1 else "bytes"
    if code == 10:
        return "date"
    if code == 11:
        return "time"
    if code in (7, 12):
        return "timestamp"
    if code == 13:
        return "int32"
    if code in (249, 250, 251, 252, 253, 254):
        return "bytes" if binary else "string"
    return "string"


def _kind_schema(name: str, kind: str, optional: bool = True) -> dict:
    """Connect field schema (JsonConverter's JSON form) of a column."""
    base: dict[str, Any]
    if kind.startswith("decimal:"):
        _, p, s = kind.split(":")
        base = {"type": "bytes", "optional": optional, "name": DECIMAL, "version": 1,
                "parameters": {"scale": s, "connect.decimal.precision": p}}
    elif kind == "date":
        base = {"type": "int32", "optional": optional, "name": DATE, "version": 1}
    elif kind == "time":
        base = {"type": "int32", "optional": optional, "name": TIME, "version": 1}
    elif kind == "timestamp":
        base = {"type": "int64", "optional": optional, "name": TIMESTAMP, "version": 1}
    else:
        t = {"float32": "float", "float64": "double"}.get(kind, kind)
        base = {"type": t, "optional": optional}
    base["field"] = name
    return base


def _schema_kind(s: Mapping[str, Any]) -> str:
    """Kind of a Connect field schema (nested structs/arrays/maps are written as JSON text)."""
    name, t = s.get("name"), s.get("type")
    if name == DECIMAL:
        params = s.get("parameters") or {}
        return f"decimal:{int(params.get('connect.decimal.precision', 0) or 0)}:{int(params.get('scale', 0))}"
    if name == DATE:
        return "date"
    if name == TIME:
        return "time"
    if name == TIMESTAMP:
        return "timestamp"
    return {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "float": "float32",
            "double": "float64", "boolean": "boolean", "string": "string", "bytes": "bytes"}.get(t, "string")


def _wire_spark_type(kind: str):
    from pyspark.sql import types as T

    return {"int8": T.ByteType(), "int16": T.ShortType(), "int32": T.IntegerType(), "int64": T.LongType(),
            "float32": T.FloatType(), "float64": T.DoubleType(), "boolean": T.BooleanType(),
            "string": T.StringType(), "bytes": T.BinaryType(), "date": T.IntegerType(), "time": T.IntegerType(),
            "timestamp": T.LongType()}.get(kind, T.BinaryType() if kind.startswith("decimal:") else T.StringType())


def _ddl_type(dialect: str, kind: str, key: bool) -> str:
    if kind.startswith("decimal:"):
        _, p, s = kind.split(":")
        p, s = int(p), int(s)
        if dialect == "postgresql":
            return f"NUMERIC({p},{s})" if 0 < p <= 1000 and s <= p else "NUMERIC"
        return f"DECIMAL({min(65, max(p, s, 1)) if p else 65},{min(s, 30)})"
    if dialect == "postgresql":
        return {"int8": "SMALLINT", "int16": "SMALLINT", "int32": "INTEGER", "int64": "BIGINT", "float32": "REAL",
                "float64": "DOUBLE PRECISION", "boolean": "BOOLEAN", "string": "TEXT", "bytes": "BYTEA",
                "date": "DATE", "time": "TIME", "timestamp": "TIMESTAMP"}[kind]
    return {"int8": "TINYINT", "int16": "SMALLINT", "int32": "INT", "int64": "BIGINT", "float32": "FLOAT",
            "float64": "DOUBLE", "boolean": "BOOLEAN", "string": "VARCHAR(256)" if key else "LONGTEXT",
            "bytes": "VARBINARY(255)" if key else "LONGBLOB", "date": "DATE", "time": "TIME(3)",
            "timestamp": "DATETIME(3)"}[kind]


def _is_decimal_column(dialect: str, desc) -> bool:
    """Whether a cursor description entry is a DECIMAL/NUMERIC column (PostgreSQL numeric, MySQL NEWDECIMAL)."""
    return desc[1] == 1700 if dialect == "postgresql" else desc[1] in (0, 246)


def _describe(conn, dialect: str, select_sql: str) -> tuple[list[str], list[str]]:
    """Column names and kinds of ``select_sql`` (run with ``WHERE 1=0``-style limit)."""
    cur = conn.cursor()
    try:
        cur.execute(f"SELECT * FROM ({select_sql}) raftconnect_d LIMIT 0")
        names = [d[0] for d in cur.description]
        if dialect == "postgresql":
            kinds = [_pg_kind(d) for d in cur.description]
        else:
            kinds = [_mysql_kind(d, f) for d, f in zip(cur.description, cur._result.fields)]
        cur.fetchall()
    finally:
        cur.close()
    conn.rollback()
    return names, kinds


def _list_tables(params: Mapping[str, Any]) -> list[str]:
    conn = jdbc_io.connect(params, autocommit=True)
    try:
        cur = conn.cursor()
        if params["dialect"] == "postgresql":
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() "
                        "AND table_type = 'BASE TABLE' ORDER BY table_name")
        else:
            cur.execute("SELECT table_name FROM information_schema.tables WHERE table_schema = DATABASE() "
                        "AND table_type = 'BASE TABLE' ORDER BY table_name")
        return [r[0] for r in cur.fetchall() if r[0] != jdbc_io.OFFSETS_TABLE]
    finally:
        conn.close()


def _create_if_missing(cur, create_sql: str, probe_sql: str) -> None:
    """Run ``create_sql`` (CREATE ... IF NOT EXISTS); tolerate losing a race with another task.

    PostgreSQL's ``IF NOT EXISTS`` is not atomic: two sessions creating the same
    table at once can fail with a unique violation on the catalog. Such an error
    is ignored when ``probe_sql`` shows the table exists afterwards.
    """
    try:
        cur.execute(create_sql)
    except Exception:
        try:
            cur.execute(probe_sql)
            cur.fetchall()
        except Exception:
            pass
        else:
            return
        raise


_TOPIC_CREATION = "topic.creation.default."
#: ``topic.creation.default.*`` keys that are not topic configs
_TOPIC_CREATION_OWN = ("partitions", "replication.factor", "include", "exclude")


def topic_creation_config(config: Mapping[str, str]) -> dict[str, str]:
    """The topic configs a source connector gives the topics it creates, as in Connect's topic creation.

    Every ``topic.creation.default.<name>`` key but ``partitions``,
    ``replication.factor``, ``include`` and ``exclude`` is the topic config ``<name>``
    (e.g. ``topic.creation.default.max.message.bytes`` → ``{"max.message.bytes": ...}``),
    passed to the broker unchanged; an existing topic keeps its own configs.
    """
    return {k[len(_TOPIC_CREATION):]: str(v) for k, v in config.items()
            if k.startswith(_TOPIC_CREATION) and k[len(_TOPIC_CREATION):] not in _TOPIC_CREATION_OWN}


def _common_errors(config: Mapping[str, str]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    if config.get("connection.url"):
        try:
            _params(config)
        except ConnectException as e:
            errors.setdefault("connection.url", []).append(str(e))
    if str(config.get("value.converter.schemas.enable", "true")).strip().lower() != "true":
        errors.setdefault("value.converter.schemas.enable", []).append(
            "The JDBC connectors need record schemas: value.converter.schemas.enable must be true")
    return errors


def _at_least_one(config: Mapping[str, str], keys: tuple[str, ...]) -> dict[str, list[str]]:
    """Errors of the whole-number ``keys`` of ``config`` that are below 1 (Connect's message; others: the ConfigDef)."""
    errors: dict[str, list[str]] = {}
    for key in keys:
        raw = config.get(key)
        if raw is not None and str(raw).lstrip("-").isdigit() and int(raw) < 1:
            errors[key] = [f"Invalid value {raw} for configuration {key}: Value must be at least 1"]
    return errors


# --------------------------------------------------------------------------------------
# Source
# --------------------------------------------------------------------------------------
class JdbcSourceConnector(SourceConnector):
    """Copies PostgreSQL / MySQL / MariaDB tables (or a query) into topics (see module docstring).

    Config keys (Confluent's): ``connection.url``, ``connection.user``,
    ``connection.password``, ``mode``, ``incrementing.column.name``,
    ``timestamp.column.name``, ``table.whitelist``, ``table.blacklist``, ``query``,
    ``topic.prefix``, ``poll.interval.ms``, ``batch.max.rows``,
    ``timestamp.delay.interval.ms``, ``tasks.max``; plus ``topic.creation.default.*``
    (partitions, replication factor and topic configs such as ``max.message.bytes``, see
    :func:`topic_creation_config`) and ``producer.override.*``. Task configs add ``tables`` (JSON list).
    """

    config_def = ConfigDef(_COMMON + _SOURCE)

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Per-key errors: types, allowed values, the URL, and the columns each mode needs."""
        errors = merge_errors(self.config_def.validate(config), _common_errors(config))
        mode = config.get("mode")
        if mode in ("incrementing", "timestamp+incrementing") and not config.get("incrementing.column.name"):
            errors["incrementing.column.name"].append(f"incrementing.column.name is required in mode {mode}")
        if mode in ("timestamp", "timestamp+incrementing") and not AbstractConfig(self.config_def, config).get_list(
                "timestamp.column.name"):
            errors["timestamp.column.name"].append(f"timestamp.column.name is required in mode {mode}")
        if config.get("query") and (config.get("table.whitelist") or config.get("table.blacklist")):
            errors["query"].append("query cannot be combined with table.whitelist or table.blacklist")
        if config.get("table.whitelist") and config.get("table.blacklist"):
            errors["table.blacklist"].append("table.whitelist and table.blacklist are mutually exclusive")
        return merge_errors(errors, _at_least_one(config, ("tasks.max", "batch.max.rows",
                                                           "topic.creation.default.partitions")))

    def start(self, config: Mapping[str, str]) -> None:
        """Validate and keep the config. Raises ConnectException listing every invalid key."""
        raise_if_errors(self.validate(config), "JdbcSourceConnector")
        self.config = dict(config)

    def tables(self) -> list[str]:
        """The tables to copy (whitelist, or all of the database's minus the blacklist); [] for query mode."""
        if self.config.get("query"):
            return []
        conf = AbstractConfig(self.config_def, self.config)
        white = conf.get_list("table.whitelist")
        if white:
            return white
        black = conf.get_list("table.blacklist")
        try:
            found = _list_tables(_params(self.config))
        except Exception as e:
            raise ConnectException(f"Cannot list the tables of {shown_url(self.config.get('connection.url'))}: {e}") from e
        return [t for t in found if not any(fnmatch.fnmatchcase(t, b) or t == b for b in black)]

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Tables round-robin over at most ``max_tasks`` tasks; one task for ``query``; [] without tables."""
        if not hasattr(self, "config"):
            raise ConnectException("JdbcSourceConnector.task_configs called before start")
        if self.config.get("query"):
            return [dict(self.config, **{TASK_TABLES: "[]"})]
        tables = self.tables()
        if not tables:
            return []
        tasks_max = AbstractConfig(self.config_def, self.config).get_int("tasks.max")
        n = max(1, min(int(max_tasks), tasks_max, len(tables)))
        groups = [tables[i::n] for i in range(n)]
        return [dict(self.config, **{TASK_TABLES: json.dumps(g)}) for g in groups]


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
        q = lambda n: jdbc_io.quote(self.dialect, n)  # noqa: E731
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
        q = lambda n: jdbc_io.quote(self.dialect, n)  # noqa: E731
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
        q = lambda n: jdbc_io.quote(self.dialect, n)  # noqa: E731
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

        q = lambda n: jdbc_io.quote(self.dialect, n)  # noqa: E731
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
            conn = jdbc_io.connect(self.params)
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
        q = lambda n: jdbc_io.quote(self.dialect, n)  # noqa: E731
        # MySQL/MariaDB print a FLOAT with 6 significant digits (3.40282e38 for FLT_MAX): read it as the
        # DOUBLE it converts to exactly, which the float32 parse turns back into the very same float
        cols = ", ".join(f"CAST({q(n)} AS DOUBLE) AS {q(n)}" if self.dialect != "postgresql" and k == "float32"
                         else q(n) for n, k in zip(names, kinds))
        sqls = [(f"SELECT {cols} FROM ({s.select}) raftconnect_s" + (f" WHERE {w}" if w else ""), a)
                for w, a in pieces]
        arrow_schema = pa.schema([pa.field(n, jdbc_io.arrow_wire_type(k)) for n, k in zip(names, kinds)])
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
        col = jdbc_io.quote("postgresql", name)
        if kind in ("date", "timestamp"):
            out.append((name, kind, f"({col} IS NOT NULL AND NOT {_pg_in_range(col)})"))
        elif kind == "time":
            out.append((name, kind, f"COALESCE({col} >= '24:00:00', false)"))
    return out


def _logical_type(kind: str):
    """Arrow type the transforms see for a column kind (see :func:`jdbc_io.wire_to_logical`)."""
    import pyarrow as pa

    return jdbc_io.wire_to_logical(pa.array([], jdbc_io.arrow_wire_type(kind)), kind).type


def _make_logical_read_fn(read_fn, kinds: list[str]):
    """``read_fn``'s wire-form batches with each column in its logical Arrow type."""
    wire_to_logical = jdbc_io.wire_to_logical
    kinds = list(kinds)

    def read(batches):
        import pyarrow as pa

        for b in read_fn(batches):
            yield pa.RecordBatch.from_arrays([wire_to_logical(c, k) for c, k in zip(b.columns, kinds)],
                                             names=b.schema.names)

    return read


def _make_read_fn(params: Mapping[str, Any], sqls: list, names: list[str], kinds: list[str]):
    """mapInArrow function: Spark partition ``i`` runs ``sqls[i]`` and yields its rows in wire form."""
    read_rows = jdbc_io.read_rows
    params, names, kinds = dict(params), list(names), list(kinds)

    def read(batches):
        ids = [i for b in batches for i in b.column(0).to_pylist()]
        for i in ids:
            sql, args = sqls[i]
            yield from read_rows(params, sql, args, names, kinds)

    return read


# --------------------------------------------------------------------------------------
# Sink
# --------------------------------------------------------------------------------------
class JdbcSinkConnector(SinkConnector):
    """Writes topics into PostgreSQL / MySQL / MariaDB tables, exactly once (see module docstring).

    Config keys (Confluent's): ``connection.url``, ``connection.user``,
    ``connection.password``, ``topics``, ``table.name.format``, ``insert.mode``,
    ``pk.mode``, ``pk.fields``, ``auto.create``, ``auto.evolve``, ``delete.enabled``,
    ``batch.size``, ``tasks.max``; plus ``batch.max.rows``, ``batch.max.ms`` and
    ``consumer.override.*``. Task configs add ``task.index`` / ``task.count``; task
    ``i`` of ``n`` takes the partitions ``p`` with ``p % n == i`` of every topic.
    """

    config_def = ConfigDef(_COMMON + _SINK)

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Per-key errors: types, allowed values, the URL, and pk/delete combinations."""
        errors = merge_errors(self.config_def.validate(config), _common_errors(config))
        conf = AbstractConfig(self.config_def, config)
        pk_mode = conf.get_string("pk.mode")
        try:
            delete_enabled = conf.get_bool("delete.enabled")
        except ConfigException:
            delete_enabled = False  # ConfigDef.validate reported it
        if delete_enabled and pk_mode != "record_key":
            errors["delete.enabled"].append("delete.enabled=true requires pk.mode=record_key")
        if conf.get_string("insert.mode") in ("upsert", "update") and pk_mode == "none":
            errors["pk.mode"].append(f"insert.mode={conf.get_string('insert.mode')} requires a primary key "
                                     "(pk.mode other than none)")
        if pk_mode == "record_value" and not conf.get_list("pk.fields"):
            pass  # all value fields form the key, as in Confluent's connector
        return merge_errors(errors, _at_least_one(config, ("tasks.max", "batch.max.rows", "batch.size")))

    def start(self, config: Mapping[str, str]) -> None:
        """Validate and keep the config. Raises ConnectException listing every invalid key."""
        raise_if_errors(self.validate(config), "JdbcSinkConnector")
        self.config = dict(config)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """``min(max_tasks, tasks.max)`` task configs with ``task.index`` / ``task.count``."""
        n = max(1, min(int(max_tasks), AbstractConfig(self.config_def, self.config).get_int("tasks.max")))
        return [dict(self.config, **{"task.index": str(i), "task.count": str(n)}) for i in range(n)]


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
        t = jdbc_io.quote(self.dialect, jdbc_io.OFFSETS_TABLE)
        try:
            conn = jdbc_io.connect(self.params, autocommit=True)
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
        t = jdbc_io.quote(self.dialect, jdbc_io.OFFSETS_TABLE)
        conn = jdbc_io.connect(self.params, autocommit=True)
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

    def _peek(self, ranges, full: bool = False) -> list[tuple]:
        """Up to 100 (key, value) pairs from the ranges' start offsets, read on the driver.

        With ``full`` each entry is ``(partition, offset, key, value, timestamp ms, headers)``
        (headers as ``[{"key", "value"}]``), what the transforms see of a record.
        """
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        from webapp.kafka.spark_io import CONSUMER_DEFAULTS, _PRODUCER_ONLY_PREFIXES, _client_config

        conf = _client_config(self.context.kafka_config, CONSUMER_DEFAULTS, _PRODUCER_ONLY_PREFIXES,
                              self.consumer_overrides)
        consumer = Consumer(conf)
        out: list[tuple[bytes | None, bytes | None]] = []
        try:
            consumer.assign([TopicPartition(r.topic, r.partition, 0 if r.start is None else r.start) for r in ranges])
            eof: set[int] = set()
            deadline = time.monotonic() + min(10.0, self.batch_ms / 1000.0)
            while len(out) < 100 and len(eof) < len(ranges) and time.monotonic() < deadline:
                for m in consumer.consume(100 - len(out), 0) or [consumer.poll(0.5)]:
                    if m is None:
                        continue
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            eof.add(m.partition())
                            continue
                        raise ConnectException(f"Reading {m.topic()}[{m.partition()}] failed: {err}")
                    if full:
                        ts_type, ts = m.timestamp()
                        out.append((m.partition(), m.offset(), m.key(), m.value(), ts if ts_type else None,
                                    [{"key": k, "value": v} for k, v in (m.headers() or [])]))
                    else:
                        out.append((m.key(), m.value()))
        finally:
            consumer.close()
        return out

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
        values = [v for _, v in peeked if v is not None]
        if not values:
            value_schema, value_prefixes = {"type": "struct", "fields": [], "optional": True}, []
        else:
            value_schema, value_prefixes = self._schemas(values, "value", topic)
            if value_schema.get("type") != "struct":
                raise ConnectException(f"Topic {topic}: record values must be structs, got {value_schema.get('type')}")
        key_schema = key_prefixes = None
        if self.pk_mode == "record_key":
            keys = [k for k, _ in peeked if k is not None]
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
        q = lambda n: jdbc_io.quote(self.dialect, n)  # noqa: E731
        have = self._tables.get(table)
        if have is not None and all(c[0] in have for c in cols):
            return
        conn = jdbc_io.connect(self.params, autocommit=True)

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
        records' schema carries (see ``scales`` in :func:`jdbc_io.write_partition`)."""
        scales = self._scales.get(table, {})
        out = {}
        for name, kind, _ in cols:
            if kind.startswith("decimal:") and scales.get(name) is not None:
                if int(scales[name]) < int(kind.split(":")[2]):
                    out[name] = int(scales[name])
        return out

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
        write_plan = {"dialect": self.dialect, "table": jdbc_io.quote(self.dialect, table), "connector": self.connector,
                      "topic": topic, "insert_mode": self.insert_mode, "columns": cols, "pk": pk,
                      "delete_enabled": self.delete_enabled and self.pk_mode == "record_key",
                      "batch_size": self.batch_size, "scales": self._narrower_scales(table, cols)}
        spans = [(r.topic, r.partition, r.start) for r in ranges]
        schema = "kafka_partition int, first long, last long, count long, next_offset long, replan boolean"
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
        """What :func:`jdbc_io.decode_batch` needs for ``plan``, or ``None`` when a field is nested."""
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
        return out if jdbc_io.decodable(kinds) else None

    def _jvm_decoded(self, plan: _TopicPlan, cols: list[list[str]], ranges):
        """The records of ``ranges`` decoded by ``from_json`` in the JVM, in :func:`jdbc_io.write_partition`'s input form."""
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
        :func:`jdbc_io.write_routed_partition`: one transaction with every routed
        table's rows and the partition's next offset, which counts records dropped
        by a filter or sent to the dead letter queue (produced, and flushed, before
        the commit). A record routed to a table or carrying a schema the driver did
        not plan ends the partition's batch there; the next batch plans again.
        """
        from webapp.kafka.spark_io import partition_reader

        t0 = time.monotonic()
        peeked = self._peek(ranges, full=True)
        if not peeked:
            return []
        values = [m[3] for m in peeked if m[3] is not None]
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
                keys = [m[2] for m in peeked if m[2] is not None]
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
            plans[r] = {"dialect": self.dialect, "table": jdbc_io.quote(self.dialect, table), "connector": self.connector,
                        "topic": topic, "record_topic": r, "insert_mode": self.insert_mode, "columns": cols, "pk": pk,
                        "delete_enabled": spec.deletes, "batch_size": self.batch_size,
                        "scales": self._narrower_scales(table, cols)}
        spec = dataclasses.replace(spec, routes=frozenset(plans))
        spans = [(r.topic, r.partition, r.start) for r in ranges]
        schema = "kafka_partition int, first long, last long, count long, next_offset long, replan boolean"
        dlq = self._operator.config.dlq_topic
        dlq_conf = None
        if dlq:
            from webapp.kafka.spark_io import _CONSUMER_ONLY_PREFIXES, PRODUCER_DEFAULTS, _client_config

            # as Connect's DLQ reporter: the worker's producer settings and the connector's producer.override.*
            dlq_conf = _client_config(self.context.kafka_config, PRODUCER_DEFAULTS, _CONSUMER_ONLY_PREFIXES,
                                      client_overrides(self.config, "producer"))
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
SINK_TASK_CLASS = "io.confluent.connect.jdbc.sink.JdbcSinkTask"
_SCHEMA_HEAD = '{"schema":'
_NOT_ENVELOPE = ('Converting byte[] to Kafka Connect data failed due to serialization error: the JDBC sink needs '
                 'JsonConverter envelopes {"schema":...,"payload":...} whose schema is a struct')
_BAD_PAYLOAD = "Converting byte[] to Kafka Connect data failed due to serialization error"


#: why a record with a nested field is not written (Kafka Connect's JDBC sink refuses them too)
_NESTED_WHY = ("the JDBC sink writes primitive and logical fields only, as Kafka Connect's JDBC sink does "
               "(drop the field before the sink, or write the record with a connector that takes nested data)")


def _nested_field(schema: Mapping[str, Any]) -> str | None:
    """``"name (struct)"`` for the first struct/array/map field of a struct schema, or None."""
    for f in schema.get("fields") or []:
        if f.get("type") in ("struct", "array", "map"):
            return f"{f.get('field')} ({f.get('type')})"
    return None


def _envelope_schema(text: str) -> dict | None:
    """The struct schema a JsonConverter envelope starts with, or None (not such an envelope)."""
    cut = text.find(',"payload":')
    if not text.startswith(_SCHEMA_HEAD) or cut < 0:
        return None
    try:
        schema = json.loads(text[len(_SCHEMA_HEAD):cut])
    except ValueError:
        return None
    return schema if isinstance(schema, dict) and schema.get("type") == "struct" else None


def _whole_envelope_schema(text: str) -> dict | None:
    """The struct schema of an envelope in any JSON layout (parsed whole), or None."""
    try:
        obj = json.loads(text)
    except ValueError:
        return None
    if not isinstance(obj, dict) or set(obj) != {"schema", "payload"}:
        return None
    schema = obj["schema"]
    return schema if isinstance(schema, dict) and schema.get("type") == "struct" else None


def _canonical(schema: Mapping[str, Any]) -> str:
    return json.dumps(schema, sort_keys=True, separators=(",", ":"))


def _peeked_batch(topic: str, peeked: list[tuple]):
    """The driver's peeked records as a batch of ``READ_SCHEMA_WITH_METADATA`` (what the workers read)."""
    import pyarrow as pa

    from webapp.runtime.transforms import headers_type

    n = len(peeked)
    return pa.RecordBatch.from_arrays(
        [pa.array([topic] * n, pa.string()), pa.array([m[0] for m in peeked], pa.int32()),
         pa.array([m[1] for m in peeked], pa.int64()), pa.array([m[2] for m in peeked], pa.binary()),
         pa.array([m[3] for m in peeked], pa.binary()), pa.array([m[4] for m in peeked], pa.int64()),
         pa.array([m[5] for m in peeked], headers_type())],
        names=["kafka_topic", "kafka_partition", "kafka_offset", "key", "value", "timestamp", "headers"])


@dataclass(frozen=True)
class _TransformSpec:
    """What a worker needs to run a sink batch through the converter, the SMTs and the error handling.

    ``value_fields`` / ``out_fields``: ``[(column, field, kind)]`` of the decoded and
    of the transformed value; ``value_prefixes``: the planned envelope schema parts
    (compact layout); ``value_schemas``: every planned value schema (canonical JSON),
    for envelopes in another layout;
    ``key_mode``: None (no key columns), ``"transformed"`` (the chain's key),
    ``"decoded"`` (the record's JsonConverter key, ``key_fields``/``key_prefixes``) or
    ``"string"`` (StringConverter keys); ``routes``: the routed topics that have a
    table plan; ``deletes``: a null value after the chain deletes its key's row
    (``delete.enabled``).
    """

    pipeline: Any
    payload_type: Any
    value_fields: list
    value_prefixes: list
    value_schemas: frozenset
    out_fields: list
    key_mode: str | None
    key_fields: list
    key_prefixes: list | None
    routes: frozenset
    deletes: bool = False

    def _decode(self, values, mask: list[bool], errors: list, prefixes):
        """Wire-form value columns for the rows of ``mask``; a row that does not decode becomes an error.

        ``prefixes``: the schema parts the envelopes are cut at, or None to parse them whole.
        """
        def run(arr, m):
            return jdbc_io._decode_side(arr, m, prefixes, self.value_fields, False, "value")

        try:
            return run(values, mask)
        except ValueError:  # isolate the bad records (the batch is decoded in one go otherwise)
            for i, m in enumerate(mask):
                if m:
                    try:
                        run(values.slice(i, 1), [True])
                    except ValueError as e:
                        errors[i] = f"{_BAD_PAYLOAD}: {str(e).replace('[jdbc] ', '')}"
                        mask[i] = False
            return run(values, mask)

    def transformed(self, raw):
        """(the pipeline's output table, rows of ``raw`` it covers): decode, convert and transform ``raw``.

        Processing stops before the first record whose envelope names a struct schema
        that was not planned (the driver plans again from there). A record whose schema
        has a nested struct/array/map field is a converter error (stage
        ``VALUE_CONVERTER``): Connect's JDBC sink cannot write such fields either.
        """
        import pyarrow as pa

        import pyarrow.compute as pc

        P = type(self.pipeline)
        values = raw.column("value")
        n = raw.num_rows
        planned = pa.array([False] * n, pa.bool_())
        for p in self.value_prefixes:  # in Arrow: only the other records are looked at in Python
            planned = pc.or_(planned, pc.fill_null(pc.starts_with(values, pattern=p), False))
        mask, errors, stop = planned.to_pylist(), [None] * n, n
        whole = [False] * n  # planned schema, other layout: parsed whole
        others = pc.indices_nonzero(pc.and_(pc.invert(planned), pc.is_valid(values))).to_pylist()
        for i in others:
            text = values[i].as_py().decode("utf-8", "replace")
            schema = _envelope_schema(text) or _whole_envelope_schema(text)
            if schema is None:
                errors[i] = _NOT_ENVELOPE
            elif _nested_field(schema) is not None:
                errors[i] = f"The record value has a nested field {_nested_field(schema)}: {_NESTED_WHY}"
            elif _canonical(schema) in self.value_schemas:
                whole[i] = True
            else:
                stop = i
                break
        if stop < n:
            raw, values, mask, errors = raw.slice(0, stop), values.slice(0, stop), mask[:stop], errors[:stop]
            whole = whole[:stop]
        if self.value_fields and (any(mask) or any(whole)):
            cols = self._decode(values, mask, errors, self.value_prefixes) if any(mask) else None
            if any(whole):
                slow = self._decode(values, whole, errors, None)
                pick = pa.array(whole, pa.bool_())
                cols = slow if cols is None else [pc.if_else(pick, b, a) for a, b in zip(cols, slow)]
                mask = [a or b for a, b in zip(mask, whole)]
            children = [jdbc_io.wire_to_logical(c, k).cast(self.payload_type.field(j).type)
                        for j, (c, (_, _, k)) in enumerate(zip(cols, self.value_fields))]
            payload = pa.StructArray.from_arrays(children, fields=list(self.payload_type),
                                                 mask=pa.array([not m for m in mask], pa.bool_()))
        else:
            payload = pa.nulls(stop, self.payload_type)
        from webapp.runtime.transforms import headers_type

        read_meta = "headers" in raw.schema.names  # read without metadata when no step or DLQ needs it
        table = pa.table({"kafka_topic": raw.column("kafka_topic"), "kafka_partition": raw.column("kafka_partition"),
                          "kafka_offset": raw.column("kafka_offset"), "key": raw.column("key"), "value": values,
                          "timestamp": raw.column("timestamp") if read_meta else pa.nulls(stop, pa.int64()),
                          "headers": raw.column("headers") if read_meta else pa.nulls(stop, headers_type()),
                          P.PAYLOAD: payload, P.CONV_ERROR: pa.array(errors, pa.string())})
        return self.pipeline.transform(table), stop

    def routes_of(self, raw) -> set[str]:
        """Topics the good records of ``raw`` are routed to (tolerant and silent: a planning probe)."""
        import pyarrow.compute as pc

        policy = self.pipeline.policy
        quiet = dataclasses.replace(self.pipeline, policy=dataclasses.replace(
            policy, errors=dataclasses.replace(policy.errors, tolerance="all", log_enable=False)))
        out, _ = dataclasses.replace(self, pipeline=quiet).transformed(raw)
        P = type(self.pipeline)
        keep = pc.is_null(out.column(P.ERROR_STAGE))
        if not self.deletes:
            keep = pc.and_(keep, pc.is_valid(out.column(P.VALUE)))
        return {t for t in out.filter(keep).column(P.TOPIC).to_pylist() if t is not None}

    def unit(self, raw, dlq_rows: list | None):
        """One read batch → ``(groups, first offset, last offset, records consumed, replan)`` (see
        :func:`jdbc_io.write_routed_partition`); error rows are appended to ``dlq_rows`` (original key,
        value and timestamp, headers plus the error context) unless it is None.

        Raises:
            RuntimeError: ``[sink] Tolerance exceeded in error handler: ...`` (``errors.tolerance=none``).
            ValueError: ``[jdbc] ...`` a record key that does not decode (``pk.mode=record_key``).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        P = type(self.pipeline)
        n = raw.num_rows
        if n == 0:
            return [], None, None, 0, False
        out, consumed = self.transformed(raw)
        replan = consumed < n
        offsets_in = raw.column("kafka_offset").slice(0, consumed)
        is_err = pc.is_valid(out.column(P.ERROR_STAGE))
        # a null value after the chain is a delete with delete.enabled, else skipped (as a tombstone)
        keep = pc.invert(is_err) if self.deletes else pc.and_(pc.invert(is_err), pc.is_valid(out.column(P.VALUE)))
        good = out.filter(keep)
        errs = out.filter(is_err)
        if good.num_rows:
            known = pc.fill_null(pc.is_in(good.column(P.TOPIC), value_set=pa.array(sorted(self.routes), pa.string())),
                                 False)
            if not pc.all(known).as_py():  # routed to a table not planned: stop before that record
                cutoff = pc.min(good.filter(pc.invert(known)).column("kafka_offset")).as_py()
                good = good.filter(pc.less(good.column("kafka_offset"), cutoff))
                errs = errs.filter(pc.less(errs.column("kafka_offset"), cutoff))
                consumed = pc.sum(pc.less(offsets_in, cutoff)).as_py() or 0
                offsets_in = offsets_in.slice(0, consumed)
                replan = True
        if dlq_rows is not None and errs.num_rows:
            dlq_rows.append(pa.table({"key": errs.column("key"), "value": errs.column("value"),
                                      "headers": errs.column(P.DLQ_HEADERS), "timestamp": errs.column("timestamp")}))
        if consumed == 0:
            return [], None, None, 0, replan
        groups = []
        if good.num_rows:
            keys = self._keys(raw.slice(0, consumed), good) if self.key_mode else {}
            routes = good.column(P.TOPIC).combine_chunks()
            for r in sorted(set(routes.to_pylist())):
                sel = pc.equal(routes, r)
                sub = good.filter(sel)
                value = sub.column(P.VALUE).combine_chunks()
                names = ["__offset", "__tombstone"]
                arrays = [sub.column("kafka_offset").combine_chunks(), pc.is_null(value)]
                for col, name, kind in self.out_fields:
                    names.append(col)
                    arrays.append(jdbc_io.logical_to_wire(value.field(name), kind))
                for col, arr in keys.items():
                    names.append(col)
                    arrays.append(arr.combine_chunks().filter(sel) if isinstance(arr, pa.ChunkedArray)
                                  else arr.filter(sel))
                groups.append((r, pa.RecordBatch.from_arrays(arrays, names=names)))
        return groups, offsets_in[0].as_py(), offsets_in[consumed - 1].as_py(), consumed, replan

    def refused(self, raw, span, offset: int, error: BaseException, dlq_rows: list | None) -> None:
        """The target refused the record at ``offset`` of ``raw``: skip it (``errors.tolerance=all``: logged,
        sent to the dead letter queue with stage ``TASK_PUT``) or raise.

        Raises:
            RuntimeError: ``[jdbc] Tolerance exceeded in error handler: ...`` naming the record and the
                database's message (``errors.tolerance=none``).
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        from webapp.runtime.errors import ProcessingError, Stage, dlq_headers
        from webapp.runtime.transforms import headers_type

        topic, partition, _ = span
        policy = self.pipeline.policy
        err = ProcessingError.from_exception(error, Stage.TASK_PUT, SINK_TASK_CLASS, topic=topic,
                                             partition=partition, offset=offset)
        if not policy.errors.tolerate_all:
            # the marker is not on the raise line: Spark's trace shows that line before the message
            message = "[jdbc] Tolerance exceeded in error handler: " + err.describe(True)
            raise RuntimeError(message) from None
        if policy.errors.log_enable:
            log.error(err.describe(policy.errors.log_include_messages))
        if dlq_rows is None:
            return
        row = raw.filter(pc.equal(raw.column("kafka_offset"), offset)).slice(0, 1).to_pylist()[0]
        extra = dlq_headers(err, policy.connector, policy.task) if policy.errors.dlq_context_headers else []
        headers = (row.get("headers") or []) + [{"key": k, "value": v} for k, v in extra]
        dlq_rows.append(pa.table({"key": pa.array([row["key"]], pa.binary()),
                                  "value": pa.array([row["value"]], pa.binary()),
                                  "headers": pa.array([headers], headers_type()),
                                  "timestamp": pa.array([row.get("timestamp")], pa.int64())}))

    def _keys(self, raw, good) -> dict[str, Any]:
        """Wire-form key columns (``k<i>``) for the rows of ``good``."""
        import pyarrow as pa
        import pyarrow.compute as pc

        P = type(self.pipeline)
        if self.key_mode == "transformed":
            key = good.column(P.KEY).combine_chunks()
            if pa.types.is_struct(key.type):
                return {col: jdbc_io.logical_to_wire(key.field(name), kind) for col, name, kind in self.key_fields}
            col, _, kind = self.key_fields[0]
            return {col: jdbc_io.logical_to_wire(key, kind)}
        idx = pc.index_in(good.column("kafka_offset"), value_set=raw.column("kafka_offset"))
        keys = raw.column("key")
        if self.key_mode == "string":
            return {"k0": keys.take(idx).cast(pa.string())}
        picked = keys.take(idx)
        mask = [v is not None for v in picked.to_pylist()]
        primitive = len(self.key_fields) == 1 and self.key_fields[0][1] is None
        cols = jdbc_io._decode_side(picked, mask, self.key_prefixes, self.key_fields, primitive, "key")
        return {col: arr for (col, _, _), arr in zip(self.key_fields, cols)}


def _reads_metadata(pipeline) -> bool:
    """Whether a step of the chain looks at record timestamps or headers (else the sink reads neither)."""
    from webapp.runtime.transforms import DropHeaders, HasHeaderKey, InsertField, InsertHeader, TimestampRouter

    for st in pipeline.chain.steps:
        t = st.transform
        if isinstance(t, (InsertHeader, DropHeaders, TimestampRouter)) or isinstance(st.predicate, HasHeaderKey):
            return True
        if isinstance(t, InsertField) and t.specs.get("timestamp"):
            return True
    return False


def _produce_dlq(rows: list, topic: str, conf: Mapping[str, Any]) -> None:
    """Produce the collected error rows to the dead letter queue and wait for every acknowledgement.

    Raises:
        RuntimeError: ``[kafka] ...`` when a record is not delivered.
    """
    import pyarrow as pa

    from webapp.kafka.spark_io import _make_produce_fn

    if not rows:
        return
    fn = _make_produce_fn(topic, dict(conf), "value", "key", None, 120.0, None, "headers", "timestamp")
    for _ in fn(iter(pa.concat_tables(rows).to_batches())):
        pass


def _make_transform_write_fn(params: Mapping[str, Any], plans: Mapping[str, Any], connector: str, spans: list,
                             reader, spec: _TransformSpec, dlq_topic: str, dlq_conf: Mapping[str, Any] | None):
    """mapInArrow function: partition ``i`` reads ``spans[i]``, transforms and writes it with its offset."""
    write_routed = jdbc_io.write_routed_partition
    params, plans = dict(params), {k: dict(v) for k, v in plans.items()}

    def run(batches):
        from webapp.runtime.engine import partition_index

        index = partition_index()
        dlq_rows: list | None = [] if dlq_topic else None
        current: dict[str, Any] = {}

        def units():
            for b in reader(batches):
                current["raw"] = b  # the batch whose rows are being written (for on_row_error)
                yield spec.unit(b, dlq_rows)

        def on_row_error(route: str, offset: int, error: BaseException) -> None:
            spec.refused(current["raw"], spans[index], offset, error, dlq_rows)

        before = (lambda: _produce_dlq(dlq_rows, dlq_topic, dlq_conf)) if dlq_topic else None
        yield from write_routed(units(), params=params, plans=plans, connector=connector, ranges=spans,
                                partition_index=index, before_commit=before, on_row_error=on_row_error)

    return run


class _LocalJob:
    """A sink job run in-process: ``collect()`` gives the same rows as the Spark job's (see write_partition)."""

    def __init__(self, engine, fn, n: int):
        self.engine, self.fn, self.n = engine, fn, n

    def collect(self) -> list:
        return [_Row(r) for batches in self.engine.run_pieces(self.fn, self.n) for b in batches for r in b.to_pylist()]


class _Row(dict):
    """A result row readable as ``row.name`` and ``row["name"]``, like a Spark Row."""

    __getattr__ = dict.__getitem__


def _make_read_write_fn(params: Mapping[str, Any], plan: Mapping[str, Any], spans: list, reader, decode):
    """mapInArrow function: Spark partition ``i`` reads ``spans[i]`` from Kafka, decodes and writes it."""
    write_partition, decode_batch = jdbc_io.write_partition, jdbc_io.decode_batch
    params, plan, decode = dict(params), dict(plan), dict(decode)

    def read_write(batches):
        from webapp.runtime.engine import partition_index

        index = partition_index()
        decoded = (decode_batch(b, decode) for b in reader(batches))
        yield from write_partition(decoded, params=params, plan=plan, ranges=spans, partition_index=index)

    return read_write


def _make_write_fn(params: Mapping[str, Any], plan: Mapping[str, Any], spans: list):
    """mapInArrow function: Spark partition ``i`` writes the records of ``spans[i]`` (see jdbc_io.write_partition)."""
    write_partition = jdbc_io.write_partition
    params, plan = dict(params), dict(plan)

    def write(batches):
        from webapp.runtime.engine import partition_index

        index = partition_index()
        yield from write_partition(batches, params=params, plan=plan, ranges=spans, partition_index=index)

    return write


# The runtime instantiates a connector's tasks through ``Connector.task_class`` (api.py).
JdbcSourceConnector.task_class = JdbcSourceTask
JdbcSinkConnector.task_class = JdbcSinkTask
