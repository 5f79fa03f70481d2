"""Offsets of a relational store: reads, group-committed commits and operator changes.

Owns the offset rows' SQL: the fenced upsert that checks the writer lease in the statement that
writes (PostgreSQL, MySQL/MariaDB), the checked transaction used elsewhere, removals and resets,
and the commit order of each row. :class:`RelationalOffsets` is a part of
:class:`~webapp.storage.relational.RelationalMetadataStore` (it uses the store's alias, lease,
retries and fence); it must not decide fencing itself.

Commit order: a commit request can outlive its sender's attempt (a member forwards it again after a
leader change while the agent, its attempt timed out, has committed the next batch elsewhere), and
the late copy then lands last. The Raft store refuses it by the task's commit floor
(``ClusterStateMachine._zzzzzzz_commit_offsets``). Here each offset row keeps the generation and the
agent's commit number (``OffsetCommit.seq``) of the commit that wrote it, and a commit of the same
generation with a lower number does not replace it: in the statement that writes (a guarded
``ON CONFLICT ... DO UPDATE ... WHERE`` on PostgreSQL, ``IF()`` per column on MySQL), or after
reading the rows locked in the checked transaction. A partition the late copy names and no later
commit does still takes its offset, which is then the newest of that partition. A row written by an
operator, a store switch or an agent without numbers (``NULL``) is replaced by any commit. A task
restarted in the same agent process (same generation) is covered by its start floor, which the
fence checks (``check_fence(..., seq=)``).
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

import orjson
from django.db import connections

from raftnode.state import late  # the commit-order rule, shared with the Raft store
from webapp.plugin import ConnectorTaskId, SourceOffset, partition_key

from ..base import OffsetCommit, StoreError, fenced_apart

__all__ = ["Entry", "RelationalOffsets", "json_text", "key_hash", "late"]

#: one partition's part of a commit: ``(partition, offset or None to remove it, generation, seq)``; the last
#: two ``None`` for an operator's change (and ``seq`` for an agent that numbers no commits)
Entry = tuple[dict, "dict | None", "int | None", "int | None"]

#: where the MySQL fenced upsert takes its rows, as the hex digits of their JSON text (:meth:`_fenced_upsert`)
_ROWS_HEX = "@rows_hex@"


def json_text(value: Any) -> str:
    """``value`` as JSON text, as ``json.dumps`` reads it back (ASCII only: non-ASCII characters escaped).

    orjson where it gives ASCII output (almost always: offsets are numbers and names), ``json.dumps``
    otherwise or for what orjson refuses (integers beyond 64 bits): the stdlib encoder was a
    twelfth of an offset commit's Python time (benchmarks/stores). ASCII keeps the text safe on a
    MySQL connection whose character set has no 4-byte characters.
    """
    try:
        out = orjson.dumps(value)
    except orjson.JSONEncodeError:
        return json.dumps(value)
    return out.decode() if out.isascii() else json.dumps(value)


def key_hash(key: str) -> str:
    """SHA-256 (hex) of a partition key: the offset row's unique key with its connector."""
    return hashlib.sha256(key.encode("utf-8")).hexdigest()


