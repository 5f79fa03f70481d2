"""The per-record stages of a task's Spark job: converters, transforms, error rows, dead letter queue.

This is how a connector plugs :mod:`webapp.runtime.transforms` and
:mod:`webapp.runtime.errors` into its own Spark job (any connector, not only the
file connectors):

Source connectors — the task has pyarrow tables of rows (one Connect struct
schema) inside a ``mapInArrow`` function::

    pipeline = SourcePipeline.plan(config, arrow_schema, connect_schema, task_id)   # driver
    skipped = pipeline.skip_counter(spark)                # a Spark accumulator
    df = spark.range(...).mapInArrow(pipeline.wrap(read_fn, topic, now_ms, skipped), pipeline.spark_schema())
    pipeline.produce(df, topic, kafka_config, ...)       # JVM encodes key/value; workers produce
    pipeline.record_skipped(metrics, skipped.value)      # task-error-metrics, once the batch is produced

Sink connectors — the task has a :func:`~webapp.kafka.spark_io.read_partitions`
DataFrame read ``with_metadata=True`` and the Connect schema it planned::

    pipeline = SinkPipeline.plan(config, connect_schema_or_None, task_id)   # driver
    out = pipeline.apply(raw)              # JVM decodes (PERMISSIVE), workers transform
    good = out.where(pipeline.is_good()).select(*pipeline.value_columns())   # write these
    pipeline.report_errors(out, kafka_config)   # DLQ + counts, after the write

A sink that reads Kafka in its own Python stage (the JDBC sink) skips ``apply``: it
builds :meth:`SinkPipeline.transform`'s input columns itself and calls it per batch.

Tolerance: with ``errors.tolerance=none`` the first bad record fails the Spark
job ("Tolerance exceeded in error handler"), so the task fails with that trace.
With ``all`` a bad record becomes an *error row* (stage, class, exception,
message, stack trace, original key/value/headers) next to the good rows; the
sink writes the good rows and produces the error rows' original bytes to the
DLQ topic with Kafka's ``__connect.errors.*`` headers. The worker-side
functions import this project (``webapp.runtime``) on Spark's Python workers.

Must not touch the metadata store; only the DLQ producer touches Kafka.
"""
from __future__ import annotations

import logging
import threading
from dataclasses import dataclass
from typing import Any, Callable, Mapping

from webapp.plugin import ConnectException, ConnectorTaskId, merge_errors, raise_if_errors

from .errors import ErrorHandlingConfig, ProcessingError, RetryWithToleranceOperator, Stage, ToleranceExceeded, \
    dlq_headers, validate_error_config
from .transforms.chain import TransformationChain, TransformError, validate_transforms
from .transforms.record import RecordBatch, headers_type

__all__ = ["SourcePipeline", "SinkPipeline", "JSON_CONVERTER", "needs_pipeline"]

log = logging.getLogger(__name__)

JSON_CONVERTER = "org.apache.kafka.connect.json.JsonConverter"
_V, _K, _T, _TS, _H = "__rc_value", "__rc_key", "__rc_topic", "__rc_timestamp", "__rc_headers"
_ERR = ("__rc_err_stage", "__rc_err_class", "__rc_err_exception", "__rc_err_message", "__rc_err_trace")
_DLQ_H = "__rc_dlq_headers"
_CONV_ERR = "__rc_conv_error"
_PAYLOAD = "__rc_payload"
_ENVELOPE_MSG = ('Converting byte[] to Kafka Connect data failed due to serialization error: JsonConverter with '
                 'schemas.enable requires "schema" and "payload" fields and may not contain additional fields. '
                 'If you are trying to deserialize plain JSON data, set schemas.enable=false in your converter '
                 'configuration.')
_PARSE_MSG = "Converting byte[] to Kafka Connect data failed due to serialization error"


def needs_pipeline(config: Mapping[str, str]) -> bool:
    """True when the config asks for transforms, tolerance or a DLQ (else a connector may keep its fast path)."""
    return bool((config.get("transforms") or "").strip()) or \
        (config.get("errors.tolerance") or "none").strip().lower() == "all" or \
        bool((config.get("errors.deadletterqueue.topic.name") or "").strip())


