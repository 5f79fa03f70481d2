"""Group commit of a relational store's offset commits: concurrent callers share transactions.

Owns who writes a batch and when (:class:`OffsetGroupCommit`); what a batch writes and how the
writer lease is checked belong to the store (:meth:`RelationalMetadataStore._commit_offsets_of`; the
Redis plugin's ``RedisMetadataStore._commit_offsets_of``, one Lua script per batch, uses it too).
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

    def _commit_offsets_of(self, entries_by_connector: dict[str, list[tuple]]) -> None:
        """Write one group commit's offsets durably, lease checked (raises LeaseLost, StoreUnavailable)."""

__all__ = ["OffsetGroupCommit"]


class _Pending:
    """One caller's commit, waiting to be written.

    ``wake`` is a lock held from the start and released exactly once, by whoever ends the wait: the
    caller woken just before this one from the same written batch, or that batch's leader for its first
    waiting caller (``done`` set first, with ``error``, and ``then`` naming the batch's next caller),
    or a leader that handed this caller the role (``done`` left false). Acquiring and releasing a
    lock are two C calls, where an ``Event`` is a ``Condition`` in Python, whose ``set`` was the
    most expensive step of a commit (benchmarks/stores).
    """

    __slots__ = ("items", "wake", "done", "error", "then")

    def __init__(self, items: list[tuple[str, list]]) -> None:
        self.items = items  # [(connector, entries)]: one commit, or a caller's many written together
        self.wake = threading.Lock()
        self.wake.acquire()
        self.done = False
        self.error: BaseException | None = None
        self.then: _Pending | None = None


class OffsetGroupCommit:
    """Group commit of offset commits: concurrent callers share transactions.

    Leader/follower, as databases do for their logs: a caller that finds fewer than
    ``max_flushes`` transactions running becomes a leader and writes its commit with
    the oldest waiting ones (up to ``max_batch`` in all) in one transaction with one
    lease check; the others wait for their commit's transaction. After its flush a
    leader hands the role to the oldest waiting caller, taking that caller's commit
    out of the queue so that it is written by that caller's own flush, so no caller
    flushes for others indefinitely. A failed transaction fails every commit in it
    (none was written).

    A written batch's callers are woken in a chain: the leader wakes the first, and
    each woken caller wakes the next before returning. Waking them all from the
    leader had one thread make every futex call while holding the GIL, and then a
    dozen threads woken at once contend for the GIL; in the chain each wake-up is
    paid by a thread that just got the GIL anyway. With no database
    (``benchmarks/stores/group_commit.py``, 32 callers), 14.4-14.8 thousand commits/s
    in a chain against 11.2-11.6 thousand waking all from the leader.

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

    The queue's lock is held only around attribute reads, list slicing and
    concatenation, never around a call or a loop: CPython may make a thread hand
    the GIL over at a call or a loop's jump (its eval breaker), and a thread that
    does so holding the lock makes every other caller block on it and be woken in
    turn (a lock convoy). With a loop and list calls inside, 32 callers paid ~58 µs
    of CPU per commit for the group commit alone, against ~4 µs for one caller
    (benchmarks/stores). So the queue is replaced, never changed in place, and a
    leader sorts out what it took after letting the lock go.
    """

    def __init__(self, store: OffsetWriter, max_batch: int = 256, max_flushes: int = 4) -> None:
        self.store = store
        self.max_batch = max_batch
        self.max_flushes = max_flushes
        self._lock = threading.Lock()
        #: waiting callers in arrival order; replaced under ``_lock``, never changed in place
        self._pending: list[_Pending] = []
        self._flushing = 0

    def submit(self, connector: str, entries: list) -> None:
        """Write ``entries`` (``(partition, offset | None, generation, seq)``, see ``offsets.Entry``) of
        ``connector``; returns once committed."""
        self.submit_many([(connector, entries)])

    def submit_many(self, items: list[tuple[str, list]]) -> None:
        """Write every ``(connector, entries)`` of ``items`` in one transaction (shared with other callers'
        commits like one commit); returns once committed. Errors: those of the transaction."""
        p = _Pending(items)
        limit = self.max_flushes if self.store.upsert else 1
        with self._lock:  # nothing called inside: see the class docstring
            lead = self._flushing < limit
            if lead:
                self._flushing += 1
            else:
                self._pending = self._pending + [p]
        if lead:
            self._flush(p)
        else:
            p.wake.acquire()  # released once: the commit was written, or this caller leads now
            if p.then is not None:  # the next caller of this caller's written batch
                p.then.wake.release()
            if not p.done:
                self._flush(p)
        if p.error is not None:
            if isinstance(p.error, StoreError):  # a fresh exception per caller (they are raised in many threads)
                raise type(p.error)(str(p.error))
            raise p.error

    def _flush(self, leader: _Pending) -> None:
        """Write ``leader``'s commit with up to ``max_batch - 1`` of the oldest waiting ones, then hand the
        role on.

        ``leader``'s commit is older than every waiting one, so it goes first: a caller handed the role
        was the oldest waiting, and one that took a free slot found nobody waiting (a slot is only
        freed when nobody waits, and nobody queues while a slot is free)."""
        take = self.max_batch - 1
        with self._lock:
            pending = self._pending
            self._pending = pending[take:]
        others = pending[:take]
        batch = [leader] + others
        merged: dict[str, list] = {}
        for q in batch:
            for connector, entries in q.items:
                merged.setdefault(connector, []).extend(entries)
        error: BaseException | None = None
        try:
            self.store._commit_offsets_of(merged)
        except BaseException as exc:  # noqa: BLE001 - handed to every caller of the batch
            error = exc
        leader.error, leader.done = error, True
        # the role passes to the oldest waiting caller, whose commit leaves the queue for its own flush
        with self._lock:
            pending = self._pending
            if pending:
                nxt = pending[0]
                self._pending = pending[1:]
            else:
                nxt = None
                self._flushing -= 1
        prev = None  # others are woken in a chain, the first by this leader (class docstring)
        for q in others:
            q.error, q.done = error, True
            if prev is not None:
                prev.then = q
            prev = q
        if nxt is not None:
            nxt.wake.release()
        if others:
            others[0].wake.release()
