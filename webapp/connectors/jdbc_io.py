"""Database I/O of the JDBC connectors, run on the driver and inside Spark's Python workers.

Owns: connecting to PostgreSQL (psycopg) and MySQL/MariaDB (PyMySQL) from a plain
parameter dict, the column *kinds* that tie a database type to its Connect schema
and its Arrow wire form, :func:`read_rows` (one query → Arrow record batches already
in JsonConverter wire form) and :func:`write_partition` (one Kafka partition's
decoded records → rows in one database transaction together with the sink's
offset). It must not import Django, Spark or anything else of this project: the
connectors register this module with cloudpickle *by value*, so Spark's workers
receive its functions without importing the project.

Column kinds (strings): ``int8 int16 int32 int64 float32 float64 boolean string
bytes date time timestamp`` and ``decimal:<precision>:<scale>``. Wire forms (what
JsonConverter's payload holds, and what the Arrow batches carry): integers and
floats as such, booleans, strings, ``bytes`` as binary (Spark's ``to_json`` writes
base64), Decimal as binary holding the big-endian two's-complement unscaled value,
Date as int32 days, Time as int32 milliseconds of the day, Timestamp as int64
milliseconds since the epoch (UTC).
"""
from __future__ import annotations

import datetime as _dt
import decimal as _decimal
import ipaddress as _ipaddress
import socket as _socket
from typing import Any, Iterator, Mapping, Sequence

__all__ = [
    "OFFSETS_TABLE",
    "connect",
    "quote",
    "arrow_wire_type",
    "to_wire_array",
    "from_wire_array",
    "read_rows",
    "write_partition",
    "write_routed_partition",
    "wire_to_logical",
    "logical_to_wire",
    "decode_batch",
    "StaleOffsetError",
    "TargetTypeError",
    "HostNotAllowed",
    "host_violation",
    "ALLOWED_HOSTS_SETTING",
]

#: The sink's offsets table in the target database (exactly-once delivery).
OFFSETS_TABLE = "__raftconnect_offsets"

_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
# Decimal arithmetic without rounding (the default context keeps only 28 digits)
_EXACT = _decimal.Context(prec=_decimal.MAX_PREC, Emax=_decimal.MAX_EMAX, Emin=_decimal.MIN_EMIN)


#: the worker setting that limits the hosts a JDBC connector may connect to, as messages name it
ALLOWED_HOSTS_SETTING = "raftconnect.jdbc.allowed.hosts (RAFTCONNECT_JDBC_ALLOWED_HOSTS)"


class HostNotAllowed(PermissionError):
    """``connection.url`` names a host (or port) outside ``raftconnect.jdbc.allowed.hosts``; the message says which."""


