"""The node's metadata store as the rest of the node sees it (:class:`StoreRouter`) and its write gate.

Owns where reads and writes go (the store Raft names active; writes on the leader, under the
store's writer lease), the mirroring marks of a switch in progress (pending names, stripe locks)
and :class:`WriteGate`, which lets a switch hold writes back. Must not run a switch's phases.
"""
from __future__ import annotations

import functools
import threading
import time
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator

from raftnode import RaftNode
from webapp.metrics import OFFSET_COMMIT_SECONDS, STORE_WRITE_SECONDS
from webapp.plugin import ConnectorTaskId, SourceOffset

from ..base import (
    KINDS, ConnectorRecord, ConnectorSummary, ListingRevisions, MetadataStore, NameSnapshot, OffsetCommit, StatusReport, StoreError, StoreUnavailable,
)
from .stores import StoreSet, UnknownStore

__all__ = ["StoreRouter", "WriteGate"]

_STRIPES = 64


@functools.lru_cache(maxsize=256)
def _write_timer(store: str, kind: str):
    """``STORE_WRITE_SECONDS``'s child for ``(store, kind)``, looked up once: ``labels`` takes the
    metric's lock and builds its key on every call, a tenth of an offset commit's Python time
    beside ``OFFSET_COMMIT_SECONDS``'s (benchmarks/stores). Nothing removes these children."""
    return STORE_WRITE_SECONDS.labels(store, kind)


@functools.lru_cache(maxsize=64)
def _offset_commit_timer(store: str):
    """``OFFSET_COMMIT_SECONDS``'s child for ``store``, looked up once (see :func:`_write_timer`)."""
    return OFFSET_COMMIT_SECONDS.labels(store)


class _SharedHold:
    """``WriteGate.shared()``'s context manager; keeps no state of its own, so one serves every thread."""

    __slots__ = ("_gate",)

    def __init__(self, gate: "WriteGate") -> None:
        self._gate = gate

    def __enter__(self) -> None:
        self._gate._enter_shared()

    def __exit__(self, *exc: object) -> None:
        self._gate._exit_shared()


