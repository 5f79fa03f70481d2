"""The active metadata store of a node, and switching a live cluster to another store.

Owns three things:

* :class:`StoreSet` — the stores a node can use: ``raft``, every store configured
  on the node as ``RAFTCONNECT_STORE_<NAME>=<URL>``, and every store added at run time
  (REST, admin page), replicated through Raft; built and prepared on first use.
* :class:`StoreRouter` — the :class:`~webapp.storage.base.MetadataStore` the rest
  of the node talks to. Reads go to the store Raft names active
  (``ClusterStateMachine.active_store``); writes go there too, on the leader,
  under the store's writer lease (:meth:`MetadataStore.claim` with the Raft term)
  and, while a switch copies, are mirrored to the switch's target.
* :class:`SwitchManager` — runs a switch on the leader, phase by phase, every
  phase recorded in Raft so any node can show it and a new leader can finish or
  roll it back:

  1. ``prepare``: build the target, migrate its schema, check it answers, take its
     writer lease, empty it.
  2. ``copy``: from now on every write that lands in the source marks its name
     (and the kinds it wrote) *pending*; the switch thread copies every name in
     batches read without locks, and after each batch copies the pending names
     again (re-read from the source, imported in one batch per kind set). Writes
     are acknowledged after the source write alone, so they do not slow down
     while the target catches up; a name is marked pending after its source
     write, so a copy that read an older value is always followed by another.
  3. ``verify``: pending names are caught up, then every name is compared
     between source and target; a difference is looked at again under the
     name's stripe lock (which each write holds from its source write to its
     pending mark): a name still pending is copied first, and a difference that
     remains fails the switch. Per kind, counts and a SHA-256 over the
     canonical values are recorded.
  4. ``committed``: pending names are caught up, then, with writes held back,
     the last pending names are copied and ``_commit_switch`` makes the target
     the active store. This log entry is the
     commit point: before it the switch can only roll back, after it only finish.
  5. ``completed``: the old store's lease is set read-only, so a deposed leader
     cannot write there any more.

  Any error before the commit point (target unreachable, a catch-up copy failing,
  a verify mismatch, an operator's rollback) aborts: mirroring stops and the
  source stays active, having never stopped taking writes. A leader that finds a
  switch it is not running (the old leader died) aborts it if not committed and
  finishes it if committed, so a cluster never has two active stores.

Consistency: all writes go through the leader (the REST layer forwards them), so
the stripe locks and the write gate are process-local. Fencing of worker writes
(generation) is each backend's, with the Raft assignment as the authority.
"""
from __future__ import annotations

import hashlib
import json
import logging
import threading
import time
import uuid
from contextlib import ExitStack, contextmanager
from typing import Any, Callable, Iterator

from raftnode import CommandRejected, RaftNode, RaftUnavailable
from raftnode.state import STORE_RAFT, SWITCH_RUNNING
from webapp.plugin import ConnectorTaskId, SourceOffset, partition_key
from webapp.metrics import OFFSET_COMMIT_SECONDS, STORE_WRITE_SECONDS

from .base import KINDS, ConnectorRecord, MetadataStore, NameSnapshot, StoreError, StoreUnavailable
from .registry import create_store
from .relational import redact_url

__all__ = ["WriteGate", "StoreSet", "StoreRouter", "SwitchManager", "SwitchError", "UnknownStore",
           "canonical", "snapshot_digest"]

log = logging.getLogger(__name__)

#: Names copied and verified per batch (one stripe-lock set, one export and one import each).
BATCH = 50
_STRIPES = 64
#: Catch-up rounds before the commit holds writes back (each copies what was written during the last).
_CATCH_UP_ROUNDS = 5


class SwitchError(Exception):
    """A switch request that cannot be taken; ``status`` is the HTTP status (400, 404, 409, 503)."""

    def __init__(self, message: str, status: int = 409):
        super().__init__(message)
        self.status = status


class UnknownStore(SwitchError):
    """No store of that name is configured on this node."""

    def __init__(self, name: str, known: list[str]):
        super().__init__(f"Unknown metadata store {name!r}; configured stores: {', '.join(known)} "
                         f"(add one with POST /raftconnect/v1/metadata-store/stores or on the admin page)", 404)