def _entry(text: str) -> tuple[str, int | None]:
    """``(host pattern, port or None)`` of one allow-list entry: ``host``, ``host:port``, ``*.domain[:port]``,
    an IP, ``[v6]:port`` or a CIDR block (``10.0.0.0/8``, no port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host.lower(), int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        if port.isdigit():
            return host.lower(), int(port)
    return text.lower(), None


def _network(pattern: str):
    try:
        return _ipaddress.ip_network(pattern, strict=False)
    except ValueError:
        return None


def host_violation(host: str, port: int, allowed: Sequence[str] | None) -> str | None:
    """Why a connection to ``host:port`` is not allowed by the entries ``allowed``, or ``None`` when it is.

    ``allowed`` empty or ``None``: every host is allowed (the setting is optional).
    Entries (comma-separated in the setting): a host name matched case-insensitively
    as the URL writes it, ``*.example.com`` for any name under that domain, an IP
    address or a CIDR block; any but a block may end in ``:port`` (``[v6]:port``),
    which then must match too. A name in the URL is resolved only against IP/CIDR
    entries, and then every address it resolves to must be inside one. A name that
    does not resolve matches no IP entry.
    """
    entries = [_entry(e) for e in (allowed or []) if e and e.strip()]
    if not entries:
        return None
    name = (host or "").strip().lower().strip("[]")
    port = int(port)
    literal = _network(name) if name and "/" not in name else None
    addresses = None
    for pattern, want_port in entries:
        if want_port is not None and want_port != port:
            continue
        if pattern.startswith("*."):
            if name.endswith(pattern[1:]) and len(name) > len(pattern) - 1:
                return None
            continue
        net = _network(pattern)
        if net is None:
            if name == pattern:
                return None
            continue
        if literal is not None:
            if literal.network_address in net:
                return None
            continue
        if addresses is None:
            try:
                addresses = {_ipaddress.ip_address(info[4][0].split("%")[0])
                             for info in _socket.getaddrinfo(name, port, proto=_socket.IPPROTO_TCP)}
            except (OSError, ValueError):
                addresses = set()
        if addresses and all(a in net for a in addresses):
            return None
    return (f"Host {host}:{port} of connection.url is not allowed by {ALLOWED_HOSTS_SETTING}; "
            f"allowed: {', '.join(e.strip() for e in allowed if e and e.strip())}")


class StaleOffsetError(RuntimeError):
    """The target database holds a different offset than the batch started from (another writer moved it)."""


class TargetTypeError(ValueError):
    """A record's value that its target column's type cannot hold, found before the database sees it.

    Raised by :class:`_TableWriter` for what a database would refuse with an opaque
    error or, worse, store changed: NaN and infinities in a MySQL/MariaDB FLOAT or
    DOUBLE, a date or timestamp outside years 1..9999 in MySQL/MariaDB, a Decimal with
    more decimal places than its column's scale (the database would round it). The
    sink treats it as the database's ``DataError``: the record is refused (stage
    ``TASK_PUT``), skipped with ``errors.tolerance=all``, else the task fails naming it.
    """


#: the instants MySQL/MariaDB DATE/DATETIME hold and Python can name: 0001-01-01 .. 9999-12-31 (UTC)
_MYSQL_MIN_DAYS, _MYSQL_MAX_DAYS = -719162, 2932896
_MYSQL_MIN_MS, _MYSQL_MAX_MS = _MYSQL_MIN_DAYS * 86_400_000, (_MYSQL_MAX_DAYS + 1) * 86_400_000 - 1


def connect(params: Mapping[str, Any], autocommit: bool = False):
    """A DB-API connection for ``params`` (``dialect``, ``host``, ``port``, ``database``, ``user``, ``password``).

    PostgreSQL sessions run with ``TimeZone=UTC`` and load uuid/json/jsonb as text;
    MySQL/MariaDB sessions with ``time_zone='+00:00'``, utf8mb4, READ COMMITTED and a
    ``sql_mode`` without ``NO_BACKSLASH_ESCAPES`` (the sink's literals escape with backslashes).

    ``params["allowed_hosts"]`` (the node's ``raftconnect.jdbc.allowed.hosts``, put there by the
    connector on the worker) is checked again here, before every connection, on the driver and on
    Spark's workers alike. Errors: :class:`HostNotAllowed`; the driver's own errors.
    """
    problem = host_violation(params["host"], params["port"], params.get("allowed_hosts"))
    if problem is not None:
        raise HostNotAllowed(problem)
    if params["dialect"] == "postgresql":
        import psycopg
        from psycopg.types.string import TextLoader

        conn = psycopg.connect(host=params["host"], port=int(params["port"]), dbname=params["database"],
                               user=params.get("user") or None, password=params.get("password") or None,
                               autocommit=autocommit, options="-c TimeZone=UTC -c DateStyle=ISO",
                               **dict(params.get("options") or {}))
        for name in ("uuid", "json", "jsonb"):
            conn.adapters.register_loader(name, TextLoader)
        return conn
    import pymysql

    conn = pymysql.connect(host=params["host"], port=int(params["port"]), user=params.get("user") or "root",
                           password=params.get("password") or "", database=params["database"] or None,
                           charset="utf8mb4", autocommit=autocommit, binary_prefix=True,
                           init_command="SET time_zone='+00:00'", **dict(params.get("options") or {}))
    with conn.cursor() as cur:  # no gap locks: concurrent partitions insert their offset rows without deadlocks
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        # the sink renders string literals with backslash escapes (_literals): a server whose sql_mode
        # has NO_BACKSLASH_ESCAPES would read a record's backslash as a plain character and its quote as
        # the end of the literal. Pin the session's mode without it (keeping the server's other modes).
        cur.execute("SELECT @@SESSION.sql_mode")
        modes = [m for m in (cur.fetchone()[0] or "").split(",") if m]
        if "NO_BACKSLASH_ESCAPES" in modes:
            cur.execute("SET SESSION sql_mode = %s", (",".join(m for m in modes if m != "NO_BACKSLASH_ESCAPES"),))
    return conn


def quote(dialect: str, name: str) -> str:
    """``name`` quoted as an identifier; a dotted name is quoted part by part."""
    q = '"' if dialect == "postgresql" else "`"
    return ".".join(q + part.replace(q, q + q) + q for part in name.split("."))


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
    import numpy as np
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


# --------------------------------------------------------------------------------------
# Writing (sink)
# --------------------------------------------------------------------------------------
def _literals(arr, kind: str, style: str):
    """SQL text of every value of a wire-form Arrow array, computed in Arrow (no per-value Python
    except for bytes and Decimal).

    ``style`` ``"mysql"``: SQL literals for a multi-row ``INSERT ... VALUES`` (``NULL``,
    quoted and backslash-escaped strings, ``X'..'`` bytes). ``"copy"``: PostgreSQL
    ``COPY`` text format fields (``\\N`` for null, backslash escapes, no quotes).
    Returns a string array without nulls.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    mysql = style == "mysql"
    null = "NULL" if mysql else "\\N"

    def quoted(text):
        if not mysql:
            return text
        return pc.binary_join_element_wise("'", text, "'", "")

    if kind == "float32" and mysql:
        # the shortest float32 text of the largest floats ("3.4028235e+38") reads as a double just
        # above FLT_MAX, which MySQL/MariaDB refuse for a FLOAT column (error 1264): the exact
        # double of the float32 value names the same float and is in range
        text = arr.cast(pa.float64()).cast(pa.string())
    elif kind in ("int8", "int16", "int32", "int64", "float32", "float64"):
        text = arr.cast(pa.string())
    elif kind == "boolean":
        text = pc.if_else(arr, "1" if mysql else "t", "0" if mysql else "f")
    elif kind == "string":
        text = arr.cast(pa.string())
        if mysql:
            for a, b in (("\\", "\\\\"), ("'", "\\'"), ("\0", "\\0")):
                text = pc.replace_substring(text, a, b)
        else:
            for a, b in (("\\", "\\\\"), ("\t", "\\t"), ("\n", "\\n"), ("\r", "\\r")):
                text = pc.replace_substring(text, a, b)
        text = quoted(text)
    elif kind == "date":
        text = quoted(arr.cast(pa.int32()).view(pa.date32()).cast(pa.string()))
    elif kind == "time":
        text = quoted(arr.cast(pa.int32()).view(pa.time32("ms")).cast(pa.string()))
    elif kind == "timestamp":
        text = quoted(arr.cast(pa.int64()).view(pa.timestamp("ms")).cast(pa.string()))
    elif kind == "bytes":
        text = pa.array([None if b is None else (f"X'{b.hex()}'" if mysql else "\\\\x" + b.hex())
                         for b in arr.to_pylist()], pa.string())
    else:  # decimal
        text = pa.array([None if v is None else str(v) for v in from_wire_array(arr, kind, "")], pa.string())
    return pc.fill_null(text, null)


def _joined(parts, sep: str, prefix: str = "", suffix: str = ""):
    """One string array: ``prefix + sep.join(parts) + suffix`` row by row."""
    import pyarrow.compute as pc

    row = pc.binary_join_element_wise(*parts, sep) if len(parts) > 1 else parts[0]
    if prefix or suffix:
        row = pc.binary_join_element_wise(prefix, row, suffix, "")
    return row


def _chunks(rows, max_bytes: int):
    """Slices of the string array ``rows`` whose total length stays under ``max_bytes`` (at least one row)."""
    import numpy as np
    import pyarrow.compute as pc

    lengths = np.cumsum(pc.binary_length(rows).to_numpy(zero_copy_only=False))
    start, base = 0, 0
    n = len(rows)
    while start < n:
        end = int(np.searchsorted(lengths, base + max_bytes, side="right"))
        end = max(end, start + 1)
        yield rows.slice(start, end - start)
        base = int(lengths[end - 1])
        start = end


def _offset_row(cur, dialect: str, connector: str, topic: str, partition: int):
    t = quote(dialect, OFFSETS_TABLE)
    cur.execute(f"SELECT next_offset FROM {t} WHERE connector = %s AND topic = %s AND kafka_partition = %s "
                "FOR UPDATE", (connector, topic, partition))
    row = cur.fetchone()
    return None if row is None else int(row[0])


def _store_offset(cur, dialect: str, connector: str, topic: str, partition: int, next_offset: int,
                  existed: bool) -> None:
    t = quote(dialect, OFFSETS_TABLE)
    if existed:
        cur.execute(f"UPDATE {t} SET next_offset = %s WHERE connector = %s AND topic = %s AND kafka_partition = %s",
                    (next_offset, connector, topic, partition))
    else:
        cur.execute(f"INSERT INTO {t} (connector, topic, kafka_partition, next_offset) VALUES (%s, %s, %s, %s)",
                    (connector, topic, partition, next_offset))


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


class _TableWriter:
    """Writes wire-form batches of one table plan with an open cursor (inside the caller's transaction).

    ``plan``: ``dialect``, ``table`` (quoted), ``insert_mode``, ``columns``
    (``[[name, kind, source]]``), ``pk``, ``delete_enabled``, ``batch_size`` (see
    :func:`write_partition`); ``topic``/``partition`` fill the ``kafka_*`` sources.
    """

    def __init__(self, cur, plan: Mapping[str, Any], topic: str, partition: int):
        dialect = self.dialect = plan["dialect"]
        self.cur, self.plan, self.topic, self.partition = cur, plan, topic, partition
        cols = self.cols = plan["columns"]
        pk = list(plan["pk"])
        mode = plan["insert_mode"]
        names = [c[0] for c in cols]
        q = lambda n: quote(dialect, n)  # noqa: E731
        table = self.table = plan["table"]
        col_sql = self.col_sql = ", ".join(q(n) for n in names)
        marks = ", ".join(["%s"] * len(names))
        non_pk = [n for n in names if n not in pk]
        if mode == "insert" or not pk:
            write_sql = f"INSERT INTO {table} ({col_sql}) VALUES ({marks})"
            order = names
        elif mode == "upsert":
            if dialect == "postgresql":
                action = ("DO UPDATE SET " + ", ".join(f"{q(n)} = EXCLUDED.{q(n)}" for n in non_pk)) if non_pk \
                    else "DO NOTHING"
                write_sql = (f"INSERT INTO {table} ({col_sql}) VALUES ({marks}) "
                             f"ON CONFLICT ({', '.join(q(n) for n in pk)}) {action}")
            else:
                upd = ", ".join(f"{q(n)} = VALUES({q(n)})" for n in (non_pk or pk[:1]))
                write_sql = f"INSERT INTO {table} ({col_sql}) VALUES ({marks}) ON DUPLICATE KEY UPDATE {upd}"
            order = names
        else:  # update
            write_sql = (f"UPDATE {table} SET " + ", ".join(f"{q(n)} = %s" for n in non_pk) + " WHERE "
                         + " AND ".join(f"{q(n)} = %s" for n in pk))
            order = non_pk + pk
        self.write_sql = write_sql
        self.delete_sql = f"DELETE FROM {table} WHERE " + " AND ".join(f"{q(n)} = %s" for n in pk) if pk else None
        pos = {n: i for i, n in enumerate(names)}
        self.order_idx = [pos[n] for n in order]
        self.identity = self.order_idx == list(range(len(names)))
        self.pk_idx = [pos[n] for n in pk]
        self.batch_size = max(1, int(plan.get("batch_size") or 3000))
        self.use_copy = dialect == "postgresql" and (mode == "insert" or not pk)
        # Fast path: SQL text rendered in Arrow, no per-row Python (MySQL INSERT/upsert, PostgreSQL COPY)
        self.rendered = self.use_copy or (dialect != "postgresql" and mode in ("insert", "upsert"))
        self.mysql_suffix = write_sql[write_sql.index(" ON DUPLICATE KEY UPDATE"):] \
            if " ON DUPLICATE KEY UPDATE" in write_sql else ""
        # values the target types cannot hold, checked before the database sees them (TargetTypeError)
        scales = plan.get("scales") or {}
        mysql = dialect != "postgresql"
        self.checks = [(name, kind, src, scales.get(name)) for name, kind, src in cols
                       if not src.startswith("kafka_")
                       and ((mysql and kind in ("float32", "float64", "date", "timestamp"))
                            or (kind.startswith("decimal:") and scales.get(name) is not None
                                and scales[name] < _decimal_ps(kind)[1]))]

    def _check(self, b) -> None:
        """Raise :class:`TargetTypeError` for the first value of ``b`` its column cannot hold."""
        import pyarrow as pa
        import pyarrow.compute as pc

        for name, kind, src, scale in self.checks:
            arr = b.column(src)
            if kind in ("float32", "float64"):
                bad = pc.invert(pc.is_finite(arr))
                what = f"{'FLOAT' if kind == 'float32' else 'DOUBLE'} holds no NaN or infinity"
            elif kind in ("date", "timestamp"):
                lo, hi = (_MYSQL_MIN_DAYS, _MYSQL_MAX_DAYS) if kind == "date" else (_MYSQL_MIN_MS, _MYSQL_MAX_MS)
                arr = arr.cast(pa.int32() if kind == "date" else pa.int64())
                bad = pc.or_(pc.less(arr, lo), pc.greater(arr, hi))
                what = f"{'DATE' if kind == 'date' else 'DATETIME'} holds years 1 to 9999 only"
            else:
                p, s = _decimal_ps(kind)
                step = 10 ** (s - scale)
                unscaled = [None if v is None else int.from_bytes(v, "big", signed=True) for v in arr.to_pylist()]
                bad = pa.array([v is not None and v % step != 0 for v in unscaled], pa.bool_())
                what = f"its column keeps {scale} decimal places: the database would round it"
            bad = pc.fill_null(bad, False)
            if pc.any(bad).as_py():
                i = pc.index(bad, True).as_py()
                if kind == "timestamp":  # as text: Python's datetime ends at year 9999
                    value = arr.slice(i, 1).view(pa.timestamp("ms")).cast(pa.string())[0].as_py()
                elif kind == "date":
                    value = arr.slice(i, 1).view(pa.date32()).cast(pa.string())[0].as_py()
                else:
                    value = from_wire_array(arr.slice(i, 1), kind, self.dialect)[0]
                raise TargetTypeError(f"column {name!r} cannot hold {value!r} (offset "
                                      f"{b.column('__offset')[i].as_py()}): {what}")

    def _flush(self, kind: str | None, rows: list) -> None:
        cur, bs = self.cur, self.batch_size
        if not rows:
            return
        if kind == "delete":
            for i in range(0, len(rows), bs):
                cur.executemany(self.delete_sql, [[r[j] for j in self.pk_idx] for r in rows[i:i + bs]])
        elif self.use_copy:
            with cur.copy(f"COPY {self.table} ({self.col_sql}) FROM STDIN") as cp:
                for r in rows:
                    cp.write_row(r)
        else:
            for i in range(0, len(rows), bs):
                part = rows[i:i + bs]
                cur.executemany(self.write_sql, part if self.identity else [[r[j] for j in self.order_idx]
                                                                            for r in part])

    def _rows(self, b, offsets) -> list:
        n = b.num_rows
        values = []
        for name, kind, src in self.cols:
            if src == "kafka_topic":
                values.append([self.topic] * n)
            elif src == "kafka_partition":
                values.append([self.partition] * n)
            elif src == "kafka_offset":
                values.append(offsets.to_pylist())
            else:
                values.append(from_wire_array(b.column(src), kind, self.dialect))
        return list(zip(*values)) if values else [()] * n

    def _write_rendered(self, b, offsets) -> None:
        import pyarrow as pa
        import pyarrow.compute as pc

        style = "copy" if self.use_copy else "mysql"
        parts = []
        for name, kind, src in self.cols:
            if src == "kafka_topic":
                arr, kind = pa.array([self.topic] * b.num_rows, pa.string()), "string"
            elif src == "kafka_partition":
                arr, kind = pa.array([self.partition] * b.num_rows, pa.int32()), "int32"
            elif src == "kafka_offset":
                arr, kind = offsets, "int64"
            else:
                arr = b.column(src)
            parts.append(_literals(arr, kind, style))
        if self.use_copy:
            text = _joined(parts, "\t", "", "\n")
            with self.cur.copy(f"COPY {self.table} ({self.col_sql}) FROM STDIN") as cp:
                for piece in _chunks(text, 4 << 20):
                    cp.write(pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(piece)], pa.int32()),
                                                                    piece), "")[0].as_py().encode("utf-8"))
            return
        text = _joined(parts, ",", "(", ")")
        for piece in _chunks(text, 4 << 20):
            values_sql = pc.binary_join(pa.ListArray.from_arrays(pa.array([0, len(piece)], pa.int32()), piece),
                                        ",")[0].as_py()
            self.cur.execute(f"INSERT INTO {self.table} ({self.col_sql}) VALUES {values_sql}{self.mysql_suffix}")

    def write(self, b) -> None:
        """Apply the records of ``b`` (``__offset``, ``__tombstone``, source columns) in offset order."""
        if b.num_rows == 0:
            return
        if self.checks:
            self._check(b)
        offsets = b.column("__offset")
        tomb = b.column("__tombstone").to_pylist()
        if self.rendered and not any(tomb):
            self._write_rendered(b, offsets)
        elif not any(tomb):
            self._flush("write", self._rows(b, offsets))
        else:
            run_kind, run = None, []
            for r, t in zip(self._rows(b, offsets), tomb):
                k = "delete" if t else "write"
                if t and not (self.plan.get("delete_enabled") and self.delete_sql):
                    continue  # tombstones are skipped unless delete.enabled
                if k != run_kind:
                    self._flush(run_kind, run)
                    run_kind, run = k, []
                run.append(r)
            self._flush(run_kind, run)


