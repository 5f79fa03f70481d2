"""The file connectors' configuration: their config keys, formats, task-config keys and config helpers.

Owns the ``ConfigDef`` keys of both connectors (``_COMMON_KEYS``, ``_SOURCE_KEYS``,
``_SINK_KEYS``), the formats and converters they accept, the keys the connectors
add to task configs (``task.index``, ``task.count``, ``task.splits``), the helpers
that check config values (converter flags, ``tasks.max``-like positive numbers,
``producer.override.*`` / ``consumer.override.*``; values are read with the plugin
API's typed getters, ``AbstractConfig(config_def, config).get_int(key)``), the listing
of a source directory, and the SMT / ``errors.*`` check a task makes at start
(:func:`_error_handling`).

Must not touch: files' contents, Kafka, Spark or the metadata store (the tasks
do); paths' permissions (``webapp.runtime.file_access`` decides); the web layer.
"""
from __future__ import annotations

import fnmatch
import os
import re
from typing import Mapping

from webapp.plugin import AbstractConfig, ConfigException, ConfigKey, ConnectException

SOURCE_FORMATS = ("csv", "json", "parquet")
SINK_FORMATS = ("parquet", "json", "csv")

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
_KEY_CONVERTERS = (JSON_CONVERTER, STRING_CONVERTER)

_EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".json": "json", ".jsonl": "json",
               ".ndjson": "json", ".parquet": "parquet", ".pq": "parquet"}
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")

_STAGING = "_staging"

# Task config keys written by the connectors (in addition to the connector config).
TASK_INDEX = "task.index"
TASK_COUNT = "task.count"
TASK_SPLITS = "task.splits"

_COMMON_KEYS = (
    ConfigKey("tasks.max", "INT", "1", importance="HIGH", documentation="Maximum number of tasks."),
    ConfigKey("value.converter", "CLASS", JSON_CONVERTER, importance="HIGH",
              documentation="Record value format; only Connect's JsonConverter is supported.",
              allowed=(JSON_CONVERTER,)),
    ConfigKey("value.converter.schemas.enable", "BOOLEAN", "true", importance="HIGH",
              documentation="Values are {\"schema\",\"payload\"} envelopes (true) or plain JSON (false)."),
    ConfigKey("key.converter", "CLASS", JSON_CONVERTER, importance="LOW",
              documentation="Record key format (keys are null for the source and ignored by the sink).",
              allowed=_KEY_CONVERTERS),
    ConfigKey("key.converter.schemas.enable", "BOOLEAN", "true", importance="LOW"),
    ConfigKey("batch.max.rows", "INT", "50000", importance="MEDIUM",
              documentation="Records per micro-batch (source: per file chunk; sink: over all assigned partitions)."),
)

_SOURCE_KEYS = (
    ConfigKey("path", "STRING", None, required=True, importance="HIGH",
              documentation="A file, or a directory whose visible files (not starting with '.' or '_') are read; "
                            "it and its files must resolve under raftconnect.file.allowed.paths."),
    ConfigKey("format", "STRING", None, importance="HIGH",
              documentation="csv, json (JSON lines) or parquet; default from the file extension.",
              allowed=SOURCE_FORMATS),
    ConfigKey("topic", "STRING", None, required=True, importance="HIGH", documentation="Topic to produce to."),
    ConfigKey("file.pattern", "STRING", "*", importance="LOW",
              documentation="Glob that file names in a directory must match."),
    ConfigKey("topic.creation.default.partitions", "INT", "4", importance="MEDIUM",
              documentation="Partitions when the source creates a missing topic."),
    ConfigKey("topic.creation.default.replication.factor", "INT", "-1", importance="LOW",
              documentation="Replication factor when creating the topic (-1: broker default)."),
    ConfigKey("split.min.bytes", "LONG", str(1 << 20), importance="LOW",
              documentation="A csv/json file is split into byte ranges for several tasks only if each "
                            "range would be at least this large."),
    ConfigKey("schema.sample.bytes", "LONG", str(64 << 20), importance="LOW",
              documentation="Bytes from the start of a csv/json file used to infer its column types once."),
    ConfigKey("csv.delimiter", "STRING", ",", importance="LOW"),
    ConfigKey("csv.header", "BOOLEAN", "true", importance="LOW",
              documentation="The first line holds the column names (else f0, f1, ...)."),
    ConfigKey("csv.null.values", "LIST", None, importance="LOW",
              documentation="Strings read as null (default: pyarrow's list: '', NA, NULL, NaN, null, ...)."),
    ConfigKey("value.schema.name", "STRING", None, importance="LOW",
              documentation="Connect schema name of the record values."),
)