class WriteGate:
    """A shared/exclusive lock that prefers the exclusive side.

    Writes hold it shared for their whole duration; the switch holds it
    exclusive to change where writes go (start mirroring, commit). Not
    re-entrant. Records the longest time any shared acquire waited
    (:attr:`longest_wait`, seconds) — the write stall a switch caused.
    """

    def __init__(self) -> None:
        self._cond = threading.Condition()
        self._shared = 0
        self._exclusive = False
        self._waiting = 0
        self.longest_wait = 0.0

    @contextmanager
    def shared(self) -> Iterator[None]:
        """Hold the gate shared (many holders at once)."""
        t0 = time.monotonic()
        with self._cond:
            while self._exclusive or self._waiting:
                self._cond.wait()
            self._shared += 1
        waited = time.monotonic() - t0
        if waited > self.longest_wait:
            self.longest_wait = waited
        try:
            yield
        finally:
            with self._cond:
                self._shared -= 1
                if not self._shared:
                    self._cond.notify_all()

    @contextmanager
    def exclusive(self) -> Iterator[None]:
        """Hold the gate alone: waits for current shared holders and holds new ones back."""
        with self._cond:
            self._waiting += 1
            try:
                while self._exclusive or self._shared:
                    self._cond.wait()
            finally:
                self._waiting -= 1
            self._exclusive = True
        try:
            yield
        finally:
            with self._cond:
                self._exclusive = False
                self._cond.notify_all()


