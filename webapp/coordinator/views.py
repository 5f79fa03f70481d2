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
from typing import Any, NamedTuple

import orjson

from webapp.states import TargetState
from webapp.storage.base import ConnectorRecord, MetadataStore

__all__ = ["NOTHING_OWNED", "Owned", "ViewBuilder"]

#: ``(connector entry or None, {task key: task entry}, hash of both)``: the hash is an int below
#: :data:`_HASH_MOD`, a view's digest adds up those of its fragments (:func:`_digest`)
Fragment = tuple[dict[str, Any] | None, dict[str, dict[str, Any]], int]
#: the fragment hashes are 256-bit (BLAKE2b) and summed modulo 2**256
_HASH_MOD = 1 << 256


class Owned(NamedTuple):
    """What one worker runs under one assignment, as :meth:`ViewBuilder.build` reads it
    (``GroupCoordinator._owned`` makes every worker's once per assignment).

    Attributes:
        connectors: names of the connectors it runs, in the assignment's order.
        tasks: keys (``"name-i"``) of the tasks it runs, in the assignment's order.
        names: sorted names of every connector either belongs to: the connectors its view holds.
        name_set: ``names`` as a set.
        owns: ``connectors`` as a set.
        nums: ``{connector name: (task numbers it runs of it, in the order of tasks)}``.
    """

    connectors: list[str]
    tasks: list[str]
    names: list[str]
    name_set: frozenset[str]
    owns: frozenset[str]
    nums: dict[str, tuple[int, ...]]


#: a worker that runs nothing
NOTHING_OWNED = Owned([], [], [], frozenset(), frozenset(), {})


class _Basis(NamedTuple):
    """A worker's last build: what :meth:`ViewBuilder.regenerate` re-digests and a patch starts from.

    One tuple, replaced whole, so a build never mixes another build's fragments into this one's."""

    digest: str
    total: int  # the sum of the fragments' hashes modulo _HASH_MOD
    fragments: dict[str, tuple[tuple, Fragment]]  # connector name -> (its key, its fragment)
    view: dict[str, Any]


def _fragment_hash(name: str, entry: dict[str, Any] | None, task_entries: dict[str, dict[str, Any]]) -> int:
    """A fragment's hash: BLAKE2b-256 of its canonical JSON (its connector's name included), as an int.

    The JSON is orjson's with sorted keys; for what orjson refuses (a key that is not a string, an
    integer beyond 64 bits) ``json.dumps`` with sorted keys, which is as canonical: which encoder is
    used depends on the content only, so equal fragments hash alike. The stdlib encoder was 3-4 % of
    the leader's interpreter time over the 10,000-connector bring-up (benchmarks/scale, 2026-12-02).
    """
    item = [name, entry, task_entries]
    try:
        text = orjson.dumps(item, option=orjson.OPT_SORT_KEYS)
    except orjson.JSONEncodeError:
        text = json.dumps(item, sort_keys=True).encode()
    return int.from_bytes(hashlib.blake2b(text, digest_size=32).digest(), "big")