def _stats(partition: int, first, last, count: int, next_offset, replan: bool):
    import pyarrow as pa

    return pa.RecordBatch.from_pydict({
        "kafka_partition": pa.array([partition], pa.int32()), "first": pa.array([first], pa.int64()),
        "last": pa.array([last], pa.int64()), "count": pa.array([count], pa.int64()),
        "next_offset": pa.array([next_offset], pa.int64()), "replan": pa.array([replan], pa.bool_())})


def _checked_offset(cur, dialect: str, connector: str, topic: str, partition: int, start):
    stored = _offset_row(cur, dialect, connector, topic, partition)
    if stored != start and not (stored is None and start is None):
        raise StaleOffsetError(f"[jdbc] {topic}[{partition}]: the target holds offset {stored}, the batch "
                               f"started at {start}")
    return stored


def write_partition(batches, *, params: Mapping[str, Any], plan: Mapping[str, Any], ranges: Sequence[Any],
                    partition_index: int) -> Iterator[Any]:
    """Write one Kafka partition's records (the Arrow ``batches``) in one transaction; yield one stats batch.

    ``plan`` (built by the sink task on the driver): ``dialect``, ``table`` (quoted),
    ``connector``, ``topic``, ``insert_mode`` (insert/upsert/update), ``columns``
    (``[[name, kind, source]]`` where source is ``"v<i>"``/``"k<i>"`` — an input
    column — or ``"kafka_topic"``/``"kafka_partition"``/``"kafka_offset"``),
    ``pk`` (column names), ``delete_enabled``, ``batch_size``, ``scales`` (optional:
    ``{column: scale}`` of Decimal columns whose table keeps fewer decimal places than
    the records carry; a value that would be rounded is a :class:`TargetTypeError`). Input columns:
    ``__offset`` (long), ``__tombstone`` (bool), ``__planned`` (bool: the record's
    schemas are those planned), then ``v<i>`` / ``k<i>``.

    The transaction first locks this partition's row of :data:`OFFSETS_TABLE`; if it
    holds an offset other than the range's start (``ranges[partition_index]`` =
    ``(topic, partition, start)``; start ``None`` = no row expected) it rolls back and
    raises ``StaleOffsetError``. Records are applied in offset order (runs of
    writes and deletes); processing stops before the first record whose schema was
    not planned. The new next offset is stored in the same transaction.

    Yields:
        One RecordBatch ``(kafka_partition int, first long, last long, count long,
        next_offset long, replan bool)``; ``first``/``last``/``next_offset`` are null
        when nothing was processed.
    """
    import pyarrow.compute as pc

    topic, partition, start = ranges[partition_index]

    def body(cur):
        first = last = None
        count = 0
        replan = False
        writer = _TableWriter(cur, plan, topic, partition)
        for batch in batches:
            if batch.num_rows == 0:
                continue
            planned = batch.column("__planned")
            stop = batch.num_rows
            if not pc.all(planned).as_py():
                stop = pc.index(planned, False).as_py()
                replan = True
            if stop > 0:
                b = batch.slice(0, stop)
                _write_isolating(cur, writer, b, plan["table"], _refused(topic, partition))
                offsets = b.column("__offset")
                if first is None:
                    first = offsets[0].as_py()
                last = offsets[b.num_rows - 1].as_py()
                count += b.num_rows
            if replan:
                break
        return first, last, count, replan

    yield _offset_transaction(params, plan["dialect"], plan["connector"], topic, partition, start, body)