class StoreSet:
    """The metadata stores one node can use, by name (see module docstring).

    Two sources: stores configured on this node by environment variable (``urls``, node-local)
    and stores added at run time, replicated through Raft (``specs``, the same on every member).
    A name in both is the environment's (``describe`` says so). A run-time store is built from its
    spec's URL and password once ``resolve`` has turned their config-provider references into
    values on this node; a store removed or replaced in ``specs`` is closed on the next lookup.

    Args:
        raft_store: the node's ``raft`` store.
        urls: ``{name: url}`` of stores configured by environment (names lower case; ``raft`` is reserved).
        fence: the fencing check handed to every built store (``raft.state.check_fence``).
        factory: ``(name, url, fence) -> MetadataStore``; defaults to
            :func:`webapp.storage.registry.create_store`.
        specs: ``() -> {name: spec}``, the run-time stores (``ClusterStateMachine.store_specs``);
            default none.
        resolve: ``(name, spec) -> url`` with every reference resolved (may raise ``ValueError``
            naming the reference, never the value); required when ``specs`` is given.
    """

    def __init__(self, raft_store: MetadataStore, urls: dict[str, str], fence: Callable,
                 factory: Callable[..., MetadataStore] = create_store,
                 specs: Callable[[], dict[str, dict[str, Any]]] | None = None,
                 resolve: Callable[[str, dict[str, Any]], str] | None = None):
        self.env_urls = {k.lower(): v for k, v in urls.items() if k.lower() != STORE_RAFT}
        if any(k.lower() == STORE_RAFT for k in urls):
            log.warning("RAFTCONNECT_STORE_RAFT is ignored: 'raft' is the built-in Raft store")
        self._fence = fence
        self._factory = factory
        self._specs = specs or dict
        self._resolve = resolve
        self._stores: dict[str, MetadataStore] = {STORE_RAFT: raft_store}
        self._built_from: dict[str, Any] = {}  # name -> the env URL or spec a built store came from
        self._lock = threading.Lock()

    def specs(self) -> dict[str, dict[str, Any]]:
        """The run-time stores not shadowed by an environment store: ``{name: spec}`` (a copy)."""
        return {k: dict(v) for k, v in list(self._specs().items()) if k not in self.env_urls and k != STORE_RAFT}

    @property
    def urls(self) -> dict[str, str]:
        """``{name: url}`` of every configured store but ``raft``: environment URLs (may hold passwords:
        show them only through ``redact_url``) and run-time stores' URLs (references, no passwords)."""
        return {**{k: v["url"] for k, v in self.specs().items()}, **self.env_urls}

    def source(self, name: str) -> str | None:
        """Where store ``name`` is configured: ``"raft"`` (built in), ``"environment"``, ``"cluster"``
        (added at run time) or ``None`` (unknown here)."""
        if name == STORE_RAFT:
            return "raft"
        if name in self.env_urls:
            return "environment"
        return "cluster" if name in self.specs() else None

    def names(self) -> list[str]:
        """``raft`` first, then the configured stores, sorted."""
        return [STORE_RAFT] + sorted(self.urls)

    def describe(self) -> list[dict[str, Any]]:
        """``[{"name", "backend", "url", "source", ...}]``, safe to show.

        ``url`` is ``None`` for raft, redacted for environment stores, and as added (references,
        never a password) for run-time stores, which also carry ``password`` (the reference or
        ``None``), ``added_at`` (unix seconds) and ``added_by``. ``shadows``: an environment
        store whose name is also a run-time store's (the environment's is used on this node).
        """
        out: list[dict[str, Any]] = [{"name": STORE_RAFT, "backend": "raft", "url": None, "source": "raft"}]
        specs = self.specs()
        shadowed = set(self._specs()) & set(self.env_urls)
        for name in sorted(self.urls):
            if name in self.env_urls:
                url = self.env_urls[name]
                entry = {"name": name, "backend": _scheme(url), "url": redact_url(url), "source": "environment"}
                if name in shadowed:
                    entry["shadows"] = "a store added at run time has this name too; this node uses its own"
            else:
                spec = specs[name]
                entry = {"name": name, "backend": _scheme(spec["url"]), "url": spec["url"], "source": "cluster",
                         "password": spec.get("password"), "added_at": spec.get("added_at"),
                         "added_by": spec.get("added_by")}
            out.append(entry)
        return out

    def _origin(self, name: str) -> Any:
        if name in self.env_urls:
            return self.env_urls[name]
        spec = self._specs().get(name) if name != STORE_RAFT else None  # no copy: every read passes here
        return None if spec is None else (spec["url"], spec.get("password"))

    def _url(self, name: str) -> str:
        if name in self.env_urls:
            return self.env_urls[name]
        spec = self.specs()[name]
        if self._resolve is None:
            raise StoreUnavailable(f"metadata store {name!r} was added at run time, but this node cannot resolve "
                                   "config-provider references")
        try:
            return self._resolve(name, spec)
        except ValueError as exc:
            raise StoreUnavailable(f"metadata store {name!r} cannot be built on this node: {exc}") from None

    def get(self, name: str) -> MetadataStore:
        """The store ``name``, built and prepared on first use (and again after its definition changed).

        Errors: :class:`UnknownStore`; :class:`StoreUnavailable` when it cannot be
        prepared or its references cannot be resolved here (the next call tries again);
        :class:`ValueError` for a bad URL.
        """
        origin = self._origin(name) if name != STORE_RAFT else None
        store = self._stores.get(name)
        if store is not None and (name == STORE_RAFT or self._built_from.get(name) == origin):
            return store
        if origin is None:
            self._drop(name)
            raise UnknownStore(name, self.names())
        with self._lock:
            store = self._stores.get(name)
            if store is not None and self._built_from.get(name) == origin:
                return store
            if store is not None:  # removed and added again with another URL: build it anew
                self._stores.pop(name)
                store.close()
            store = self._factory(name, self._url(name), self._fence)
            try:
                store.prepare()
            except Exception:
                store.close()
                raise
            self._stores[name] = store
            self._built_from[name] = origin
        return store

    def prune(self) -> list[str]:
        """Close the built stores no longer configured (removed at run time); returns their names."""
        gone = [n for n in list(self._stores) if n != STORE_RAFT and self._origin(n) is None]
        for name in gone:
            self._drop(name)
        return gone

    def _drop(self, name: str) -> None:
        with self._lock:
            store = self._stores.pop(name, None) if name != STORE_RAFT else None
            self._built_from.pop(name, None)
        if store is not None:
            store.close()

    def close(self) -> None:
        """Close every built store except ``raft`` (which the node owns)."""
        with self._lock:
            for name, store in list(self._stores.items()):
                if name != STORE_RAFT:
                    store.close()
                    del self._stores[name]
            self._built_from.clear()


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""


def _normal_status(st: dict[str, Any] | None) -> dict[str, Any] | None:
    if not st:
        return None
    return {"state": st.get("state"), "trace": st.get("trace"), "worker_id": st.get("worker_id"),
            "generation": st.get("generation")}


