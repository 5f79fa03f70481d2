"""Reading (source): one query's rows as Arrow record batches in wire form.

Owns :func:`read_rows` (PostgreSQL through ``COPY ... TO STDOUT`` CSV where every
column allows it, else a server-side cursor; MySQL/MariaDB through an unbuffered
cursor).

Must not import anything of this project (see :mod:`webapp.connectors.jdbc.dbio`).
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from .connection import connect
from .wire import _decimal_array_to_wire, _decimal_ps, arrow_wire_type, to_wire_array

__all__ = ["read_rows"]


# --------------------------------------------------------------------------------------
# Reading (source)
# --------------------------------------------------------------------------------------
_COPY_KINDS = frozenset(("int16", "int32", "int64", "float32", "float64", "boolean", "string", "date", "timestamp"))


def _copy_decimal(kind: str) -> bool:
    return kind.startswith("decimal:") and 0 < _decimal_ps(kind)[0] <= 38


class _CopyStream:
    """A file-like ``read(n)`` over a psycopg ``Copy``'s chunks (for pyarrow's streaming CSV reader)."""

    def __init__(self, copy):
        self._it = iter(copy)
        self._buf = bytearray()
        self.closed = False

    def read(self, n: int = -1) -> bytes:
        while n < 0 or len(self._buf) < n:
            try:
                self._buf += next(self._it)
            except StopIteration:
                break
        if n < 0 or n >= len(self._buf):
            out, self._buf = bytes(self._buf), bytearray()
        else:
            out = bytes(self._buf[:n])
            del self._buf[:n]
        return out

    def readable(self) -> bool:
        return True

    def close(self) -> None:
        self.closed = True


def _read_copy(params, sql: str, args, names, kinds, schema):
    """PostgreSQL fast path: ``COPY (sql) TO STDOUT`` as CSV, parsed by pyarrow in C++ (no per-row Python)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pacsv

    types = {}
    for n, k in zip(names, kinds):
        if k.startswith("decimal:"):
            types[n] = pa.decimal128(*_decimal_ps(k))
        else:
            types[n] = {"date": pa.date32(), "timestamp": pa.string()}.get(k, arrow_wire_type(k))
    conn = connect(params)
    try:
        with conn.cursor().copy(f"COPY ({sql}) TO STDOUT WITH (FORMAT csv)", list(args)) as cp:
            reader = pacsv.open_csv(
                pa.PythonFile(_CopyStream(cp), mode="r"),
                read_options=pacsv.ReadOptions(column_names=list(names), block_size=4 << 20),
                parse_options=pacsv.ParseOptions(ignore_empty_lines=False),  # one NULL column = an empty line
                convert_options=pacsv.ConvertOptions(column_types=types, null_values=[""], strings_can_be_null=True,
                                                     quoted_strings_can_be_null=False, true_values=["t"],
                                                     false_values=["f"]))
            for batch in reader:
                cols = []
                for arr, k in zip(batch.columns, kinds):
                    if k == "date":
                        arr = arr.view(pa.int32())
                    elif k == "timestamp":
                        ts = pc.replace_substring_regex(arr, r"\+00$", "").cast(pa.timestamp("us"))
                        arr = pc.divide(pc.floor_temporal(ts, unit="millisecond").view(pa.int64()), 1000)
                    elif k.startswith("decimal:"):
                        arr = _decimal_array_to_wire(arr)
                    cols.append(arr)
                yield pa.RecordBatch.from_arrays(cols, schema=schema)
        conn.commit()
    finally:
        conn.close()


def read_rows(params: Mapping[str, Any], sql: str, args: Sequence[Any], names: Sequence[str],
              kinds: Sequence[str], chunk: int = 10_000) -> Iterator[Any]:
    """Run ``sql`` and yield ``pyarrow.RecordBatch``es of at most ``chunk`` rows in wire form.

    Reads with a server-side cursor (PostgreSQL named cursor, MySQL unbuffered
    ``SSCursor``) so memory stays bounded by ``chunk`` whatever the result size.
    Columns are named ``names`` and typed by :func:`arrow_wire_type` of ``kinds``.

    Raises:
        RuntimeError: ``[source] ...`` with the database error.
    """
    import pyarrow as pa

    schema = pa.schema([pa.field(n, arrow_wire_type(k)) for n, k in zip(names, kinds)])
    if params["dialect"] == "postgresql" and all(k in _COPY_KINDS or _copy_decimal(k) for k in kinds):
        yield from _read_copy(params, sql, args, names, kinds, schema)
        return
    conn = connect(params)
    try:
        if params["dialect"] == "postgresql":
            cur = conn.cursor(name="raftconnect_read")
            cur.itersize = chunk
        else:
            import pymysql.cursors

            cur = conn.cursor(pymysql.cursors.SSCursor)
        try:
            cur.execute(sql, list(args))
            while True:
                rows = cur.fetchmany(chunk)
                if not rows:
                    break
                cols = list(zip(*rows))
                yield pa.RecordBatch.from_arrays([to_wire_array(list(c), k) for c, k in zip(cols, kinds)],
                                                 schema=schema)
                del rows, cols
        except Exception as e:
            if isinstance(e, (pa.ArrowException,)):
                raise
            raise RuntimeError(f"[source] query failed: {e}") from e
        finally:
            cur.close()
        conn.commit()
    finally:
        conn.close()
