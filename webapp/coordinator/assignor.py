"""Weighted round-robin, incremental and sticky assignment of connectors and tasks.

A pure function of cluster state; no I/O. The coordinator calls it on the Raft
leader whenever membership, weights, the leader or the set of connectors/tasks
changes, and commits the result to Raft with a new generation.

Algorithm (quotas by the largest-remainder method, then sticky fill):

1. Effective weights: each worker's ``weight`` (> 0), except the worker on the
   Raft leader's node, which gets ``weight * leader_weight_cap`` (default 0.5, "at
   most half a share") because the leader also runs the coordinator and Raft.
2. Quotas: for ``n`` items and total effective weight ``W``, worker ``i`` has the
   ideal load ``n * w_i / W``; its quota is the floor of that, and the ``n - sum``
   items left over go one each to the workers with the largest fractional parts
   (ties broken by worker id) — Hamilton's largest-remainder apportionment. Every
   load is therefore within one item of its weighted ideal.
3. Sticky: an item keeps its previous worker while that worker is alive and below
   its quota (items are visited in a stable order). Only items whose worker left,
   or which exceed their worker's new quota, are released.
4. Released and new items go round-robin to the workers with free quota, taking
   first the worker with the largest remaining deficit (ties by worker id).

Connectors and tasks are apportioned as two separate pools, like Kafka Connect's
assignors, so both the connector instances and the tasks are balanced.

Cost: O(n + m log m) for n items and m workers.
"""
from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass
from typing import Any, Callable, Iterable, Mapping

__all__ = ["Assignment", "WeightedRoundRobinAssignor", "apportion"]


@dataclass(frozen=True)
class Assignment:
    """Result of one assignment: ``connectors`` and ``tasks`` map item key → worker id."""

    connectors: dict[str, str]
    tasks: dict[str, str]

    def moved_from(self, previous: "Assignment") -> int:
        """How many items present in both assignments changed worker."""
        moved = 0
        for new, old in ((self.connectors, previous.connectors), (self.tasks, previous.tasks)):
            moved += sum(1 for k, w in new.items() if k in old and old[k] != w)
        return moved

    @staticmethod
    def moved_in(changes: tuple[dict[str, str | None], dict[str, str | None]], previous: "Assignment") -> int:
        """:meth:`moved_from` counted from ``changes`` (:meth:`changes_from`'s answer for ``previous``): a
        walk of what changed, not of both assignments (100,000 tasks at every generation in
        benchmarks/scale)."""
        return sum(1 for changed, old in zip(changes, (previous.connectors, previous.tasks))
                   for k, w in changed.items() if w is not None and k in old)

    def changes_from(self, previous: "Assignment") -> tuple[dict[str, str | None], dict[str, str | None]]:
        """``(connector changes, task changes)`` that turn ``previous`` into this assignment.

        Each is ``{key: new worker}`` for keys added or moved and ``{key: None}`` for keys dropped;
        keys that kept their worker are left out. What the coordinator commits
        (``ClusterCommands.set_assignment(base_generation=...)``), so the log entry of a rebalance is
        as large as what it changed, not as the whole assignment.
        """
        out = []
        for new, old in ((self.connectors, previous.connectors), (self.tasks, previous.tasks)):
            changes: dict[str, str | None] = {k: w for k, w in new.items() if old.get(k) != w}
            changes.update((k, None) for k in old if k not in new)
            out.append(changes)
        return out[0], out[1]


def apportion(n: int, weights: Mapping[str, float]) -> dict[str, int]:
    """Split ``n`` items over workers in proportion to ``weights`` (largest remainder).

    Returns ``{worker: quota}`` with ``sum == n`` and each quota within one of
    ``n * w / sum(w)``. Raises ``ValueError`` for no workers or a non-positive
    total weight.
    """
    if not weights:
        raise ValueError("no workers to assign to")
    total = float(sum(weights.values()))
    if total <= 0:
        raise ValueError("total worker weight must be positive")
    ideal = {w: n * weights[w] / total for w in weights}
    quota = {w: math.floor(v) for w, v in ideal.items()}
    left = n - sum(quota.values())
    by_remainder = sorted(weights, key=lambda w: (-(ideal[w] - quota[w]), w))
    for w in by_remainder[:left]:
        quota[w] += 1
    return quota


