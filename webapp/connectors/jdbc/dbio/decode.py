"""Decoding (sink): JsonConverter envelopes → wire-form columns, in the Python worker.

Owns :func:`decode_batch` (each envelope cut to its payload by the planned schema
prefix and parsed by pyarrow's JSON reader; non-finite floats, bytes and Decimal
fixed after parsing) and :func:`decodable`.

Must not import anything of this project (see :mod:`webapp.connectors.jdbc.dbio`).
"""
from __future__ import annotations

from typing import Any, Mapping, Sequence

__all__ = ["decodable", "decode_batch"]


# --------------------------------------------------------------------------------------
# Decoding (sink): JsonConverter envelopes -> wire-form columns, in the worker
# --------------------------------------------------------------------------------------
_PARSE_TYPES = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "float32": "float32",
                "float64": "float64", "boolean": "bool_", "string": "string", "date": "int32", "time": "int32",
                "timestamp": "int64"}


def decodable(kinds: Sequence[str]) -> bool:
    """Whether :func:`decode_batch` handles columns of these kinds (all but nested JSON-as-text)."""
    return all(k in _PARSE_TYPES or k == "bytes" or k.startswith("decimal:") for k in kinds)


def _parse_type(kind: str):
    import pyarrow as pa

    # bytes and Decimal travel as base64 strings in the JSON and are decoded after parsing
    return getattr(pa, _PARSE_TYPES[kind])() if kind in _PARSE_TYPES else pa.string()


def _planned(arr, prefixes) -> list[bool]:
    """Per value: null, or starts with one of ``prefixes`` (any value when ``prefixes`` is empty/None)."""
    if not prefixes:
        return [True] * len(arr)
    heads = tuple(p.encode("utf-8") for p in prefixes)
    return [v is None or v.startswith(heads) for v in arr.to_pylist()]


def _decode_side(arr, mask: list[bool], prefixes, fields: Sequence[Sequence[str]], primitive: bool, what: str):
    """Parse the envelopes of ``arr`` where ``mask`` holds; return one wire-form column per ``fields`` entry.

    ``fields``: ``[(output name, field name, kind)]``; for a ``primitive`` schema a
    single entry whose value is the payload itself. Rows outside ``mask`` are null.
    A value starting with a known schema part (``prefixes``) is cut to
    ``{"payload":...}`` first, so the schema is not parsed again for every record.

    Raises:
        ValueError: ``[jdbc] ...`` when a record is not valid JSON or does not match
            the planned schema (as ``from_json`` in FAILFAST mode would).
    """
    import base64
    import io

    import pyarrow as pa
    import pyarrow.json as pj

    n = len(arr)
    cuts = [(p.encode("utf-8"), len(p.encode("utf-8")) + 1) for p in (prefixes or [])]
    lines, rows = [], []
    for i, v in enumerate(arr.to_pylist()):
        if not mask[i] or v is None:
            continue
        for head, cut in cuts:
            if v.startswith(head):
                v = b"{" + v[cut:]
                break
        lines.append(v)
        rows.append(i)
    if primitive:
        payload = _parse_type(fields[0][2])
    else:
        payload = pa.struct([pa.field(f, _parse_type(k)) for _, f, k in fields])
    if lines:
        buf = b"\n".join(lines)
        try:
            table = pj.read_json(io.BytesIO(buf), read_options=pj.ReadOptions(use_threads=False,
                                                                             block_size=len(buf) + 1),
                                 parse_options=pj.ParseOptions(explicit_schema=pa.schema([("payload", payload)]),
                                                               unexpected_field_behavior="ignore"))
            parsed = table.column("payload").combine_chunks()
        except pa.ArrowInvalid as e:
            # JsonConverter (Jackson) writes NaN and infinities as the strings "NaN", "Infinity",
            # "-Infinity", which Arrow's reader refuses in a float column: read such a batch in Python
            parsed = _parse_non_finite(lines, payload, primitive)
            if parsed is None:
                raise ValueError(f"[jdbc] a record {what} does not match the planned schema: {e}") from None
        if len(parsed) != len(lines):
            raise ValueError(f"[jdbc] {len(lines)} record {what}s gave {len(parsed)} rows")
    else:
        parsed = pa.array([], payload)
    # row i of the batch -> row of ``parsed`` (null: not decoded)
    where = [None] * n
    for j, i in enumerate(rows):
        where[i] = j
    take = pa.array(where, pa.int64())
    children = [parsed] if primitive else parsed.flatten()  # flatten: a null payload nulls every field
    out = []
    for (_, field, kind), col in zip(fields, children):
        col = col.take(take)
        if kind == "bytes" or kind.startswith("decimal:"):
            try:
                col = pa.array([None if x is None else base64.b64decode(x, validate=True) for x in col.to_pylist()],
                               pa.binary())
            except ValueError as e:
                raise ValueError(f"[jdbc] a record {what} holds bad base64 in {field or 'its payload'}: {e}") from None
        out.append(col)
    return out


