"""Workers' assignment views, assembled from per-connector fragments reused while their inputs hold.

Owns what a worker's view holds (:meth:`ViewBuilder.build`) and its digest, and which connector
records are known to have changed (:meth:`ViewBuilder.changed`). The coordinator decides when a
view is needed and sends it; this module never writes to Raft or the metadata store.

Why fragments: at 10,000 connectors over 100 workers a view names ~100 connectors and ~1,000 task
configs. Every new generation (one every few seconds while connectors are created) moved every
worker's view, and rebuilding each one copied every record out of the store and re-encoded the
whole view for its digest: half of the leader's time in benchmarks/scale. A connector's fragment of
a view (its entry and the entries of the worker's tasks of it) depends only on the connector's
record, which of it the worker owns, since when, and the restart counters, so it is kept while those
hold and a new generation re-assembles the view from fragments it already has.
"""
from __future__ import annotations

import hashlib
import itertools
import json
import threading
from collections.abc import Callable
from typing import Any

from webapp.states import TargetState
from webapp.storage.base import ConnectorRecord, MetadataStore

__all__ = ["ViewBuilder"]

#: ``(connector entry or None, {task key: task entry}, sha1 hex of both)``
Fragment = tuple[dict[str, Any] | None, dict[str, dict[str, Any]], str]


def _digest(worker_id: str, generation: int, epoch: int, names: list[str], digests: list[str]) -> str:
    """A view's digest (sha1 hex) from its worker, generation, epoch and its connectors' fragment digests."""
    return hashlib.sha1(json.dumps([worker_id, generation, epoch, names, digests]).encode()).hexdigest()