class WriteGate:
    """A shared/exclusive lock that prefers the exclusive side.

    Writes hold it shared for their whole duration; the switch holds it
    exclusive to change where writes go (start mirroring, commit). Not
    re-entrant. Records the longest time any shared acquire waited
    (:attr:`longest_wait`, seconds) — the write stall a switch caused.

    Every write passes through :meth:`shared`, so its way in and out is a
    ``with`` block on one ``threading.Lock`` around attribute arithmetic, with no
    call while the lock is held (but the notify of the last one out while the
    exclusive side waits): CPython may make a thread hand the GIL over at a
    call (its eval breaker), and if that thread holds a lock, the threads after
    it queue on the lock, each blocking and being woken in turn (a lock
    convoy). Through a ``threading.Condition``, whose ``__enter__`` is Python,
    32 writing threads paid ~25 µs of CPU per write for the gate alone, ~2 µs
    each alone (benchmarks/stores). Only writes that find the exclusive side
    held or waited for use the condition.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._cond = threading.Condition(self._lock)
        self._shared = 0
        self._exclusive = False
        self._waiting = 0
        self.longest_wait = 0.0
        self._hold = _SharedHold(self)

    def shared(self) -> "_SharedHold":
        """Hold the gate shared (many holders at once): ``with gate.shared(): ...``.

        A reusable object rather than a ``@contextmanager`` generator: every write takes the gate,
        and the generator's setup was a measurable part of an offset commit (benchmarks/stores)."""
        return self._hold

    def _enter_shared(self) -> None:
        with self._lock:  # nothing called inside: see the class docstring
            if not self._exclusive and not self._waiting:
                self._shared += 1
                return
        self._enter_shared_slow()

    def _enter_shared_slow(self) -> None:
        t0 = time.monotonic()
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1
        waited = time.monotonic() - t0
        if waited > self.longest_wait:
            self.longest_wait = waited

    def _exit_shared(self) -> None:
        with self._lock:
            self._shared -= 1
            if not self._shared and self._waiting:  # an exclusive holder waits for the last one to leave
                self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the gate alone: waits for current shared holders and holds new ones back."""
        with self._cond:
            self._waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            except BaseException:  # interrupted while waiting: writes held back for this one may go in
                self._cond.notify_all()
                raise
            finally:
                self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class StoreRouter(MetadataStore):
    """The node's metadata store: the active store, plus mirroring during a switch (see module docstring).

    Args:
        raft: the local Raft member (which store is active; leadership and term for the lease).
        stores: the node's :class:`StoreSet`.

    Errors: as the active store's, plus :class:`StoreUnavailable` for a write on a
    node that is not the Raft leader while an external store is active.
    """

    name = "router"

    def __init__(self, raft: RaftNode, stores: StoreSet):
        self.raft = raft
        self.stores = stores
        self.gate = WriteGate()
        self._stripes = [threading.Lock() for _ in range(_STRIPES)]
        self._mirror: MetadataStore | None = None
        self._pending: dict[str, set[str]] = {}
        self._pending_lock = threading.Lock()
        self._claimed: dict[str, int] = {}
        self._claim_lock = threading.Lock()

    # ------------------------------------------------------------ plumbing
    @property
    def active_name(self) -> str:
        """Name of the store Raft says is active (this member's applied state)."""
        return self.raft.state.active_store

    @property
    def active(self) -> MetadataStore:
        """The active store object (built on first use).

        Errors: :class:`StoreUnavailable` when it cannot be prepared or is not configured on this node.
        """
        name = self.active_name
        try:
            return self.stores.get(name)
        except UnknownStore as exc:
            raise StoreUnavailable(f"the active metadata store {name!r} is not configured on this node "
                                   f"(RAFTCONNECT_STORE_{name.upper()} is set on other nodes only)") from exc

    @property
    def external(self) -> bool:  # type: ignore[override]
        return self.active.external

    @contextmanager
    def stripes(self, names: list[str]) -> Iterator[None]:
        """Hold the stripe locks of ``names`` (taken in index order, so never deadlocks)."""
        idx = sorted({hash(n) % _STRIPES for n in names})
        with ExitStack() as stack:
            for i in idx:
                stack.enter_context(self._stripes[i])
            yield

    def claim_store(self, store: MetadataStore, *, read_only: bool = False) -> None:
        """Take ``store``'s writer lease for this leader's Raft term (no-op for non-external stores)."""
        if not store.external:
            return
        term = self.raft.term
        with self._claim_lock:
            store.claim(term, read_only=read_only)
            if read_only:
                self._claimed.pop(store.name, None)
            else:
                self._claimed[store.name] = term

    def _writable(self) -> MetadataStore:
        store = self.active
        if store.external:
            if not self.raft.is_leader:
                raise StoreUnavailable("this node is not the Raft leader; metadata writes go through the leader")
            if self._claimed.get(store.name) != self.raft.term:
                self.claim_store(store)
        return store

    def take_pending(self) -> dict[str, set[str]]:
        """Names written since the last call while mirroring, with the kinds written; resets them.

        A write marks its name after its source write (under the name's stripe
        lock), so a copy that reads the source after this call sees every write
        whose mark it took; a write that lands later marks the name again.
        """
        with self._pending_lock:
            pending, self._pending = self._pending, {}
        return pending

    def pending_count(self) -> int:
        """How many names wait to be copied to the switch's target."""
        return len(self._pending)

    def discard_pending(self, name: str) -> set[str] | None:
        """Remove ``name`` from the pending names; returns the kinds it was pending for, or ``None``."""
        with self._pending_lock:
            return self._pending.pop(name, None)

    def start_mirror(self, target: MetadataStore) -> None:
        """From now on, mark every write pending for ``target`` (call with the gate held exclusive)."""
        self._pending = {}
        self._mirror = target

    def stop_mirror(self) -> None:
        """Stop marking writes (call with the gate held exclusive, or when aborting)."""
        self._mirror = None
        self._pending = {}

    def _write(self, name: str | list[str], kinds: tuple[str, ...], fn: Callable[[MetadataStore], Any],
               commits: int = 0) -> Any:
        """Run ``fn(active store)`` under the gate; while mirroring, mark ``name``'s ``kinds`` pending
        (a list: every connector one write touches, e.g. :meth:`put_statuses`).

        ``commits``: how many offset commits the write is (each timed as one offset commit).
        """
        t0 = time.monotonic()
        try:
            return self._write_gated(name, kinds, fn)
        finally:
            took = time.monotonic() - t0
            active = self.active_name
            _write_timer(active, kinds[0]).observe(took)
            if commits:
                timer = _offset_commit_timer(active)
                for _ in range(commits):
                    timer.observe(took)

    def _write_gated(self, names: str | list[str], kinds: tuple[str, ...], fn: Callable[[MetadataStore], Any]) -> Any:
        names = [names] if isinstance(names, str) else names
        with self.gate.shared():
            store = self._writable()
            if self._mirror is None:
                return fn(store)
            with self.stripes(names):
                try:
                    return fn(store)
                finally:  # even a failed write may have changed something: copy the names again
                    with self._pending_lock:
                        for name in names:
                            self._pending.setdefault(name, set()).update(kinds)

    # ------------------------------------------------------------ reads
    def connector_names(self) -> list[str]:
        return self.active.connector_names()

    def get_connector(self, name: str) -> ConnectorRecord | None:
        return self.active.get_connector(name)

    def get_statuses(self, name: str) -> dict[str, Any]:
        return self.active.get_statuses(name)

    def connector_summaries(self) -> Iterator[ConnectorSummary]:
        return self.active.connector_summaries()

    def connectors_with_statuses(self) -> Iterator[tuple[ConnectorSummary, dict[str, Any]]]:
        return self.active.connectors_with_statuses()

    def connector_summary(self, name: str) -> ConnectorSummary | None:
        return self.active.connector_summary(name)

    def listing_revisions(self) -> ListingRevisions | None:
        return self.active.listing_revisions()

    def get_offsets(self, name: str) -> list[SourceOffset]:
        return self.active.get_offsets(name)

    def latest_offsets(self, name: str) -> list[SourceOffset]:
        return self.active.latest_offsets(name)

    def get_topics(self, name: str) -> list[str]:
        return self.active.get_topics(name)

    def offset_names(self) -> list[str]:
        return self.active.offset_names()

    def export_name(self, name: str) -> NameSnapshot:
        return self.active.export_name(name)

    # ------------------------------------------------------------ writes
    def put_connector_config(self, name: str, config: dict[str, str], *, target_state: str | None = None,
                             create_only: bool = False) -> bool:
        return self._write(name, ("config",), lambda s: s.put_connector_config(
            name, config, target_state=target_state, create_only=create_only))

    def remove_connector_config(self, name: str) -> None:
        self._write(name, ("config", "statuses"), lambda s: s.remove_connector_config(name))

    def put_target_state(self, name: str, target_state: str) -> None:
        self._write(name, ("config",), lambda s: s.put_target_state(name, target_state))

    def put_task_configs(self, name: str, task_configs: list[dict[str, str]], *, worker_id: str | None,
                         generation: int) -> None:
        self._write(name, ("config", "statuses"), lambda s: s.put_task_configs(
            name, task_configs, worker_id=worker_id, generation=generation))

    def put_status(self, name: str, task: int | None, status: dict[str, Any], *, worker_id: str,
                   generation: int) -> None:
        self._write(name, ("statuses",), lambda s: s.put_status(
            name, task, status, worker_id=worker_id, generation=generation))

    def put_statuses(self, reports: list[StatusReport], *, worker_id: str) -> list[StoreError | None]:
        """Many statuses in one write of the active store; while mirroring, every connector named is
        marked pending (the stripes of all of them are held, in name order, as one write's are)."""
        names = sorted({r.name for r in reports})
        if not names:
            return []
        return self._write(names, ("statuses",), lambda s: s.put_statuses(reports, worker_id=worker_id))

    def put_topics(self, name: str, topics: list[str]) -> None:
        self._write(name, ("statuses",), lambda s: s.put_topics(name, topics))

    def reset_topics(self, name: str) -> None:
        self._write(name, ("statuses",), lambda s: s.reset_topics(name))

    def commit_offsets(self, task_id: ConnectorTaskId, offsets: list[SourceOffset], *, worker_id: str,
                       generation: int) -> None:
        self._write(task_id.connector, ("offsets",), lambda s: s.commit_offsets(
            task_id, offsets, worker_id=worker_id, generation=generation), commits=1)

    def commit_offsets_many(self, commits: list[OffsetCommit], *, worker_id: str) -> list[StoreError | None]:
        """Many tasks' commits in one write of the active store; while mirroring, every connector named is
        marked pending (as :meth:`put_statuses` does)."""
        names = sorted({c.task_id.connector for c in commits})
        if not names:
            return []
        return self._write(names, ("offsets",), lambda s: s.commit_offsets_many(commits, worker_id=worker_id),
                           commits=len(commits))

    def alter_offsets(self, name: str, offsets: list) -> None:
        self._write(name, ("offsets",), lambda s: s.alter_offsets(name, offsets), commits=1)

    def reset_offsets(self, name: str) -> None:
        self._write(name, ("offsets",), lambda s: s.reset_offsets(name))

    def import_name(self, snapshot: NameSnapshot, kinds: tuple[str, ...] = KINDS) -> None:
        self._write(snapshot.name, tuple(kinds), lambda s: s.import_name(snapshot, kinds))

    def clear(self) -> None:
        raise StoreUnavailable("the active metadata store cannot be cleared; switch to another store first")

