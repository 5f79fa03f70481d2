"""A worker's view answered as what changed since the view the worker holds.

A worker's view (``GroupCoordinator.worker_view``) names ~100 connectors and ~1,000 task configs at
10,000 connectors over 100 workers, and while connectors are created or rebalanced nearly every
generation changes nearly every view a little: a few connectors placed, a task's generation moved.
Answering each heartbeat with the whole view made encoding it the largest single cost of the leader
over the bring-up (17 % of the samples holding its interpreter lock, ``ConnectJSONRenderer.render``,
benchmarks/scale 2026-12-02). So a worker that says it can (``"view_deltas": true`` in its report)
and names the view it holds (``view_digest``) is answered, when the coordinator still has that view,
with the entries that differ::

    {"worker_id", "generation", "epoch", "digest", "session_timeout_ms", "delta_from": <digest held>,
     "connectors": {name: entry, ...}, "tasks": {key: entry, ...},      # new or changed entries
     "removed_connectors": [name, ...], "removed_tasks": [key, ...]}

Both digests are of the views' whole content (``webapp.coordinator.views._digest``), so a delta
applies to exactly one view: :func:`apply_view_delta` refuses any other, and the worker then reports
the view it does hold and is answered in full. The same pattern as the report going the other way
(``tasks_delta``). Workers that do not ask get whole views, as before. The Celery fast path
(``GroupCoordinator.dispatch``) sends deltas from the view the worker's last report named, which the
agent keeps (``Worker.NAMED_VIEWS_KEPT``) whatever the heartbeats brought since; from the newest view
given they lost a race to heartbeat answers still on their way (``benchmarks/scale/dispatch.py``
measures what they save).

Must not import Django, Raft or the store: the agent (``webapp.runtime.worker``) imports it.
"""
from __future__ import annotations

from typing import Any

__all__ = ["DELTA_FROM", "apply_view_delta", "delta_answer"]

#: the field naming the digest of the view a delta applies to
DELTA_FROM = "delta_from"


def _changes(before: dict[str, Any], after: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """``(entries of after that are new or differ, keys of before gone from after)``; an entry that is
    the same object in both is not compared (a view reused from its fragments shares them). Entries
    are dicts, never ``None``."""
    changed = {}
    new = 0
    for key, entry in after.items():
        old = before.get(key)
        if old is None:
            new += 1
            changed[key] = entry
        elif old is not entry and old != entry:
            changed[key] = entry
    # every key of after is in before or new: before holds len(after) - new of them, and the rest left
    removed = [key for key in before if key not in after] if len(before) > len(after) - new else []
    return changed, removed


def delta_answer(base: dict[str, Any], view: dict[str, Any], header: dict[str, Any]) -> dict[str, Any]:
    """The answer that turns ``base`` (a view the worker holds, its digest ``header[DELTA_FROM]``) into
    ``view``; ``header`` holds the answer's other fields (worker_id, generation, epoch, digest, ...).

    Cost: one pass over ``view``'s connectors and tasks, comparing by identity first; the answer
    holds only what differs."""
    connectors, removed_connectors = _changes(base["connectors"], view["connectors"])
    tasks, removed_tasks = _changes(base["tasks"], view["tasks"])
    return {**header, "connectors": connectors, "tasks": tasks,
            "removed_connectors": removed_connectors, "removed_tasks": removed_tasks}


def apply_view_delta(held: dict[str, Any] | None, answer: dict[str, Any]) -> dict[str, Any] | None:
    """The whole view ``answer`` (a delta, see the module docstring) describes, made from ``held``, the view
    the worker holds; ``None`` when ``held`` is not the view the delta is from (its ``digest`` differs)
    or is missing: the worker then keeps what it has, and its next heartbeat, naming that view, is
    answered in full. ``held`` is not changed."""
    if held is None or held.get("digest") != answer.get(DELTA_FROM):
        return None
    gone_connectors, gone_tasks = set(answer.get("removed_connectors") or ()), set(answer.get("removed_tasks") or ())
    connectors = {k: v for k, v in held["connectors"].items() if k not in gone_connectors}
    connectors.update(answer.get("connectors") or {})
    tasks = {k: v for k, v in held["tasks"].items() if k not in gone_tasks}
    tasks.update(answer.get("tasks") or {})
    view = {k: v for k, v in answer.items() if k not in (DELTA_FROM, "removed_connectors", "removed_tasks")}
    view["connectors"], view["tasks"] = connectors, tasks
    return view