class RelationalOffsets:
    """The offset methods of :class:`~webapp.storage.relational.RelationalMetadataStore` (see module docstring)."""

    # ----------------------------------------------------------------- offsets
    def get_offsets(self, name: str) -> list[SourceOffset]:
        """Committed offsets of ``name`` (empty when none; kept after the connector is removed).

        Errors: :class:`StoreUnavailable`.
        """
        from ..models import Offset

        rows = self._call(lambda: list(Offset.objects.using(self.alias).filter(connector=name).order_by("id")))
        return [SourceOffset(row.partition, row.offset) for row in rows]

    @staticmethod
    def _offset_rows(entries_by_connector: dict[str, list[Entry]]) -> tuple[list, dict]:
        """``(kept, gone)``: the rows to upsert, ``(connector, key hash, partition key, partition, offset,
        generation, seq)`` tuples in (connector, key hash) order, and ``{connector: [key hash, ...]}`` of
        the partitions to remove; of a key's entries the last wins unless it is older (:func:`late`)
        than the one before."""
        kept: list[tuple[str, str, str, dict, dict, int | None, int | None]] = []
        gone: dict[str, list[str]] = {}
        for name in sorted(entries_by_connector):
            final: dict[str, Entry] = {}
            for entry in entries_by_connector[name]:
                k = partition_key(entry[0])
                held = final.get(k)
                if held is None or not late(entry[2], entry[3], held[2], held[3]):
                    final[k] = entry
            removed = sorted(key_hash(k) for k, e in final.items() if e[1] is None)
            if removed:
                gone[name] = removed
            kept += sorted(((name, key_hash(k), k, dict(p), dict(o), g, s) for k, (p, o, g, s) in final.items()
                            if o is not None), key=lambda row: row[1])
        return kept, gone

    def _commit_offsets_of(self, entries_by_connector: dict[str, list[Entry]]) -> None:
        """Write a group commit's offsets (``{connector: [(partition, offset | None, generation, seq), ...]}``)
        durably, lease checked, each row in commit order (module docstring).

        Where the backend has a fenced upsert (:meth:`_fenced_upsert_sql`) and nothing is removed,
        one autocommit statement does it all (:meth:`_fenced_upsert`): one round trip instead of
        four (BEGIN, the lease check, the upsert, COMMIT). When that statement wrote nothing (the
        lease names another term, is read-only, or was never claimed) the commit runs again as a
        transaction that checks the lease first (:meth:`_atomic_write`), which raises the precise
        :class:`LeaseLost` or, when no term was ever claimed, writes; so does a statement whose every
        row was newer already (PostgreSQL counts no row then). Errors: :class:`LeaseLost`,
        :class:`StoreUnavailable`.
        """
        kept, gone = self._offset_rows(entries_by_connector)
        if kept and not gone and self.upsert and self._fenced_upsert_sql() is not None:
            if self._retrying(lambda: self._fenced_upsert(kept)):
                return
        self._atomic_write(lambda: self._write_offset_rows(kept, gone))

    def _fenced_upsert_sql(self) -> str | None:
        """The statement of :meth:`_fenced_upsert` for this backend, or ``None`` where there is none.

        The rows travel as one JSON array, turned into rows by the server (``jsonb_to_recordset``
        on PostgreSQL, ``JSON_TABLE`` on MariaDB >= 10.6 and MySQL >= 8.0): a ``VALUES`` list of
        five parameters per row cost the client more CPU than the server's work (4.2 ms for 64
        rows, psycopg re-parsing the long query each time). On PostgreSQL the array is a parameter
        of a constant statement. On MySQL it is a hex literal written into the statement where
        :data:`_ROWS_HEX` stands: PyMySQL escapes a string parameter character by character
        (``str.translate``), 7.4 µs per commit for the array against 0.3 µs for ``bytes.hex``, and a
        hex literal needs no escaping at all, whatever the server's ``sql_mode``. Older
        MySQL/MariaDB servers and other backends get ``None``.
        """
        if self._fenced_sql is not False:
            return self._fenced_sql
        from ..models import Offset, WriterLease

        connection = connections[self.alias]
        q = connection.ops.quote_name
        table, lease = q(Offset._meta.db_table), q(WriterLease._meta.db_table)
        columns = ", ".join(q(c) for c in ("connector", "key_hash", "partition_key", "partition", "offset",
                                           "generation", "seq"))
        # seq before generation: MySQL assigns in order, and the guard must read the row's own values
        updated = ("partition_key", "partition", "offset", "seq", "generation")
        gen, seq = q("generation"), q("seq")
        sql: str | None = None
        if self.backend == "postgresql":
            newer = (f"t.{seq} IS NULL OR EXCLUDED.{seq} IS NULL OR t.{gen} IS DISTINCT FROM EXCLUDED.{gen} "
                     f"OR t.{seq} <= EXCLUDED.{seq}")
            sql = (f"INSERT INTO {table} AS t ({columns}) SELECT v.c, v.h, v.k, v.p, v.o, v.g, v.s "
                   f"FROM jsonb_to_recordset(%s::jsonb) AS v (c text, h text, k text, p jsonb, o jsonb, g bigint, "
                   f"s bigint) "
                   f"CROSS JOIN {lease} AS l WHERE l.id = %s AND l.term = %s AND NOT l.read_only "
                   f"ORDER BY v.c, v.h FOR SHARE OF l ON CONFLICT ({q('connector')}, {q('key_hash')}) DO UPDATE SET "
                   + ", ".join(f"{q(c)} = EXCLUDED.{q(c)}" for c in updated) + f" WHERE {newer}")
        elif self.backend == "mysql":
            self._call(connection.ensure_connection)
            if connection.mysql_version >= ((10, 6) if connection.mysql_is_mariadb else (8, 0, 4)):
                # partition and offset travel as JSON text inside the array (one string column each); the
                # array itself as a hex literal put in per statement (_fenced_upsert)
                newer = (f"{seq} IS NULL OR VALUES({seq}) IS NULL OR NOT ({gen} <=> VALUES({gen})) "
                         f"OR {seq} <= VALUES({seq})")
                sql = (f"INSERT INTO {table} ({columns}) SELECT v.c, v.h, v.k, v.p, v.o, v.g, v.s FROM "
                       f"JSON_TABLE(CONVERT(X'{_ROWS_HEX}' USING utf8mb4), '$[*]' "
                       f"COLUMNS (c VARCHAR(255) PATH '$.c', h VARCHAR(64) PATH '$.h', k LONGTEXT PATH '$.k', "
                       f"p LONGTEXT PATH '$.p', o LONGTEXT PATH '$.o', g BIGINT PATH '$.g', "
                       f"s BIGINT PATH '$.s')) AS v "
                       f"JOIN {lease} AS l ON l.id = %s AND l.term = %s AND NOT l.read_only "
                       f"ORDER BY v.c, v.h {self.LEASE_LOCKS[self.backend]} ON DUPLICATE KEY UPDATE "
                       # each column kept unless the row is newer; after seq is set the guard still holds
                       # exactly when it held before (seq <= VALUES(seq) then), so generation follows it
                       + ", ".join(f"{q(c)} = IF({newer}, VALUES({q(c)}), {q(c)})" for c in updated))
        self._fenced_sql = sql
        return sql

    def _fenced_upsert(self, kept: list) -> bool:
        """Upsert ``kept`` (rows of :meth:`_offset_rows`) in one autocommit statement that holds the writer lease.

        ``INSERT INTO offsets SELECT rows JOIN lease WHERE lease is ours FOR SHARE ... ON CONFLICT /
        ON DUPLICATE KEY UPDATE``: the rows are selected only while the lease row names this
        writer's term and is not read-only, and the statement holds the lease row under the same
        shared lock as ``_lease`` until it commits. So, as with the transaction, either the write
        commits before a new leader's ``claim`` (which takes the row exclusively) or it waits for
        that claim and then matches no row (PostgreSQL re-evaluates the condition on the updated row;
        InnoDB's locking read reads the latest committed version). Each conflicting row is replaced
        only where the commit is not older than the row's (module docstring). Returns whether the
        statement counted a row: 0 when the lease did not match, and on PostgreSQL also when every row
        was newer already (it counts an updated row even if unchanged, but not one its ``WHERE`` kept);
        Django's MySQL backend sets ``CLIENT.FOUND_ROWS``, so every matched row counts there. The
        caller then writes through the checked transaction, which tells the two apart.
        """
        from ..models import LEASE_ID, escape_nul_json

        sql = self._fenced_upsert_sql()
        if self.backend == "postgresql":
            rows = [{"c": c, "h": h, "k": k, "p": p, "o": o, "g": g, "s": s} for c, h, k, p, o, g, s in kept]
            text = json_text(rows)  # ASCII: NUL and U+FFFF appear as escapes
            if "\\u0000" in text or "\\uffff" in text:  # jsonb refuses NUL: as PortableJSONField writes it
                rows = [{**r, "p": escape_nul_json(r["p"]), "o": escape_nul_json(r["o"])} for r in rows]
                text = json_text(rows)
        else:
            rows = [{"c": c, "h": h, "k": k, "p": json_text(p), "o": json_text(o), "g": g, "s": s}
                    for c, h, k, p, o, g, s in kept]
        with connections[self.alias].cursor() as cur:
            if self.backend == "postgresql":
                cur.execute(sql, [text, LEASE_ID, self._term or 0])
            else:  # hex digits only: nothing in it is SQL, nor a % for the driver's formatting
                cur.execute(sql.replace(_ROWS_HEX, json_text(rows).encode("utf-8").hex(), 1),
                            [LEASE_ID, self._term or 0])
            return cur.rowcount > 0

    def _write_offset_rows(self, kept: list, gone: dict[str, list[str]]) -> None:
        """Upsert ``kept`` and delete ``gone`` (see :meth:`_offset_rows`) in the caller's transaction.

        A group-committed transaction holds commits of many tasks, usually of as many
        connectors: one statement per connector made its cost grow with the batch (32
        round trips for 32 threads' commits, benchmarks/stores). Rows are written in
        (connector, key) order, so concurrent transactions lock shared rows in one order.
        A row a task commit names is first read (locked where transactions run side by side)
        and kept when it is newer (module docstring).
        """
        from django.db.models import Q

        from ..models import Offset

        def named(pairs) -> Q:  # the rows of these (connector, key hash) pairs
            q = Q()
            for c, h in pairs:
                q |= Q(connector=c, key_hash=h)
            return q

        rows = Offset.objects.using(self.alias)
        numbered = [r for r in kept if r[6] is not None]
        if numbered:
            held = rows.filter(named((r[0], r[1]) for r in numbered))
            if self.upsert:  # concurrent flushes: the newer of two must not be overwritten in between
                held = held.select_for_update()
            stored = {(c, h): (g, s) for c, h, g, s in held.values_list("connector", "key_hash", "generation", "seq")}
            kept = [r for r in kept if not late(r[5], r[6], *stored.get((r[0], r[1]), (None, None)))]
        removed = Q()
        any_removed = bool(gone)
        for name, hashes in gone.items():
            removed |= Q(connector=name, key_hash__in=hashes)
        kept = [Offset(connector=c, key_hash=h, partition_key=k, partition=p, offset=o, generation=g, seq=s)
                for c, h, k, p, o, g, s in kept]
        if any_removed:
            rows.filter(removed).delete()
        if kept and not self.upsert:
            # No INSERT ... ON CONFLICT in Django's backend (Oracle): replace the rows instead. Safe
            # because writers are serialized by the lease row there (FOR UPDATE).
            rows.filter(named((o.connector, o.key_hash) for o in kept)).delete()
            rows.bulk_create(kept)
        elif kept:
            # MySQL's ON DUPLICATE KEY UPDATE takes no conflict target (the unique key is implied).
            unique = ["connector", "key_hash"] if self.backend == "postgresql" else None
            rows.bulk_create(kept, update_conflicts=True, unique_fields=unique,
                             update_fields=["partition_key", "partition", "offset", "generation", "seq"])

    def commit_offsets(self, task_id: ConnectorTaskId, offsets: list[SourceOffset], *, worker_id: str,
                       generation: int) -> None:
        """Atomically store all ``offsets`` of one batch of ``task_id`` (one transaction, one upsert).

        Within a batch the last offset of a partition wins. Fenced with
        ``fence(connector, task, worker_id, generation)``; the connector need not
        exist. Concurrent commits share transactions (:class:`_GroupCommit`): the
        call returns once the transaction holding its offsets committed.
        Errors: :class:`FencedWrite`, :class:`StoreUnavailable`.
        """
        entries = [(o.partition, o.offset, generation, None) for o in offsets]

        self._check_fence(task_id.connector, task_id.task, worker_id, generation)
        self._group.submit(task_id.connector, entries)

    def commit_offsets_many(self, commits: list[OffsetCommit], *, worker_id: str) -> list[StoreError | None]:
        """:meth:`commit_offsets` of many tasks in one group-committed transaction: each commit is fenced
        on its own, with its number against its task's start (a fenced one, or one numbered below the
        start of a later instance of its task at its generation, gets its :class:`FencedWrite` and is
        not written); the others are written together, each row in commit order (module docstring).
        Errors: :class:`StoreUnavailable` for the whole call (none written)."""
        outcomes, passed = fenced_apart(commits, lambda c: self._check_fence(
            c.task_id.connector, c.task_id.task, worker_id, c.generation, seq=c.seq))
        items = [(c.task_id.connector, [(o.partition, o.offset, c.generation, c.seq) for o in c.offsets])
                 for c in passed]
        if items:
            self._group.submit_many(items)
        return outcomes

    def alter_offsets(self, name: str, offsets: list[SourceOffset | tuple[dict, None]]) -> None:
        """Operator change of a stopped connector's offsets in one transaction; an offset of ``None``
        removes the partition. Not fenced (the operator's write; also how a store switch mirrors
        offset commits, hence group-committed like them). Errors: :class:`StoreUnavailable`.
        """
        entries = []
        for item in offsets:
            partition, offset = (item.partition, item.offset) if isinstance(item, SourceOffset) else item
            entries.append((partition, offset, None, None))

        self._group.submit(name, entries)

    def reset_offsets(self, name: str) -> None:
        """Remove every offset of ``name`` (no error when there are none). Errors: :class:`StoreUnavailable`."""
        from ..models import Offset

        self._atomic_write(lambda: Offset.objects.using(self.alias).filter(connector=name).delete())

    def offset_names(self) -> list[str]:
        """Names with committed offsets (deleted connectors included), sorted. Errors: :class:`StoreUnavailable`."""
        from ..models import Offset

        return self._call(lambda: sorted(set(
            Offset.objects.using(self.alias).values_list("connector", flat=True).distinct())))
