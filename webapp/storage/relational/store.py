"""The relational metadata store: configs, statuses, topics, switch support, the writer lease.

Owns :class:`RelationalMetadataStore` (see the package docstring for its consistency, fencing and
lease rules) and its connections on a runtime Django alias; its offsets are
:class:`~webapp.storage.relational.offsets.RelationalOffsets`, their group commit
:class:`~webapp.storage.relational.group_commit.OffsetGroupCommit`. Must not import the web layer.
"""
from __future__ import annotations

import random
import threading
import time
import uuid
from collections import deque
from collections.abc import Iterator
from typing import Any, Callable, TypeVar

from tenacity import Retrying, retry_if_exception, stop_after_attempt, wait_random
from django.db import DatabaseError, IntegrityError, InterfaceError, OperationalError, connections, transaction

from webapp.plugin import SourceOffset, partition_key
from webapp.states import TargetState

from ..base import (
    KINDS, TARGET_STATES, AlreadyExists, ConnectorRecord, ConnectorSummary, FenceCheck, LeaseLost, MetadataStore,
    NameSnapshot, NotFound, StoreUnavailable, check_fence, empty_statuses,
)
from .databases import database_settings, redact_url
from .group_commit import OffsetGroupCommit
from .offsets import RelationalOffsets, key_hash

__all__ = ["FenceCheck", "RelationalMetadataStore", "close_retired_connections", "lock_conflict"]

#: aliases of closed stores, the newest 256, and how many were ever retired: each thread that still
#: holds a connection on one closes it at the end of its next request (:func:`close_retired_connections`)
_retired: deque[str] = deque(maxlen=256)
_retired_total = 0
_retired_lock = threading.Lock()
_retired_seen = threading.local()  # .total: _retired_total when this thread last looked


def close_retired_connections(**_signal: Any) -> None:
    """Close this thread's connections of stores closed since it last looked (``request_finished`` receiver).

    A store's connections are kept between requests (``CONN_MAX_AGE``, :mod:`.databases`), one per
    thread that used it; :meth:`RelationalMetadataStore.close` can close only its own thread's, and
    once its alias is unregistered Django no longer closes the others. A REST thread lives as long
    as the node, so without this each closed store would keep a server connection per such thread.
    Costs one thread-local read per request unless a store was closed since.
    """
    seen = getattr(_retired_seen, "total", 0)
    if seen == _retired_total:
        return
    with _retired_lock:
        total = _retired_total
        recent = list(_retired)[-(total - seen):]
    _retired_seen.total = total
    for alias in recent:
        _drop_own_connection(alias)


def _drop_own_connection(alias: str) -> None:
    """Close and forget this thread's connection on ``alias``, if it has one. Never raises."""
    conn = getattr(connections._connections, alias, None)
    if conn is None:
        return
    try:
        conn.close()
    except Exception:  # noqa: BLE001 - a broken connection is as good as closed; must not hide the real error
        pass
    try:
        delattr(connections._connections, alias)
    except AttributeError:
        pass


T = TypeVar("T")


#: attempts in all of a write that meets a deadlock or lock-wait timeout (:meth:`RelationalMetadataStore._retrying`)
_CONFLICT_ATTEMPTS = 5
#: the random wait before each attempt after a conflict, seconds (low, high)
_CONFLICT_WAIT_S = (0.002, 0.05)


def lock_conflict(exc: BaseException) -> bool:
    """Whether ``exc`` is a deadlock or lock-wait timeout after which the transaction may simply run again."""
    if not isinstance(exc, OperationalError):
        return False
    cause = exc.__cause__ or exc
    code = cause.args[0] if getattr(cause, "args", None) else None
    # Db2's CLI driver puts the state in the message only (SQL0911N deadlock or lock timeout: 40001)
    return (code in (1213, 1205) or getattr(cause, "sqlstate", None) in ("40P01", "40001")
            or "SQLSTATE=40001" in str(cause))