def error_handling(config: Mapping[str, str], *, sink: bool) -> tuple[bool, RetryWithToleranceOperator]:
    """(run the SMT / tolerance pipeline?, the task's :class:`RetryWithToleranceOperator`) for a task config.

    A source's records can only fail in a transformation, so only ``transforms`` takes a source off
    its fast path (and a source has no dead letter queue); a sink also leaves it for
    ``errors.tolerance=all`` or a dead letter queue. Raises ConnectException listing invalid
    ``transforms`` / ``predicates`` / ``errors.*`` keys.
    """
    raise_if_errors(merge_errors(validate_transforms(config), validate_error_config(config, sink=sink)),
                    "transforms / errors")
    cfg = {k: v for k, v in config.items() if sink or k != "errors.deadletterqueue.topic.name"}
    transforming = needs_pipeline(cfg) if sink else bool((cfg.get("transforms") or "").strip())
    return transforming, RetryWithToleranceOperator(ErrorHandlingConfig.from_config(cfg))


def _spark_safe(arrow_schema):
    """The Arrow schema Spark hands/takes for ``arrow_schema`` (e.g. timestamps in µs), and the Spark schema."""
    from pyspark.sql.pandas.types import from_arrow_schema, to_arrow_schema

    spark_schema = from_arrow_schema(arrow_schema)
    return to_arrow_schema(spark_schema, timezone="UTC"), spark_schema


def _json_expr(col, dtype, schema: Mapping[str, Any] | None, schemas_enable: bool):
    """JVM expression: JsonConverter bytes (as string) of ``col`` with Connect ``schema``; null stays null."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    from .converters import _to_wire, envelope_prefix

    wire = _to_wire(col, dtype)
    if isinstance(dtype, (T.StructType, T.MapType, T.ArrayType)):
        payload = F.to_json(wire, {"ignoreNullFields": "false"})
    else:  # to_json takes containers only: encode [x] and strip the brackets
        payload = F.regexp_replace(F.to_json(F.array(wire)), r"^\[|\]$", "")
    if schemas_enable:
        if schema is None:
            payload = F.concat(F.lit('{"schema":null,"payload":'), payload, F.lit("}"))
        else:
            payload = F.concat(F.lit(envelope_prefix(schema)), payload, F.lit("}"))
    return F.when(col.isNull(), F.lit(None).cast("string")).otherwise(payload)


def _known_type(t) -> bool:
    """False when ``t`` is or holds Arrow's null type (a type only the records themselves will tell)."""
    import pyarrow as pa

    if pa.types.is_null(t):
        return False
    if pa.types.is_struct(t):
        return all(_known_type(t.field(i).type) for i in range(t.num_fields))
    if pa.types.is_list(t) or pa.types.is_large_list(t):
        return _known_type(t.value_type)
    if pa.types.is_map(t):
        return _known_type(t.key_type) and _known_type(t.item_type)
    return True


def _raise_intolerable(policy: "_Policy", err: ProcessingError, prefix: str) -> None:
    try:
        RetryWithToleranceOperator(policy.errors).tolerate(err)
    except ToleranceExceeded as e:
        raise RuntimeError(f"[{prefix}] {e}") from None


