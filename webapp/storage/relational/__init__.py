"""Relational metadata stores: PostgreSQL, MySQL/MariaDB and Oracle, one implementation on Django's ORM.

Owns turning a store URL (``postgresql://user[:password]@host:port/db``,
``mysql://user[:password]@host:port/db``) into a Django database alias created at
run time, preparing that database (create it if missing, apply this app's
migrations), and implementing :class:`~webapp.storage.base.MetadataStore` on the
tables of :mod:`webapp.storage.models`.

Consistency: every write is one database transaction (``transaction.atomic``) that
locks the connector's row where the write depends on it, so a check (existence,
fencing) and its write commit together or not at all. Reads see the last
committed state of the database.

Fencing: this store cannot see the Raft assignment, so it is given a
``fence(connector, task, worker_id, generation) -> str | None`` callable (for
example a node's ``raft.state.check_fence``) that returns why a write must be
refused, or ``None``. A returned reason raises :class:`FencedWrite` before
anything is written. Writes with ``worker_id=None`` (the coordinator's own) skip
fencing, as in :mod:`webapp.storage.raft`.

Writer lease: a deposed leader could still reach the database, so every write
transaction first reads the single :class:`~webapp.storage.models.WriterLease`
row under a shared lock (``FOR SHARE`` on PostgreSQL, ``LOCK IN SHARE MODE`` on
MySQL/MariaDB) and refuses with :class:`LeaseLost` unless it names the term this
object claimed (:meth:`RelationalMetadataStore.claim`) and is not read-only.
Writers share the lock; a new leader's claim takes it exclusively, so it waits
for writes in flight and every later write of the old term fails. An object that
never claimed may write only while no term was ever claimed (tools, tests). Offset commits
(PostgreSQL, MariaDB >= 10.6, MySQL >= 8.0.4) fold the check into their one autocommit
statement, under the same shared lock (:mod:`.offsets`).

Oracle (``oracle://user:password@host:port/service``) goes through Django's
Oracle backend with python-oracledb in thin mode. It differs in two places:
offsets are replaced (delete, insert) where the others upsert, and the lease
check locks the row exclusively, so writers are serialized. No Oracle server
runs on our machines: the contract suite has not been run against one; the
replace path is exercised on PostgreSQL by the tests.

Errors: connection and operational failures become :class:`StoreUnavailable`
(retryable; messages name the URL with its password redacted, never the
password); other errors are as documented on each method. Passwords never appear
in messages, ``repr`` or logs of this module: use :func:`redact_url`.

Modules: :mod:`.databases` (URLs, Django settings, redaction), :mod:`.store`
(:class:`RelationalMetadataStore`), :mod:`.offsets` (its offsets), :mod:`.group_commit` (the
group commit of offset commits).
"""
from __future__ import annotations

from .databases import SCHEMES, database_settings, redact_url
from .store import FenceCheck, RelationalMetadataStore

__all__ = ["RelationalMetadataStore", "FenceCheck", "SCHEMES", "redact_url", "database_settings"]