class ViewBuilder:
    """Builds ``worker_view``s from cached connector records and fragments.

    Args:
        state: returns the Raft state machine (``connector_versions``, ``views_version``,
            ``restarts``); read, never written.
        store: the metadata store the records come from (any backend).

    Cache keys: a record is read again when its Raft ``connector_versions`` entry, the
    state's ``views_version`` or a :meth:`changed` call for it (or for all) moved; a store
    other than Raft changes without a Raft write, so the Herder reports each of its writes
    through :meth:`changed`. Both caches are bounded: records and pokes of connectors that
    left the assignment are dropped by :meth:`prune`, a worker's fragments are replaced on
    each build and dropped by :meth:`forget`.
    """

    def __init__(self, state: Callable[[], Any], store: MetadataStore) -> None:
        self._state = state
        self.store = store
        self._lock = threading.Lock()
        self._seq = itertools.count(1)
        self._all = 0  # the last change that touches every record (a store switch or restore)
        self._pokes: dict[str, int] = {}
        self._records: dict[str, tuple[tuple, ConnectorRecord | None]] = {}
        # worker -> (digest, names, fragment digests, fragments) of its last build: what regenerate() re-digests
        # and build() starts from (one tuple, so a build never takes another build's fragments for this one's)
        self._bases: dict[str, tuple[str, list[str], list[str], dict[str, tuple[tuple, Fragment]]]] = {}
        #: the state's ``connectors`` dict the caches were filled from (a reference, so that its identity
        #: cannot be reused): a snapshot installed since replaces it
        self._filled_from: Any = None

    # ------------------------------------------------------------------ invalidation
    def changed(self, name: str | None = None) -> None:
        """Connector ``name``'s config, target state or task configs changed (``None``: maybe all)."""
        with self._lock:
            if name is None:
                self._all = next(self._seq)
            else:
                self._pokes[name] = next(self._seq)

    def record_key(self, name: str) -> tuple:
        """What connector ``name``'s record is known by: it is re-read when this moves."""
        st = self._state()
        return (st.connector_versions.get(name), st.views_version, self._pokes.get(name), self._all)

    def prune(self, assigned: dict[str, Any]) -> None:
        """Drop cached records and pokes of connectors not in ``assigned`` (``{name: owner}``)."""
        with self._lock:
            # list() copies the keys in one step: views being built meanwhile add records
            for name in list(self._records):
                if name not in assigned:
                    self._records.pop(name, None)
            for name in list(self._pokes):
                if name not in assigned:
                    self._pokes.pop(name, None)

    def forget(self, worker_id: str) -> None:
        """Drop ``worker_id``'s fragments (it left or its session expired)."""
        self._bases.pop(worker_id, None)

    def clear(self) -> None:
        """Drop everything (e.g. a new epoch whose caches cannot be trusted: see :meth:`still_valid`)."""
        with self._lock:
            self._records.clear()
            self._bases.clear()
            self._filled_from = None

    def still_valid(self, raft_store_active: bool) -> bool:
        """Whether what is cached may be kept by a new coordinator epoch of this member.

        Record keys are versions from the replicated state, the same on every member, so with the
        Raft store active they stay right across leader changes: a new leader keeps them instead of
        rebuilding every view cold (~4 s of CPU at 10,000 connectors, paid at each of the elections
        of ``benchmarks/scale``). Not when another store is active (its writes on another leader
        never poked this member) nor when a snapshot was installed since the caches were filled (it
        replaces the state's ``connectors`` and may restart the versions, e.g. one written before
        they existed).
        """
        return raft_store_active and (self._filled_from is None or self._filled_from is self._state().connectors)

    # ------------------------------------------------------------------ building
    def record(self, name: str) -> ConnectorRecord | None:
        """Connector ``name``'s record (``None`` if it does not exist), from the cache while its key holds.

        The key is read before the record, so a change racing the read leaves a key that is
        already stale and the next call reads again. Errors: the store's (``StoreUnavailable``).
        """
        key = self.record_key(name)
        hit = self._records.get(name)
        if hit is not None and hit[0] == key:
            return hit[1]
        if self._filled_from is None:
            self._filled_from = self._state().connectors
        rec = self.store.get_connector(name)
        self._records[name] = (key, rec)
        return rec

    def build(self, worker_id: str, assignment: dict[str, Any], owned: tuple[list[str], list[str], list[str]],
              touched: set[str] | None = None, since: str | None = None) -> tuple[dict[str, Any], str] | None:
        """``(view, digest)`` of ``worker_id`` for the committed ``assignment``.

        ``owned``: ``(connector names, task keys "name-i", sorted names of every connector either
        belongs to)`` of the worker. The view's shape is ``GroupCoordinator.worker_view``'s; the
        digest (sha1 hex) is a function of the view's content only, so a worker can tell whether
        the view it runs is the current one.

        ``touched`` (with ``since``, the digest of the worker's view it is relative to): the names of
        the connectors whose parts of the view may have changed since that view, for a caller that
        knows nothing else did (``GroupCoordinator._touched``). The other connectors' fragments are
        taken as they are, without looking up their keys; ``None`` is returned when the worker's
        last build is not that view (build without ``touched``). Each key is ~10 lookups per
        connector and task, and while 100,000 tasks were placed most generations moved most
        views by a few instances (benchmarks/scale).
        """
        connectors, tasks, names = owned
        basis = self._bases.get(worker_id)
        if touched is not None and (basis is None or basis[0] != since):
            return None
        before = basis[3] if basis is not None else {}
        owns_connector = set(connectors)
        task_nums: dict[str, list[int]] = {}
        for key in tasks:
            name, _, num = key.rpartition("-")
            task_nums.setdefault(name, []).append(int(num))
        restarts, at, generation = self._state().restarts, assignment["assigned_at"], assignment["generation"]
        fragments: dict[str, tuple[tuple, Fragment]] = {}
        view: dict[str, Any] = {"worker_id": worker_id, "generation": generation, "epoch": assignment["epoch"],
                                "connectors": {}, "tasks": {}}
        digests = []
        for name in names:
            hit = before.get(name)
            if touched is None or hit is None or name in touched:
                nums = task_nums.get(name, ())
                key = (self.record_key(name), name in owns_connector, at.get(name, generation),
                       restarts.get(name, 0),
                       tuple((n, at.get(f"{name}-{n}", generation), restarts.get(f"{name}-{n}", 0)) for n in nums))
                if hit is None or hit[0] != key:
                    hit = (key, self._fragment(name, key, nums))
            fragments[name] = hit
            entry, task_entries, digest = hit[1]
            if entry is not None:
                view["connectors"][name] = entry
            view["tasks"].update(task_entries)
            digests.append(digest)
        digest = _digest(worker_id, generation, assignment["epoch"], names, digests)
        self._bases[worker_id] = (digest, names, digests, fragments)
        return view, digest

    def regenerate(self, worker_id: str, view: dict[str, Any], digest: str, assignment: dict[str, Any]
                   ) -> tuple[dict[str, Any], str] | None:
        """``(view, digest)``: ``worker_id``'s ``view`` (whose digest is ``digest``) under ``assignment``'s
        generation and epoch, for a caller that knows nothing else of the view moved (no instance of
        the worker placed or granted anew, none of its connectors changed); what :meth:`build` would
        give then, without walking the view's connectors and tasks. ``None`` when ``view`` is not
        this worker's last build (build it).
        """
        basis = self._bases.get(worker_id)
        if basis is None or basis[0] != digest:
            return None
        _, names, digests, fragments = basis
        generation, epoch = assignment["generation"], assignment["epoch"]
        new = _digest(worker_id, generation, epoch, names, digests)
        self._bases[worker_id] = (new, names, digests, fragments)
        return {**view, "generation": generation, "epoch": epoch}, new

    def _fragment(self, name: str, key: tuple, nums: Any) -> Fragment:
        """Connector ``name``'s part of a view: its entry (if owned) and the owned tasks' entries."""
        rec = self.record(name)
        _, owns, connector_at, connector_restart, task_keys = key
        entry = None
        task_entries: dict[str, dict[str, Any]] = {}
        if rec is not None:
            if owns:
                entry = {"config": rec.config, "target_state": rec.target_state, "generation": connector_at,
                         "tasks": rec.tasks, "restart": connector_restart}
            if rec.target_state != TargetState.STOPPED:
                connector_keys = rec.config.keys()
                for num, task_at, task_restart in task_keys:
                    if num < len(rec.tasks):
                        # the connector config overlaid with the task config; most connectors' task
                        # configs already hold every connector key, and then the overlay is the task
                        # config itself: a merged copy per task was ~1.2 KB, 120 MB of the leader at
                        # 100,000 tasks (benchmarks/scale/memory.py)
                        task = rec.tasks[num]
                        task_entries[f"{name}-{num}"] = {
                            "connector": name, "task": num,
                            "config": task if connector_keys <= task.keys() else {**rec.config, **task},
                            "target_state": rec.target_state, "generation": task_at, "restart": task_restart}
        digest = hashlib.sha1(json.dumps([name, entry, task_entries], sort_keys=True).encode()).hexdigest()
        return entry, task_entries, digest