class _Count:
    """An in-process counter with the accumulator's ``add`` / ``value`` (see :meth:`SourcePipeline.skip_counter`)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.value = 0

    def add(self, n: int) -> None:
        with self._lock:
            self.value += int(n)


@dataclass(frozen=True)
class _Policy:
    errors: ErrorHandlingConfig
    connector: str
    task: int


# --------------------------------------------------------------------------------------
# Source
# --------------------------------------------------------------------------------------
@dataclass
class SourcePipeline:
    """Transforms for a source task's rows; planned in the driver, run on the workers.

    Attributes:
        chain: the configured transformations.
        in_schema: Connect struct schema of the rows the task reads.
        in_arrow: Arrow schema of those rows.
        out: the chain's output for no rows (types and schemas of what is produced).
        arrow_out: Arrow schema of :meth:`transform` results (Spark-compatible): the value (and key),
            plus topic, timestamp and headers only when :attr:`routes`.
        routes: a step sets the topic or the headers (RegexRouter, TimestampRouter, InsertHeader,
            DropHeaders); otherwise every record goes to the task's topic with no headers and the
            timestamp of the producer, and those columns are not carried to the JVM at all.
    """

    chain: TransformationChain
    in_schema: dict
    in_arrow: Any
    out: RecordBatch
    arrow_out: Any
    spark_out: Any
    policy: _Policy
    routes: bool = True

    @classmethod
    def plan(cls, config: Mapping[str, str], arrow_schema, connect_schema: Mapping[str, Any],
             task_id: ConnectorTaskId) -> "SourcePipeline":
        """Parse ``transforms``/``errors.*`` and compute the output types. Raises ConnectException."""
        import pyarrow as pa

        chain = TransformationChain.from_config(config)
        errors = ErrorHandlingConfig.from_config({k: v for k, v in config.items()
                                                  if k != "errors.deadletterqueue.topic.name"})
        value_type = pa.struct([pa.field(f.name, f.type) for f in arrow_schema])
        empty = RecordBatch.empty(value_type=value_type, value_schema=dict(connect_schema))
        try:
            out = chain.output_empty(empty)
        except Exception as e:
            raise ConnectException(f"Transformations cannot be applied to records with schema "
                                   f"{connect_schema.get('name') or 'struct'}: {e}") from e
        from .transforms import DropHeaders, InsertHeader, RegexRouter, TimestampRouter

        routes = any(isinstance(st.transform, (RegexRouter, TimestampRouter, InsertHeader, DropHeaders))
                     for st in chain.steps)
        fields = [pa.field(_V, out.table.schema.field("value").type)]
        if not pa.types.is_null(out.table.schema.field("key").type):
            fields.append(pa.field(_K, out.table.schema.field("key").type))
        if routes:
            fields += [pa.field(_T, pa.string()), pa.field(_TS, pa.int64()), pa.field(_H, headers_type())]
        arrow_out, spark_out = _spark_safe(pa.schema(fields))
        return cls(chain, dict(connect_schema), arrow_schema, out, arrow_out, spark_out,
                   _Policy(errors, task_id.connector, task_id.task), routes)

    def spark_schema(self):
        """Spark ``StructType`` of the ``mapInArrow`` output (for ``mapInArrow(fn, schema)``)."""
        return self.spark_out

    def transform(self, table, topic: str, timestamp_ms: int | None, skipped: Any = None):
        """Worker side: one pyarrow Table of rows → the output table (:attr:`arrow_out`).

        Bad records are skipped (tolerance all, logged if ``errors.log.enable``) and
        added to ``skipped`` (anything with ``add(n)``: see :meth:`skip_counter`), or
        fail the job with ``[source] Tolerance exceeded in error handler: ...``.
        """
        import pyarrow as pa

        from .transforms.record import conform

        n = table.num_rows
        value = pa.StructArray.from_arrays([c.combine_chunks() for c in table.columns],
                                           fields=[pa.field(f.name, f.type) for f in table.schema]) if n else \
            pa.array([], pa.struct([pa.field(f.name, f.type) for f in table.schema]))
        rb = RecordBatch(pa.table({"key": pa.nulls(n), "value": value, "topic": pa.array([topic] * n, pa.string()),
                                   "partition": pa.nulls(n, pa.int32()), "offset": pa.nulls(n, pa.int64()),
                                   "timestamp": pa.array([timestamp_ms] * n, pa.int64()),
                                   "headers": pa.array([[]] * n, headers_type())}),
                         None, self.in_schema, sink=False)
        if self.policy.errors.tolerate_all:
            out, errors = self.chain.apply_tolerant(rb)
            for _, e in errors:
                _raise_intolerable(self.policy, ProcessingError.from_exception(e, Stage.TRANSFORMATION,
                                                                               e.executing_class), "source")
            if errors and skipped is not None:
                skipped.add(len(errors))
        else:
            try:
                out = self.chain.apply(rb)
            except TransformError as e:
                _raise_intolerable(self.policy, ProcessingError.from_exception(e, Stage.TRANSFORMATION,
                                                                               e.executing_class), "source")
                raise
        cols = {_V: conform(out.column("value"), self.arrow_out.field(_V).type)}
        if self.arrow_out.get_field_index(_K) >= 0:
            cols[_K] = conform(out.column("key"), self.arrow_out.field(_K).type)
        if self.routes:
            cols[_T] = out.column("topic")
            cols[_TS] = out.column("timestamp")
            cols[_H] = out.column("headers")
        return pa.table([cols[f.name] for f in self.arrow_out], schema=self.arrow_out) \
            if out.num_rows else self.arrow_out.empty_table()

    def wrap(self, read_fn: Callable, topic: str, timestamp_ms: int | None, skipped: Any = None) -> Callable:
        """A ``mapInArrow`` function: ``read_fn``'s record batches, transformed; the records skipped under
        ``errors.tolerance=all`` are added to ``skipped`` (:meth:`skip_counter`), when given."""
        pipeline = self

        def transformed(batches):
            import pyarrow as pa

            for rb in read_fn(batches):
                out = pipeline.transform(pa.Table.from_batches([rb]), topic, timestamp_ms, skipped)
                for b in out.to_batches():
                    yield b

        return transformed

    @staticmethod
    def skip_counter(spark: Any = None) -> Any:
        """A counter for :meth:`wrap`'s ``skipped``, read as ``.value`` once the batch ran.

        With a SparkSession: a Spark accumulator (the ``mapInArrow`` function runs in
        Spark's Python workers; their additions reach the driver with each finished
        Spark task, before the job's action returns). Without: an in-process counter,
        for a pipeline run on the driver (it does not survive pickling into another
        process). Adding happens only in the tolerant branch, so a counter costs nothing
        when no record fails.
        """
        if spark is not None:
            return spark.sparkContext.accumulator(0)
        return _Count()

    def record_skipped(self, metrics: Any, skipped: int) -> None:
        """Count ``skipped`` records of a produced batch in the task's metrics (a ``TaskMetrics``, or None
        outside a worker): Connect's task-error-metrics ``total-record-errors``, ``total-record-failures``,
        ``total-records-skipped`` and, with ``errors.log.enable``, ``total-errors-logged`` (the workers
        logged each). A source has no dead letter queue. Call it only once the batch was produced: a
        failed batch is read again, and its records would be counted twice."""
        skipped = int(skipped or 0)
        if not skipped:
            return
        if metrics is not None:
            metrics.record_errors(failed=skipped, skipped=skipped,
                                  logged=skipped if self.policy.errors.log_enable else 0)
        log.warning("task %s-%d: %d record(s) failed in a transformation and were skipped (errors.tolerance=all)",
                    self.policy.connector, self.policy.task, skipped)

    def encoded(self, df, config: Mapping[str, str]):
        """``df`` (the ``mapInArrow`` output) as columns value, key, and with :attr:`routes` topic, timestamp,
        headers (JVM-encoded)."""
        from pyspark.sql import functions as F

        schemas_enable = str(config.get("value.converter.schemas.enable", "true")).lower() == "true"
        cols = [_json_expr(F.col(_V), df.schema[_V].dataType, self.out.value_schema, schemas_enable).alias("value")]
        if _K in df.columns:
            key_conv = config.get("key.converter") or JSON_CONVERTER
            if key_conv == JSON_CONVERTER:
                key_schemas = str(config.get("key.converter.schemas.enable", "true")).lower() == "true"
                cols.append(_json_expr(F.col(_K), df.schema[_K].dataType, self.out.key_schema,
                                       key_schemas).alias("key"))
            else:
                cols.append(F.col(_K).cast("string").alias("key"))
        if self.routes:
            cols += [F.col(_T).alias("topic"), F.col(_TS).alias("timestamp"), F.col(_H).alias("headers")]
        return df.select(*cols)

    def produce(self, df, topic: str, kafka_config: Mapping[str, Any], config: Mapping[str, str], *,
                producer_config: Mapping[str, Any] | None = None, partitions: int = 1,
                replication_factor: int = -1) -> int:
        """Encode and produce ``df`` (the ``mapInArrow`` output); topics routed to are created if missing.

        Returns the number of records acknowledged. Raises KafkaIOError.
        """
        from webapp.kafka.spark_io import produce_dataframe

        enc = self.encoded(df, config)
        key_col = "key" if "key" in enc.columns else None
        if not self.routes:
            # one topic, no headers: the producer's bulk loop (per-record topic/headers/timestamp
            # arguments cost about as much as the rest of the job); the record's timestamp is then
            # the producer's, a few milliseconds after the read time the chain saw
            return produce_dataframe(enc.select("value", *([key_col] if key_col else [])), topic, kafka_config,
                                     key_col=key_col, producer_config=producer_config)
        return produce_dataframe(enc, topic, kafka_config, key_col=key_col,
                                 topic_col="topic", headers_col="headers", timestamp_col="timestamp",
                                 producer_config=producer_config,
                                 create_topics={"partitions": partitions, "replication_factor": replication_factor})


# --------------------------------------------------------------------------------------
# Sink
# --------------------------------------------------------------------------------------
def _decode_key(data, schemas_enable: bool):
    from .converters import decode_value

    return decode_value(data, schemas_enable)


@dataclass
class SinkPipeline:
    """Converter (JVM) + transforms (workers) + error rows for a sink task's records.

    Attributes:
        value_schema: Connect schema the values are decoded with (struct), or None
            with ``schemas.enable=false`` (the struct type is then inferred, and the
            transforms see schemaless maps).
        decode_schema: the Connect struct schema used for ``from_json``.
        out: the chain's output for no records (``out.key_schema``/``out.value_schema``:
            the transformed schemas, which decide a JDBC sink's columns).

    :meth:`transform` also runs without Spark: a connector that reads Kafka in its
    own Python stage (the JDBC sink) builds the :meth:`decoded` columns itself
    (``kafka_topic, kafka_partition, kafka_offset, key, value, timestamp, headers``,
    the payload struct of :meth:`payload_type` as ``__rc_payload`` and a converter
    error message or null as ``__rc_conv_error``) and calls it per batch.
    """

    #: columns of :meth:`transform`'s output a connector reads directly: the transformed value,
    #: the (possibly routed) topic, the transformed key (only when the chain sets keys), the
    #: error stage (null for good rows) and the DLQ headers of error rows
    VALUE, TOPIC, KEY, ERROR_STAGE, DLQ_HEADERS = _V, _T, _K, _ERR[0], _DLQ_H
    #: input columns of :meth:`transform`: the decoded payload and the converter error message
    PAYLOAD, CONV_ERROR = _PAYLOAD, _CONV_ERR

    chain: TransformationChain
    value_schema: dict | None
    decode_schema: dict
    schemas_enable: bool
    key_schemas_enable: bool
    decode_keys: bool
    out: RecordBatch
    arrow_out: Any
    spark_out: Any
    policy: _Policy

    @classmethod
    def plan(cls, config: Mapping[str, str], decode_schema: Mapping[str, Any], task_id: ConnectorTaskId,
             schemaless: bool) -> "SinkPipeline":
        """Parse ``transforms``/``errors.*`` and compute output types for values of ``decode_schema``."""
        import pyarrow as pa
        from pyspark.sql.pandas.types import to_arrow_type

        from .converters import connect_to_spark_schema

        chain = TransformationChain.from_config(config)
        errors = ErrorHandlingConfig.from_config(config)
        payload_type = to_arrow_type(connect_to_spark_schema(decode_schema), timezone="UTC")
        value_schema = None if schemaless else dict(decode_schema)
        empty = RecordBatch.empty(value_type=payload_type, value_schema=value_schema, sink=True)
        try:
            out = chain.output_empty(empty)
        except Exception as e:
            raise ConnectException(f"Transformations cannot be applied to this topic's records: {e}") from e
        fields = [pa.field(_V, out.table.schema.field("value").type), pa.field(_T, pa.string()),
                  pa.field("kafka_topic", pa.string()), pa.field("kafka_partition", pa.int32()),
                  pa.field("kafka_offset", pa.int64()), pa.field("timestamp", pa.int64()),
                  pa.field("key", pa.binary()), pa.field("value", pa.binary()),
                  pa.field("headers", headers_type())]
        fields += [pa.field(n, pa.string()) for n in _ERR] + [pa.field(_DLQ_H, headers_type())]
        if _known_type(out.table.schema.field("key").type):  # the chain sets keys of a known type (ValueToKey)
            fields.append(pa.field(_K, out.table.schema.field("key").type))
        arrow_out, spark_out = _spark_safe(pa.schema(fields))
        schemas_enable = str(config.get("value.converter.schemas.enable", "true")).lower() == "true"
        key_schemas = str(config.get("key.converter.schemas.enable", "true")).lower() == "true"
        decode_keys = chain.reads_key and (config.get("key.converter") or JSON_CONVERTER) == JSON_CONVERTER
        return cls(chain, value_schema, dict(decode_schema), schemas_enable, key_schemas, decode_keys, out,
                   arrow_out, spark_out, _Policy(errors, task_id.connector, task_id.task))

    def payload_type(self):
        """Arrow struct type of the decoded payload :meth:`transform` takes (``__rc_payload``)."""
        from pyspark.sql.pandas.types import to_arrow_type

        from .converters import connect_to_spark_schema

        return to_arrow_type(connect_to_spark_schema(self.decode_schema), timezone="UTC")

    # -- JVM: decode --------------------------------------------------------------------
    def decoded(self, raw):
        """``raw`` plus the decoded payload and a converter-error message column (JVM, PERMISSIVE)."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        from .converters import _from_wire, connect_to_spark_schema

        wire = connect_to_spark_schema(self.decode_schema, wire=True)
        text = F.col("value").cast("string")
        corrupt = "__rc_corrupt"
        opts = {"mode": "PERMISSIVE", "columnNameOfCorruptRecord": corrupt}
        if self.schemas_enable:
            parsed = F.from_json(text, T.StructType([T.StructField("payload", wire, True),
                                                     T.StructField(corrupt, T.StringType(), True)]), opts)
            body = parsed.getField("payload")
            keys = F.json_object_keys(text)
            bad_envelope = F.coalesce(~(F.array_contains(keys, "payload") & F.array_contains(keys, "schema")
                                        & (F.size(keys) == 2)), F.lit(True))
            error = F.when(parsed.getField(corrupt).isNotNull(),
                           F.concat(F.lit(_PARSE_MSG + ": malformed JSON or a value that does not match the "
                                          "schema: "), F.substring(parsed.getField(corrupt), 1, 200))) \
                .when(bad_envelope, F.lit(_ENVELOPE_MSG))
        else:
            parsed = F.from_json(text, T.StructType(list(wire.fields) + [T.StructField(corrupt, T.StringType())]),
                                 opts)
            body = parsed
            error = F.when(parsed.getField(corrupt).isNotNull(),
                           F.concat(F.lit(_PARSE_MSG + ": "), F.substring(parsed.getField(corrupt), 1, 200)))
        fields = [_from_wire(body.getField(f["field"]), f).alias(f["field"])
                  for f in self.decode_schema.get("fields", [])]
        is_null = F.col("value").isNull()
        conv_error = F.when(is_null, F.lit(None).cast("string")).otherwise(error)
        payload = F.when(is_null | conv_error.isNotNull(), F.lit(None)).otherwise(F.struct(*fields))
        return raw.select("kafka_topic", "kafka_partition", "kafka_offset", "key", "value", "timestamp", "headers",
                          payload.alias(_PAYLOAD), conv_error.alias(_CONV_ERR))

    # -- workers: transform --------------------------------------------------------------
    def _error_rows(self, table, errors: list[tuple[int, ProcessingError]]):
        import pyarrow as pa

        if not errors:
            return None
        idx = pa.array([i for i, _ in errors], pa.int64())
        src = table.take(idx)
        n = len(errors)
        cols: dict[str, Any] = {
            _V: pa.nulls(n, self.arrow_out.field(_V).type), _T: src.column("kafka_topic"),
            "kafka_topic": src.column("kafka_topic"), "kafka_partition": src.column("kafka_partition"),
            "kafka_offset": src.column("kafka_offset"), "timestamp": src.column("timestamp"),
            "key": src.column("key"), "value": src.column("value"), "headers": src.column("headers")}
        errs = [e for _, e in errors]
        for name, attr in zip(_ERR, ("stage", "executing_class", "exception_class", "message", "stacktrace")):
            cols[name] = pa.array([getattr(e, attr) for e in errs], pa.string())
        hdrs = []
        for (i, e), orig in zip(errors, src.column("headers").to_pylist()):
            extra = dlq_headers(e, self.policy.connector, self.policy.task) if self.policy.errors.dlq_context_headers \
                else []
            hdrs.append((orig or []) + [{"key": k, "value": v} for k, v in extra])
        cols[_DLQ_H] = pa.array(hdrs, headers_type())
        if self.arrow_out.get_field_index(_K) >= 0:
            cols[_K] = pa.nulls(n, self.arrow_out.field(_K).type)
        return pa.table([cols[f.name].cast(f.type) for f in self.arrow_out], schema=self.arrow_out)

    def _report(self, errors: list[tuple[int, ProcessingError]]) -> None:
        for _, e in errors:
            _raise_intolerable(self.policy, e, "sink")

    def transform(self, table):
        """Worker side: one Arrow table of :meth:`decoded` rows → output rows (good rows, then error rows)."""
        import pyarrow as pa
        import pyarrow.compute as pc

        from .transforms.record import conform

        errors: list[tuple[int, ProcessingError]] = []
        conv = table.column(_CONV_ERR).combine_chunks()

        class _Lazy:  # the record coordinates as Python lists, built only when a record failed
            def __init__(self, name):
                self.name, self.values = name, None

            def __getitem__(self, i):
                if self.values is None:
                    self.values = table.column(self.name).to_pylist()
                return self.values[i]

        topics, parts, offs = _Lazy("kafka_topic"), _Lazy("kafka_partition"), _Lazy("kafka_offset")
        for i in pc.indices_nonzero(pc.is_valid(conv)).to_pylist():
            where = {"topic": topics[i], "partition": parts[i], "offset": offs[i]}
            errors.append((i, ProcessingError(Stage.VALUE_CONVERTER, JSON_CONVERTER,
                                              "org.apache.kafka.connect.errors.DataException", conv[i].as_py(),
                                              "", **where)))
        self._report(errors)
        ok_idx = pc.indices_nonzero(pc.is_null(conv))
        good = table if len(ok_idx) == table.num_rows else table.take(ok_idx)  # no copy when none failed
        n = good.num_rows
        key_col, key_schema = pa.nulls(n), None
        if self.decode_keys and n:
            decoded, bad = [], []
            for j, k in enumerate(good.column("key").to_pylist()):
                try:
                    s, v = _decode_key(k, self.key_schemas_enable)
                    key_schema = key_schema or s
                    decoded.append(v)
                except Exception as e:  # noqa: BLE001 - any decoding failure is the record's
                    decoded.append(None)
                    bad.append((j, e))
            for j, e in bad:
                i = ok_idx[j].as_py()
                err = ProcessingError.from_exception(e, Stage.KEY_CONVERTER, JSON_CONVERTER, topic=topics[i],
                                                     partition=parts[i], offset=offs[i])
                self._report([(i, err)])
                errors.append((i, err))
            if bad:  # records whose key failed are not transformed
                keep = [j for j in range(n) if j not in {b for b, _ in bad}]
                decoded = [decoded[j] for j in keep]
                ok_idx = ok_idx.take(pa.array(keep, pa.int64()))
                good = table.take(ok_idx)
            try:
                key_col = pa.array(decoded)
            except (pa.ArrowInvalid, pa.ArrowTypeError):
                key_col = pa.array([None if v is None else str(v) for v in decoded], pa.string())
        rb = RecordBatch(pa.table({"key": key_col, "value": good.column(_PAYLOAD), "topic": good.column("kafka_topic"),
                                   "partition": good.column("kafka_partition"),
                                   "offset": good.column("kafka_offset"), "timestamp": good.column("timestamp"),
                                   "headers": good.column("headers").cast(headers_type()),
                                   "__rc_src": ok_idx.cast(pa.int64())}),
                         key_schema, self.value_schema, sink=True)
        out, terrs = self.chain.apply_tolerant(rb)  # whole batch; per record only if something failed
        t_errors = []
        for j, e in terrs:
            i = ok_idx[j].as_py()
            err = ProcessingError.from_exception(e, Stage.TRANSFORMATION, e.executing_class, topic=topics[i],
                                                 partition=parts[i], offset=offs[i])
            t_errors.append((i, err))
        self._report(t_errors)
        errors += t_errors
        parts_out = []
        if out.num_rows:
            m = out.num_rows
            src = table.select(["kafka_topic", "kafka_partition", "kafka_offset"]).take(out.table.column("__rc_src"))
            cols = {_V: conform(out.column("value"), self.arrow_out.field(_V).type), _T: out.column("topic"),
                    "kafka_topic": src.column("kafka_topic"), "kafka_partition": src.column("kafka_partition"),
                    "kafka_offset": src.column("kafka_offset"), "timestamp": out.column("timestamp"),
                    "key": pa.nulls(m, pa.binary()), "value": pa.nulls(m, pa.binary()),
                    "headers": out.column("headers")}
            for name in _ERR:
                cols[name] = pa.nulls(m, pa.string())
            cols[_DLQ_H] = pa.nulls(m, headers_type())
            if self.arrow_out.get_field_index(_K) >= 0:
                cols[_K] = conform(out.column("key"), self.arrow_out.field(_K).type)
            parts_out.append(pa.table([cols[f.name].cast(f.type) for f in self.arrow_out], schema=self.arrow_out))
        err_table = self._error_rows(table, errors)
        if err_table is not None:
            parts_out.append(err_table)
        return pa.concat_tables(parts_out) if parts_out else self.arrow_out.empty_table()

    def apply(self, raw):
        """The output DataFrame (lazy): :meth:`decoded` then the transforms in ``mapInArrow``.

        Spark partition ``i`` of the result holds the output of partition ``i`` of ``raw``.
        """
        pipeline = self

        def run(batches):
            import pyarrow as pa

            for b in batches:
                for ob in pipeline.transform(pa.Table.from_batches([b])).to_batches():
                    yield ob

        return self.decoded(raw).mapInArrow(run, self.spark_out)

    # -- driver: selecting and reporting -------------------------------------------------
    @staticmethod
    def error_count():
        """Aggregate expression counting error rows (for ``DataFrame.observe``)."""
        from pyspark.sql import functions as F

        return F.count(F.when(F.col(_ERR[0]).isNotNull(), 1)).alias("rc_errors")

    @staticmethod
    def is_good():
        """Filter: rows to write (no error, value not null after the transforms)."""
        from pyspark.sql import functions as F

        return F.col(_ERR[0]).isNull() & F.col(_V).isNotNull()

    def value_columns(self) -> list:
        """Columns to write: the value's fields (struct value) or one column ``value``."""
        from pyspark.sql import functions as F
        from pyspark.sql import types as T

        dt = self.spark_out[_V].dataType
        if isinstance(dt, T.StructType):
            return [F.col(_V).getField(f.name).alias(f.name) for f in dt.fields]
        return [F.col(_V).alias("value")]

    def produce_dlq(self, out, kafka_config: Mapping[str, Any],
                    producer_config: Mapping[str, Any] | None = None) -> int:
        """Produce the error rows of ``out`` (original key, value, headers (+ context)) to the DLQ topic.

        ``producer_config``: the connector's ``producer.override.*`` keys as librdkafka settings
        (applied last, as Connect's DeadLetterQueueReporter takes the connector's producer overrides).
        Returns the number of records produced; 0 when no DLQ topic is configured.
        Raises KafkaIOError.
        """
        from pyspark.sql import functions as F

        from webapp.kafka.spark_io import produce_dataframe

        topic = self.policy.errors.dlq_topic
        if not topic:
            return 0
        rows = out.where(F.col(_ERR[0]).isNotNull()).select("key", "value", F.col(_DLQ_H).alias("headers"),
                                                              "timestamp")
        return produce_dataframe(rows, topic, kafka_config, key_col="key", headers_col="headers",
                                 timestamp_col="timestamp", producer_config=producer_config)