_NON_FINITE = {"NaN": float("nan"), "Infinity": float("inf"), "-Infinity": float("-inf")}


def _parse_non_finite(lines: list, payload_type, primitive: bool):
    """Parse ``{"payload":...}`` lines in Python, reading ``"NaN"``/``"Infinity"``/``"-Infinity"`` in float fields.

    The slow path of :func:`_decode_side` for batches Arrow's reader refused; ``None`` when the
    payload type has no float field or a line still does not fit (the caller then reports it).
    """
    import json

    import pyarrow as pa
    import pyarrow.types as pt

    fields = [payload_type] if primitive else [payload_type.field(i).type for i in range(payload_type.num_fields)]
    if not any(pt.is_floating(t) for t in fields):
        return None

    def value(v, t):
        if pt.is_floating(t) and isinstance(v, str):
            return _NON_FINITE[v]  # KeyError: any other string is not a float
        return v

    try:
        payloads = [json.loads(line)["payload"] for line in lines]
        if primitive:
            return pa.array([value(p, payload_type) for p in payloads], payload_type)
        names = [payload_type.field(i).name for i in range(payload_type.num_fields)]
        cols = [pa.array([None if p is None else value(p.get(n), t) for p in payloads], t)
                for n, t in zip(names, fields)]
        mask = pa.array([p is None for p in payloads], pa.bool_())
        return pa.StructArray.from_arrays(cols, names=names, mask=mask)
    except (ValueError, KeyError, TypeError, AttributeError, pa.ArrowException):
        return None


def decode_batch(batch, plan: Mapping[str, Any]):
    """A raw Kafka batch (``kafka_offset``, ``key``, ``value``) → the input :func:`write_partition` takes.

    ``plan``: ``value_prefixes`` / ``key_prefixes`` (schema parts planned, or None),
    ``value_fields`` (``[(column, field, kind)]``), ``key_fields`` and
    ``key_primitive`` (a one-entry list when the key schema is not a struct),
    ``key_string`` (StringConverter keys: the key bytes are the value). Output
    columns: ``__offset``, ``__tombstone``, ``__planned`` and the ``v<i>`` / ``k<i>``
    columns named in the field lists.

    Raises:
        ValueError: a planned record does not decode (see :func:`_decode_side`).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    values, keys = batch.column("value"), batch.column("key")
    planned = _planned(values, plan.get("value_prefixes"))
    if plan.get("key_prefixes"):
        planned = [a and b for a, b in zip(planned, _planned(keys, plan["key_prefixes"]))]
    names = ["__offset", "__tombstone", "__planned"]
    cols = [batch.column("kafka_offset"), values.is_null(), pa.array(planned, pa.bool_())]
    if plan.get("value_fields"):
        names += [c for c, _, _ in plan["value_fields"]]
        cols += _decode_side(values, planned, plan.get("value_prefixes"), plan["value_fields"], False, "value")
    if plan.get("key_string"):
        names.append(plan["key_string"])
        cols.append(pc.if_else(pa.array(planned, pa.bool_()), keys.cast(pa.string()), pa.nulls(len(keys), pa.string())))
    elif plan.get("key_fields"):
        names += [c for c, _, _ in plan["key_fields"]]
        cols += _decode_side(keys, planned, plan.get("key_prefixes"), plan["key_fields"],
                             bool(plan.get("key_primitive")), "key")
    return pa.RecordBatch.from_arrays(cols, names=names)