def _status_dict(row: Any) -> dict[str, Any]:
    return {"state": row.state, "trace": row.trace, "worker_id": row.worker_id, "generation": row.generation}



class RelationalMetadataStore(RelationalOffsets, MetadataStore):
    """Metadata in a PostgreSQL or MySQL/MariaDB database (see module docstring).

    Args:
        name: the store's configured name (``pg``, ``mysql``, ...).
        url: ``postgresql://user[:password]@host:port/db`` or ``mysql://...``.
        fence: fencing check for worker writes (see module docstring); ``None``
            accepts every write (only for tools and tests without a cluster).

    Attributes:
        alias: the Django database alias this store registered (unique per instance).
        backend: ``postgresql`` or ``mysql``.
        safe_url: ``url`` with its password redacted.

    Call :meth:`prepare` once before the first use of a new database, and
    :meth:`close` when done (it unregisters the alias).
    Errors: :class:`ValueError` for a URL that is not a relational store URL.
    """

    def __init__(self, name: str, url: str, fence: FenceCheck | None = None):
        self.name = name
        self.safe_url = redact_url(url)
        self._settings = self.settings_for_url(url)
        self._password = str(self._settings.get("PASSWORD") or "")
        self.backend = self.backend_for_engine(self._settings["ENGINE"])
        self.fence = fence
        self._term: int | None = None
        # Two transactions at a time: one being built while the other is in the server. Each fenced
        # upsert costs the server a JSON parse and a locking read of the lease whatever its size, and
        # costs this process a round trip's hand-offs between threads, so fewer, larger ones do more per
        # CPU; the callers in flight are as many either way, so the rate does not need more of them.
        # 32 committing threads (benchmarks/stores, in-process): MySQL/MariaDB 11.1-11.6 thousand
        # commits/s with two against 9.0-10.9 with four; PostgreSQL 10.9-11.2 thousand with two against
        # 8.9-9.6 with four (server CPU per commit 63 against 83-92 µs).
        self._group = OffsetGroupCommit(self, max_flushes=2)
        #: the statement of ``_fenced_upsert`` (``None``: none for this backend), made on first use
        self._fenced_sql: str | None | bool = False
        #: whether Django's backend can upsert (``INSERT ... ON CONFLICT``); ``False`` on Oracle
        self.upsert = self.backend != "oracle"
        self.alias = f"metadata_{uuid.uuid4().hex[:12]}"
        self._aliases: list[str] = []
        self._lock = threading.Lock()
        self._register(self.alias, self._settings)

    # Hooks for plugin packages that reuse this store on another Django backend
    # (webapp/storage/db2.py, and third-party plugins): URL → settings, engine → backend name, the
    # lease check's shared row lock per backend, whether prepare() creates the database,
    # the health check's no-op query.
    #: ``SELECT ... <lock>`` of the writer-lease check, per backend (see module docstring).
    LEASE_LOCKS: dict[str, str] = {"postgresql": "FOR SHARE", "mysql": "LOCK IN SHARE MODE",
                                   # Oracle has no shared row lock: there the lease check serializes writers.
                                   "oracle": "FOR UPDATE"}
    #: backends whose database :meth:`prepare` creates when missing (others: the schema is the user's own).
    CREATES_DATABASE = ("postgresql", "mysql")
    #: the no-op query of :meth:`ping` where plain ``SELECT 1`` is not SQL the backend accepts.
    PING_SQL: dict[str, str] = {"oracle": "SELECT 1 FROM DUAL"}
    #: the length of a JSON array column, per backend (a Django ``Func`` template), so that
    #: :meth:`connector_summaries` counts task configs in the database instead of fetching them; a
    #: backend not named here (Oracle, plugins) fetches the task configs and counts them in Python.
    JSON_ARRAY_LENGTH_SQL: dict[str, str] = {"postgresql": "jsonb_array_length(%(expressions)s)",
                                             "mysql": "JSON_LENGTH(%(expressions)s)"}

    @classmethod
    def settings_for_url(cls, url: str) -> dict[str, Any]:
        """Django ``DATABASES`` entry for ``url`` (default: :func:`database_settings`)."""
        return database_settings(url)

    @classmethod
    def backend_for_engine(cls, engine: str) -> str:
        """Backend name (a key of :attr:`LEASE_LOCKS`) for a Django ``ENGINE``."""
        return next(b for b in ("postgresql", "oracle", "mysql") if b in engine)

    def __repr__(self) -> str:
        return f"{type(self).__name__}(name={self.name!r}, url={self.safe_url!r})"

    # ------------------------------------------------------------ connections
    def _register(self, alias: str, cfg: dict[str, Any]) -> None:
        # configure_settings fills Django's defaults (and insists on a "default" entry).
        full = connections.configure_settings({"default": {"ENGINE": "django.db.backends.dummy"}, alias: dict(cfg)})
        with self._lock:
            connections.settings[alias] = full[alias]
            self._aliases.append(alias)

    def _unregister(self, alias: str) -> None:
        global _retired_total
        _drop_own_connection(alias)
        with _retired_lock:
            _retired.append(alias)
            _retired_total += 1
        with self._lock:
            connections.settings.pop(alias, None)
            if alias in self._aliases:
                self._aliases.remove(alias)

    def close(self) -> None:
        """Close this thread's connection and unregister the store's Django aliases. Never raises.

        Connections other threads opened on the alias close when those threads
        end (Django keeps connections per thread); the store is unusable afterwards.
        """
        for alias in list(self._aliases):
            self._unregister(alias)

    def _unavailable(self, exc: BaseException) -> StoreUnavailable:
        detail = " ".join(str(exc).split()) or type(exc).__name__
        if self._password:
            detail = detail.replace(self._password, "***")
        try:  # the connection may be unusable now; the next call reconnects
            connections[self.alias].close()
        except Exception:  # noqa: BLE001
            pass
        return StoreUnavailable(f"metadata store {self.name!r} ({self.backend} at {self.safe_url}) "
                                f"is unavailable: {detail}")

    def _call(self, fn: Callable[[], T]) -> T:
        try:
            return fn()
        except (OperationalError, InterfaceError) as exc:
            raise self._unavailable(exc) from None

    def _check_fence(self, connector: str, task: int | None, worker_id: str | None, generation: int, *,
                     seq: int | None = None) -> None:
        check_fence(self.fence, connector, task, worker_id, generation, seq=seq)

    def _locked_connector(self, name: str):
        from ..models import Connector

        row = Connector.objects.using(self.alias).select_for_update().filter(name=name).first()
        if row is None:
            raise NotFound(f"Connector {name} not found")
        return row

    def _lease(self) -> None:
        """Check the writer lease inside the caller's transaction (see module docstring)."""
        from ..models import LEASE_ID, WriterLease

        table = connections[self.alias].ops.quote_name(WriterLease._meta.db_table)
        lock = self.LEASE_LOCKS[self.backend]
        with connections[self.alias].cursor() as cur:
            cur.execute(f"SELECT term, read_only FROM {table} WHERE id = %s {lock}", [LEASE_ID])
            row = cur.fetchone()
        term, read_only = (int(row[0]), bool(row[1])) if row else (0, False)
        if read_only:
            raise LeaseLost(f"metadata store {self.name!r} is read-only: the cluster switched to another store")
        if term != (self._term or 0):
            raise LeaseLost(f"metadata store {self.name!r} was claimed by the leader of term {term} "
                            f"(this writer holds term {self._term or 0}); retry through the current leader")

    def _atomic_write(self, fn: Callable[[], T], *, retry_integrity: bool = False) -> T:
        """``fn()`` in one transaction that checks the writer lease first; errors as :meth:`_call`.

        A transaction the server chose as a deadlock victim (InnoDB error 1213,
        PostgreSQL 40P01) or that timed out waiting for a lock (1205) had no
        effect, so it is run again: up to 5 attempts with a short random wait.
        ``retry_integrity`` also retries a unique-key clash with a concurrent
        insert (imports, which delete and re-insert a name's rows).
        """
        def run() -> T:
            with transaction.atomic(using=self.alias):
                self._lease()
                return fn()

        return self._retrying(run, retry_integrity=retry_integrity)

    def _retrying(self, fn: Callable[[], T], *, retry_integrity: bool = False) -> T:
        """``fn()``, run again (up to 5 attempts) after a deadlock or lock-wait timeout, or with
        ``retry_integrity`` a unique-key clash; errors as :meth:`_call`."""
        def conflict(exc: BaseException) -> bool:
            return lock_conflict(exc) or (retry_integrity and isinstance(exc, IntegrityError))

        try:
            # The first attempt runs outside tenacity: its bookkeeping for a call that succeeds was a
            # twentieth of an offset commit's Python time (benchmarks/stores). A conflict there starts
            # the same retries as before, with one attempt fewer left and the same random wait first.
            try:
                return fn()
            except Exception as exc:  # noqa: BLE001 - retried below or raised as it was
                if not conflict(exc):
                    raise
            retrying = Retrying(retry=retry_if_exception(conflict), stop=stop_after_attempt(_CONFLICT_ATTEMPTS - 1),
                                wait=wait_random(*_CONFLICT_WAIT_S), reraise=True)
            time.sleep(random.uniform(*_CONFLICT_WAIT_S))
            return retrying(fn)
        except (OperationalError, InterfaceError) as exc:
            raise self._unavailable(exc) from None

    def claim(self, term: int, *, read_only: bool = False) -> None:
        """Take the writer lease for Raft ``term`` (see module docstring); ``read_only`` blocks every writer.

        Errors: :class:`LeaseLost` when a newer term already claimed the store,
        :class:`StoreUnavailable`.
        """
        from ..models import LEASE_ID, WriterLease

        def write() -> None:
            with transaction.atomic(using=self.alias):
                row = WriterLease.objects.using(self.alias).select_for_update().filter(id=LEASE_ID).first()
                if row is not None and row.term > term:
                    raise LeaseLost(f"metadata store {self.name!r} was already claimed by term {row.term} > {term}")
                WriterLease.objects.using(self.alias).update_or_create(
                    id=LEASE_ID, defaults={"term": term, "read_only": read_only})

        try:
            self._call(write)
        except IntegrityError:  # two first claims raced; the row exists now
            self._call(write)
        self._term = term

    # ------------------------------------------------------------- lifecycle
    def prepare(self) -> None:
        """Create the database if it is missing and apply this app's migrations to it.

        Idempotent; safe to call on every start. Errors: :class:`StoreUnavailable`
        (server unreachable, no privilege to create the database, ...).
        """
        from django.core.management import call_command

        self._call(self._create_database)
        self._call(lambda: call_command("migrate", "storage", database=self.alias, verbosity=0,
                                        interactive=False))

    def ping(self) -> None:
        """``SELECT 1`` on this thread's connection (opened within the 5 s connect timeout if needed).

        Errors: :class:`StoreUnavailable` naming the backend and the redacted URL.
        """
        def select_one() -> None:
            with connections[self.alias].cursor() as cur:
                cur.execute(self.PING_SQL.get(self.backend, "SELECT 1"))
                cur.fetchone()

        try:
            self._call(select_one)
        except DatabaseError as exc:  # e.g. a server shutting down answers with an error, not a closed socket
            raise self._unavailable(exc) from None

    def schema_problems(self) -> list[str]:
        """What keeps this database's schema from being this version's: migrations of the ``storage``
        app not applied yet (by name). Empty when :meth:`prepare` has nothing left to do.

        Errors: :class:`StoreUnavailable`.
        """
        from django.db.migrations.executor import MigrationExecutor

        def plan() -> list[str]:
            executor = MigrationExecutor(connections[self.alias])
            targets = [key for key in executor.loader.graph.leaf_nodes() if key[0] == "storage"]
            return [f"migration {m.app_label}.{m.name} not applied" for m, _ in executor.migration_plan(targets)]

        try:
            return self._call(plan)
        except DatabaseError as exc:
            raise self._unavailable(exc) from None

    def _create_database(self) -> None:
        if self.backend not in self.CREATES_DATABASE:  # Oracle, DB2: the schema is the user's own
            return
        admin = dict(self._settings, NAME="postgres" if self.backend == "postgresql" else "")
        alias = f"{self.alias}_admin"
        self._register(alias, admin)
        try:
            conn = connections[alias]
            db = self._settings["NAME"]
            with conn.cursor() as cur:
                if self.backend == "postgresql":
                    cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", [db])
                    if cur.fetchone() is None:
                        try:
                            cur.execute(f"CREATE DATABASE {conn.ops.quote_name(db)}")
                        except DatabaseError as exc:  # created meanwhile by another process
                            if "already exists" not in str(exc):
                                raise
                else:
                    cur.execute(f"CREATE DATABASE IF NOT EXISTS {conn.ops.quote_name(db)} "
                                "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
        finally:
            self._unregister(alias)

    # ------------------------------------------------------------------ config
    def connector_names(self) -> list[str]:
        """Names of all connectors, sorted; last committed state. Errors: :class:`StoreUnavailable`."""
        from ..models import Connector

        return self._call(lambda: sorted(Connector.objects.using(self.alias).values_list("name", flat=True)))

    def get_connector(self, name: str) -> ConnectorRecord | None:
        """The connector's record, or ``None`` when it does not exist. Errors: :class:`StoreUnavailable`."""
        from ..models import Connector

        row = self._call(lambda: Connector.objects.using(self.alias).filter(name=name).first())
        if row is None:
            return None
        return ConnectorRecord(name=row.name, config=dict(row.config), target_state=row.target_state,
                               tasks=[dict(t) for t in row.task_configs])

    def connector_summaries(self) -> Iterator[ConnectorSummary]:
        """Every connector without its task configs, in name order, from one query; the database
        counts the task configs where :attr:`JSON_ARRAY_LENGTH_SQL` names how. Sorted in Python, as
        :meth:`connector_names` is (a database collation may order names otherwise). Last
        committed state. Errors: :class:`StoreUnavailable` (on the first ``next``).
        """
        from django.db.models import F, Func, IntegerField

        from ..models import Connector

        template = self.JSON_ARRAY_LENGTH_SQL.get(self.backend)
        tasks = Func(F("task_configs"), template=template, output_field=IntegerField()) if template else "task_configs"
        rows = self._call(lambda: list(
            Connector.objects.using(self.alias).values_list("name", "config", "target_state", tasks)))
        rows.sort(key=lambda row: row[0])
        for name, config, target_state, count in rows:
            yield ConnectorSummary(name, config, target_state, (count or 0) if template else len(count))

    def put_connector_config(self, name: str, config: dict[str, str], *, target_state: str | None = None,
                             create_only: bool = False) -> bool:
        """Create or replace a connector's config in one transaction; ``True`` when it was created.

        ``target_state`` applies on create (default STARTED) and, when given, on
        update; task configs and statuses are kept. Errors: :class:`AlreadyExists`
        with ``create_only``, :class:`ValueError` for an unknown target state,
        :class:`StoreUnavailable`.
        """
        from ..models import Connector

        if target_state is not None and target_state not in TARGET_STATES:
            raise ValueError(f"unknown target state {target_state!r} (one of {', '.join(TARGET_STATES)})")

        def write() -> bool:
            row = Connector.objects.using(self.alias).select_for_update().filter(name=name).first()
            if row is not None:
                if create_only:
                    raise AlreadyExists(f"Connector {name} already exists")
                row.config = dict(config)
                if target_state:
                    row.target_state = target_state
                row.save(using=self.alias, update_fields=["config", "target_state"])
                return False
            Connector.objects.using(self.alias).create(
                name=name, config=dict(config), target_state=target_state or TargetState.STARTED.value, task_configs=[])
            return True

        try:
            return self._atomic_write(write)
        except IntegrityError:  # another writer created it between our read and insert
            if create_only:
                raise AlreadyExists(f"Connector {name} already exists") from None
            return self._atomic_write(write)

    def remove_connector_config(self, name: str) -> None:
        """Delete the connector, its task configs and statuses in one transaction (offsets are kept).

        Errors: :class:`NotFound`, :class:`StoreUnavailable`.
        """
        from ..models import ActiveTopic, Connector, Status

        def write() -> None:
            deleted, _ = Connector.objects.using(self.alias).filter(name=name).delete()
            if not deleted:
                raise NotFound(f"Connector {name} not found")
            Status.objects.using(self.alias).filter(connector=name).delete()
            ActiveTopic.objects.using(self.alias).filter(connector=name).delete()

        self._atomic_write(write)

    def put_target_state(self, name: str, target_state: str) -> None:
        """Set the desired state (one of :data:`~webapp.storage.base.TARGET_STATES`).

        Errors: :class:`NotFound`, :class:`ValueError` for an unknown state, :class:`StoreUnavailable`.
        """
        from ..models import Connector

        if target_state not in TARGET_STATES:
            raise ValueError(f"unknown target state {target_state!r} (one of {', '.join(TARGET_STATES)})")

        def write() -> None:
            updated = Connector.objects.using(self.alias).filter(name=name).update(target_state=target_state)
            if not updated:
                raise NotFound(f"Connector {name} not found")

        self._atomic_write(write)

    def put_task_configs(self, name: str, task_configs: list[dict[str, str]], *, worker_id: str | None,
                         generation: int) -> None:
        """Replace the task configs in one transaction; statuses of tasks beyond the new count are dropped.

        Fenced with ``fence(name, None, worker_id, generation)`` (the connector
        instance) unless ``worker_id`` is ``None`` (the coordinator's own write).
        Errors: :class:`NotFound` (checked first), :class:`FencedWrite`, :class:`StoreUnavailable`.
        """
        from ..models import Status

        new = [dict(t) for t in task_configs]

        def write() -> None:
            row = self._locked_connector(name)
            self._check_fence(name, None, worker_id, generation)
            if row.task_configs != new:
                row.task_configs = new
                row.save(using=self.alias, update_fields=["task_configs"])
                Status.objects.using(self.alias).filter(connector=name, task__gte=len(new)).delete()

        self._atomic_write(write)

    # ------------------------------------------------------------------ status
    def put_status(self, name: str, task: int | None, status: dict[str, Any], *, worker_id: str,
                   generation: int) -> None:
        """Record the status (``state`` and ``trace`` of ``status``) of the connector (``task=None``) or a task.

        One transaction holding the connector's row lock; fenced with
        ``fence(name, task, worker_id, generation)``. Errors: :class:`NotFound`
        (checked first), :class:`FencedWrite`, :class:`StoreUnavailable`.
        """
        from ..models import CONNECTOR_TASK, Status

        def write() -> None:
            self._locked_connector(name)
            self._check_fence(name, task, worker_id, generation)
            Status.objects.using(self.alias).update_or_create(
                connector=name, task=CONNECTOR_TASK if task is None else int(task),
                defaults={"state": status["state"], "trace": status.get("trace"),
                          "worker_id": worker_id, "generation": generation})

        self._atomic_write(write)

    def get_statuses(self, name: str) -> dict[str, Any]:
        """``{"connector": status | None, "tasks": {"<i>": status}}``, a status being
        ``{"state", "trace", "worker_id", "generation"}``; the empty shape for an unknown
        connector. Errors: :class:`StoreUnavailable`.
        """
        from ..models import CONNECTOR_TASK, Status

        rows = self._call(lambda: list(Status.objects.using(self.alias).filter(connector=name).order_by("task")))
        out: dict[str, Any] = {"connector": None, "tasks": {}}
        for row in rows:
            if row.task == CONNECTOR_TASK:
                out["connector"] = _status_dict(row)
            else:
                out["tasks"][str(row.task)] = _status_dict(row)
        return out

    # ------------------------------------------------------------ active topics
    def put_topics(self, name: str, topics: list[str]) -> None:
        """Add active topics in one transaction holding the connector's row lock (so concurrent adds
        cannot clash); ignored when the connector does not exist. Errors: :class:`StoreUnavailable`."""
        from ..models import ActiveTopic, Connector

        wanted = sorted(set(topics))

        def write() -> None:
            if Connector.objects.using(self.alias).select_for_update().filter(name=name).first() is None:
                return
            have = set(ActiveTopic.objects.using(self.alias).filter(connector=name).values_list("topic", flat=True))
            ActiveTopic.objects.using(self.alias).bulk_create(
                [ActiveTopic(connector=name, topic=t) for t in wanted if t not in have])

        if wanted:
            self._atomic_write(write)

    def get_topics(self, name: str) -> list[str]:
        """Active topics of ``name``, sorted. Errors: :class:`StoreUnavailable`."""
        from ..models import ActiveTopic

        return self._call(lambda: sorted(
            ActiveTopic.objects.using(self.alias).filter(connector=name).values_list("topic", flat=True)))

    def reset_topics(self, name: str) -> None:
        """Forget the active topics of ``name``. Errors: :class:`StoreUnavailable`."""
        from ..models import ActiveTopic

        self._atomic_write(lambda: ActiveTopic.objects.using(self.alias).filter(connector=name).delete())

    # ------------------------------------------------------------ switch support
    def connectors_with_statuses(self) -> Iterator[tuple[ConnectorSummary, dict[str, Any]]]:
        """Every connector with its statuses, in name order, from two queries: every status row,
        then :meth:`connector_summaries` (in that order, so a connector deleted in between is not
        listed, and one created in between is listed without statuses, which it has). Each
        connector's statuses are built as the caller reaches it, its tasks in no particular order
        (as the Raft store's). Errors: :class:`StoreUnavailable`.
        """
        from ..models import CONNECTOR_TASK, Status

        rows = self._call(lambda: list(Status.objects.using(self.alias).values_list(
            "connector", "task", "state", "trace", "worker_id", "generation")))
        by_connector: dict[str, list[tuple]] = {}
        for row in rows:
            by_connector.setdefault(row[0], []).append(row)
        del rows
        for summary in self.connector_summaries():
            statuses = empty_statuses()
            tasks = statuses["tasks"]
            for _, task, state, trace, worker_id, generation in by_connector.pop(summary.name, ()):
                status = {"state": state, "trace": trace, "worker_id": worker_id, "generation": generation}
                if task == CONNECTOR_TASK:
                    statuses["connector"] = status
                else:
                    tasks[str(task)] = status
            yield summary, statuses

    def export_name(self, name: str) -> NameSnapshot:
        return self.export_names([name])[0]

    def export_names(self, names: list[str]) -> list[NameSnapshot]:
        """:meth:`export_name` of many names in three queries; snapshots in the order of ``names``.

        Errors: :class:`StoreUnavailable`.
        """
        from ..models import CONNECTOR_TASK, ActiveTopic, Connector, Offset, Status

        def read():
            conns = {r.name: r for r in Connector.objects.using(self.alias).filter(name__in=names)}
            stats = list(Status.objects.using(self.alias).filter(connector__in=names).order_by("task"))
            offs = list(Offset.objects.using(self.alias).filter(connector__in=names).order_by("id"))
            tops = list(ActiveTopic.objects.using(self.alias).filter(connector__in=names).order_by("topic")
                        .values_list("connector", "topic"))
            return conns, stats, offs, tops

        conns, stats, offs, tops = self._call(read)
        out = {n: NameSnapshot(n, None, {"connector": None, "tasks": {}}, []) for n in names}
        for n, row in conns.items():
            out[n].record = ConnectorRecord(name=n, config=dict(row.config), target_state=row.target_state,
                                            tasks=[dict(t) for t in row.task_configs])
        for row in stats:
            if row.task == CONNECTOR_TASK:
                out[row.connector].statuses["connector"] = _status_dict(row)
            else:
                out[row.connector].statuses["tasks"][str(row.task)] = _status_dict(row)
        for row in offs:
            snap = out[row.connector]
            snap.offsets.append(SourceOffset(row.partition, row.offset))
            if row.generation is not None and row.seq is not None:
                snap.offset_commits[row.partition_key] = (row.generation, row.seq)
        for connector, topic in tops:
            out[connector].topics.append(topic)
        return [out[n] for n in names]

    def import_name(self, snapshot: NameSnapshot, kinds: tuple[str, ...] = KINDS) -> None:
        self.import_names([snapshot], kinds)

    def import_names(self, snapshots: list[NameSnapshot], kinds: tuple[str, ...] = KINDS) -> None:
        """:meth:`import_name` of many names in one transaction (deletes, then bulk inserts).

        Errors: :class:`LeaseLost`, :class:`StoreUnavailable`, :class:`ValueError`
        for an unknown target state.
        """
        from ..models import CONNECTOR_TASK, ActiveTopic, Connector, Offset, Status

        names = [s.name for s in snapshots]
        for snap in snapshots:
            if "config" in kinds and snap.record is not None and snap.record.target_state not in TARGET_STATES:
                raise ValueError(f"unknown target state {snap.record.target_state!r} of {snap.name}")

        def write() -> None:
            db = self.alias
            if "config" in kinds:
                Connector.objects.using(db).filter(name__in=names).delete()
                Connector.objects.using(db).bulk_create([
                    Connector(name=s.name, config=dict(s.record.config), target_state=s.record.target_state,
                              task_configs=[dict(t) for t in s.record.tasks])
                    for s in snapshots if s.record is not None])
            if "statuses" in kinds:
                Status.objects.using(db).filter(connector__in=names).delete()
                rows = []
                for s in snapshots:
                    st = s.statuses or {}
                    items = ([(CONNECTOR_TASK, st["connector"])] if st.get("connector") else []) + \
                        [(int(k), v) for k, v in (st.get("tasks") or {}).items() if v]
                    rows += [Status(connector=s.name, task=t, state=v["state"], trace=v.get("trace"),
                                    worker_id=v.get("worker_id") or "", generation=int(v.get("generation") or 0))
                             for t, v in items]
                Status.objects.using(db).bulk_create(rows)
                ActiveTopic.objects.using(db).filter(connector__in=names).delete()
                ActiveTopic.objects.using(db).bulk_create(
                    [ActiveTopic(connector=s.name, topic=t) for s in snapshots for t in sorted(set(s.topics))])
            if "offsets" in kinds:
                Offset.objects.using(db).filter(connector__in=names).delete()
                rows = []
                for s in snapshots:
                    last = {partition_key(o.partition): o for o in s.offsets}
                    order = s.offset_commits or {}
                    rows += [Offset(connector=s.name, key_hash=key_hash(k), partition_key=k,
                                    partition=dict(o.partition), offset=dict(o.offset),
                                    generation=order.get(k, (None, None))[0], seq=order.get(k, (None, None))[1])
                             for k, o in last.items()]
                Offset.objects.using(db).bulk_create(rows)

        self._atomic_write(write, retry_integrity=True)

    def clear(self) -> None:
        """Remove every connector, status and offset in one transaction. Errors: :class:`LeaseLost`, :class:`StoreUnavailable`."""
        from ..models import ActiveTopic, Connector, Offset, Status

        def write() -> None:
            for model in (Connector, Status, Offset, ActiveTopic):
                model.objects.using(self.alias).all().delete()

        self._atomic_write(write)