def _digest(worker_id: str, generation: int, epoch: int, total: int) -> str:
    """A view's digest (sha1 hex) from its worker, generation, epoch and ``total``, the sum of its
    connectors' fragment hashes modulo 2**256.

    A sum, not a hash of the list in order, so that a patch changing a few connectors of a view of
    a thousand updates it by subtracting the old fragments' hashes and adding the new ones, without
    walking the others: an additive multiset hash (MSet-Add-Hash; Clarke, Devadas, van Dijk, Gassend
    and Suh, "Incremental Multiset Hash Functions and Their Application to Memory Integrity
    Checking", ASIACRYPT 2003). The fragments are distinct (each names its connector), so the
    multiset is the view's set of fragments. The digest tells a worker whether its view is the
    current one; it is not a defence against anyone who chooses configs to make two views collide
    (who could change the views themselves).
    """
    return hashlib.sha1(json.dumps([worker_id, generation, epoch, format(total, "064x")]).encode()).hexdigest()


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
        self._bases: dict[str, _Basis] = {}  # worker -> its last build
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

    def build(self, worker_id: str, assignment: dict[str, Any], owned: Owned,
              touched: set[str] | None = None, since: str | None = None) -> tuple[dict[str, Any], str] | None:
        """``(view, digest)`` of ``worker_id`` for the committed ``assignment``.

        ``owned``: what the worker runs under ``assignment`` (:class:`Owned`). The view's shape is
        ``GroupCoordinator.worker_view``'s; the digest (sha1 hex) is a function of the view's content
        only (:func:`_digest`), so a worker can tell whether the view it runs is the current one.

        ``touched`` (with ``since``, the digest of the worker's view it is relative to): the names of
        the connectors whose parts of the view may have changed since that view, for a caller that
        knows nothing else did (``GroupCoordinator._touched``). The view is then that view with only
        those connectors' parts made again: its connectors and tasks are copied (two dict copies, in
        C) and the digest updated by the touched fragments' hashes, so a patch costs what it touches,
        not the view's size. ``None`` is returned when the worker's last build is not that view (build
        without ``touched``). While 100,000 tasks were placed, most generations gave most of the 100
        workers a few instances, and walking each view's ~1,000 connectors and hashing the list of
        their digests was the largest part of the leader's coordinator work (benchmarks/scale).
        """
        basis = self._bases.get(worker_id)
        if touched is not None and (basis is None or basis.digest != since):
            return None
        restarts, at, generation = self._state().restarts, assignment["assigned_at"], assignment["generation"]
        if touched is None:
            before = basis.fragments if basis is not None else {}
            fragments: dict[str, tuple[tuple, Fragment]] = {}
            connectors: dict[str, Any] = {}
            tasks: dict[str, Any] = {}
            total = 0
            for name in owned.names:
                hit = fragments[name] = self._current(name, owned, before.get(name), at, generation, restarts)
                entry, task_entries, value = hit[1]
                if entry is not None:
                    connectors[name] = entry
                tasks.update(task_entries)
                total += value
        else:
            fragments, total = dict(basis.fragments), basis.total
            connectors, tasks = dict(basis.view["connectors"]), dict(basis.view["tasks"])
            for name in touched:
                old = fragments.get(name)
                new = self._current(name, owned, old, at, generation, restarts) if name in owned.name_set else None
                if new is old:
                    continue
                if old is not None:
                    entry, task_entries, value = old[1]
                    if entry is not None:
                        del connectors[name]
                    for key in task_entries:
                        del tasks[key]
                    total -= value
                    del fragments[name]
                if new is not None:
                    entry, task_entries, value = new[1]
                    if entry is not None:
                        connectors[name] = entry
                    tasks.update(task_entries)
                    total += value
                    fragments[name] = new
        total %= _HASH_MOD
        view = {"worker_id": worker_id, "generation": generation, "epoch": assignment["epoch"],
                "connectors": connectors, "tasks": tasks}
        digest = _digest(worker_id, generation, assignment["epoch"], total)
        self._bases[worker_id] = _Basis(digest, total, fragments, view)
        return view, digest

    def _current(self, name: str, owned: Owned, hit: tuple[tuple, Fragment] | None, at: dict[str, int],
                 generation: int, restarts: dict[str, int]) -> tuple[tuple, Fragment]:
        """``(key, fragment)`` of connector ``name`` in the view of the worker that runs ``owned``: ``hit``
        (the last one made) while its key holds, else made anew. The key is what the fragment depends
        on: the record's key, whether the worker runs the connector, the generations its instances were
        assigned at (``at``; ``generation`` for those not recorded) and their restart counters."""
        nums = owned.nums.get(name, ())
        key = (self.record_key(name), name in owned.owns, at.get(name, generation), restarts.get(name, 0),
               tuple((n, at.get(f"{name}-{n}", generation), restarts.get(f"{name}-{n}", 0)) for n in nums))
        if hit is not None and hit[0] == key:
            return hit
        return key, self._fragment(name, key, nums)

    def regenerate(self, worker_id: str, view: dict[str, Any], digest: str, assignment: dict[str, Any]
                   ) -> tuple[dict[str, Any], str] | None:
        """``(view, digest)``: ``worker_id``'s ``view`` (whose digest is ``digest``) under ``assignment``'s
        generation and epoch, for a caller that knows nothing else of the view moved (no instance of
        the worker placed or granted anew, none of its connectors changed); what :meth:`build` would
        give then, without walking the view's connectors and tasks. ``None`` when ``view`` is not
        this worker's last build (build it).
        """
        basis = self._bases.get(worker_id)
        if basis is None or basis.digest != digest:
            return None
        generation, epoch = assignment["generation"], assignment["epoch"]
        new = _digest(worker_id, generation, epoch, basis.total)
        view = {**view, "generation": generation, "epoch": epoch}
        self._bases[worker_id] = _Basis(new, basis.total, basis.fragments, view)
        return view, new

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
        return entry, task_entries, _fragment_hash(name, entry, task_entries)
