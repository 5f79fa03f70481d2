"""Backup and restore of a cluster's metadata: one versioned, self-checking JSON document.

Owns the backup format and the two operations on the leader's
:class:`~webapp.storage.switch.StoreRouter`; the REST resources
(``GET /raftconnect/v1/backup``, ``POST /raftconnect/v1/restore``, in
:mod:`webapp.connect.api.stores`) and the CLI (``raftconnect backup``) only move the
document. Must not touch Kafka or the workers.

What a backup holds, per connector name (the unit the store switch copies,
:class:`~webapp.storage.base.NameSnapshot`): the connector config as stored
(secrets stay config-provider references when they were submitted as such),
its target state, its task configs and its committed offsets, including the
offsets of deleted connectors, which Connect keeps too. Statuses are left out:
they describe workers of the old cluster, and the new one reports its own.
Optionally the cluster's replicated REST users (name, password hash, role as a
group, active); API tokens are not exported (issue new ones).

Consistency: :func:`export_backup` holds the router's write gate exclusively
while it reads, the same gate the store switch uses to verify a copy, so no
config write or offset commit lands in the middle: the document is one point
in the cluster's history. Writes wait for the read (about a millisecond per
connector) and then go on.

Format (``version`` 1)::

    {"format": "raftconnect-backup", "version": 1, "created_at": ISO-8601 UTC,
     "store": name of the store it was read from,
     "connectors": [{"name", "config" | null, "target_state" | null,
                     "tasks": [task config, ...], "offsets": [{"partition", "offset"}, ...]}],
     "users": [{"username", "password" (Django hash), "is_active", "is_superuser",
                "groups": [role, ...]}],
     "sha256": hex digest of the document without this key (canonical JSON)}

Errors are :class:`BackupError` with an HTTP status.
"""
from __future__ import annotations

import hashlib
import json
from datetime import datetime, timezone
from typing import Any

from .base import ConnectorRecord, NameSnapshot, SourceOffset

__all__ = ["FORMAT", "VERSION", "BackupError", "export_backup", "restore_backup", "digest"]

FORMAT = "raftconnect-backup"
VERSION = 1
#: what a restore writes for each name: configs (with target states and task configs) and offsets
RESTORED_KINDS = ("config", "offsets")


