"""The JDBC connectors' configuration: config keys, connection URL, allowed hosts, config checks.

Owns the ``ConfigDef`` keys of both connectors (``_COMMON``, ``_SOURCE``, ``_SINK``,
Confluent's names), the modes and the Connect logical-type and converter class
names they use, :func:`parse_connection_url` (``jdbc:postgresql://`` /
``jdbc:mysql://`` / ``jdbc:mariadb://`` → a parameter dict), the worker setting
``raftconnect.jdbc.allowed.hosts`` (:func:`allowed_hosts`) and the checks shared by
both connectors (:func:`_params`, ``_common_errors``, ``_at_least_one``), and
``topic.creation.default.*`` (:func:`topic_creation_config`).

Must not touch: tables, Kafka or Spark (the tasks do); whether a host is allowed
(:func:`.dbio.host_violation` decides); the web layer or the metadata store.
"""
from __future__ import annotations

import os
import urllib.parse
from typing import Any, Mapping

from webapp.plugin import (
    ConfigDef,
    ConfigKey,
    ConnectException,
    merge_errors,
    raise_if_errors,
)

from . import dbio

__all__ = [
    "MODES", "INSERT_MODES", "PK_MODES", "TASK_TABLES", "JSON_CONVERTER", "STRING_CONVERTER", "ALLOWED_HOSTS_ENV",
    "allowed_hosts", "parse_connection_url", "shown_url", "topic_creation_config",
]


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
    ConfigKey("table.poll.interval.ms", "LONG", "60000", importance="LOW",
              documentation="How often the tables are listed again, so that tables created or dropped after "
                            "the connector started are copied or dropped (tasks are reconfigured); 0 never. "
                            "Not used with table.whitelist or query, which name the work."),
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

    Entry forms: see :func:`webapp.connectors.dbio.host_violation`.
    """
    env = os.environ if environ is None else environ
    return [e.strip() for e in (env.get(ALLOWED_HOSTS_ENV) or "").split(",") if e.strip()]


def _params(config: Mapping[str, str]) -> dict[str, Any]:
    """Connection parameters of a connector config, with this node's allowed hosts, checked against them.

    Errors: ConnectException for an unsupported URL or a host outside ``raftconnect.jdbc.allowed.hosts``
    (:func:`dbio.connect` checks the same list again before every connection).
    """
    params = parse_connection_url(config.get("connection.url", ""), config.get("connection.user") or None,
                                  config.get("connection.password") or None)
    params["allowed_hosts"] = allowed_hosts()
    problem = dbio.host_violation(params["host"], params["port"], params["allowed_hosts"])
    if problem is not None:
        raise ConnectException(problem)
    return params


def _checked_params(config: Mapping[str, str], config_def: ConfigDef, what: str) -> dict[str, Any]:
    """A task config's connection parameters (:func:`_params`) once it is valid.

    Raises ConnectException naming ``what`` and listing every invalid key.
    """
    raise_if_errors(merge_errors(config_def.validate(config), _common_errors(config)), what)
    return _params(config)


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
