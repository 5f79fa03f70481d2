"""``OffsetGroupCommit`` (a relational store's group commit of offset commits), with a store that only
counts what it writes: every commit written once, in each caller's order, every flush slot given back,
a failed transaction failing exactly its own commits."""
from __future__ import annotations

import random
import threading
import time

import pytest

from webapp.storage.base import StoreUnavailable
from webapp.storage.relational.group_commit import OffsetGroupCommit

CALLERS, COMMITS = 32, 300


class CountingStore:
    """Writes by appending; each transaction takes 0-2 ms, as a database's does; fails on request."""

    def __init__(self, upsert: bool = True) -> None:
        self.upsert = upsert
        self.written: dict[str, list[int]] = {}
        self.fail: set[int] = set()
        self._lock = threading.Lock()
        self.running = self.most_running = 0

    def _commit_offsets_of(self, merged: dict[str, list]) -> None:
        with self._lock:
            self.running += 1
            self.most_running = max(self.most_running, self.running)
        try:
            time.sleep(random.random() * 0.002)
            if any(n in self.fail for entries in merged.values() for n in entries):
                raise StoreUnavailable("metadata store 'test': the transaction failed")
            with self._lock:
                for connector, entries in merged.items():
                    self.written.setdefault(connector, []).extend(entries)
        finally:
            with self._lock:
                self.running -= 1


def _run(group: OffsetGroupCommit, callers: int = CALLERS, commits: int = COMMITS) -> dict[str, list]:
    """Every caller's commits; asserts that each acknowledged commit was written before its caller woke
    (callers of a batch are woken one by another, in a chain: a woken caller must find its own commit written)."""
    errors: dict[str, list] = {}
    early: list[int] = []
    store = group.store

    def caller(i: int) -> None:
        for n in range(commits):
            try:
                group.submit(f"c{i}", [i * commits + n])
            except StoreUnavailable:
                errors.setdefault(f"c{i}", []).append(i * commits + n)
            else:
                with store._lock:
                    if store.written.get(f"c{i}", [None])[-1] != i * commits + n:
                        early.append(i * commits + n)

    threads = [threading.Thread(target=caller, args=(i,), daemon=True) for i in range(callers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not any(t.is_alive() for t in threads), "commits still waiting after 120 s"
    assert early == [], "commits acknowledged before they were written"
    return errors


@pytest.mark.parametrize("upsert, max_batch", [(True, 1), (True, 8), (True, 256), (False, 8)])
def test_every_commit_is_written_once_in_order_and_every_slot_comes_back(upsert, max_batch):
    store = CountingStore(upsert)
    group = OffsetGroupCommit(store, max_batch=max_batch, max_flushes=4)
    assert _run(group) == {}
    for i in range(CALLERS):
        assert store.written[f"c{i}"] == list(range(i * COMMITS, (i + 1) * COMMITS))
    assert group._flushing == 0 and group._pending == []
    assert store.most_running <= (4 if upsert else 1)


def test_a_failed_transaction_fails_its_commits_only():
    store = CountingStore()
    store.fail = set(random.Random(7).sample(range(CALLERS * 50), 40))
    group = OffsetGroupCommit(store, max_batch=8, max_flushes=4)
    errors = _run(group, commits=50)
    failed = {n for entries in errors.values() for n in entries}
    written = {n for entries in store.written.values() for n in entries}
    assert store.fail <= failed  # a commit in a failed transaction is never acknowledged
    assert failed.isdisjoint(written) and failed | written == set(range(CALLERS * 50))
    assert group._flushing == 0
