"""File connectors on Spark: CSV / JSON-lines / Parquet files ⇄ Kafka topics.

Source (:class:`FileSourceConnector`): reads a file or the files of a directory.
Per batch the driver only plans newline-aligned byte ranges (csv/json) or row
ranges (parquet); Spark's Python workers read and parse them with pyarrow (C++,
column types inferred once per file), the JVM encodes each row as a Connect
``JsonConverter`` value, and the workers produce them to ``topic``.

Sink (:class:`FileSinkConnector`): reads explicit offset ranges of the
``topics``' partitions inside Spark tasks, decodes the JsonConverter values in the
JVM (``from_json``) and writes each batch as files into ``path`` — staged by
Spark under ``path/_staging/`` and then renamed into ``path`` with deterministic
names, so that ``path`` only ever holds complete, committed data files.

Offsets (Connect style):

* source csv/json: partition ``{"filename": <abs path>}`` (whole file) or
  ``{"filename", "range.start", "range.end"}`` (a byte range of a split file) →
  ``{"position": <byte offset of the next line>}``, like Kafka's FileStreamSource;
* source parquet: partition ``{"filename"}`` or ``{"filename", "range.start",
  "range.end"}`` (row-group indices) → ``{"row": <next row index in the file>}``;
* sink: ``{"kafka_topic": t, "kafka_partition": p}`` → ``{"kafka_offset": next}``.

Paths: every ``path`` (and every file a source directory expands to) must
resolve under the worker setting ``raftconnect.file.allowed.paths`` and never
into the node's data directory (:mod:`webapp.connectors.file_access`). It is
checked when a connector is validated or created, when it splits its work, when
a task starts and before each batch opens its files or writes its output.

Delivery: the source is at-least-once (a batch that failed after some records
were acknowledged is produced again). The sink is exactly-once into ``path`` for
a given start offset: an output file is named
``<topic>+<partition>+<start offset>-<last offset>.<ext>`` (offsets zero-padded
to 20 digits) and a re-run of an uncommitted batch replaces the files of the
previous attempt that started at the same offset.
"""
from __future__ import annotations

import functools
import fnmatch
import glob
import io
import json
import logging
import math
import os
import re
import shutil
import uuid
from dataclasses import dataclass
from typing import Any, Mapping

from webapp.kafka import client_overrides

from . import file_access
from .api import (
    BatchResult,
    ConfigDef,
    ConfigKey,
    ConnectException,
    SinkConnector,
    SourceConnector,
    SourceOffset,
    Task,
    TaskContext,
    partition_key,
)

__all__ = [
    "FileSourceConnector",
    "FileSourceTask",
    "FileSinkConnector",
    "FileSinkTask",
    "SOURCE_FORMATS",
    "SINK_FORMATS",
]

SOURCE_FORMATS = ("csv", "json", "parquet")
SINK_FORMATS = ("parquet", "json", "csv")

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER = "org.apache.kafka.connect.storage.StringConverter"
_KEY_CONVERTERS = (JSON_CONVERTER, STRING_CONVERTER)

_EXTENSIONS = {".csv": "csv", ".tsv": "csv", ".txt": "csv", ".json": "json", ".jsonl": "json",
               ".ndjson": "json", ".parquet": "parquet", ".pq": "parquet"}
_TOPIC_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")
log = logging.getLogger(__name__)

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


# --------------------------------------------------------------------------------------
# Config helpers
# --------------------------------------------------------------------------------------
def _bool(value: Any) -> bool:
    return str(value).strip().lower() == "true"


def _list(value: Any) -> list[str]:
    if value is None:
        return []
    return [v.strip() for v in str(value).split(",") if v.strip()]


def _get(config_def: ConfigDef, config: Mapping[str, str], name: str) -> str | None:
    value = config_def.get(config, name)
    return None if value is None else str(value)


def _int(config_def: ConfigDef, config: Mapping[str, str], name: str) -> int:
    raw = _get(config_def, config, name)
    try:
        return int(str(raw))
    except (TypeError, ValueError):
        raise ConnectException(f"Invalid value {raw} for configuration {name}: Not a number") from None


