"""The file sink's in-process path: decode a partition's JsonConverter payloads with pyarrow and write parquet.

Owns the pieces :class:`~.sink_task.FileSinkTask` hands to the engine's worker
processes (or threads) when a batch runs without Spark: the wire Arrow schema
of a flat Connect schema (:func:`_local_arrow_schema`), one partition's read →
decode → ``stage/part-<index>.parquet`` (:func:`_sink_piece`), and cutting the
payloads out of the envelopes with Arrow kernels (:func:`_decode_payloads`).
Anything it cannot decode returns None and the task takes the Spark path.

Must not touch: the commit of staged files or offsets (the task does), Spark,
the metadata store, the web layer. Imported by reference into worker processes:
keep it free of module-level state.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

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
