"""Writing (sink): one partition's records and its next offset in one database transaction.

Owns the offsets table (``OFFSETS_TABLE``), the fenced offset row (the transaction
locks it and checks it still holds the batch's start offset, else
:class:`StaleOffsetError`), ``_TableWriter`` (multi-row INSERT / upsert / UPDATE /
DELETE statements as literals, values a column cannot hold refused as
:class:`TargetTypeError`), :func:`write_partition` and :func:`write_routed_partition`
(the SMT stage's routed rows, refused rows isolated one by one).

About 520 lines, most of them ``_TableWriter``'s statements per dialect and mode,
kept beside the transaction that runs them.

Must not import anything of this project (see :mod:`webapp.connectors.jdbc.dbio`).
"""
from __future__ import annotations

from typing import Any, Iterator, Mapping, Sequence

from .connection import connect, quote
from .wire import _decimal_ps, from_wire_array

__all__ = ["OFFSETS_TABLE", "StaleOffsetError", "TargetTypeError", "write_partition", "write_routed_partition"]


#: The sink's offsets table in the target database (exactly-once delivery).
OFFSETS_TABLE = "__raftconnect_offsets"


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
