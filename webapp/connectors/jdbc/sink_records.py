"""The JDBC sink's per-record pieces: envelopes, the transform stage, the write functions.

Owns reading a JsonConverter envelope's schema (``_envelope_schema`` and its
whole-JSON fallback, nested-field refusal), ``_TransformSpec`` (what a worker needs to
decode, transform, route and refuse records in one Python stage) and the
``mapInArrow`` functions the sink task runs in Spark or on the engine
(``_make_read_write_fn``, ``_make_write_fn``, ``_make_transform_write_fn``), which call
:mod:`.dbio` to write.

Must not touch: planning tables or offsets (:mod:`.sink_task`); the database beyond
what :mod:`.dbio` does.
"""
from __future__ import annotations

import dataclasses
import json
import logging
from dataclasses import dataclass
from typing import Any, Mapping

from . import dbio

__all__ = ["SINK_TASK_CLASS"]

log = logging.getLogger(__name__)


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


def _peeked_batch(topic: str, peeked: list):
    """The driver's peeked records (:class:`~webapp.runtime.sink_task.PeekedRecord`) as a batch of ``READ_SCHEMA_WITH_METADATA`` (what the workers read)."""
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
            return dbio.decode._decode_side(arr, m, prefixes, self.value_fields, False, "value")

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
            children = [dbio.wire_to_logical(c, k).cast(self.payload_type.field(j).type)
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
        :func:`dbio.write_routed_partition`); error rows are appended to ``dlq_rows`` (original key,
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
                    arrays.append(dbio.logical_to_wire(value.field(name), kind))
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
                return {col: dbio.logical_to_wire(key.field(name), kind) for col, name, kind in self.key_fields}
            col, _, kind = self.key_fields[0]
            return {col: dbio.logical_to_wire(key, kind)}
        idx = pc.index_in(good.column("kafka_offset"), value_set=raw.column("kafka_offset"))
        keys = raw.column("key")
        if self.key_mode == "string":
            return {"k0": keys.take(idx).cast(pa.string())}
        picked = keys.take(idx)
        mask = [v is not None for v in picked.to_pylist()]
        primitive = len(self.key_fields) == 1 and self.key_fields[0][1] is None
        cols = dbio.decode._decode_side(picked, mask, self.key_prefixes, self.key_fields, primitive, "key")
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

    from webapp.kafka.spark_io import record_produce_function

    if not rows:
        return
    fn = record_produce_function(topic, conf, key_col="key", headers_col="headers", timestamp_col="timestamp")
    for _ in fn(iter(pa.concat_tables(rows).to_batches())):
        pass


def _make_transform_write_fn(params: Mapping[str, Any], plans: Mapping[str, Any], connector: str, spans: list,
                             reader, spec: _TransformSpec, dlq_topic: str, dlq_conf: Mapping[str, Any] | None):
    """mapInArrow function: partition ``i`` reads ``spans[i]``, transforms and writes it with its offset."""
    write_routed = dbio.write_routed_partition
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


def _make_read_write_fn(params: Mapping[str, Any], plan: Mapping[str, Any], spans: list, reader, decode):
    """mapInArrow function: Spark partition ``i`` reads ``spans[i]`` from Kafka, decodes and writes it."""
    write_partition, decode_batch = dbio.write_partition, dbio.decode_batch
    params, plan, decode = dict(params), dict(plan), dict(decode)

    def read_write(batches):
        from webapp.runtime.engine import partition_index

        index = partition_index()
        decoded = (decode_batch(b, decode) for b in reader(batches))
        yield from write_partition(decoded, params=params, plan=plan, ranges=spans, partition_index=index)

    return read_write


def _make_write_fn(params: Mapping[str, Any], plan: Mapping[str, Any], spans: list):
    """mapInArrow function: Spark partition ``i`` writes the records of ``spans[i]`` (see dbio.write_partition)."""
    write_partition = dbio.write_partition
    params, plan = dict(params), dict(plan)

    def write(batches):
        from webapp.runtime.engine import partition_index

        index = partition_index()
        yield from write_partition(batches, params=params, plan=plan, ranges=spans, partition_index=index)

    return write