def canonical(snapshot: NameSnapshot) -> dict[str, Any]:
    """A backend-independent form of a snapshot: ``{kind: JSON-able value}`` for each of :data:`KINDS`.

    Task statuses are reduced to ``state``, ``trace``, ``worker_id``,
    ``generation`` (what every backend keeps); offsets are sorted by partition key.
    """
    rec = snapshot.record
    config = None if rec is None else {"config": rec.config, "target_state": rec.target_state, "tasks": rec.tasks}
    st = snapshot.statuses or {}
    tasks = {str(k): _normal_status(v) for k, v in (st.get("tasks") or {}).items() if v}
    statuses = {"connector": _normal_status(st.get("connector")), "tasks": tasks}
    if snapshot.topics:  # active topics belong to the status store; absent key keeps older digests equal
        statuses["topics"] = sorted(set(snapshot.topics))
    offsets = sorted(([partition_key(o.partition), o.offset] for o in snapshot.offsets),
                     key=lambda e: (e[0], json.dumps(e[1], sort_keys=True)))
    return {"config": config, "statuses": statuses, "offsets": offsets}


def _counts(canon: dict[str, Any]) -> dict[str, int]:
    st = canon["statuses"]
    return {"config": 0 if canon["config"] is None else 1,
            "statuses": (st["connector"] is not None) + len(st["tasks"]),
            "offsets": len(canon["offsets"])}


class _Digest:
    """Running per-kind counts and SHA-256 over canonical values, fed name by name in sorted order."""

    def __init__(self) -> None:
        self.counts = dict.fromkeys(KINDS, 0)
        self.hashes = {k: hashlib.sha256() for k in KINDS}

    def add(self, name: str, canon: dict[str, Any]) -> None:
        for kind, n in _counts(canon).items():
            self.counts[kind] += n
        for kind in KINDS:
            value = canon[kind]
            if value:
                self.hashes[kind].update(json.dumps([name, value], sort_keys=True, separators=(",", ":")).encode())

    def result(self) -> dict[str, Any]:
        return {k: {"count": self.counts[k], "sha256": self.hashes[k].hexdigest()} for k in KINDS}


def snapshot_digest(store: MetadataStore) -> dict[str, Any]:
    """``{kind: {"count", "sha256"}}`` of everything in ``store`` (reads every name; for tests and tools)."""
    d = _Digest()
    for name in store.all_names():
        d.add(name, canonical(store.export_name(name)))
    return d.result()


def _export(store: MetadataStore, names: list[str]) -> list[NameSnapshot]:
    batch = getattr(store, "export_names", None)
    return list(batch(names)) if batch else [store.export_name(n) for n in names]


def _import(store: MetadataStore, snapshots: list[NameSnapshot], kinds: tuple[str, ...] = KINDS) -> None:
    batch = getattr(store, "import_names", None)
    if batch:
        batch(snapshots, kinds)
    else:
        for snap in snapshots:
            store.import_name(snap, kinds)


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

    def _write(self, name: str, kinds: tuple[str, ...], fn: Callable[[MetadataStore], Any],
               offsets: list | None = None) -> Any:
        """Run ``fn(active store)`` under the gate; while mirroring, mark ``name``'s ``kinds`` pending.

        ``offsets``: the offset entries written, for an offset write (timed as an offset commit).
        """
        t0 = time.monotonic()
        try:
            return self._write_gated(name, kinds, fn)
        finally:
            took = time.monotonic() - t0
            active = self.active_name
            STORE_WRITE_SECONDS.labels(active, kinds[0]).observe(took)
            if offsets is not None:
                OFFSET_COMMIT_SECONDS.labels(active).observe(took)

    def _write_gated(self, name: str, kinds: tuple[str, ...], fn: Callable[[MetadataStore], Any]) -> Any:
        with self.gate.shared():
            store = self._writable()
            if self._mirror is None:
                return fn(store)
            with self.stripes([name]):
                try:
                    return fn(store)
                finally:  # even a failed write may have changed something: copy the name again
                    with self._pending_lock:
                        self._pending.setdefault(name, set()).update(kinds)

    # ------------------------------------------------------------ reads
    def connector_names(self) -> list[str]:
        return self.active.connector_names()

    def get_connector(self, name: str) -> ConnectorRecord | None:
        return self.active.get_connector(name)

    def get_statuses(self, name: str) -> dict[str, Any]:
        return self.active.get_statuses(name)

    def get_offsets(self, name: str) -> list[SourceOffset]:
        return self.active.get_offsets(name)

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

    def put_topics(self, name: str, topics: list[str]) -> None:
        self._write(name, ("statuses",), lambda s: s.put_topics(name, topics))

    def reset_topics(self, name: str) -> None:
        self._write(name, ("statuses",), lambda s: s.reset_topics(name))

    def commit_offsets(self, task_id: ConnectorTaskId, offsets: list[SourceOffset], *, worker_id: str,
                       generation: int) -> None:
        self._write(task_id.connector, ("offsets",), lambda s: s.commit_offsets(
            task_id, offsets, worker_id=worker_id, generation=generation), offsets=offsets)

    def alter_offsets(self, name: str, offsets: list) -> None:
        self._write(name, ("offsets",), lambda s: s.alter_offsets(name, offsets), offsets=offsets)

    def reset_offsets(self, name: str) -> None:
        self._write(name, ("offsets",), lambda s: s.reset_offsets(name))

    def import_name(self, snapshot: NameSnapshot, kinds: tuple[str, ...] = KINDS) -> None:
        self._write(snapshot.name, tuple(kinds), lambda s: s.import_name(snapshot, kinds))

    def clear(self) -> None:
        raise StoreUnavailable("the active metadata store cannot be cleared; switch to another store first")