_SINK_KEYS = (
    ConfigKey("topics", "LIST", None, required=True, importance="HIGH", documentation="Comma-separated topics."),
    ConfigKey("path", "STRING", None, required=True, importance="HIGH",
              documentation="Output directory; must resolve under raftconnect.file.allowed.paths."),
    ConfigKey("format", "STRING", "parquet", importance="HIGH", documentation="parquet, json or csv.",
              allowed=SINK_FORMATS),
    ConfigKey("batch.max.ms", "LONG", "30000", importance="LOW",
              documentation="Time budget for reading one batch from Kafka."),
    ConfigKey("parquet.compression", "STRING", "snappy", importance="LOW",
              allowed=("none", "uncompressed", "snappy", "gzip", "lz4", "zstd")),
    ConfigKey("schemaless.sample.rows", "INT", "1000", importance="LOW",
              documentation="With schemas.enable=false: records sampled per batch to infer column types."),
)


def _client_overrides(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    """Connect's ``producer.override.*`` / ``consumer.override.*`` keys, prefix stripped."""
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix) and len(k) > len(prefix)}


def _format_from_name(name: str) -> str | None:
    lower = name.lower()
    for ext, fmt in _EXTENSIONS.items():
        if lower.endswith(ext) or lower.endswith(ext + ".gz"):
            return fmt
    return None


def _list_files(path: str, pattern: str = "*") -> list[str]:
    """Absolute paths: ``path`` itself if a file, else its visible matching files, sorted."""
    path = os.path.abspath(path)
    if os.path.isfile(path):
        return [path]
    out = []
    for entry in sorted(os.scandir(path), key=lambda e: e.name):
        if entry.name.startswith((".", "_")) or not entry.is_file():
            continue
        if fnmatch.fnmatch(entry.name, pattern or "*"):
            out.append(entry.path)
    return out


def _converter_errors(config: Mapping[str, str]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for key in ("value.converter.schemas.enable", "key.converter.schemas.enable"):
        raw = config.get(key)
        if raw is not None and str(raw).strip().lower() not in ("true", "false"):
            errors.setdefault(key, []).append(f"Invalid value {raw} for configuration {key}: "
                                              "Expected value to be either true or false")
    return errors


def _merge_errors(*dicts: Mapping[str, list[str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for d in dicts:
        for k, v in d.items():
            out.setdefault(k, [])
            out[k].extend(x for x in v if x not in out[k])
    return out


def _raise_if_errors(errors: Mapping[str, list[str]], what: str) -> None:
    bad = [f"{k}: {m}" for k, msgs in errors.items() for m in msgs]
    if bad:
        raise ConnectException(f"Invalid {what} configuration: " + "; ".join(bad))


def _positive(conf: AbstractConfig, names: tuple[str, ...]) -> dict[str, list[str]]:
    """``{key: [message]}`` for each of ``names`` whose value is a number below 1 (a non-number is
    ``ConfigDef.validate``'s to report)."""
    errors: dict[str, list[str]] = {}
    for name in names:
        try:
            value = conf.get_int(name)
        except ConfigException:
            continue  # reported by ConfigDef.validate
        if value is not None and value < 1:
            errors.setdefault(name, []).append(f"Invalid value {conf.get_string(name)} for configuration {name}: "
                                               "Value must be at least 1")
    return errors


def _error_handling(config: Mapping[str, str], sink: bool):
    """(run the SMT/tolerance pipeline?, RetryWithToleranceOperator) for a task config.

    Raises ConnectException listing invalid ``transforms``/``predicates``/``errors.*`` keys.
    """
    from webapp.runtime.errors import ErrorHandlingConfig, RetryWithToleranceOperator, validate_error_config
    from webapp.runtime.pipeline import needs_pipeline
    from webapp.runtime.transforms import validate_transforms

    errors = _merge_errors(validate_transforms(config), validate_error_config(config, sink=sink))
    _raise_if_errors(errors, "transforms / errors")
    cfg = {k: v for k, v in config.items() if sink or k != "errors.deadletterqueue.topic.name"}
    # A source's records can only fail in a transformation: without transforms it keeps its fast path.
    transforming = needs_pipeline(cfg) if sink else bool((cfg.get("transforms") or "").strip())
    return transforming, RetryWithToleranceOperator(ErrorHandlingConfig.from_config(cfg))