def _offset_transaction(params: Mapping[str, Any], dialect: str, connector: str, topic: str, partition: int,
                        start, body, before_commit=None):
    """One sink transaction for a partition: check its stored offset, ``body(cursor)``, store the new one.

    ``body`` writes and returns ``(first, last, count, replan)`` (offsets consumed, ``last`` None when
    nothing was); ``before_commit()`` runs after it, inside the transaction. Anything raised rolls
    the transaction back. Returns the stats batch of :func:`write_partition`.
    """
    conn = connect(params)
    try:
        cur = conn.cursor()
        stored = _checked_offset(cur, dialect, connector, topic, partition, start)
        first, last, count, replan = body(cur)
        if before_commit is not None:
            before_commit()
        if last is not None:
            _store_offset(cur, dialect, connector, topic, partition, last + 1, stored is not None)
        conn.commit()
    except BaseException:
        try:
            conn.rollback()
        except Exception:
            pass
        raise
    finally:
        conn.close()
    return _stats(partition, first, last, count, None if last is None else last + 1, replan)


def _is_data_error(e: BaseException) -> bool:
    """A refusal of the data itself (DB-API ``DataError``/``IntegrityError``, :class:`TargetTypeError`), not of
    the connection."""
    return isinstance(e, TargetTypeError) or any(c.__name__ in ("DataError", "IntegrityError")
                                                 for c in type(e).__mro__)