class _Aborted(Exception):
    pass


class SwitchManager:
    """Runs store switches on the leader and finishes or rolls back ones a dead leader left (module docstring).

    Args:
        raft: the local Raft member.
        router: the node's :class:`StoreRouter` (its :class:`StoreSet` names the targets).
        hold_seconds: time each phase is held before the next (0 in production;
            drills and tests use it to act in a chosen phase).
        progress_interval: seconds between progress records in Raft.
    """

    def __init__(self, raft: RaftNode, router: StoreRouter, *, hold_seconds: float = 0.0,
                 progress_interval: float = 0.5):
        self.raft = raft
        self.router = router
        self.hold_seconds = hold_seconds
        self.progress_interval = progress_interval
        self._lock = threading.Lock()
        self._running: str | None = None  # id of the switch this process runs
        self._abort = threading.Event()
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._watch: threading.Thread | None = None

    # ------------------------------------------------------------ lifecycle
    def start(self) -> None:
        """Start the watcher that finishes or rolls back switches left by a previous leader."""
        if self._watch is None:
            self._watch = threading.Thread(target=self._watch_loop, name="store-switch-watch", daemon=True)
            self._watch.start()

    def stop(self) -> None:
        """Stop the watcher and ask a running switch to abort."""
        self._stop.set()
        self._abort.set()

    # ------------------------------------------------------------ API
    def status(self) -> dict[str, Any]:
        """The ``GET /raftconnect/v1/metadata-store`` body.

        Shape: ``{"active": name, "previous": name | None, "stores": [{"name", "backend", "url",
        "source", "active": bool, ...}] (see :meth:`StoreSet.describe`; no passwords), "switch":
        {...} | None (as in :class:`raftnode.state.ClusterStateMachine`), "rollback":
        {"possible", "action", "target", "reason"} (see :meth:`rollback_plan`)}``.
        """
        st = self.raft.state
        self.router.stores.prune()  # close what was removed at run time
        stores = [dict(s, active=s["name"] == st.active_store) for s in self.router.stores.describe()]
        if st.active_store not in {s["name"] for s in stores}:
            stores.append({"name": st.active_store, "backend": None, "url": None, "source": None, "active": True,
                           "error": "the active store is not configured on this node"})
        switch = None
        if st.switch is not None:
            switch = json.loads(json.dumps(st.switch))
        return {"active": st.active_store, "previous": st.previous_store, "stores": stores, "switch": switch,
                "rollback": self.rollback_plan()}

    def rollback_plan(self) -> dict[str, Any]:
        """What :meth:`rollback` would do now: ``{"possible": bool, "action": "abort" | "switch_back" | None,
        "target": store name | None, "reason": plain-language sentence}``.

        Possible while a switch runs before its commit point (abort it: its source stays active),
        and after a completed switch whose source is still configured (switch back to it). Not after
        an aborted switch (its source never stopped being active), nor while a committed switch
        finishes, nor when the previous store was removed.
        """
        st = self.raft.state
        sw = st.switch
        if sw is None:
            return {"possible": False, "action": None, "target": None, "reason": "No switch has run yet."}
        if sw["phase"] in SWITCH_RUNNING:
            return {"possible": True, "action": "abort", "target": sw["source"],
                    "reason": f"Cancels the switch to {sw['target']}: {sw['source']} stays the active store "
                              "and keeps every write."}
        if sw["phase"] == "committed":
            return {"possible": False, "action": None, "target": None,
                    "reason": f"The switch to {sw['target']} is committed and finishing; roll back once it completed."}
        if sw["phase"] == "aborted":
            return {"possible": False, "action": None, "target": None,
                    "reason": f"The last switch was rolled back: {sw['source']} has been the active store throughout."}
        previous = st.previous_store
        if not previous or previous != sw["source"]:
            return {"possible": False, "action": None, "target": None,
                    "reason": "There is no previous metadata store to go back to."}
        if previous != STORE_RAFT and self.router.stores.source(previous) is None:
            return {"possible": False, "action": None, "target": None,
                    "reason": f"The previous store {previous} has been removed."}
        return {"possible": True, "action": "switch_back", "target": previous,
                "reason": f"Switches back to {previous}: a new switch copies everything written to "
                          f"{st.active_store} since, then {previous} is active again."}

    def begin(self, target: str) -> dict[str, Any]:
        """Start switching to ``target`` (leader only); returns :meth:`status` once the switch is recorded.

        Errors: :class:`SwitchError` — 400 bad name or already active, 404 unknown
        store, 409 a switch is already running, 503 not the leader.
        """
        if not isinstance(target, str) or not target.strip():
            raise SwitchError('Request body must be {"target": "<store name>"}', 400)
        target = target.strip().lower()
        if self.router.stores.source(target) is None:
            raise UnknownStore(target, self.router.stores.names())
        if not self.raft.is_leader:
            raise SwitchError("this node is not the Raft leader", 503)
        with self._lock:
            if self._running is not None:
                raise SwitchError(f"switch {self._running} is still running on this leader", 409)
            switch_id = uuid.uuid4().hex[:12]
            term = self.raft.term
            source = self.raft.state.active_store
            self._running = switch_id  # before proposing, so the watcher never takes it for an orphan
            try:
                self.raft.commands.begin_switch(epoch=term, switch_id=switch_id, source=source, target=target,
                                                now=time.time())
            except CommandRejected as exc:
                self._running = None
                raise SwitchError(exc.reason, 400 if exc.code == 400 else 409) from exc
            except RaftUnavailable as exc:
                self._running = None
                raise SwitchError(str(exc), 503) from exc
            self._abort.clear()
            self._thread = threading.Thread(target=self._run, args=(switch_id, term, source, target),
                                            name=f"store-switch-{switch_id}", daemon=True)
            self._thread.start()
        log.info("store switch %s: %s -> %s started", switch_id, source, target)
        return self.status()

    def rollback(self) -> dict[str, Any]:
        """Roll back: abort the running switch, or switch back to the previous store after a completed one.

        Errors: :class:`SwitchError` — 409 nothing to roll back (no switch, the last one was
        aborted, a committed switch still finishing, the previous store removed; the message is
        :meth:`rollback_plan`'s reason), 503 not the leader.
        """
        if not self.raft.is_leader:
            raise SwitchError("this node is not the Raft leader", 503)
        sw = self.raft.state.switch
        plan = self.rollback_plan()
        if plan["action"] == "abort":
            with self._lock:
                running = self._running == sw["id"]
                self._abort.set()
            if not running:
                self._propose_abort(sw["id"], "rolled back by an operator")
            elif self._thread is not None:
                self._thread.join(30)
            return self.status()
        if not plan["possible"]:
            raise SwitchError(plan["reason"], 409)
        return self.begin(plan["target"])

    # ------------------------------------------------------------ the switch

    def _propose_abort(self, switch_id: str, reason: str) -> None:
        try:
            self.raft.commands.abort_switch(epoch=self.raft.term, switch_id=switch_id, reason=reason, now=time.time())
            log.warning("store switch %s aborted: %s", switch_id, reason)
        except (CommandRejected, RaftUnavailable) as exc:
            log.warning("store switch %s: could not record the abort (%s); the next leader will", switch_id, exc)

    def _check(self, term: int) -> None:
        if self._abort.is_set():
            raise _Aborted("rolled back by an operator")
        if self.raft.term != term or not self.raft.is_leader:
            raise _Aborted("this node lost Raft leadership")

    def _hold(self, term: int) -> None:
        deadline = time.monotonic() + self.hold_seconds
        while time.monotonic() < deadline:
            self._check(term)
            time.sleep(min(0.05, max(0.0, deadline - time.monotonic())))
        self._check(term)

    def _run(self, switch_id: str, term: int, source_name: str, target_name: str) -> None:
        progress: dict[str, Any] = {}
        router = self.router
        t_start = time.monotonic()
        try:
            source = router.stores.get(source_name)
            # 1. prepare
            try:
                target = router.stores.get(target_name)
                router.claim_store(target)
                target.clear()
            except StoreError as exc:
                raise _Aborted(f"target store {target_name} is not usable: {exc}") from exc
            self._hold(term)
            # 2. copy while dual-writing
            router.gate.longest_wait = 0.0
            with router.gate.exclusive():
                router.start_mirror(target)
            names = source.all_names()
            progress = {"names_total": len(names), "names_copied": 0,
                        "prepare_s": round(time.monotonic() - t_start, 3)}
            log.info("store switch %s: copy (%d names), prepare took %.2f s", switch_id, len(names),
                     progress["prepare_s"])
            self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="copy", progress=progress,
                                            now=time.time())
            last = time.monotonic()
            for i in range(0, len(names), BATCH):
                self._check(term)
                chunk = names[i:i + BATCH]
                _import(target, _export(source, chunk))
                self._catch_up(source, target)  # written meanwhile (this batch's names included): copy again
                progress["names_copied"] = i + len(chunk)
                if time.monotonic() - last >= self.progress_interval:
                    self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="copy", progress=progress,
                                            now=time.time())
                    last = time.monotonic()
            if self.hold_seconds:  # a drill holds the phase: show it finished, not as last sampled
                self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="copy", progress=progress,
                                                now=time.time())
            self._hold(term)
            # 3. verify
            progress["names_verified"] = 0
            progress["copy_s"] = round(time.monotonic() - t_start - progress["prepare_s"], 3)
            log.info("store switch %s: verify, copy took %.2f s", switch_id, progress["copy_s"])
            self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="verify", progress=progress,
                                            now=time.time())
            names = sorted(set(source.all_names()) | set(target.all_names()))
            progress["names_total"] = len(names)
            digest = _Digest()
            for i in range(0, len(names), BATCH):
                self._check(term)
                self._catch_up(source, target)
                chunk = names[i:i + BATCH]
                a, b = _export(source, chunk), _export(target, chunk)
                for sa, sb in zip(a, b):
                    ca, cb = canonical(sa), canonical(sb)
                    if ca != cb:  # maybe written since the catch-up: look again with its writes held back
                        with router.stripes([sa.name]):
                            kinds = router.discard_pending(sa.name)
                            snap = _export(source, [sa.name])
                            if kinds:
                                _import(target, snap, tuple(k for k in KINDS if k in kinds))
                            ca = canonical(snap[0])
                            cb = canonical(_export(target, [sa.name])[0])
                    if ca != cb:
                        kinds = [k for k in KINDS if ca[k] != cb[k]]
                        raise _Aborted(f"verify failed: {sa.name} differs in {', '.join(kinds)}")
                    digest.add(sa.name, ca)
                progress["names_verified"] = i + len(chunk)
                if time.monotonic() - last >= self.progress_interval:
                    self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="verify", progress=progress,
                                            now=time.time())
                    last = time.monotonic()
            progress["verify_s"] = round(time.monotonic() - t_start - progress["prepare_s"] - progress["copy_s"], 3)
            if self.hold_seconds:
                self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="verify", progress=progress,
                                                now=time.time())
            self._hold(term)
            # 4. commit: the single log entry that changes the active store. Catch up while
            # writes flow, so that what is left to copy with writes held back is small.
            for _ in range(_CATCH_UP_ROUNDS):
                if router.pending_count() <= BATCH:
                    break
                self._catch_up(source, target)
            t0 = time.monotonic()
            with router.gate.exclusive():
                self._check(term)
                progress["names_caught_up_at_commit"] = self._catch_up(source, target)
                self.raft.commands.commit_switch(epoch=term, switch_id=switch_id, digest=digest.result(), now=time.time())
                router.stop_mirror()
            progress["commit_stall_ms"] = round((time.monotonic() - t0) * 1000, 1)
            # only the wait at the write gate; a write may also wait for its stripe, the mirror and the CPU
            progress["longest_gate_wait_ms"] = round(router.gate.longest_wait * 1000, 1)
            log.info("store switch %s: %s is now the active metadata store", switch_id, target_name)
            self._finish(switch_id, term, source, progress, t_start)
        except Exception as exc:
            with router.gate.exclusive():
                router.stop_mirror()
            sw = self.raft.state.switch
            if sw is not None and sw["id"] == switch_id and sw["phase"] == "committed":
                log.warning("store switch %s: committed, but finishing failed (%s); the watcher retries",
                            switch_id, exc)
            else:
                reason = str(exc) if isinstance(exc, (_Aborted, StoreError)) else f"{type(exc).__name__}: {exc}"
                if not isinstance(exc, (_Aborted, StoreError)):
                    log.exception("store switch %s failed", switch_id)
                self._propose_abort(switch_id, reason)
        finally:
            with self._lock:
                if self._running == switch_id:
                    self._running = None

    def _catch_up(self, source: MetadataStore, target: MetadataStore) -> int:
        """Copy the names written since the last catch-up from ``source`` to ``target``; returns how many.

        Reads the source without stripe locks: a write landing meanwhile marks
        its name pending again, for the next catch-up (see :meth:`StoreRouter.take_pending`).
        Names are imported in batches of :data:`BATCH`, grouped by the kinds written.

        Errors: the stores' (:class:`StoreError`), which abort the switch.
        """
        pending = self.router.take_pending()
        groups: dict[tuple[str, ...], list[str]] = {}
        for name, kinds in pending.items():
            groups.setdefault(tuple(k for k in KINDS if k in kinds), []).append(name)
        for kinds, names in groups.items():
            names.sort()
            for i in range(0, len(names), BATCH):
                _import(target, _export(source, names[i:i + BATCH]), kinds)
        return len(pending)

    def _finish(self, switch_id: str, term: int, source: MetadataStore | None, progress: dict[str, Any],
                t_start: float | None = None) -> None:
        """After the commit point: make the old store read-only, then record ``completed``."""
        self._hold(term)
        if source is not None:
            try:
                self.router.claim_store(source, read_only=True)
            except StoreError as exc:
                # Unreachable old store: nobody can write it now either; its lease is
                # checked again by any writer, whose claim would need a newer term.
                log.warning("store switch %s: could not mark %s read-only: %s", switch_id, source.name, exc)
                progress["old_store_read_only"] = False
        if t_start is not None:
            progress["duration_s"] = round(time.monotonic() - t_start, 3)
        self.raft.commands.switch_phase(epoch=term, switch_id=switch_id, phase="completed", progress=progress,
                                        now=time.time())
        log.info("store switch %s completed", switch_id)

    # ------------------------------------------------------------ recovery
    def recover(self) -> None:
        """On the leader: roll back an unfinished switch this process is not running, or finish a committed one."""
        if not self.raft.is_leader:
            return
        sw = self.raft.state.switch
        if sw is None or sw["phase"] in ("completed", "aborted"):
            return
        with self._lock:
            if self._running == sw["id"]:
                return
        if sw["phase"] in SWITCH_RUNNING:
            self._propose_abort(sw["id"], f"the leader changed during phase {sw['phase']}; rolled back")
        elif sw["phase"] == "committed":
            try:
                source = self.router.stores.get(sw["source"])
            except (StoreError, SwitchError) as exc:
                log.warning("store switch %s: old store %s unreachable: %s", sw["id"], sw["source"], exc)
                source = None
            progress = dict(sw.get("progress") or {})
            progress.pop("digest", None)
            hold, self.hold_seconds = self.hold_seconds, 0.0
            try:
                self._finish(sw["id"], self.raft.term, source, progress)
            finally:
                self.hold_seconds = hold

    def _watch_loop(self) -> None:
        while not self._stop.wait(0.2):
            try:
                self.recover()
            except (CommandRejected, RaftUnavailable, StoreError, _Aborted) as exc:
                log.debug("store switch watcher: %s", exc)
            except Exception:
                log.exception("store switch watcher error")
