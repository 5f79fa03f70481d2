"""The JDBC connectors: :class:`JdbcSourceConnector` and :class:`JdbcSinkConnector`.

Owns their validation (types, allowed values, the URL and host, mode/column and
pk/delete combinations) and their task configs (source: tables round-robin over the
tasks, one task for ``query``; sink: ``task.index`` / ``task.count``).

Must not touch: rows, Kafka or Spark (the tasks in :mod:`.source_task` and
:mod:`.sink_task` do); the runtime's Worker or the web layer.
"""
from __future__ import annotations

import fnmatch
import json
from typing import Mapping

from webapp.plugin import (
    AbstractConfig,
    ConfigDef,
    ConfigException,
    ConnectException,
    SinkConnector,
    SourceConnector,
    merge_errors,
    raise_if_errors,
)

from .config import _COMMON, _SINK, _SOURCE, TASK_TABLES, _at_least_one, _common_errors, _params, shown_url
from .dialects import _list_tables

__all__ = ["JdbcSourceConnector", "JdbcSinkConnector"]


# --------------------------------------------------------------------------------------
# Source
# --------------------------------------------------------------------------------------
class JdbcSourceConnector(SourceConnector):
    """Copies PostgreSQL / MySQL / MariaDB tables (or a query) into topics (see module docstring).

    Config keys (Confluent's): ``connection.url``, ``connection.user``,
    ``connection.password``, ``mode``, ``incrementing.column.name``,
    ``timestamp.column.name``, ``table.whitelist``, ``table.blacklist``, ``query``,
    ``topic.prefix``, ``poll.interval.ms``, ``table.poll.interval.ms``, ``batch.max.rows``,
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
        raw = config.get("table.poll.interval.ms")
        if raw is not None and str(raw).strip().lstrip("-").isdigit() and int(raw) < 0:
            errors["table.poll.interval.ms"].append(
                f"Invalid value {raw} for configuration table.poll.interval.ms: Value must be at least 0")
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

    def task_configs_recheck_s(self) -> float | None:
        """``table.poll.interval.ms`` in seconds when the tables are listed from the database (no
        ``table.whitelist``, no ``query``): tables created or dropped later are then picked up, as
        Confluent's table monitor does; ``None`` otherwise or when it is 0."""
        if self.config.get("query") or self.config.get("table.whitelist"):
            return None
        ms = AbstractConfig(self.config_def, self.config).get_long("table.poll.interval.ms")
        return ms / 1000.0 if ms > 0 else None

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
