"""The file source task: reads its splits chunk by chunk and produces each chunk to Kafka.

Owns :class:`FileSourceTask` — resuming from committed offsets, inferring a
file's types once (:class:`_FileInfo`), planning newline-aligned byte ranges or
row ranges per batch, following a file that is still written (a partial last
line waits :data:`PARTIAL_LINE_QUIET_SECONDS`), parking on the worker's file
watcher — and the function Spark's Python workers run to parse a piece
(:func:`_make_parse_fn`). A batch runs in-process on the engine or as one Spark
job; with transforms, through the runtime's ``SourcePipeline``.

Must not touch: the sink's code, config validation beyond its own start checks
(:mod:`.connectors`), the metadata store (offsets go back in ``BatchResult``),
the web layer.
"""
from __future__ import annotations

import functools
import io
import json
import math
import os
from dataclasses import dataclass
from typing import Any, Mapping

from webapp.kafka.client_overrides import with_admin_overrides
from webapp.plugin import (
    AbstractConfig,
    BatchResult,
    ConnectException,
    SourceOffset,
    Task,
    TaskContext,
    merge_errors,
    partition_key,
    raise_if_errors,
)
from webapp.runtime import file_access
from webapp.runtime.file_watcher import QuietFiles

from .config import (
    TASK_SPLITS,
    _client_overrides,
    _converter_errors,
)
from .connectors import FileSourceConnector, _Split

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
        self._quiet = QuietFiles(PARTIAL_LINE_QUIET_SECONDS)  # when each followed file last changed

    # -- lifecycle ------------------------------------------------------------------
    def start(self) -> None:
        cfg, cd = self.config, self.config_def
        errors = merge_errors(cd.validate(cfg), _converter_errors(cfg))
        errors.pop("path", None)  # the file list comes from task.splits
        raise_if_errors(errors, "FileSourceTask")
        self.topic = cfg["topic"]
        conf = AbstractConfig(cd, cfg)
        self.schemas_enable = conf.get_bool("value.converter.schemas.enable")
        self.batch_rows = max(1, conf.get_int("batch.max.rows"))
        self.sample_bytes = conf.get_long("schema.sample.bytes")
        self.delimiter = conf.get_string("csv.delimiter") or ","
        self.csv_header = conf.get_bool("csv.header")
        self.topic_partitions = conf.get_int("topic.creation.default.partitions")
        self.topic_replication = conf.get_int("topic.creation.default.replication.factor")
        # not get_list: an empty item is a null string here ("a,,b" makes "" null)
        nulls = cfg.get("csv.null.values")
        self.null_values = None if nulls is None else [v.strip() for v in nulls.split(",")]
        self.schema_name = cfg.get("value.schema.name") or None
        self.producer_overrides = _client_overrides(cfg, "producer.override.")
        from webapp.runtime.pipeline import error_handling

        self._transforming, self._operator = error_handling(cfg, sink=False)
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
            ensure_topic_cached(with_admin_overrides(self.context.kafka_config, self.config), self.topic,
                                self.topic_partitions, self.topic_replication)
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
        skipped = pipeline.skip_counter(self.context.spark)
        df = self.context.spark.range(0, n, 1, n).mapInArrow(pipeline.wrap(parse, self.topic, now_ms, skipped),
                                                             pipeline.spark_schema())
        try:
            produced = pipeline.produce(df, self.topic, self.context.kafka_config, self.config,
                                        producer_config=self.producer_overrides,
                                        partitions=self.topic_partitions, replication_factor=self.topic_replication)
        except KafkaIOError as e:
            raise ConnectException(str(e)) from e
        pipeline.record_skipped(self.context.metrics, skipped.value)
        return produced

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
        if not at_eof or (split.end is None and not sample.endswith(b"\n")
                          and not self._quiet.quiet(split.filename)):
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
        if cut > last_nl and split.end is None and not self._quiet.quiet(split.filename):
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


#: seconds a followed file must stay unchanged, as the task sees it (size and modification time, timed on
#: the monotonic clock: ``file_watcher.QuietFiles``), before its unterminated last line is read (a file
#: that does not end in a newline still has all its rows read; a live writer is waited for)
PARTIAL_LINE_QUIET_SECONDS = 2.0


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