def _write_isolating(cur, writer: "_TableWriter", b, key: str, on_row_error) -> None:
    """``writer.write(b)``; if the database refuses the data, find the refused records by halving the batch
    (each attempt behind a savepoint, left half first so records stay in offset order) and report each to
    ``on_row_error(key, offset, error)``, which skips it or raises. ``k`` refused records of ``n`` cost
    about ``2 k log2(n)`` attempts; other errors (connection, ...) propagate at once."""
    def attempt(part):
        cur.execute("SAVEPOINT raftconnect_part")
        try:
            writer.write(part)
        except Exception as e:
            if not _is_data_error(e):
                raise
            cur.execute("ROLLBACK TO SAVEPOINT raftconnect_part")
            cur.execute("RELEASE SAVEPOINT raftconnect_part")
            return e
        cur.execute("RELEASE SAVEPOINT raftconnect_part")
        return None

    def isolate(part) -> None:
        error = attempt(part)
        if error is None:
            return
        if part.num_rows == 1:
            on_row_error(key, part.column("__offset")[0].as_py(), error)
            return
        half = part.num_rows // 2
        isolate(part.slice(0, half))
        isolate(part.slice(half))

    if b.num_rows:
        isolate(b)


def _refused(topic: str, partition: int):
    """``on_row_error`` of the fast path: fail the batch naming the record the table cannot hold."""
    def fail(table: str, offset: int, error: BaseException) -> None:
        # the marker is not on the raise line: Spark's trace shows that line before the message
        text = " ".join(str(error).split())
        message = (f"[jdbc] {table} cannot hold the record at {topic}[{partition}] offset {offset} "
                   "(errors.tolerance=all skips such records, to the dead letter queue if one is set): "
                   f"{type(error).__module__}.{type(error).__name__}: {text}")
        raise RuntimeError(message) from None

    return fail