class WeightedRoundRobinAssignor:
    """Weighted, sticky, incremental assignor (see module docstring).

    Args:
        leader_weight_cap: fraction of its own weight that the leader's worker gets
            (0 < cap <= 1; ``leader.weight.cap``).
    """

    def __init__(self, leader_weight_cap: float = 0.5):
        if not 0 < leader_weight_cap <= 1:
            raise ValueError("leader.weight.cap must be in (0, 1]")
        self.leader_weight_cap = leader_weight_cap

    def effective_weights(self, workers: Mapping[str, float], leader_worker: str | None) -> dict[str, float]:
        """Weights after the leader cap; each must be > 0."""
        eff = {}
        for w, weight in workers.items():
            if weight <= 0:
                raise ValueError(f"worker {w} has non-positive weight {weight}")
            eff[w] = weight * self.leader_weight_cap if w == leader_worker else float(weight)
        return eff

    def assign(self, *, workers: Mapping[str, float], leader_worker: str | None,
               connectors: Iterable[str], tasks: Iterable[str],
               previous: Assignment | None = None) -> Assignment:
        """Assign every connector and task key to one worker.

        Args:
            workers: live workers and their configured weights.
            leader_worker: the worker on the Raft leader's node, or ``None``.
            connectors, tasks: item keys (``"name"`` and ``"name-i"``).
            previous: the current assignment, to stay sticky to.
        Returns an :class:`Assignment`; empty maps when there are no workers.
        """
        if not workers:
            return Assignment({}, {})
        weights = self.effective_weights(workers, leader_worker)
        prev = previous or Assignment({}, {})
        return Assignment(
            connectors=self._assign_pool(dict.fromkeys(connectors), weights, prev.connectors, None),
            tasks=self._assign_pool(dict.fromkeys(tasks), weights, prev.tasks, _task_sort_key),
        )

    @staticmethod
    def _assign_pool(items: dict[str, None], weights: dict[str, float], previous: Mapping[str, str],
                     sort_key: Callable[[str], Any] | None) -> dict[str, str]:
        """One pool (connectors or tasks): ``items`` (the keys, without duplicates, as a dict's keys) over
        ``weights``' workers, sticky to ``previous``, visited in ``sort_key`` order (steps 2-4 of the
        module docstring).

        When no live worker holds more of the items it had than its new quota (no worker left and
        none got a smaller quota: items were added or dropped, the common case), step 3 keeps every
        item it had whatever the order, so only the others are sorted and placed; the answer is the
        same as the walk of every item in order, which is done otherwise. At 100,000 tasks the
        sort and the walk were ~110 ms of the leader's GIL at each generation, while the 100,000
        tasks of benchmarks/scale were being placed.
        """
        quota = apportion(len(items), weights)
        kept = {item: owner for item, owner in previous.items() if owner in quota and item in items}
        load = dict.fromkeys(weights, 0)
        load.update(Counter(kept.values()))
        if all(load[w] <= quota[w] for w in weights):
            result = kept
            unplaced = sorted((item for item in items if item not in kept), key=sort_key)
        else:
            load = dict.fromkeys(weights, 0)
            result, unplaced = _keep_in_order(items, previous, quota, load, sort_key)
        return _place_round_robin(unplaced, quota, load, result)


def _keep_in_order(items: Iterable[str], previous: Mapping[str, str], quota: dict[str, int], load: dict[str, int],
                   sort_key: Callable[[str], Any] | None) -> tuple[dict[str, str], list[str]]:
    """Step 3 as a walk of every item in ``sort_key`` order: ``({item: its previous worker}, [the others in
    order])`` — an item stays while its previous worker is live (in ``quota``) and below its quota.
    Counts what it keeps into ``load`` (``{worker: 0, ...}`` at first)."""
    result: dict[str, str] = {}
    unplaced: list[str] = []
    # dict.fromkeys kept the caller's order: keys given in order (the coordinator's are) sort in one pass
    # instead of n log n key comparisons
    for item in sorted(items, key=sort_key):
        owner = previous.get(item)
        if owner in load and load[owner] < quota[owner]:
            result[item] = owner
            load[owner] += 1
        else:
            unplaced.append(item)
    return result, unplaced


def _place_round_robin(unplaced: list[str], quota: dict[str, int], load: dict[str, int],
                       result: dict[str, str]) -> dict[str, str]:
    """Step 4: ``unplaced`` (in order) round-robin over the workers with free quota, largest deficit first
    (ties by worker id), into ``result`` (returned) and ``load``."""
    if unplaced:
        order = sorted((w for w in quota if load[w] < quota[w]), key=lambda w: (-(quota[w] - load[w]), w))
        i = 0
        for item in unplaced:
            while load[order[i % len(order)]] >= quota[order[i % len(order)]]:
                i += 1
            w = order[i % len(order)]
            result[item] = w
            load[w] += 1
            i += 1
    return result


def _task_sort_key(key: str) -> tuple[str, int]:
    name, _, num = key.rpartition("-")
    return (name, int(num)) if num.isdigit() else (key, -1)
