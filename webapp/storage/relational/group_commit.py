"""Group commit of a relational store's offset commits: concurrent callers share transactions.

Owns who writes a batch and when (:class:`OffsetGroupCommit`); what a batch writes and how the
writer lease is checked belong to the store (:meth:`RelationalMetadataStore._commit_offsets_of`).
Must not import the store.
"""
from __future__ import annotations

import threading
from typing import Protocol

from ..base import StoreError


class OffsetWriter(Protocol):
    """What a group commit needs of its store (:class:`~webapp.storage.relational.RelationalMetadataStore`)."""

    #: whether the backend upserts (several flushes may then run at once) or replaces rows (one at a time)
    upsert: bool

    def _commit_offsets_of(self, entries_by_connector: dict[str, list[tuple[dict, dict | None]]]) -> None:
        """Write one group commit's offsets durably, lease checked (raises LeaseLost, StoreUnavailable)."""

__all__ = ["OffsetGroupCommit"]


class _Pending:
    """One caller's commit. ``lead``, ``done``, ``error`` and ``woken`` change under the group's lock.

    ``wake`` is a lock held from the start, released to wake the caller: acquiring and releasing a
    lock are two C calls, where an ``Event`` is a ``Condition`` in Python, whose ``set`` was the most
    expensive step of a commit (benchmarks/stores). ``woken`` says a release is outstanding, so a
    caller woken twice (its commit written by one flush while another hands it the lead) is
    released once.
    """

    __slots__ = ("items", "wake", "woken", "lead", "done", "error")

    def __init__(self, items: list[tuple[str, list]]) -> None:
        self.items = items  # [(connector, entries)]: one commit, or a caller's many written together
        self.wake = threading.Lock()
        self.wake.acquire()
        self.woken = self.lead = self.done = False
        self.error: BaseException | None = None


class OffsetGroupCommit:
    """Group commit of offset commits: concurrent callers share transactions.

    Leader/follower, as databases do for their logs: a caller that finds fewer than
    ``max_flushes`` transactions running becomes a leader and writes the pending
    commits (up to ``max_batch``, in arrival order) in one transaction with one lease
    check; the others wait for their commit's transaction. After its flush a leader
    hands the role to the oldest waiting caller, so no caller flushes for others
    indefinitely. A failed transaction fails every commit in it (none was written).
    A caller that was handed the role but has not flushed yet keeps its commit for
    its own flush: were it written by another leader, that caller would return
    without flushing and its slot would be lost, until no slot was left and every
    commit waited forever (found by tests/storage/test_group_commit.py).

    Up to ``max_flushes`` transactions run at once, each on its leader's own
    connection: with one, every batch waited for the previous one's commit (its WAL
    flush, on PostgreSQL), and the store reached 0.08 of plain batched upserts from
    32 threads (benchmarks/stores, issue 16); concurrent transactions let the
    database share its log flush between them. Their lease checks take a shared
    row lock, so they do not serialize each other. A backend without upsert
    (Oracle, a plugin setting ``upsert`` false) replaces rows by delete and insert,
    which two transactions on one key would make clash: there one transaction runs
    at a time, as before. Each transaction writes its rows in key order, so two of
    them touching the same rows cannot deadlock. One caller has
    at most one commit pending, so its own commits stay in order.
    """

    def __init__(self, store: OffsetWriter, max_batch: int = 256, max_flushes: int = 4) -> None:
        self.store = store
        self.max_batch = max_batch
        self.max_flushes = max_flushes
        self._lock = threading.Lock()
        self._pending: list[_Pending] = []
        self._flushing = 0

    def submit(self, connector: str, entries: list) -> None:
        """Write ``entries`` (``(partition, offset | None)``) of ``connector``; returns once committed."""
        self.submit_many([(connector, entries)])

    def submit_many(self, items: list[tuple[str, list]]) -> None:
        """Write every ``(connector, entries)`` of ``items`` in one transaction (shared with other callers'
        commits like one commit); returns once committed. Errors: those of the transaction."""
        p = _Pending(items)
        with self._lock:
            self._pending.append(p)
            if self._flushing < (self.max_flushes if self.store.upsert else 1):
                self._flushing += 1
                p.lead = True
        while True:
            with self._lock:
                p.woken = False
                if p.done:
                    break
                lead = p.lead
            if lead:
                self._flush(p)
            else:
                p.wake.acquire()
        if p.error is not None:
            if isinstance(p.error, StoreError):  # a fresh exception per caller (they are raised in many threads)
                raise type(p.error)(str(p.error))
            raise p.error

    def _flush(self, leader: _Pending) -> None:
        with self._lock:
            batch: list[_Pending] = []
            rest: list[_Pending] = []
            for q in self._pending:  # not the commits of callers handed the lead: each flushes its own
                (batch if len(batch) < self.max_batch and (q is leader or not q.lead) else rest).append(q)
            self._pending = rest
        merged: dict[str, list] = {}
        for q in batch:
            for connector, entries in q.items:
                merged.setdefault(connector, []).extend(entries)
        error: BaseException | None = None
        if batch:
            try:
                self.store._commit_offsets_of(merged)
            except BaseException as exc:  # noqa: BLE001 - handed to every caller of the batch
                error = exc
        wake: list[_Pending] = []
        with self._lock:
            for q in batch:
                q.error, q.done, q.lead = error, True, False
                if q is not leader and not q.woken:
                    q.woken = True
                    wake.append(q)
            leader.lead = False
            # the role passes to the oldest waiting caller not already leading (others may be flushing)
            nxt = next((q for q in self._pending if not q.lead), None)
            if nxt is not None:
                nxt.lead = True
                if nxt is not leader and not nxt.woken:  # the leader may be next: its own commit waits
                    nxt.woken = True
                    wake.append(nxt)
            else:
                self._flushing -= 1
        for q in wake:
            q.wake.release()
