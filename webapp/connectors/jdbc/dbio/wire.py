"""Column kinds ⇄ Arrow wire form ⇄ logical Arrow types (the JsonConverter payload forms).

Owns the wire form of each kind (see :mod:`webapp.connectors.jdbc.dbio`), Decimal's
two's-complement bytes computed without rounding, and the logical types
(Timestamp, Date, Decimal) the transforms see.

Must not import anything of this project (see :mod:`webapp.connectors.jdbc.dbio`).
"""
from __future__ import annotations

import datetime as _dt
import decimal as _decimal

__all__ = ["arrow_wire_type", "to_wire_array", "from_wire_array", "wire_to_logical", "logical_to_wire"]


# Decimal arithmetic without rounding (the default context keeps only 28 digits)
_EXACT = _decimal.Context(prec=_decimal.MAX_PREC, Emax=_decimal.MAX_EMAX, Emin=_decimal.MIN_EMIN)


# --------------------------------------------------------------------------------------
# Kinds <-> Arrow
# --------------------------------------------------------------------------------------
def _decimal_ps(kind: str) -> tuple[int, int]:
    _, p, s = kind.split(":")
    return int(p), int(s)


def arrow_wire_type(kind: str):
    """The Arrow type of a kind's wire form (see module docstring)."""
    import pyarrow as pa

    return {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
            "float32": pa.float32(), "float64": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
            "bytes": pa.binary(), "date": pa.int32(), "time": pa.int32(), "timestamp": pa.int64(),
            }.get(kind, pa.binary() if kind.startswith("decimal:") else pa.string())


def _decimal_array_to_wire(arr):
    """decimal128 Arrow array → binary array of 16-byte big-endian two's-complement unscaled values."""
    import numpy as np
    import pyarrow as pa

    n = len(arr)
    bufs = arr.buffers()
    data = np.frombuffer(bufs[1], dtype=np.uint8, count=16 * (arr.offset + n))[16 * arr.offset:].reshape(n, 16)
    offsets = np.arange(0, 16 * (n + 1), 16, dtype=np.int32)
    validity = None if arr.null_count == 0 else pa.array(arr.is_valid()).buffers()[1]
    return pa.Array.from_buffers(pa.binary(), n, [validity, pa.py_buffer(offsets.tobytes()),
                                                  pa.py_buffer(np.ascontiguousarray(data[:, ::-1]).tobytes())],
                                 null_count=arr.null_count)


def _decimal_to_wire(values: list, precision: int, scale: int):
    import pyarrow as pa

    if precision <= 38:
        try:
            arr = pa.array(values, pa.decimal128(max(precision, 1), scale))
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            arr = None
        if arr is not None:
            return _decimal_array_to_wire(arr)
    out = []
    for v in values:
        if v is None:
            out.append(None)
            continue
        unscaled = int(_decimal.Decimal(v).scaleb(scale, _EXACT).to_integral_value(context=_EXACT))
        out.append(unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True))
    return pa.array(out, pa.binary())


def to_wire_array(values: list, kind: str):
    """Arrow array of ``values`` (as the DB driver returned them) in the kind's wire form."""
    import pyarrow as pa
    import pyarrow.compute as pc

    if kind in ("int8", "int16", "int32", "int64", "float32", "float64", "bytes"):
        if kind == "bytes":
            values = [bytes(v) if isinstance(v, (memoryview, bytearray)) else v for v in values]
        return pa.array(values, arrow_wire_type(kind))
    if kind == "boolean":
        try:
            return pa.array(values, pa.bool_())
        except (pa.ArrowInvalid, pa.ArrowTypeError):  # MySQL TINYINT(1) / BIT(1)
            return pa.array([None if v is None else bool(int.from_bytes(v, "big") if isinstance(v, bytes) else v)
                             for v in values], pa.bool_())
    if kind == "string":
        try:
            return pa.array(values, pa.string())
        except (pa.ArrowInvalid, pa.ArrowTypeError):
            return pa.array([None if v is None else (v.decode("utf-8", "replace") if isinstance(v, bytes) else str(v))
                             for v in values], pa.string())
    if kind.startswith("decimal:"):
        return _decimal_to_wire(values, *_decimal_ps(kind))
    if kind == "date":
        return pa.array(values, pa.date32()).view(pa.int32())
    if kind == "time":
        if any(isinstance(v, _dt.timedelta) for v in values):  # PyMySQL gives TIME as timedelta
            us = pa.array(values, pa.duration("us")).view(pa.int64())
        else:
            us = pa.array(values, pa.time64("us")).view(pa.int64())
        return pc.divide(us, 1000).cast(pa.int32())
    if kind == "timestamp":
        aware = next((v.tzinfo is not None for v in values if v is not None), False)
        arr = pa.array(values, pa.timestamp("us", tz="UTC" if aware else None))
        arr = pc.floor_temporal(arr, unit="millisecond")
        return pc.divide(arr.view(pa.int64()), 1000)
    return pa.array([None if v is None else str(v) for v in values], pa.string())


