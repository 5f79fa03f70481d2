"""The encoded entries of ``GET /connectors?expand=status|info``, kept between lists.

Owns :class:`ListingCache`: each connector's ConnectorStateInfo and ConnectorInfo as JSON bytes,
tagged with the connector's listing revision (:meth:`~webapp.storage.base.MetadataStore.listing_revisions`),
so that a list rebuilds only the connectors that changed since the last one. It must not decide
what an entry says: the caller (the Herder) hands in the functions that build every entry, exactly
as for a single connector, and this module imports nothing of it.

Why: at 10,000 connectors of 10 tasks the list is ~7 MB of JSON, and building it whole cost the
leader ~0.25 s of CPU per request (benchmarks/scale/expand.py), which a leader that also carries
100 workers' heartbeats stretched to ~2 s (benchmarks/scale, issue 16). A console polls this list;
between two polls few connectors change.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import orjson

from webapp.storage.base import ConnectorSummary, ListingRevisions, MetadataStore

__all__ = ["ListingCache"]

_Entry = tuple[int, orjson.Fragment]


class ListingCache:
    """Encoded list entries per connector, valid while the connector's listing revision is unchanged.

    An entry cached under revision ``r`` was built from data read after ``r`` was read, so it is at
    least as new as ``r`` (the store's contract); it is served while the connector's revision is
    still ``r``. Status entries also depend on the members' REST addresses (a ``worker_id`` is
    shown as one) and are dropped whenever those change; every entry is dropped when the store's
    scope changes (another store became active, or this one restarted its numbering).

    Memory: one ``bytes`` per connector and kind (~0.7 KiB for a connector of 10 tasks), and
    entries of deleted connectors are dropped by the next list. Thread-safe: lists may run in
    several request threads at once; each builds what it misses, and the last writer wins with
    data no older than its revision.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._scope: Any = None
        self._addresses: dict[str, str] | None = None
        self._status: dict[str, _Entry] = {}
        self._info: dict[str, _Entry] = {}

    def clear(self) -> None:
        """Drop every entry."""
        with self._lock:
            self._scope, self._addresses = None, None
            self._status, self._info = {}, {}

    def listing(self, store: MetadataStore, revisions: ListingRevisions, *, addresses: dict[str, str] | None,
                assignment: Callable[[], dict[str, Any]],
                kind: Callable[[ConnectorSummary], tuple[str, frozenset[str]]],
                status: Callable[..., dict[str, Any]] | None,
                info: Callable[..., dict[str, Any]] | None) -> dict[str, dict[str, orjson.Fragment]]:
        """``{name: {"status": ..., "info": ...}}`` (each key only when asked) of every connector of
        ``store`` in name order, each value the JSON of what ``status`` / ``info`` build for it.

        ``revisions`` must have been read from ``store`` before this call. ``addresses``: the
        members' REST addresses status entries show (``None`` without ``status``); ``assignment()``
        the committed assignment; ``kind(summary)`` its ``(type, password keys)``, asked once per
        connector class; ``status(summary, statuses, assignment, addresses, type)`` and
        ``info(summary, type, password keys)`` build one entry, ``None`` when not asked. A connector
        deleted while the list is built is left out. Errors: the store's (:class:`StoreUnavailable`).
        """
        want_status, want_info = status is not None, info is not None
        names = store.connector_names()
        with self._lock:
            if self._scope != revisions.scope:
                self._scope, self._addresses, self._status, self._info = revisions.scope, None, {}, {}
            if want_status and addresses != self._addresses:
                self._addresses, self._status = addresses, {}
            status_cache, info_cache = self._status, self._info
        floor, changed = revisions.floor, revisions.revisions
        out: dict[str, dict[str, orjson.Fragment]] = {}
        built_status: dict[str, _Entry] = {}
        built_info: dict[str, _Entry] = {}
        committed: dict[str, Any] | None = None
        types: dict[str, tuple[str, frozenset[str]]] = {}
        for name in names:
            rev = changed.get(name, 0)
            if rev < floor:
                rev = floor
            entry: dict[str, orjson.Fragment] = {}
            hit_status = status_cache.get(name) if want_status else None
            hit_info = info_cache.get(name) if want_info else None
            if ((want_status and (hit_status is None or hit_status[0] != rev))
                    or (want_info and (hit_info is None or hit_info[0] != rev))):
                summary = store.connector_summary(name)
                if summary is None:  # deleted meanwhile
                    continue
                cls = summary.config.get("connector.class", "")
                type_, keys = types.get(cls) or types.setdefault(cls, kind(summary))
                if want_status and (hit_status is None or hit_status[0] != rev):
                    if committed is None:
                        committed = assignment()
                    built = status(summary, store.get_statuses(name), committed, addresses, type_)
                    hit_status = built_status[name] = (rev, orjson.Fragment(orjson.dumps(built)))
                if want_info and (hit_info is None or hit_info[0] != rev):
                    built = info(summary, type_, keys)
                    hit_info = built_info[name] = (rev, orjson.Fragment(orjson.dumps(built)))
            if want_status:
                entry["status"] = hit_status[1]
            if want_info:
                entry["info"] = hit_info[1]
            out[name] = entry
        self._keep(revisions.scope, addresses, built_status, built_info, out)
        return out

    def _keep(self, scope: Any, addresses: dict[str, str] | None, built_status: dict[str, _Entry],
              built_info: dict[str, _Entry], listed: dict[str, Any]) -> None:
        """Store what one list built, unless the scope or the addresses changed meanwhile; drop
        entries of connectors the list no longer holds."""
        with self._lock:
            if self._scope != scope:
                return
            if built_status and addresses == self._addresses:
                self._status.update(built_status)
            if built_info:
                self._info.update(built_info)
            for cache in (self._status, self._info):
                if len(cache) > len(listed):
                    for name in [n for n in cache if n not in listed]:
                        del cache[name]
