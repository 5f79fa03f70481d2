"""The file sink task: reads its partitions' offset ranges from Kafka and writes each batch as files.

Owns :class:`FileSinkTask` — its assignment (partitions p with ``p % N == i``),
planning the value schema from a peek, the Spark passes (single pass, cached
pass, the SMT / tolerance / DLQ pass), staging under ``path/_staging/`` and the
commit: fsync, then rename into ``path`` with deterministic names
(``<topic>+<partition>+<start>-<last>.<ext>``), so ``path`` only ever holds
complete files. The in-process path without Spark is :mod:`.sink_local`.

About 700 lines, most of them the one class: its passes share the staging and
commit protocol, and splitting them would spread that protocol over modules.

Must not touch: the source's code, config validation beyond its own start checks
(:mod:`.connectors`), the metadata store (offsets go back in ``BatchResult``),
the web layer.
"""
from __future__ import annotations

import functools
import glob
import json
import os
import re
import shutil
import uuid

from webapp.plugin import AbstractConfig, ConnectException, merge_errors, raise_if_errors
from webapp.runtime import file_access
from webapp.runtime.sink_task import PartitionDone, SinkTask

from .config import _STAGING, _converter_errors
from .connectors import FileSinkConnector
from .sink_local import _local_arrow_schema, _sink_piece

_SCHEMA_PREFIX = '{"schema":'
_PART_RE = re.compile(r"^part-(\d+)")


class FileSinkTask(SinkTask):
    """Consumes its topic-partitions batch by batch and writes each batch as files.

    Its assignment, offsets and batch loop are :class:`~webapp.runtime.sink_task.SinkTask`'s; each
    topic of a batch (:meth:`put_topic`): read up to ``batch.max.rows`` records (split over the assigned
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
        errors = merge_errors(cd.validate(cfg), _converter_errors(cfg))
        raise_if_errors(errors, "FileSinkTask")
        conf = AbstractConfig(cd, cfg)
        self.path = os.path.abspath(cfg["path"])
        file_access.check(self.path)  # before anything is created there; again before each batch's writes
        self.format = conf.get_string("format") or "parquet"
        self.schemas_enable = conf.get_bool("value.converter.schemas.enable")
        self.batch_ms = max(1, conf.get_long("batch.max.ms"))
        self.sample_rows = max(1, conf.get_int("schemaless.sample.rows"))
        self.compression = conf.get_string("parquet.compression") or "snappy"
        self.start_sink(conf.get_list("topics"), conf.get_int("batch.max.rows"))
        self._schemaless: dict[str, dict] = {}
        self._stage_prefix = f"{self.context.task_id.connector}-{self.context.task_id.task}-"
        os.makedirs(os.path.join(self.path, _STAGING), exist_ok=True)
        for stale in glob.glob(os.path.join(self.path, _STAGING, glob.escape(self._stage_prefix) + "*")):
            shutil.rmtree(stale, ignore_errors=True)
        if self.context.spark is None:
            from webapp.runtime.spark import get_spark_session

            self.context.spark = get_spark_session()

    def before_batch(self) -> None:
        """Check the path again: a symbolic link swapped in since start fails the task before any write."""
        file_access.check(self.path)

    def put_topic(self, topic: str, ranges: list) -> list[PartitionDone]:
        """Write one topic's ranges as files (:meth:`_sink_topic`); what each partition read came to."""
        return [PartitionDone(r.partition, r.count, r.next_offset) for r in self._sink_topic(topic, ranges)]

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

    def _plan(self, topic: str, ranges):
        """(Connect schema, envelope prefixes or None), _FALLBACK, or None when nothing to read."""
        from webapp.runtime.converters import SchemaConversionError, merge_connect_schemas

        peeked, saw = self.peek(ranges, 100 if self.schemas_enable else self.sample_rows,
                                timeout=min(10.0, self.batch_ms / 1000.0), skip_nulls=True)
        values = [r.value for r in peeked]
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

        if not self.peek(ranges, 1, timeout=min(10.0, self.batch_ms / 1000.0), skip_nulls=True)[1]:
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
                    sent = pipeline.produce_dlq(out, self.context.kafka_config, self.producer_overrides)
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


_FALLBACK = object()
_NO_FIELDS = {"type": "struct", "optional": False, "fields": [{"field": "value", "type": "string", "optional": True}]}


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