def from_wire_array(arr, kind: str, dialect: str) -> list:
    """Python values for the DB driver from a wire-form Arrow array (inverse of :func:`to_wire_array`)."""
    import pyarrow as pa

    if kind.startswith("decimal:"):
        scale = _decimal_ps(kind)[1]
        return [None if b is None else _decimal.Decimal(int.from_bytes(b, "big", signed=True)).scaleb(-scale, _EXACT)
                for b in arr.to_pylist()]
    if kind == "date":
        return arr.cast(pa.int32()).view(pa.date32()).to_pylist()
    if kind == "time":
        return arr.cast(pa.int32()).view(pa.time32("ms")).to_pylist()
    if kind == "timestamp":
        tz = "UTC" if dialect == "postgresql" else None
        return arr.cast(pa.int64()).view(pa.timestamp("ms", tz=tz)).to_pylist()
    return arr.to_pylist()


def wire_to_logical(arr, kind: str):
    """A wire-form Arrow array as the transforms' logical Arrow type (see :mod:`webapp.runtime.transforms`).

    Timestamp int64 ms → ``timestamp[ms, UTC]``, Date int32 days → ``date32``,
    Decimal big-endian bytes → ``decimal128(p, s)`` (precision 1..38); every other
    kind is returned as is (Time stays int32 milliseconds).

    Raises:
        ValueError: a Decimal whose precision is outside 1..38 (no ``decimal128``).
    """
    import pyarrow as pa

    if kind == "timestamp":
        return arr.cast(pa.int64()).view(pa.timestamp("ms", tz="UTC"))
    if kind == "date":
        return arr.cast(pa.int32()).view(pa.date32())
    if kind.startswith("decimal:"):
        p, s = _decimal_ps(kind)
        p = p or 38  # no precision parameter: Connect's default
        if not 0 < p <= 38:
            raise ValueError(f"[jdbc] Decimal precision {p} cannot be transformed (1..38 only)")
        return pa.array(from_wire_array(arr, kind, ""), pa.decimal128(p, s))
    return arr


def logical_to_wire(arr, kind: str):
    """The inverse of :func:`wire_to_logical`, for a column of kind ``kind`` (casts to the kind's wire type).

    Raises:
        pyarrow.ArrowInvalid: a value does not fit the kind (e.g. an int64 into int32).
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    t = arr.type
    if kind == "timestamp":
        if pa.types.is_timestamp(t):
            ms = pc.floor_temporal(arr, unit="millisecond").cast(pa.timestamp("ms", tz=t.tz), safe=False)
            return ms.view(pa.int64())
        return arr.cast(pa.int64())
    if kind == "date":
        return arr.cast(pa.date32()).view(pa.int32()) if pa.types.is_date(t) else arr.cast(pa.int32())
    if kind == "time":
        if pa.types.is_time(t):
            return arr.cast(pa.time32("ms"), safe=False).view(pa.int32())
        return arr.cast(pa.int32())
    if kind.startswith("decimal:"):
        if pa.types.is_decimal(t):
            p, s = _decimal_ps(kind)
            return _decimal_array_to_wire(arr.cast(pa.decimal128(p or 38, s)))
        return arr.cast(pa.binary())
    return arr.cast(arrow_wire_type(kind))
