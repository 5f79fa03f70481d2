"""The file connectors: :class:`FileSourceConnector` and :class:`FileSinkConnector` (validation, task configs).

Owns what a connector does on the control plane: validating a config (per-key
errors, including that ``path`` is under the allowed roots, before anything is
said about its existence), and splitting the work into task configs — the
source cuts files into newline-aligned byte ranges or parquet row-group ranges
(:class:`_Split`) balanced by bytes; the sink gives task i of N the partitions
p with ``p % N == i``.

Must not touch: reading or writing data, Kafka or Spark (the tasks,
:mod:`.source_task` and :mod:`.sink_task`, do); the web layer. Their task
classes are attached in the package's ``__init__``.
"""
from __future__ import annotations

import json
import math
import os
import stat
from dataclasses import dataclass
from typing import Any, Mapping

from webapp.kafka.topics import is_valid_topic_name
from webapp.plugin import (
    AbstractConfig,
    ConfigDef,
    ConnectException,
    SinkConnector,
    SourceConnector,
    merge_errors,
    raise_if_errors,
)
from webapp.runtime import file_access
from webapp.runtime.recent import RecentKeys

from .config import (
    _COMMON_KEYS,
    _SINK_KEYS,
    _SOURCE_KEYS,
    SOURCE_FORMATS,
    TASK_COUNT,
    TASK_INDEX,
    TASK_SPLITS,
    _converter_errors,
    _format_from_name,
    _list_files,
    _positive,
)

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


def _stat_mode(path: str) -> int | None:
    """``st_mode`` of ``path`` (symbolic links followed), or ``None`` where ``os.path.exists`` says False:
    one ``stat`` where the exists / isfile / isdir chain made up to four."""
    try:
        return os.stat(path).st_mode
    except (OSError, ValueError):
        return None


def _source_path_errors(path: str, pattern: str, format_given: bool) -> tuple[tuple[str, str], ...]:
    """``((key, message), ...)``: what is wrong with a file source's ``path`` (allowed, exists, a readable
    file or directory whose files are allowed too) and, without ``format``, with inferring its format.

    A check that found nothing wrong is not made again for :data:`PATH_CHECK_TTL_S` for the same
    ``(path, pattern, format_given)`` and allowed roots (``_passed``); one that found a
    problem is made again every time, so a file created after an error is seen at once."""
    access = file_access.policy()
    key = (path, pattern, format_given, access)
    if key in _passed:
        return ()
    errors = _check_source_path(access, path, pattern, format_given)
    if not errors:
        _passed.add(key)
    return errors


def _check_source_path(access: file_access.FileAccessPolicy, path: str, pattern: str,
                       format_given: bool) -> tuple[tuple[str, str], ...]:
    denied = access.violation(path)  # first: nothing is said about paths outside the allowed roots
    if denied:
        return (("path", denied),)
    mode = _stat_mode(path)
    if mode is None:
        return (("path", f"Path {path} does not exist"),)
    if not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
        return (("path", f"Path {path} is neither a file nor a directory"),)
    if not os.access(path, os.R_OK):
        return (("path", f"Path {path} is not readable"),)
    if stat.S_ISDIR(mode):
        files = _list_files(path, pattern)
        denied = next(filter(None, map(access.violation, files)), None)  # its symlinks too
    else:
        files, denied = [path], None  # checked above
    if denied:
        return (("path", denied),)
    if not format_given and files and _format_from_name(files[0]) is None:
        return (("format", (f"Cannot infer the format of {files[0]} from its extension; "
                            f"set format to one of {', '.join(SOURCE_FORMATS)}")),)
    return ()


#: seconds a file source's passed path check is reused (:func:`_source_path_errors`). Its five system calls
#: (resolve, stat, access) each let the interpreter lock go: under 32 concurrent REST writes on the Raft
#: leader each came back to a wait for the lock, and the check was ~12% of the leader's time holding it
#: (py-spy ``--gil``, benchmarks/cluster, issue 16). A pass may thus be up to this old, as any check's
#: result may be a moment later: the tasks check their paths again before they read or write.
PATH_CHECK_TTL_S = 1.0


_passed = RecentKeys(PATH_CHECK_TTL_S, max_entries=1024)


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

    config_def = ConfigDef(_COMMON_KEYS + _SOURCE_KEYS)

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Per-key errors: ConfigDef checks plus path existence, format, topic name, converters."""
        conf = AbstractConfig(self.config_def, config)
        errors = merge_errors(self.config_def.validate(config), _converter_errors(config),
                               _positive(conf, ("tasks.max", "batch.max.rows", "topic.creation.default.partitions")))
        path = config.get("path")
        if path:
            for key, message in _source_path_errors(path, config.get("file.pattern") or "*",
                                                    bool(config.get("format"))):
                errors[key].append(message)
        topic = config.get("topic")
        if topic and not is_valid_topic_name(topic):
            errors["topic"].append(f"Invalid topic name {topic!r}: use up to 249 of [a-zA-Z0-9._-]")
        if len(conf.get_string("csv.delimiter") or ",") != 1:
            errors["csv.delimiter"].append("csv.delimiter must be a single character")
        return errors

    def start(self, config: Mapping[str, str]) -> None:
        """Validate and keep the config. Raises ConnectException listing every invalid key."""
        raise_if_errors(self.validate(config), "FileSourceConnector")
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
        conf = AbstractConfig(self.config_def, self.config)
        max_tasks = max(1, min(int(max_tasks), conf.get_int("tasks.max")))
        try:
            files = self._files()
        except FileNotFoundError as e:
            raise ConnectException(f"Path {self.config['path']} does not exist") from e
        if not files:
            return []
        sizes = {f: os.path.getsize(f) for f, _ in files}
        total = sum(sizes.values()) or 1
        target = total / max_tasks
        min_split = max(1, conf.get_long("split.min.bytes"))
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
        header = fmt == "csv" and AbstractConfig(self.config_def, self.config).get_bool("csv.header")
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


class FileSinkConnector(SinkConnector):
    """Writes topics into a directory of parquet / JSON-lines / csv files (see module docstring).

    Config keys: ``topics``, ``path``, ``format``, ``tasks.max``, ``value.converter``,
    ``value.converter.schemas.enable``, ``key.converter``, ``batch.max.rows``,
    ``batch.max.ms``, ``parquet.compression``, ``schemaless.sample.rows``, and
    ``consumer.override.*`` (librdkafka settings).

    Task configs: the connector config plus ``task.index`` (i) and ``task.count``
    (N); task i reads the partitions p of every topic with ``p % N == i``.
    """

    config_def = ConfigDef(_COMMON_KEYS + _SINK_KEYS)

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Per-key errors: ConfigDef checks plus topic names, output path, converters."""
        conf = AbstractConfig(self.config_def, config)
        errors = merge_errors(self.config_def.validate(config), _converter_errors(config),
                               _positive(conf, ("tasks.max", "batch.max.rows")))
        if config.get("topics") is not None:
            names = conf.get_list("topics")
            if not names:
                errors["topics"].append("topics must list at least one topic")
            for t in names:
                if not is_valid_topic_name(t):
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
        raise_if_errors(self.validate(config), "FileSinkConnector")
        self.config = dict(config)

    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """``min(max_tasks, tasks.max)`` configs; task i of N takes partitions p with p % N == i."""
        if not hasattr(self, "config"):
            raise ConnectException("FileSinkConnector.task_configs called before start")
        n = max(1, min(int(max_tasks), AbstractConfig(self.config_def, self.config).get_int("tasks.max")))
        return [{**self.config, TASK_INDEX: str(i), TASK_COUNT: str(n)} for i in range(n)]
