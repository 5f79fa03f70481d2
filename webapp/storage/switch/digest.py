"""Comparing stores: the canonical form of a name's metadata, digests, and copying names in batches.

Owns what "the same metadata" means across backends (:func:`canonical`, :func:`snapshot_digest`)
and the export/import helpers the switch copies with. Must not hold switch state.
"""
from __future__ import annotations

import hashlib
import json
from typing import Any

from webapp.plugin import partition_key

from ..base import KINDS, MetadataStore, NameSnapshot

__all__ = ["Digest", "canonical", "export", "import_into", "snapshot_digest"]


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


class Digest:
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
    d = Digest()
    for name in store.all_names():
        d.add(name, canonical(store.export_name(name)))
    return d.result()


def export(store: MetadataStore, names: list[str]) -> list[NameSnapshot]:
    """Snapshots of ``names`` in ``store``, in one batch where the store has ``export_names``. Errors: the store's."""
    batch = getattr(store, "export_names", None)
    return list(batch(names)) if batch else [store.export_name(n) for n in names]


def import_into(store: MetadataStore, snapshots: list[NameSnapshot], kinds: tuple[str, ...] = KINDS) -> None:
    """Write ``snapshots`` (their ``kinds``) into ``store``, in one batch where it has ``import_names``."""
    batch = getattr(store, "import_names", None)
    if batch:
        batch(snapshots, kinds)
    else:
        for snap in snapshots:
            store.import_name(snap, kinds)