class BackupError(Exception):
    """A backup document that cannot be taken or restored; ``status`` is the HTTP status to answer."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def digest(document: dict[str, Any]) -> str:
    """Hex SHA-256 of ``document`` without its ``sha256`` key, over canonical JSON (sorted keys, no spaces)."""
    body = {k: v for k, v in document.items() if k != "sha256"}
    return hashlib.sha256(json.dumps(body, sort_keys=True, separators=(",", ":")).encode()).hexdigest()


def _snapshot_json(snap: NameSnapshot) -> dict[str, Any]:
    rec = snap.record
    return {"name": snap.name,
            "config": None if rec is None else dict(rec.config),
            "target_state": None if rec is None else rec.target_state,
            "tasks": [] if rec is None else [dict(t) for t in rec.tasks],
            "offsets": [{"partition": dict(o.partition), "offset": dict(o.offset)} for o in snap.offsets]}


def export_backup(router, *, users: list[dict[str, Any]] | None = None,
                  now: datetime | None = None) -> dict[str, Any]:
    """The backup document of everything ``router`` (the leader's StoreRouter) holds, read at one point.

    ``users``: the REST users to include (see :func:`webapp.connect.api.accounts.export_users`
    for their shape), or None for none. Errors: :class:`BackupError` 409 while a
    store switch runs (the data is moving between stores).
    """
    if getattr(router, "_mirror", None) is not None:
        raise BackupError("A metadata store switch is running; take the backup after it finished", 409)
    with router.gate.exclusive():
        snaps = [router.export_name(name) for name in router.all_names()]
        store = router.active_name
    created = (now or datetime.now(timezone.utc)).isoformat(timespec="milliseconds").replace("+00:00", "Z")
    document = {"format": FORMAT, "version": VERSION, "created_at": created, "store": store,
                "connectors": [_snapshot_json(s) for s in snaps if s.record is not None or s.offsets],
                "users": list(users or [])}
    document["sha256"] = digest(document)
    return document


def _check_str_map(value: Any, what: str) -> dict[str, str]:
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise BackupError(f"{what} must be an object of strings")
    return value


def parse_backup(document: Any) -> list[NameSnapshot]:
    """Check a backup document (format, version, digest, shapes) and return its names as snapshots.

    Errors: :class:`BackupError` 400 naming what is wrong.
    """
    if not isinstance(document, dict) or document.get("format") != FORMAT:
        raise BackupError(f'Not a RaftConnect backup: expected "format": "{FORMAT}"')
    version = document.get("version")
    if not isinstance(version, int) or version < 1 or version > VERSION:
        raise BackupError(f"Backup format version {version!r} is not supported by this release (it reads 1 to "
                          f"{VERSION})")
    if document.get("sha256") != digest(document):
        raise BackupError("The backup's sha256 does not match its content: the file was changed or is incomplete")
    entries = document.get("connectors")
    if not isinstance(entries, list):
        raise BackupError('"connectors" must be a list')
    snaps, seen = [], set()
    for i, entry in enumerate(entries):
        where = f"connectors[{i}]"
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str) or not entry["name"]:
            raise BackupError(f"{where} must be an object with a non-empty name")
        name = entry["name"]
        if name in seen:
            raise BackupError(f"{where}: connector {name} appears twice")
        seen.add(name)
        record = None
        if entry.get("config") is not None:
            config = _check_str_map(entry["config"], f"{where}.config")
            tasks = entry.get("tasks") or []
            if not isinstance(tasks, list):
                raise BackupError(f"{where}.tasks must be a list")
            record = ConnectorRecord(name, dict(config), str(entry.get("target_state") or "STARTED"),
                                     [dict(_check_str_map(t, f"{where}.tasks[{j}]")) for j, t in enumerate(tasks)])
        offsets = []
        for j, o in enumerate(entry.get("offsets") or []):
            if not isinstance(o, dict) or not isinstance(o.get("partition"), dict) or not isinstance(o.get("offset"), dict):
                raise BackupError(f"{where}.offsets[{j}] must be {{\"partition\": {{...}}, \"offset\": {{...}}}}")
            offsets.append(SourceOffset(dict(o["partition"]), dict(o["offset"])))
        snaps.append(NameSnapshot(name, record, {"connector": None, "tasks": {}}, offsets, []))
    users = document.get("users") or []
    if not isinstance(users, list) or not all(isinstance(u, dict) and isinstance(u.get("username"), str) for u in users):
        raise BackupError('"users" must be a list of objects with a username')
    return snaps


def restore_backup(router, document: Any) -> dict[str, Any]:
    """Write a backup's connectors and offsets into ``router`` (the leader's StoreRouter) and return a summary.

    Restores into a cluster that holds none of the backup's names: a name that
    exists (a connector, or offsets) fails the whole restore with 409 before
    anything is written, listing the names. Each name is written in one store
    write (config, target state, task configs and offsets together); the
    coordinator then assigns the connectors and their tasks resume from the
    restored offsets. Returns ``{"connectors": n, "offsets": n, "names": [...]}``.

    Errors: :class:`BackupError` (400 bad document, 409 names exist or a store
    switch runs); store errors as they come (a failed write leaves the names
    written before it in place, and a re-run reports them as existing).
    """
    snaps = parse_backup(document)
    if getattr(router, "_mirror", None) is not None:
        raise BackupError("A metadata store switch is running; restore after it finished", 409)
    existing = sorted(set(router.all_names()) & {s.name for s in snaps})
    if existing:
        shown = ", ".join(existing[:20]) + (f" and {len(existing) - 20} more" if len(existing) > 20 else "")
        raise BackupError(f"The cluster already holds {len(existing)} of the backup's names ({shown}); restore "
                          "into a cluster without them (delete the connectors and reset their offsets first)", 409)
    for snap in snaps:
        router._write(snap.name, RESTORED_KINDS, lambda store, snap=snap: store.import_name(snap, RESTORED_KINDS))
    return {"connectors": sum(1 for s in snaps if s.record is not None),
            "offsets": sum(len(s.offsets) for s in snaps), "names": [s.name for s in snaps]}