def _client_overrides(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    """Connect's ``producer.override.*`` / ``consumer.override.*`` keys, prefix stripped."""
    return client_overrides.client_overrides(config, prefix.split(".")[0])


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


def _positive(config_def: ConfigDef, config: Mapping[str, str], names: tuple[str, ...]) -> dict[str, list[str]]:
    errors: dict[str, list[str]] = {}
    for name in names:
        raw = _get(config_def, config, name)
        try:
            if raw is not None and int(raw) < 1:
                errors.setdefault(name, []).append(f"Invalid value {raw} for configuration {name}: "
                                                   "Value must be at least 1")
        except ValueError:
            pass  # reported by ConfigDef.validate
    return errors


# --------------------------------------------------------------------------------------
# Source connector
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class _Split:
    """One unit of source work: a whole file or a range of it.

    For csv/json, ``start``/``end`` are byte offsets (``end`` None = to the current
    end of file); for parquet they are row-group indices (``end`` exclusive).
    """

    filename: str
    format: str
    start: int = 0
    end: int | None = None
    whole: bool = True

    def partition(self) -> dict[str, Any]:
        if self.whole:
            return {"filename": self.filename}
        return {"filename": self.filename, "range.start": self.start, "range.end": self.end}

    def to_json(self) -> dict[str, Any]:
        return {"filename": self.filename, "format": self.format, "start": self.start, "end": self.end,
                "whole": self.whole}

    @classmethod
    def from_json(cls, d: Mapping[str, Any]) -> "_Split":
        return cls(str(d["filename"]), str(d["format"]), int(d.get("start") or 0),
                   None if d.get("end") is None else int(d["end"]), bool(d.get("whole", True)))


def _next_line_start(f, offset: int, size: int) -> int:
    """Smallest position >= offset that starts a line (just after a newline), or ``size``."""
    if offset <= 0:
        return 0
    f.seek(offset - 1)
    pos = offset - 1
    while pos < size:
        chunk = f.read(1 << 16)
        if not chunk:
            break
        idx = chunk.find(b"\n")
        if idx >= 0:
            return pos + idx + 1
        pos += len(chunk)
    return size


class FileSourceConnector(SourceConnector):
    """Reads csv / JSON-lines / parquet files into a topic (see module docstring).

    Config keys: ``path``, ``format``, ``topic``, ``tasks.max``, ``value.converter``,
    ``value.converter.schemas.enable``, ``key.converter``, ``batch.max.rows``,
    ``topic.creation.default.partitions``, ``topic.creation.default.replication.factor``,
    ``file.pattern``, ``split.min.bytes``, ``schema.sample.bytes``, ``csv.delimiter``,
    ``csv.header``, ``csv.null.values``, ``value.schema.name``, and
    ``producer.override.*`` (librdkafka settings).

    Task configs: the connector config plus ``task.index``, ``task.count`` and
    ``task.splits`` (JSON list of ``{"filename","format","start","end","whole"}``).
    """

    version = "0.1.0"
    config_def = ConfigDef(_COMMON_KEYS + _SOURCE_KEYS)

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Per-key errors: ConfigDef checks plus path existence, format, topic name, converters."""
        errors = _merge_errors(self.config_def.validate(config), _converter_errors(config),
                               _positive(self.config_def, config,
                                         ("tasks.max", "batch.max.rows", "topic.creation.default.partitions")))
        path = config.get("path")
        if path:
            access = file_access.policy()
            denied = access.violation(path)  # first: nothing is said about paths outside the allowed roots
            if denied:
                errors["path"].append(denied)
            elif not os.path.exists(path):
                errors["path"].append(f"Path {path} does not exist")
            elif not (os.path.isfile(path) or os.path.isdir(path)):
                errors["path"].append(f"Path {path} is neither a file nor a directory")
            elif not os.access(path, os.R_OK):
                errors["path"].append(f"Path {path} is not readable")
            else:
                files = _list_files(path, config.get("file.pattern") or "*") if os.path.isdir(path) else [path]
                denied = next(filter(None, map(access.violation, files)), None)  # a directory's symlinks too
                if denied:
                    errors["path"].append(denied)
                elif not config.get("format") and files and _format_from_name(files[0]) is None:
                    errors["format"].append(f"Cannot infer the format of {files[0]} from its extension; "
                                            f"set format to one of {', '.join(SOURCE_FORMATS)}")
        topic = config.get("topic")
        if topic and not _TOPIC_RE.match(topic):
            errors["topic"].append(f"Invalid topic name {topic!r}: use up to 249 of [a-zA-Z0-9._-]")
        if len(_get(self.config_def, config, "csv.delimiter") or ",") != 1:
            errors["csv.delimiter"].append("csv.delimiter must be a single character")
        return errors

    def start(self, config: Mapping[str, str]) -> None:
        """Validate and keep the config. Raises ConnectException listing every invalid key."""
        _raise_if_errors(self.validate(config), "FileSourceConnector")
        self.config = dict(config)

    def _files(self) -> list[tuple[str, str]]:
        """``[(file, format)]`` that ``path`` expands to now; raises ``file_access.PathNotAllowed`` (a
        ConnectException) when ``path`` or one of its files is not allowed (it may have changed since validation)."""
        path = self.config["path"]
        fmt = self.config.get("format")
        access = file_access.policy()
        access.check(path)
        out = []
        for f in _list_files(path, self.config.get("file.pattern") or "*"):
            access.check(f)
            ff = fmt or _format_from_name(f)
            if ff is None:
                raise ConnectException(f"Cannot infer the format of {f}; set format")
            out.append((f, ff))
        return out

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Split files into at most ``max_tasks`` tasks (balanced by bytes).

        A csv/json file bigger than ``total / max_tasks`` (and than
        ``split.min.bytes`` per range) is cut into newline-aligned byte ranges; a
        parquet file into row-group ranges. Returns ``[]`` when there are no files.

        Raises:
            ConnectException: ``path`` vanished or a format cannot be inferred.
        """
        if not hasattr(self, "config"):
            raise ConnectException("FileSourceConnector.task_configs called before start")
        max_tasks = max(1, min(int(max_tasks), _int(self.config_def, self.config, "tasks.max")))
        try:
            files = self._files()
        except FileNotFoundError as e:
            raise ConnectException(f"Path {self.config['path']} does not exist") from e
        if not files:
            return []
        sizes = {f: os.path.getsize(f) for f, _ in files}
        total = sum(sizes.values()) or 1
        target = total / max_tasks
        min_split = max(1, _int(self.config_def, self.config, "split.min.bytes"))
        splits: list[tuple[_Split, int]] = []  # (split, weight in bytes)
        for f, fmt in files:
            size = sizes[f]
            n = 1
            if len(files) < max_tasks or size > 1.5 * target:
                n = max(1, min(max_tasks, math.ceil(size / target), size // min_split))
            if n <= 1:
                splits.append((_Split(f, fmt), size))
            elif fmt == "parquet":
                splits.extend(self._split_parquet(f, n))
            else:
                splits.extend(self._split_text(f, fmt, size, n))
        # Longest-processing-time-first onto the least loaded task.
        n_tasks = min(max_tasks, len(splits))
        buckets: list[list[_Split]] = [[] for _ in range(n_tasks)]
        loads = [0] * n_tasks
        for split, weight in sorted(splits, key=lambda sw: -sw[1]):
            i = loads.index(min(loads))
            buckets[i].append(split)
            loads[i] += weight
        configs = []
        for i, bucket in enumerate(buckets):
            bucket.sort(key=lambda s: (s.filename, s.start))
            cfg = dict(self.config)
            cfg[TASK_INDEX] = str(i)
            cfg[TASK_COUNT] = str(n_tasks)
            cfg[TASK_SPLITS] = json.dumps([s.to_json() for s in bucket], separators=(",", ":"))
            configs.append(cfg)
        return configs

    def _split_text(self, filename: str, fmt: str, size: int, n: int) -> list[tuple[_Split, int]]:
        header = fmt == "csv" and _bool(_get(self.config_def, self.config, "csv.header"))
        with open(filename, "rb") as f:
            first = _next_line_start(f, 1, size) if header else 0
            bounds = [0]
            for k in range(1, n):
                b = max(_next_line_start(f, k * size // n, size), first)
                if bounds[-1] < b < size:
                    bounds.append(b)
        ranges = list(zip(bounds, bounds[1:] + [None]))
        if len(ranges) == 1:
            return [(_Split(filename, fmt), size)]
        return [(_Split(filename, fmt, s, e, whole=False), (e if e is not None else size) - s) for s, e in ranges]

    def _split_parquet(self, filename: str, n: int) -> list[tuple[_Split, int]]:
        import pyarrow.parquet as pq

        md = pq.ParquetFile(filename).metadata
        groups = md.num_row_groups
        if groups <= 1:
            return [(_Split(filename, "parquet"), os.path.getsize(filename))]
        weights = [md.row_group(i).total_byte_size for i in range(groups)]
        total = sum(weights) or 1
        n = min(n, groups)
        out, start, acc = [], 0, 0
        for i, w in enumerate(weights):
            acc += w
            if len(out) < n - 1 and acc >= total * (len(out) + 1) / n and i + 1 < groups:
                out.append((_Split(filename, "parquet", start, i + 1, whole=False), sum(weights[start:i + 1])))
                start = i + 1
        out.append((_Split(filename, "parquet", start, groups, whole=False), sum(weights[start:])))
        return out


# --------------------------------------------------------------------------------------
# Source task
# --------------------------------------------------------------------------------------
@dataclass
class _FileInfo:
    """What a source task learns about a file once: types and names, kept for every batch."""

    arrow_schema: Any  # pyarrow.Schema used to parse every chunk
    connect_schema: dict
    avg_row_bytes: float = 100.0
    header: bool = False


def _fix_inferred_type(t):
    """Inferred Arrow type → the type to read with: text-like inferred types stay text."""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_timestamp(t) or pt.is_date(t) or pt.is_time(t) or pt.is_null(t) or pt.is_duration(t):
        return pa.string()
    if pt.is_struct(t):
        return pa.struct([pa.field(f.name, _fix_inferred_type(f.type)) for f in t])
    if pt.is_list(t) or pt.is_large_list(t):
        return pa.list_(_fix_inferred_type(t.value_type))
    return t


def _normalize_for_spark(table):
    """Cast types Spark's Arrow path does not take (large/dictionary/unsigned/null) to plain ones."""
    import pyarrow as pa
    import pyarrow.types as pt

    def norm(t):
        if pt.is_dictionary(t):
            return norm(t.value_type)
        if pt.is_large_string(t) or getattr(pt, "is_string_view", lambda _t: False)(t) or pt.is_null(t):
            return pa.string()
        if pt.is_large_binary(t) or pt.is_fixed_size_binary(t):
            return pa.binary()
        if pt.is_uint8(t):
            return pa.int16()
        if pt.is_uint16(t):
            return pa.int32()
        if pt.is_uint32(t):
            return pa.int64()
        if pt.is_float16(t):
            return pa.float32()
        if pt.is_large_list(t) or pt.is_fixed_size_list(t):
            return pa.list_(norm(t.value_type))
        if pt.is_list(t):
            return pa.list_(norm(t.value_type))
        if pt.is_struct(t):
            return pa.struct([pa.field(f.name, norm(f.type), f.nullable) for f in t])
        return t

    target = pa.schema([pa.field(f.name, norm(f.type), f.nullable) for f in table.schema])
    return table if target.equals(table.schema) else table.cast(target)


class FileSourceTask(Task):
    """Reads its splits chunk by chunk and produces each chunk as one Spark job.

    ``run_batch`` reads about ``batch.max.rows`` rows from the first split that has
    data left, produces them, and returns the split's new position after every
    record was acknowledged; ``None`` when all splits are fully read (a whole-file
    csv/json split picks up lines appended later).

    Raises (from ``start``/``run_batch``): ConnectException for bad config, unreadable
    or unparsable files (message names the file and position), and Kafka failures.
    """

    config_def = FileSourceConnector.config_def

    def __init__(self, context: TaskContext, config: Mapping[str, str]):
        super().__init__(context, config)
        self._splits: list[_Split] = []
        self._positions: list[int] = []
        self._infos: dict[str, _FileInfo] = {}
        self._parked = False  # waiting on the worker's FileChangeWatcher
        self._partial_left = False  # the last look left a line to its writer

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        cfg, cd = self.config, self.config_def
        errors = _merge_errors(cd.validate(cfg), _converter_errors(cfg))
        errors.pop("path", None)  # the file list comes from task.splits
        _raise_if_errors(errors, "FileSourceTask")
        self.topic = cfg["topic"]
        self.schemas_enable = _bool(_get(cd, cfg, "value.converter.schemas.enable"))
        self.batch_rows = max(1, _int(cd, cfg, "batch.max.rows"))
        self.sample_bytes = _int(cd, cfg, "schema.sample.bytes")
        self.delimiter = _get(cd, cfg, "csv.delimiter") or ","
        self.csv_header = _bool(_get(cd, cfg, "csv.header"))
        nulls = cfg.get("csv.null.values")
        self.null_values = None if nulls is None else [v.strip() for v in nulls.split(",")]
        self.schema_name = cfg.get("value.schema.name") or None
        self.producer_overrides = _client_overrides(cfg, "producer.override.")
        self._transforming, self._operator = _error_handling(cfg, sink=False)
        self._pipelines: dict[str, Any] = {}
        raw = cfg.get(TASK_SPLITS)
        if raw is None:  # config not produced by the connector: take the whole path
            conn = FileSourceConnector()
            conn.start(cfg)
            raw = conn.task_configs(1)[0][TASK_SPLITS] if conn._files() else "[]"
        try:
            self._splits = [_Split.from_json(d) for d in json.loads(raw)]
        except (ValueError, KeyError, TypeError) as e:
            raise ConnectException(f"Invalid {TASK_SPLITS}: {e}") from e
        access = file_access.policy()
        for split in self._splits:  # the files may have been swapped since the connector was validated
            access.check(split.filename)
        self._positions = [self._resume_position(s) for s in self._splits]
        self._on_spark = self.context.engine is None
        if self.context.spark is None:
            from webapp.runtime.spark import get_spark_session

            self.context.spark = get_spark_session()
        from webapp.kafka.clients import ensure_topic_cached
        from webapp.kafka.topics import TopicError

        try:  # one metadata call for all of the worker's tasks
            ensure_topic_cached(self.context.kafka_config, self.topic,
                                _int(cd, cfg, "topic.creation.default.partitions"),
                                _int(cd, cfg, "topic.creation.default.replication.factor"))
        except TopicError as e:
            raise ConnectException(str(e)) from e

    def _resume_position(self, split: _Split) -> int:
        entry = self.context.offsets.get(partition_key(split.partition()))
        if entry is None:
            return self._first_position(split)
        key = "row" if split.format == "parquet" else "position"
        try:
            pos = int(entry.offset[key])
        except (KeyError, TypeError, ValueError):
            raise ConnectException(f"Committed offset {dict(entry.offset)} for {split.filename} has no {key!r}") \
                from None
        return max(pos, self._first_position(split))

    def _first_position(self, split: _Split) -> int:
        if split.format == "parquet":
            return self._row_group_starts(split.filename)[split.start] if split.start else 0
        return split.start

    def stop(self) -> None:
        self._infos.clear()
        if self.context.file_changes is not None:
            self.context.file_changes.unwatch(str(self.context.task_id))

    def idle_delay(self) -> float | None:
        # parked on the worker's FileChangeWatcher: woken when a file changes; the long wait is a
        # safety net only. A line left for its writer is looked at again after the quiet time.
        if self._parked:
            return 30.0
        return PARTIAL_LINE_QUIET_SECONDS if self._partial_left else None

    # -- batches --------------------------------------------------------------------
    def run_batch(self) -> BatchResult | None:
        watcher = self.context.file_changes
        seen = None
        if watcher is not None and self.context.wake is not None:
            from webapp.runtime.file_watcher import states

            seen = states({s.filename for s in self._splits})  # before reading: a later change wakes us
        self._parked = self._partial_left = False
        result = self._next_batch()
        if result is None and seen is not None and not self._partial_left:
            watcher.watch(str(self.context.task_id), seen, self.context.wake)
            self._parked = True
        return result

    def _next_batch(self) -> BatchResult | None:
        for i, split in enumerate(self._splits):
            try:
                plan = self._plan_chunk(split, self._positions[i])
            except ConnectException:
                raise
            except FileNotFoundError as e:
                raise ConnectException(f"File {split.filename} disappeared: {e}") from e
            except Exception as e:  # pyarrow.ArrowInvalid and friends from schema inference
                raise ConnectException(f"Cannot read {split.filename} at position {self._positions[i]}: {e}") \
                    from e
            if plan is None:
                continue
            pieces, new_pos = plan
            produced = self._operator.execute(lambda: self._produce(split, pieces), "KAFKA_PRODUCE",
                                              type(self).__name__) if pieces else 0
            self._positions[i] = new_pos
            key = "row" if split.format == "parquet" else "position"
            return BatchResult(produced, (SourceOffset(split.partition(), {key: new_pos}),))
        return None

    def _produce(self, split: _Split, pieces: list[dict]) -> int:
        """Produce the chunk: in-process (parse → encode → produce on the engine's pool), or as one Spark job
        (workers parse ``pieces`` → JVM encodes values → workers produce)."""
        from webapp.kafka.spark_io import KafkaIOError, produce_dataframe

        info = self._info(split)
        parse = _make_parse_fn(pieces, split.format, info.arrow_schema, self.delimiter, self.null_values)
        n = len(pieces)
        if self._transforming:
            return self._produce_transformed(split, info, parse, n)
        if not self._on_spark:
            from webapp.runtime.engine import encode_values

            # a partial of a module function: the pieces may run in the engine's worker processes
            encode = functools.partial(encode_values, schemas_enable=self.schemas_enable,
                                       connect_schema=info.connect_schema)

            try:
                return self.context.engine.produce_pieces(parse, n, topic=self.topic,
                                                          kafka_config=self.context.kafka_config,
                                                          producer_config=self.producer_overrides, encode=encode)
            except KafkaIOError as e:
                raise ConnectException(str(e)) from e
            except ValueError as e:
                raise ConnectException(str(e)) from e
        from pyspark.sql.pandas.types import from_arrow_schema

        from webapp.runtime.converters import encode_value_column

        spark = self.context.spark
        df = spark.range(0, n, 1, n).mapInArrow(parse, from_arrow_schema(info.arrow_schema))
        value = encode_value_column(df.schema, self.schemas_enable, connect_schema=info.connect_schema)
        try:
            return produce_dataframe(df.select(value.alias("value")), self.topic, self.context.kafka_config,
                                     producer_config=self.producer_overrides)
        except KafkaIOError as e:
            raise ConnectException(str(e)) from e

    def _produce_transformed(self, split: _Split, info: "_FileInfo", parse, n: int) -> int:
        """Like :meth:`_produce`, with the SMT chain applied to the parsed Arrow batches in the same Spark job."""
        import time

        from webapp.kafka.spark_io import KafkaIOError
        from webapp.runtime.pipeline import SourcePipeline

        pipeline = self._pipelines.get(split.filename)
        if pipeline is None:
            pipeline = SourcePipeline.plan(self.config, info.arrow_schema, info.connect_schema, self.context.task_id)
            self._pipelines[split.filename] = pipeline
        now_ms = int(time.time() * 1000)  # a source record's timestamp: when it was read, as FileStreamSource
        df = self.context.spark.range(0, n, 1, n).mapInArrow(pipeline.wrap(parse, self.topic, now_ms),
                                                             pipeline.spark_schema())
        cd, cfg = self.config_def, self.config
        try:
            return pipeline.produce(df, self.topic, self.context.kafka_config, cfg,
                                    producer_config=self.producer_overrides,
                                    partitions=_int(cd, cfg, "topic.creation.default.partitions"),
                                    replication_factor=_int(cd, cfg, "topic.creation.default.replication.factor"))
        except KafkaIOError as e:
            raise ConnectException(str(e)) from e

    def _parallelism(self, rows: int) -> int:
        """Pieces for a chunk of ``rows`` rows; also decides where the chunk runs (``self._on_spark``)."""
        self._on_spark = self._use_spark(rows)
        if self._on_spark:
            cores = max(1, self.context.spark.sparkContext.defaultParallelism)
        else:
            cores = self.context.engine.threads
        return max(1, min(cores, math.ceil(rows / _MIN_PIECE_ROWS)))

    def _use_spark(self, rows: int) -> bool:
        engine = self.context.engine
        if engine is None:  # run outside a worker (tools, older tests): Spark, as before
            return True
        local_ok = not self._transforming and all(
            engine_local_encodable(self._infos[s.filename].arrow_schema)
            for s in self._splits if s.filename in self._infos)
        return engine.use_spark(self.config, rows, local_ok=local_ok)

    # -- planning -------------------------------------------------------------------
    def _plan_chunk(self, split: _Split, pos: int):
        """(pieces for the Spark tasks, next position) for the next chunk, or None when done.

        Raises ``file_access.PathNotAllowed`` (a ConnectException: the task fails) when the file now resolves
        outside the allowed roots, e.g. a symbolic link swapped in after validation; nothing of it is read.
        """
        file_access.check(split.filename)
        if split.format == "parquet":
            return self._plan_parquet(split, pos)
        return self._plan_text(split, pos)

    def _info(self, split: _Split) -> _FileInfo:
        info = self._infos.get(split.filename)
        if info is None:
            info = self._infer(split)
            self._infos[split.filename] = info
        return info

    def _infer(self, split: _Split) -> _FileInfo:
        import pyarrow as pa

        from webapp.runtime.converters import SchemaConversionError, arrow_to_connect_schema

        if split.format == "parquet":
            import pyarrow.parquet as pq

            schema = pq.ParquetFile(split.filename).schema_arrow
            schema = _normalize_for_spark(pa.table({f.name: pa.array([], f.type) for f in schema})).schema
            try:
                return _FileInfo(schema, arrow_to_connect_schema(schema, name=self.schema_name))
            except SchemaConversionError as e:
                raise ConnectException(f"{split.filename}: {e}") from e
        with open(split.filename, "rb") as f:
            sample = f.read(self.sample_bytes if self.sample_bytes > 0 else -1)
            at_eof = not f.read(1)
        if not at_eof or (split.end is None and not sample.endswith(b"\n") and _still_written(split.filename)):
            cut = sample.rfind(b"\n")  # the last line may be cut short (or still being written)
            sample = sample[: cut + 1] if cut >= 0 else sample
        header = split.format == "csv" and self.csv_header
        if split.format == "csv":
            import pyarrow.csv as pacsv

            table = pacsv.read_csv(
                io.BytesIO(sample),
                read_options=pacsv.ReadOptions(autogenerate_column_names=not header,
                                               block_size=max(1 << 20, len(sample) // 4 + 1)),
                parse_options=pacsv.ParseOptions(delimiter=self.delimiter),
                convert_options=_csv_convert_options(None, self.null_values))
        else:
            import pyarrow.json as pajson

            table = pajson.read_json(io.BytesIO(sample),
                                     read_options=pajson.ReadOptions(block_size=max(1 << 20, len(sample) // 4 + 1)))
        names = table.column_names
        if len(set(names)) != len(names):
            raise ConnectException(f"{split.filename}: duplicate column names {names}")
        schema = _normalize_for_spark(
            pa.table({f.name: pa.array([], _fix_inferred_type(f.type)) for f in table.schema})).schema
        lines = max(1, sample.count(b"\n"))
        try:
            connect = arrow_to_connect_schema(schema, name=self.schema_name)
        except SchemaConversionError as e:
            raise ConnectException(f"{split.filename}: {e}") from e
        return _FileInfo(schema, connect, avg_row_bytes=max(1.0, len(sample) / lines), header=header)

    def _plan_text(self, split: _Split, pos: int):
        """Newline-aligned byte ranges covering the next ~batch.max.rows lines from ``pos``."""
        import numpy as np

        size = os.path.getsize(split.filename)
        end = size if split.end is None else min(split.end, size)
        if pos >= end:
            return None
        info = self._info(split)
        limit = end - pos
        want = min(limit, int(self.batch_rows * info.avg_row_bytes * 1.1) + (64 << 10))
        header = pos == 0 and info.header
        max_lines = self.batch_rows + (1 if header else 0)
        with open(split.filename, "rb") as f:
            f.seek(pos)
            buf = f.read(want)
            while True:
                newlines = np.flatnonzero(np.frombuffer(buf, dtype=np.uint8) == 10)
                if len(newlines) >= max_lines:
                    newlines = newlines[:max_lines]
                    cut = int(newlines[-1]) + 1
                    break
                if len(buf) >= limit:
                    cut = len(buf)  # the range's end (a final line without newline included)
                    break
                more = f.read(min(limit - len(buf), max(len(buf), 1 << 20)))
                if not more:
                    cut = len(buf)
                    break
                buf += more
        del buf
        last_nl = int(newlines[-1]) + 1 if len(newlines) else 0
        if cut > last_nl and split.end is None and _still_written(split.filename):
            # a followed file ends in a line its writer may be in the middle of (appends are not
            # atomic): keep it for a later batch, as Kafka's FileStreamSource reads whole lines only
            cut = last_nl
            self._partial_left = True
            if cut == 0 or (header and len(newlines) <= 1):
                return None
        lines = len(newlines) + (1 if cut > last_nl else 0)
        n = self._parallelism(lines)
        bounds = [0]
        for k in range(1, n):  # cut after the newline closest to an even share of lines
            b = int(newlines[min(len(newlines) - 1, k * len(newlines) // n)]) + 1 if len(newlines) else cut
            if bounds[-1] < b < cut:
                bounds.append(b)
        bounds.append(cut)
        pieces = [{"path": split.filename, "start": pos + a, "end": pos + b, "skip_header": header and a == 0}
                  for a, b in zip(bounds, bounds[1:])]
        return pieces, pos + cut

    def _row_group_starts(self, filename: str) -> list[int]:
        import pyarrow.parquet as pq

        md = pq.ParquetFile(filename).metadata
        starts = [0]
        for i in range(md.num_row_groups):
            starts.append(starts[-1] + md.row_group(i).num_rows)
        return starts

    def _plan_parquet(self, split: _Split, pos: int):
        """Row ranges covering the next ~batch.max.rows rows of the split from row ``pos``."""
        self._info(split)
        starts = self._row_group_starts(split.filename)
        groups = len(starts) - 1
        g_end = groups if (split.whole or split.end is None) else min(split.end, groups)
        row_end = starts[g_end]
        if pos >= row_end:
            return None
        stop = min(row_end, pos + self.batch_rows)
        n = self._parallelism(stop - pos)
        cuts = [pos + (stop - pos) * k // n for k in range(n + 1)]
        pieces = [{"path": split.filename, "start": a, "end": b} for a, b in zip(cuts, cuts[1:]) if b > a]
        return pieces, stop


#: seconds since its last modification after which an unterminated last line of a followed file is read
#: (a file that does not end in a newline still has all its rows read; a live writer is waited for)
PARTIAL_LINE_QUIET_SECONDS = 2.0


def _still_written(path: str) -> bool:
    """Whether ``path`` was modified within :data:`PARTIAL_LINE_QUIET_SECONDS` (its last line may be partial)."""
    import time

    try:
        return time.time() - os.path.getmtime(path) < PARTIAL_LINE_QUIET_SECONDS
    except OSError:
        return False


_MIN_PIECE_ROWS = 10_000  # rows below which a chunk is not spread over more Spark tasks / pool threads


def engine_local_encodable(schema) -> bool:
    """Whether the in-process engine can encode records of this Arrow schema (else the batch runs on Spark)."""
    from webapp.runtime.engine import local_encodable

    return local_encodable(schema)


def _csv_convert_options(schema, null_values):
    import pyarrow.csv as pacsv

    kwargs: dict[str, Any] = {"strings_can_be_null": True, "quoted_strings_can_be_null": True}
    if null_values is not None:
        kwargs["null_values"] = list(null_values)
    if schema is not None:
        kwargs["column_types"] = {f.name: f.type for f in schema}
    return pacsv.ConvertOptions(**kwargs)


def _make_parse_fn(pieces: list[dict], fmt: str, schema, delimiter: str, null_values):
    """The mapInArrow function run by Spark's Python workers: parse piece ``id`` → Arrow batches.

    Imports only pyarrow (the closure is shipped by value; workers never import this
    project). Raises ValueError("[source] ...") naming the file and range on parse errors.
    """
    convert = _csv_convert_options(schema, null_values) if fmt == "csv" else None

    def parse(batches):
        import io as _io

        import pyarrow as pa

        ids = [i for b in batches for i in b.column(0).to_pylist()]
        for i in ids:
            piece = pieces[i]
            path, start, end = piece["path"], piece["start"], piece["end"]
            try:
                if fmt == "parquet":
                    import pyarrow.parquet as pq

                    pf = pq.ParquetFile(path)
                    md, parts, first = pf.metadata, [], 0
                    for g in range(md.num_row_groups):
                        rows = md.row_group(g).num_rows
                        lo, hi = max(start, first), min(end, first + rows)
                        if lo < hi:
                            parts.append(pf.read_row_group(g).slice(lo - first, hi - lo))
                        first += rows
                    table = pa.concat_tables(parts) if parts else schema.empty_table()
                else:
                    with open(path, "rb") as f:
                        f.seek(start)
                        data = f.read(end - start)
                    if fmt == "csv":
                        import pyarrow.csv as pacsv

                        table = pacsv.read_csv(
                            _io.BytesIO(data),
                            read_options=pacsv.ReadOptions(column_names=schema.names,
                                                           skip_rows=1 if piece.get("skip_header") else 0,
                                                           block_size=max(1 << 20, len(data) // 2 + 1)),
                            parse_options=pacsv.ParseOptions(delimiter=delimiter),
                            convert_options=convert)
                    else:
                        import pyarrow.json as pajson

                        table = pajson.read_json(
                            _io.BytesIO(data),
                            read_options=pajson.ReadOptions(block_size=max(1 << 22, len(data) // 2 + 1)),
                            parse_options=pajson.ParseOptions(explicit_schema=schema,
                                                              unexpected_field_behavior="ignore"))
                table = table.select(schema.names)
                if not table.schema.equals(schema):
                    table = table.cast(schema)
            except Exception as e:
                unit = "rows" if fmt == "parquet" else "bytes"
                raise ValueError(f"[source] cannot parse {path} {unit} {start}-{end}: {e}") from None
            for batch in table.to_batches(max_chunksize=10_000):
                yield batch

    return parse


# --------------------------------------------------------------------------------------
# Sink connector
# --------------------------------------------------------------------------------------
class FileSinkConnector(SinkConnector):
    """Writes topics into a directory of parquet / JSON-lines / csv files (see module docstring).

    Config keys: ``topics``, ``path``, ``format``, ``tasks.max``, ``value.converter``,
    ``value.converter.schemas.enable``, ``key.converter``, ``batch.max.rows``,
    ``batch.max.ms``, ``parquet.compression``, ``schemaless.sample.rows``, and
    ``consumer.override.*`` (librdkafka settings).

    Task configs: the connector config plus ``task.index`` (i) and ``task.count``
    (N); task i reads the partitions p of every topic with ``p % N == i``.
    """

    version = "0.1.0"
    config_def = ConfigDef(_COMMON_KEYS + _SINK_KEYS)

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Per-key errors: ConfigDef checks plus topic names, output path, converters."""
        errors = _merge_errors(self.config_def.validate(config), _converter_errors(config),
                               _positive(self.config_def, config, ("tasks.max", "batch.max.rows")))
        topics = config.get("topics")
        if topics is not None:
            names = _list(topics)
            if not names:
                errors["topics"].append("topics must list at least one topic")
            for t in names:
                if not _TOPIC_RE.match(t):
                    errors["topics"].append(f"Invalid topic name {t!r}: use up to 249 of [a-zA-Z0-9._-]")
        path = config.get("path")
        if path:
            denied = file_access.violation(path)
            if denied:
                errors["path"].append(denied)
            elif os.path.exists(path) and not os.path.isdir(path):
                errors["path"].append(f"Path {path} exists and is not a directory")
            else:
                parent = os.path.abspath(path)
                while not os.path.exists(parent):
                    parent = os.path.dirname(parent)
                if not os.access(parent, os.W_OK):
                    errors["path"].append(f"Path {path} is not writable")
        return errors

    def start(self, config: Mapping[str, str]) -> None:
        """Validate and keep the config. Raises ConnectException listing every invalid key."""
        _raise_if_errors(self.validate(config), "FileSinkConnector")
        self.config = dict(config)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """``min(max_tasks, tasks.max)`` configs; task i of N takes partitions p with p % N == i."""
        if not hasattr(self, "config"):
            raise ConnectException("FileSinkConnector.task_configs called before start")
        n = max(1, min(int(max_tasks), _int(self.config_def, self.config, "tasks.max")))
        return [{**self.config, TASK_INDEX: str(i), TASK_COUNT: str(n)} for i in range(n)]


# --------------------------------------------------------------------------------------
# Sink task
# --------------------------------------------------------------------------------------
_SCHEMA_PREFIX = '{"schema":'
_PART_RE = re.compile(r"^part-(\d+)")


class FileSinkTask(Task):
    """Consumes its topic-partitions batch by batch and writes each batch as files.

    ``run_batch``: read up to ``batch.max.rows`` records (split over the assigned
    partitions) from the next offsets until partition EOF, decode in the JVM,
    write with Spark into a staging directory, fsync and rename the files into
    ``path``, then return the next offsets. ``None`` when no partition had new
    records (or no topic exists yet).

    Raises (from ``start``/``run_batch``): ConnectException for bad config, Kafka
    errors, malformed records (FAILFAST decoding), incompatible schemas in one
    batch, and write failures.
    """

    config_def = FileSinkConnector.config_def

    def start(self) -> None:
        cfg, cd = self.config, self.config_def
        errors = _merge_errors(cd.validate(cfg), _converter_errors(cfg))
        _raise_if_errors(errors, "FileSinkTask")
        self.topics = _list(cfg["topics"])
        self.path = os.path.abspath(cfg["path"])
        file_access.check(self.path)  # before anything is created there; again before each batch's writes
        self.format = _get(cd, cfg, "format") or "parquet"
        self.schemas_enable = _bool(_get(cd, cfg, "value.converter.schemas.enable"))
        self.batch_rows = max(1, _int(cd, cfg, "batch.max.rows"))
        self.batch_ms = max(1, _int(cd, cfg, "batch.max.ms"))
        self.sample_rows = max(1, _int(cd, cfg, "schemaless.sample.rows"))
        self.compression = _get(cd, cfg, "parquet.compression") or "snappy"
        self.index = int(cfg.get(TASK_INDEX, self.context.task_id.task))
        self.count = int(cfg.get(TASK_COUNT, 1))
        if not (0 <= self.index < self.count):
            raise ConnectException(f"{TASK_INDEX}={self.index} must be in [0, {TASK_COUNT}={self.count})")
        self.consumer_overrides = _client_overrides(cfg, "consumer.override.")
        self._transforming, self._operator = _error_handling(cfg, sink=True)
        dlq = self._operator.config.dlq_topic
        if dlq:
            from webapp.kafka.topics import TopicError, ensure_topic

            try:  # as Kafka's DeadLetterQueueReporter: one partition, the configured replication factor
                ensure_topic(self.context.kafka_config, dlq, 1, self._operator.config.dlq_replication_factor)
            except TopicError as e:
                raise ConnectException(f"Could not initialize dead letter queue with topic={dlq}: {e}") from e
        self._next: dict[tuple[str, int], int] = {}
        for entry in self.context.offsets.values():
            part, off = entry.partition, entry.offset
            if part.get("kafka_topic") in self.topics and "kafka_offset" in off:
                self._next[(part["kafka_topic"], int(part["kafka_partition"]))] = int(off["kafka_offset"])
        self._schemaless: dict[str, dict] = {}
        self._stage_prefix = f"{self.context.task_id.connector}-{self.context.task_id.task}-"
        os.makedirs(os.path.join(self.path, _STAGING), exist_ok=True)
        for stale in glob.glob(os.path.join(self.path, _STAGING, glob.escape(self._stage_prefix) + "*")):
            shutil.rmtree(stale, ignore_errors=True)
        if self.context.spark is None:
            from webapp.runtime.spark import get_spark_session

            self.context.spark = get_spark_session()
        from webapp.kafka.clients import SinkParking

        self._parking = SinkParking(self.context.end_offsets, str(self.context.task_id), self.context.wake)

    def stop(self) -> None:
        if getattr(self, "_parking", None) is not None:
            self._parking.stop()

    def _assigned(self) -> list[tuple[str, int]]:
        from webapp.kafka.clients import partition_count_cached
        from webapp.kafka.topics import TopicError

        out = []
        for topic in self.topics:
            try:
                n = partition_count_cached(self.context.kafka_config, topic)
            except TopicError as e:
                raise ConnectException(str(e)) from e
            out.extend((topic, p) for p in range(n or 0) if p % self.count == self.index)
        return out

    def idle_delay(self) -> float | None:
        # woken by the worker's EndOffsetWatcher when a partition gets records; the long
        # wait is only a safety net (a missed wake-up, a new partition)
        return self._parking.idle_delay()

    def run_batch(self) -> BatchResult | None:
        from webapp.kafka.spark_io import TopicPartitionRange

        assigned = self._assigned()
        if not assigned:
            return None
        if self._parking.nothing_new(assigned):
            return None
        file_access.check(self.path)  # a symbolic link swapped in since start fails the task before any write
        per = max(1, math.ceil(self.batch_rows / len(assigned)))
        reads = []
        for topic in self.topics:
            ranges = [TopicPartitionRange(t, p, self._next.get((t, p)), per) for t, p in assigned if t == topic]
            if ranges:
                reads.extend(self._operator.execute(lambda: self._sink_topic(topic, ranges), "TASK_PUT",
                                                    type(self).__name__))
        if not reads:
            self._parking.found_nothing()
            return None
        self._parking.moved()
        offsets = []
        for r in reads:  # only now: every file of the batch is in place
            self._next[(r.topic, r.partition)] = r.next_offset
            offsets.append(SourceOffset({"kafka_topic": r.topic, "kafka_partition": r.partition},
                                        {"kafka_offset": r.next_offset}))
        return BatchResult(sum(r.count for r in reads), tuple(offsets))

    # -- one topic per Spark job ----------------------------------------------------------
    def _sink_topic(self, topic: str, ranges) -> list:
        """Read, decode and write one topic's ranges; returns the PartitionReads that moved.

        Fast path (one Spark job): the value schema is planned from a small driver-side
        peek, and the job that reads Kafka also writes the files and computes the
        per-partition counts/offsets (``observe``) and, with schemas enabled, how many
        records carry a schema other than the peeked ones. If any does, the output is
        discarded and the batch is redone on a cached read with every distinct schema.
        """
        stage = os.path.join(self.path, _STAGING, f"{self._stage_prefix}{uuid.uuid4().hex}")
        try:
            if self._transforming:
                return self._pipeline_pass(topic, ranges, stage)
            engine = self.context.engine
            if engine is not None and not engine.use_spark(self.config, None, local_ok=self.format == "parquet"):
                reads = self._local_pass(topic, ranges, stage)
                if reads is not None:
                    return reads
                shutil.rmtree(stage, ignore_errors=True)  # not for the in-process path: Spark decides
            plan = self._plan(topic, ranges)
            if plan is None:
                return []
            if plan is not _FALLBACK:
                reads = self._single_pass(topic, ranges, plan, stage)
                if reads is not None:
                    return reads
                shutil.rmtree(stage, ignore_errors=True)
            return self._cached_pass(topic, ranges, stage)
        finally:
            shutil.rmtree(stage, ignore_errors=True)

    def _local_pass(self, topic: str, ranges, stage: str):
        """Read, decode and write the ranges without Spark (the engine's local path).

        Like the Spark fast path: the value schema is planned from a small peek,
        then each range is read from its start offset, its values cut to their
        payloads, parsed by pyarrow's JSON reader into the planned types and
        written as one Parquet file — one piece per partition, in the engine's
        worker processes (or its threads). Returns the PartitionReads, or ``None``
        when the batch needs the Spark path (a record with an unplanned schema, a
        value that is not a one-line envelope, nested or decimal fields): nothing
        was committed then, and the Spark path reads the same ranges again.
        """
        from webapp.kafka.spark_io import PartitionRead, partition_reader
        from webapp.runtime.engine import phase

        with phase("decode"):
            plan = self._plan(topic, ranges)
        if plan is None:
            return []
        if plan is _FALLBACK:
            return None
        schema, prefixes = plan
        arrow_schema = _local_arrow_schema(schema)
        if arrow_schema is None:
            return None
        reader = partition_reader(ranges, self.context.kafka_config, consumer_config=self.consumer_overrides,
                                  timeout=self.batch_ms / 1000.0)
        os.makedirs(stage, exist_ok=True)
        heads = None if prefixes is None else [(p + ',"payload":').encode() for p in prefixes]
        piece = functools.partial(_sink_piece, prefixes=heads,
                                  arrow_schema=arrow_schema, stage=stage, compression=self.compression)
        results = self.context.engine.run_pieces(reader, len(ranges), piece, processes=True)
        if any(r is None for r in results):
            return None
        reads = [PartitionRead(topic, r.partition, r.start, res["first"], res["last"], res["count"], res["values"])
                 for r, res in zip(ranges, results) if res["count"]]
        if reads:
            with phase("write"):
                self._commit_files(topic, ranges, reads, stage)
        return reads

    def _consumer_config(self) -> dict:
        from webapp.kafka.spark_io import CONSUMER_DEFAULTS, _PRODUCER_ONLY_PREFIXES, _client_config

        return _client_config(self.context.kafka_config, CONSUMER_DEFAULTS, _PRODUCER_ONLY_PREFIXES,
                              self.consumer_overrides)

    def _peek(self, ranges, limit: int) -> tuple[list[bytes], bool]:
        """Up to ``limit`` non-null values from the ranges' start offsets (driver side).

        Returns (values, saw_records); stops at EOF of every partition, at ``limit``,
        or after a few seconds.
        """
        import time

        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(self._consumer_config())
        values: list[bytes] = []
        saw = False
        try:
            consumer.assign([TopicPartition(r.topic, r.partition, 0 if r.start is None else r.start) for r in ranges])
            eof: set[int] = set()
            deadline = time.monotonic() + min(10.0, self.batch_ms / 1000.0)
            while len(values) < limit and len(eof) < len(ranges):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                msgs = consumer.consume(limit - len(values), 0) or [consumer.poll(min(left, 0.5))]
                for m in msgs:
                    if m is None:
                        continue
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            eof.add(m.partition())
                            continue
                        raise ConnectException(f"Reading {m.topic()}[{m.partition()}] failed: {err}")
                    saw = True
                    if m.value() is not None:
                        values.append(m.value())
        finally:
            consumer.close()
        return values, saw

    def _plan(self, topic: str, ranges):
        """(Connect schema, envelope prefixes or None), _FALLBACK, or None when nothing to read."""
        from webapp.runtime.converters import SchemaConversionError, merge_connect_schemas

        values, saw = self._peek(ranges, 100 if self.schemas_enable else self.sample_rows)
        if not saw:
            return None
        if not values:
            return _FALLBACK  # only tombstones at the start: let the full pass sort it out
        if not self.schemas_enable:
            return self._schemaless_schema(topic, values), None
        prefixes: list[str] = []
        for v in values:
            text = v.decode("utf-8", "replace")
            cut = text.find(',"payload":')
            if cut < 0 or not text.startswith(_SCHEMA_PREFIX):
                return _FALLBACK
            if text[:cut] not in prefixes:
                prefixes.append(text[:cut])
        try:
            schemas = [json.loads(p[len(_SCHEMA_PREFIX):]) for p in prefixes]
            if any(not isinstance(sc, dict) for sc in schemas):
                return _FALLBACK
            return merge_connect_schemas(schemas), prefixes
        except (ValueError, SchemaConversionError):
            return _FALLBACK

    def _schemaless_schema(self, topic: str, values) -> dict:
        from webapp.runtime.converters import SchemaConversionError, infer_connect_schema

        try:
            payloads = [json.loads(v) for v in values]
        except ValueError as e:
            raise ConnectException(f"Topic {topic}: a record value is not valid JSON: {e}") from e
        try:
            inferred = infer_connect_schema(payloads)
        except SchemaConversionError as e:
            raise ConnectException(f"Topic {topic}: records have incompatible types: {e}") from e
        prev = self._schemaless.get(topic)
        schema = inferred if prev is None else _extend_schema(prev, inferred)
        self._schemaless[topic] = schema
        return schema

    def _read(self, ranges, with_metadata: bool = False):
        from webapp.kafka.spark_io import read_partitions

        return read_partitions(self.context.spark, ranges, self.context.kafka_config,
                               consumer_config=self.consumer_overrides, timeout=self.batch_ms / 1000.0,
                               with_metadata=with_metadata)

    # -- transforms / error tolerance / DLQ ------------------------------------------------
    def _pipeline_pass(self, topic: str, ranges, stage: str) -> list:
        """Read once (cached) → decode in the JVM (PERMISSIVE) → SMTs on the workers → write good rows.

        Records that fail conversion or a transformation become error rows: with
        ``errors.tolerance=none`` the job fails on the first; with ``all`` they are
        counted, logged (``errors.log.enable``) and produced to the DLQ topic with
        their original bytes after the good rows were written.
        """
        import logging

        from pyspark import StorageLevel
        from pyspark.sql import Observation

        from webapp.kafka.spark_io import KafkaIOError
        from webapp.runtime.pipeline import SinkPipeline

        if not self._peek(ranges, 1)[1]:
            return []  # nothing new: decided in the driver, without a Spark job
        raw = self._read(ranges, with_metadata=True).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            try:
                reads, prefixes = self._scan(raw, topic, ranges)
            except Exception as e:
                raise ConnectException(f"Reading {topic} failed: {_spark_error(e)}") from e
            if not any(r.value_count for r in reads):
                return reads  # tombstones only: nothing to write
            schema, schemaless = self._tolerant_schema(raw, topic, prefixes)
            pipeline = SinkPipeline.plan(self.config, schema, self.context.task_id, schemaless)
            out = pipeline.apply(raw)
            observation = Observation(f"sink-errors-{uuid.uuid4().hex}")
            good = out.observe(observation, SinkPipeline.error_count()).where(SinkPipeline.is_good()) \
                .select(*pipeline.value_columns())
            self._save(good, topic, stage)
            failed = observation.get.get("rc_errors") or 0
            if failed:
                metrics = self.context.metrics
                logged = failed if self._operator.config.log_enable else 0
                try:
                    sent = pipeline.produce_dlq(out, self.context.kafka_config)
                except KafkaIOError as e:
                    if metrics is not None:
                        metrics.record_errors(failed=failed, logged=logged, dlq_failed=1)
                    raise ConnectException(f"Producing to the dead letter queue failed: {e}") from e
                if metrics is not None:  # the skipped records must show (task-error-metrics, console)
                    metrics.record_errors(failed=failed, skipped=failed, logged=logged, dlq_sent=sent)
                logging.getLogger(__name__).warning(
                    "task %s: %d record(s) of %s failed and were skipped (errors.tolerance=all); %d sent to the "
                    "dead letter queue %r", self.context.task_id, failed, topic, sent,
                    self._operator.config.dlq_topic or None)
            self._commit_files(topic, ranges, reads, stage, allow_missing=True)
            return reads
        finally:
            raw.unpersist()

    def _scan(self, raw, topic: str, ranges) -> tuple[list, list[str]]:
        """One job over the (cached) read: per-partition counts and offsets, and the distinct schema prefixes.

        Returns (PartitionReads in ``ranges`` order, distinct ``{"schema":...`` prefixes of
        the values; empty when schemas are disabled). A value that does not start like
        a JsonConverter envelope counts as prefix ``"?"``, so the result stays small.
        """
        from pyspark.sql import functions as F

        from webapp.kafka.spark_io import PartitionRead

        value = F.col("value")
        keys = ["kafka_partition"]
        if self.schemas_enable:
            text = value.cast("string")
            prefix = F.when(value.isNull(), F.lit(None)).when(text.startswith(_SCHEMA_PREFIX),
                                                               F.substring_index(text, ',"payload":', 1)) \
                .otherwise(F.lit("?"))
            raw = raw.withColumn("__rc_prefix", prefix)
            keys.append("__rc_prefix")
        rows = raw.groupBy(*keys).agg(F.count(F.lit(1)).alias("n"), F.count(value).alias("v"),
                                      F.min("kafka_offset").alias("lo"), F.max("kafka_offset").alias("hi")).collect()
        stats: dict[int, list] = {}
        prefixes: list[str] = []
        for r in rows:
            st = stats.setdefault(r.kafka_partition, [0, 0, None, None])
            st[0] += r.n
            st[1] += r.v
            st[2] = r.lo if st[2] is None else min(st[2], r.lo)
            st[3] = r.hi if st[3] is None else max(st[3], r.hi)
            p = r["__rc_prefix"] if self.schemas_enable else None
            if p is not None and p not in prefixes:
                prefixes.append(p)
        reads = [PartitionRead(topic, rng.partition, rng.start, stats[rng.partition][2], stats[rng.partition][3],
                               stats[rng.partition][0], stats[rng.partition][1])
                 for rng in ranges if rng.partition in stats]
        return reads, prefixes

    def _tolerant_schema(self, raw, topic: str, prefixes: list[str]) -> tuple[dict, bool]:
        """(Connect struct schema to decode with, schemaless?) from the batch, skipping undecodable values."""
        from pyspark.sql import functions as F

        from webapp.runtime.converters import SchemaConversionError, infer_connect_schema, merge_connect_schemas

        values = raw.where(F.col("value").isNotNull())
        text = F.col("value").cast("string")
        try:
            if self.schemas_enable:
                schemas, null_schema = [], False
                for p in prefixes:
                    if not p.startswith(_SCHEMA_PREFIX):
                        continue
                    try:
                        sc = json.loads(p[len(_SCHEMA_PREFIX):])
                    except ValueError:
                        continue
                    if isinstance(sc, dict) and sc.get("type") == "struct":
                        schemas.append(sc)
                    elif sc is None:
                        null_schema = True
                if schemas:
                    return merge_connect_schemas(schemas), False
                if not null_schema:
                    return _NO_FIELDS, False
                sample = [r.p for r in values.select(F.get_json_object(text, "$.payload").alias("p"))
                          .limit(self.sample_rows).collect() if r.p is not None]
            else:
                sample = [r.v for r in values.select(text.alias("v")).limit(self.sample_rows).collect()]
            payloads = []
            for v in sample:
                try:
                    obj = json.loads(v)
                except ValueError:
                    continue
                if isinstance(obj, dict):
                    payloads.append(obj)
            if not payloads:
                return _NO_FIELDS, True
            inferred = infer_connect_schema(payloads)
            prev = self._schemaless.get(topic)
            schema = inferred if prev is None else _extend_schema(prev, inferred)
            self._schemaless[topic] = schema
            return schema, True
        except SchemaConversionError as e:
            raise ConnectException(f"Topic {topic}: records in one batch have incompatible schemas: {e}") from e

    def _single_pass(self, topic: str, ranges, plan, stage: str):
        """One job: read → observe stats → decode → write. None if a schema was not planned for."""
        from functools import reduce

        from pyspark.sql import Observation
        from pyspark.sql import functions as F

        from webapp.kafka.spark_io import PartitionRead

        schema, prefixes = plan
        raw = self._read(ranges)
        value, offset = F.col("value"), F.col("kafka_offset")
        metrics = []
        for i, r in enumerate(ranges):
            here = F.col("kafka_partition") == r.partition
            metrics += [F.count(F.when(here, 1)).alias(f"n{i}"),
                        F.count(F.when(here & value.isNotNull(), 1)).alias(f"v{i}"),
                        F.min(F.when(here, offset)).alias(f"lo{i}"),
                        F.max(F.when(here, offset)).alias(f"hi{i}")]
        if prefixes is not None:
            text = value.cast("string")
            known = reduce(lambda a, b: a | b, [text.startswith(p) for p in prefixes])
            metrics.append(F.count(F.when(value.isNotNull() & ~known, 1)).alias("unplanned"))
        observation = Observation(f"sink-{uuid.uuid4().hex}")
        df = raw.observe(observation, *metrics).where(value.isNotNull())
        self._write(df, topic, schema, stage)
        m = observation.get
        if m.get("unplanned"):
            return None
        reads = [PartitionRead(topic, r.partition, r.start, m[f"lo{i}"], m[f"hi{i}"], m[f"n{i}"], m[f"v{i}"])
                 for i, r in enumerate(ranges) if m[f"n{i}"]]
        self._commit_files(topic, ranges, reads, stage)
        return reads

    def _cached_pass(self, topic: str, ranges, stage: str) -> list:
        """Read once into Spark's cache, find every distinct schema, then decode and write."""
        from pyspark import StorageLevel
        from pyspark.sql import functions as F

        from webapp.kafka.spark_io import summarize_read

        raw = self._read(ranges).persist(StorageLevel.MEMORY_AND_DISK)
        try:
            try:
                by_partition = {r.partition: r for r in summarize_read(raw)}
            except Exception as e:
                raise ConnectException(f"Reading {topic} failed: {_spark_error(e)}") from e
            reads = [by_partition[r.partition] for r in ranges if r.partition in by_partition]
            if any(r.value_count for r in reads):
                df = raw.where(F.col("value").isNotNull())
                self._write(df, topic, self._batch_schema(df, topic), stage)
                self._commit_files(topic, ranges, reads, stage)
            return reads
        finally:
            raw.unpersist()

    # -- schema (cached pass) ---------------------------------------------------------
    def _batch_schema(self, values, topic: str) -> dict:
        from pyspark.sql import functions as F

        from webapp.runtime.converters import SchemaConversionError, merge_connect_schemas

        try:
            if self.schemas_enable:
                schemas = self._envelope_schemas(values)
                if schemas is not None:
                    return merge_connect_schemas(schemas)
                sample = [r.p.encode() for r in values.select(
                    F.get_json_object(F.col("value").cast("string"), "$.payload").alias("p"))
                    .limit(self.sample_rows).collect() if r.p is not None]
            else:
                sample = [r.value for r in values.select("value").limit(self.sample_rows).collect()]
            return self._schemaless_schema(topic, sample)
        except SchemaConversionError as e:
            raise ConnectException(f"Topic {topic}: records in one batch have incompatible schemas: {e}") from e

    def _envelope_schemas(self, values) -> list[dict] | None:
        """Distinct Connect schemas of enveloped values; None when a record has a null schema.

        Compares the text before ``,"payload":`` (JsonConverter writes ``schema``
        first), then parses each distinct prefix once; falls back to a full JSON
        path extraction in the JVM when the layout differs.

        Raises:
            ConnectException: values are not ``{"schema","payload"}`` envelopes.
        """
        from pyspark.sql import functions as F

        text = F.col("value").cast("string")
        try:
            prefixes = [r.p for r in values.select(F.substring_index(text, ',"payload":', 1).alias("p"))
                        .distinct().limit(1000).collect()]
        except Exception as e:
            raise ConnectException(f"Reading failed: {_spark_error(e)}") from e
        schemas: list[dict] = []
        try:
            for p in prefixes:
                if not p.startswith(_SCHEMA_PREFIX):
                    raise ValueError("not schema-first")
                schemas.append(json.loads(p[len(_SCHEMA_PREFIX):]))
        except ValueError:
            rows = values.select(F.get_json_object(text, "$.schema").alias("s"),
                                 F.get_json_object(text, "$.payload").isNotNull().alias("has_payload")) \
                .distinct().limit(1000).collect()
            if any(r.s is None and not r.has_payload for r in rows):
                raise ConnectException(
                    'JsonConverter with schemas.enable requires "schema" and "payload" fields and may not contain '
                    "additional fields; a record is not such an envelope (plain JSON? set "
                    "value.converter.schemas.enable=false)")
            schemas = [json.loads(r.s) if r.s is not None else None for r in rows]
        if any(sc is None for sc in schemas):
            return None
        return schemas

    # -- writing ----------------------------------------------------------------------
    def _write(self, df, topic: str, schema: dict, stage: str) -> None:
        """Decode ``df``'s values with ``schema`` and let Spark write them under ``stage``."""
        from pyspark.sql import functions as F

        from webapp.runtime.converters import SchemaConversionError, decode_value_columns

        if not schema.get("fields"):
            raise ConnectException(f"Topic {topic}: record values have no fields to write")
        try:
            cols = decode_value_columns(F.col("value").cast("string"), schema, self.schemas_enable)
        except SchemaConversionError as e:
            raise ConnectException(f"Topic {topic}: unsupported schema: {e}") from e
        self._save(df.select(*cols), topic, stage)

    def _save(self, df, topic: str, stage: str) -> None:
        """Let Spark write ``df``'s rows (one file per Spark partition) under ``stage``."""
        writer = df.write.mode("overwrite").format(self.format)
        if self.format == "parquet":
            writer = writer.option("compression", self.compression)
        elif self.format == "csv":
            writer = writer.option("header", "true")
        else:
            writer = writer.option("ignoreNullFields", "false")
        try:
            writer.save(stage)
        except Exception as e:
            raise ConnectException(f"Topic {topic}: decoding or writing the batch failed: {_spark_error(e)}") from e

    def _commit_files(self, topic: str, ranges, reads, stage: str, allow_missing: bool = False) -> None:
        """Rename the staged part files (part-<i> ↔ ranges[i]) into ``path``; fsync.

        ``allow_missing``: a partition may have no file (its records were all
        filtered out or failed, with transforms / error tolerance).
        """
        expected = {i: r for i, rng in enumerate(ranges) for r in reads
                    if r.partition == rng.partition and r.value_count}
        staged: dict[int, str] = {}
        for name in (os.listdir(stage) if os.path.isdir(stage) else []):
            m = _PART_RE.match(name)
            if m is None or name.endswith(".crc"):
                continue
            idx = int(m.group(1))
            if idx in staged:
                raise ConnectException(f"Spark wrote several files for partition {idx} of {topic}; refusing to commit")
            staged[idx] = os.path.join(stage, name)
        ext = {"parquet": ".parquet", "json": ".json", "csv": ".csv"}[self.format]
        moves = []
        for idx, src in sorted(staged.items()):
            if _is_empty_output(src, self.format):
                continue  # Spark's placeholder when a result is empty
            if idx not in expected:
                raise ConnectException(f"Unexpected output file {src} for topic {topic}")
            r = expected[idx]
            start = ranges[idx].start if ranges[idx].start is not None else r.first_offset
            final = os.path.join(self.path, f"{topic}+{r.partition}+{start:020d}-{r.last_offset:020d}{ext}")
            moves.append((src, final, r.partition, start))
        missing = set(expected) - set(staged)
        if missing and not allow_missing:
            raise ConnectException(f"Topic {topic}: no output file for partitions "
                                   f"{sorted(ranges[i].partition for i in missing)}; refusing to commit")
        for src, final, p, start in moves:
            _fsync_file(src)
            for old in glob.glob(os.path.join(self.path, glob.escape(f"{topic}+{p}+{start:020d}-") + "*")):
                if old != final:
                    os.remove(old)  # a previous, uncommitted attempt of this batch
            os.replace(src, final)
        _fsync_dir(self.path)


_LOCAL_TYPES = {"int8", "int16", "int32", "int64", "float", "double", "boolean", "string", "bytes"}


def _local_arrow_schema(schema: Mapping[str, Any]):
    """Arrow schema (wire types) to parse payloads of a flat Connect ``schema`` in-process; None if not flat."""
    import pyarrow as pa

    from webapp.runtime.converters import DATE_LOGICAL, DECIMAL_LOGICAL, TIMESTAMP_LOGICAL

    fields = []
    for f in schema.get("fields", []):
        t, name = f.get("type"), f.get("name")
        if name == DECIMAL_LOGICAL or t not in _LOCAL_TYPES or (name and name not in (DATE_LOGICAL, TIMESTAMP_LOGICAL)):
            return None
        wire = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
                "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
                "bytes": pa.string()}[t]
        fields.append(pa.field(f["field"], wire, metadata={"connect": name or t}))
    return pa.schema(fields) if fields else None


def _sink_piece(index: int, batches, *, prefixes: list[bytes] | None, arrow_schema, stage: str,
                compression: str) -> dict | None:
    """One partition of an in-process sink batch: read → decode → ``stage/part-<index>.parquet``.

    Runs in the engine's worker processes (or threads); ``batches`` are the raw
    records of the range (:func:`webapp.kafka.spark_io.partition_reader`).
    Returns ``{"count", "values", "first", "last"}`` (tombstones counted, not
    written), or None when a value does not decode with the planned schema.
    """
    import pyarrow as pa
    import pyarrow.parquet as pq

    from webapp.runtime.engine import phase, timed

    got = list(timed(batches, "consume"))
    if not got:
        return {"count": 0, "values": 0, "first": None, "last": None}
    t = pa.Table.from_batches(got)
    offsets = t.column("kafka_offset")
    values = t.column("value").combine_chunks()
    out = {"count": t.num_rows, "values": t.num_rows - values.null_count, "first": offsets[0].as_py(),
           "last": offsets[-1].as_py()}
    if out["values"] == 0:
        return out
    with phase("decode"):
        data = _decode_payloads(values.drop_null() if values.null_count else values, prefixes, arrow_schema)
    if data is None:
        return None
    with phase("write"):
        pq.write_table(data, os.path.join(stage, f"part-{index:05d}.parquet"), compression=compression)
    return out


def _decode_payloads(values, prefixes: list[bytes] | None, arrow_schema):
    """Arrow table of the records' payloads (logical types as the Spark path writes them), or None if unparsable.

    ``values``: a binary Arrow array of record values without nulls. With one
    known envelope prefix (the usual case) the payloads are cut out and joined
    into newline-delimited JSON by Arrow kernels, without per-record Python.
    """
    import base64

    import numpy as np
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.json as pj

    from webapp.runtime.converters import DATE_LOGICAL, TIMESTAMP_LOGICAL

    n = len(values)
    if prefixes is not None and len(prefixes) == 1:
        text = values.cast(pa.string())
        if not (pc.all(pc.starts_with(text, prefixes[0].decode())).as_py() and pc.all(pc.ends_with(text, "}")).as_py()):
            return None
        body = pc.binary_slice(values, len(prefixes[0]), -1)
    elif prefixes is not None:
        lines = []
        for v in values.to_pylist():
            for p in prefixes:
                if v.startswith(p):
                    rest = v[len(p):].rstrip()
                    if not rest.endswith(b"}"):
                        return None
                    lines.append(rest[:-1])
                    break
            else:
                return None
        body = pa.array(lines, pa.binary())
    else:
        body = values
    joined = pc.binary_join_element_wise(body.cast(pa.binary()), pa.scalar(b""), pa.scalar(b"\n"))
    bufs = joined.buffers()
    offsets = np.frombuffer(bufs[1], dtype=np.int32, count=len(joined) + 1 + joined.offset)[joined.offset:]
    buf = bufs[2][int(offsets[0]):int(offsets[-1])]
    try:
        table = pj.read_json(pa.BufferReader(buf), read_options=pj.ReadOptions(block_size=4 << 20),
                             parse_options=pj.ParseOptions(explicit_schema=arrow_schema,
                                                           unexpected_field_behavior="ignore"))
    except pa.ArrowInvalid:
        return None
    if table.num_rows != n:  # a multi-line value: the JVM path parses it
        return None
    cols = []
    for f in arrow_schema:
        col = table.column(f.name).combine_chunks()
        kind = f.metadata[b"connect"].decode()
        if kind == TIMESTAMP_LOGICAL:
            col = col.cast(pa.int64()).view(pa.timestamp("ms", tz="UTC")).cast(pa.timestamp("us", tz="UTC"))
        elif kind == DATE_LOGICAL:
            col = col.cast(pa.int32()).view(pa.date32())
        elif kind == "bytes":
            try:
                col = pa.array([None if x is None else base64.b64decode(x, validate=True) for x in col.to_pylist()],
                               pa.binary())
            except ValueError:
                return None
        cols.append(col)
    return pa.table(cols, names=[f.name for f in arrow_schema])


_FALLBACK = object()
_NO_FIELDS = {"type": "struct", "optional": False, "fields": [{"field": "value", "type": "string", "optional": True}]}


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


def _extend_schema(prev: dict, new: dict) -> dict:
    """Keep ``prev``'s field types (stable output types); add fields only ``new`` has.

    Numeric fields widen (int64 → double) when the new sample needs it.
    """
    fields = {f["field"]: dict(f) for f in prev.get("fields", [])}
    for f in new.get("fields", []):
        old = fields.get(f["field"])
        if old is None:
            fields[f["field"]] = dict(f)
        elif old.get("type") == "int64" and f.get("type") == "double":
            old["type"] = "double"
    out = dict(prev)
    out["fields"] = list(fields.values())
    return out


def _is_empty_output(path: str, fmt: str) -> bool:
    if fmt == "parquet":
        import pyarrow.parquet as pq

        return pq.ParquetFile(path).metadata.num_rows == 0
    return os.path.getsize(path) == 0 or (fmt == "csv" and open(path, "rb").read().count(b"\n") <= 1)


def _fsync_file(path: str) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
    finally:
        os.close(fd)


def _fsync_dir(path: str) -> None:
    try:
        fd = os.open(path, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _spark_error(e: BaseException) -> str:
    text = str(e)
    for marker in ("[sink] ", "[source] ", "[kafka] ", "SparkRuntimeException: ", "Malformed records",
                   "SparkException: "):
        idx = text.find(marker)
        if idx >= 0:
            return text[idx:].splitlines()[0][:2000]
    return (text.splitlines()[0] if text else repr(e))[:2000]


# The runtime instantiates a connector's tasks through ``Connector.task_class`` (api.py).
FileSourceConnector.task_class = FileSourceTask
FileSinkConnector.task_class = FileSinkTask