def write_routed_partition(units, *, params: Mapping[str, Any], plans: Mapping[str, Mapping[str, Any]],
                           connector: str, ranges: Sequence[Any], partition_index: int,
                           before_commit=None, on_row_error=None) -> Iterator[Any]:
    """Write one Kafka partition's *transformed* records to one or more tables, in one transaction.

    ``units`` yields, per consumed batch, ``(groups, first_offset, last_offset, consumed, replan)``:
    ``groups`` a list of ``(plan key, wire batch)`` — the batch in
    :class:`_TableWriter` input form for ``plans[plan key]``; ``first_offset`` /
    ``last_offset`` the lowest / highest Kafka offset consumed (records dropped by a filter or sent to the dead
    letter queue included; None when nothing was consumed); ``consumed`` the number
    of records; ``replan`` true when the partition stops before a record the driver
    did not plan for. ``before_commit()`` (e.g. flushing the dead letter queue
    producer) runs before the commit; an exception from it rolls the batch back.
    With ``on_row_error(plan key, offset, error)``, a batch the database refuses
    (``DataError``/``IntegrityError``: a value out of a column's range, too long, a
    constraint) is split in halves behind savepoints until the refused records are
    found, and each is handed to it: it returns to skip the record (which
    still counts as consumed) or raises to fail the batch.

    The offset check and storage are those of :func:`write_partition`: the stored
    next offset is ``last_offset + 1`` even when no row was written, so a filtered
    or failed record advances the committed offset in the same transaction.

    Yields:
        One stats RecordBatch as :func:`write_partition`.
    """
    dialect = next(iter(plans.values()))["dialect"] if plans else params["dialect"]
    topic, partition, start = ranges[partition_index]

    def body(cur):
        first = last = None
        count = 0
        replan = False
        writers: dict[str, _TableWriter] = {}
        for groups, first_offset, last_offset, consumed, stop in units:
            for key, b in groups:
                w = writers.get(key)
                if w is None:
                    w = writers[key] = _TableWriter(cur, plans[key], plans[key].get("record_topic", topic),
                                                    partition)
                if on_row_error is None:
                    w.write(b)
                else:
                    _write_isolating(cur, w, b, key, on_row_error)
            if last_offset is not None:
                if first is None:
                    first = first_offset
                last = last_offset
                count += consumed
            if stop:
                replan = True
                break
        return first, last, count, replan

    yield _offset_transaction(params, dialect, connector, topic, partition, start, body, before_commit)
