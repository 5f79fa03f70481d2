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

Modules: :mod:`.stores` (:class:`StoreSet`, the request errors), :mod:`.router`
(:class:`StoreRouter`, :class:`WriteGate`), :mod:`.digest` (canonical values, digests, batch
copies), :mod:`.manager` (:class:`SwitchManager`).
"""
from __future__ import annotations

from .digest import canonical, snapshot_digest
from .manager import SwitchManager
from .router import StoreRouter, WriteGate
from .stores import StoreSet, SwitchError, UnknownStore

__all__ = ["StoreRouter", "StoreSet", "SwitchError", "SwitchManager", "UnknownStore", "WriteGate",
           "canonical", "snapshot_digest"]
