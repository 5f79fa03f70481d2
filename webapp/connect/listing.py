"""The encoded entries of ``GET /connectors?expand=status|info``, kept between lists.

Owns :class:`ListingCache`: each connector's ConnectorStateInfo and ConnectorInfo as JSON bytes,
tagged with the connector's listing revision (:meth:`~webapp.storage.base.MetadataStore.listing_revisions`),
so that a list rebuilds only the connectors that changed since the last one. It must not decide
what an entry says: the Herder's ``_status`` and ``_info`` build every entry, exactly as for a
single connector.

Why: at 10,000 connectors of 10 tasks the list is ~7 MB of JSON, and building it whole cost the
leader ~0.25 s of CPU per request (benchmarks/scale/expand.py), which a leader that also carries
100 workers' heartbeats stretched to ~2 s (benchmarks/scale, issue 16). A console polls this list;
between two polls few connectors change.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING, Any

import orjson

from webapp.storage.base import ListingRevisions

if TYPE_CHECKING:  # pragma: no cover
    from webapp.connect.herder import Herder

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

    def listing(self, herder: Herder, revisions: ListingRevisions, want_status: bool,
                want_info: bool) -> dict[str, dict[str, orjson.Fragment]]:
        """``{name: {"status": ..., "info": ...}}`` (each key only when asked) of every connector in
        name order, each value the JSON of what ``herder``'s ``connectors_expanded`` gives for it.

        ``revisions`` must have been read from ``herder.store`` before this call. A connector
        deleted while the list is built is left out. Errors: the store's (:class:`StoreUnavailable`).
        """
        store = herder.store
        names = store.connector_names()
        addresses = herder._worker_addresses(herder.members()) if want_status else None
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
        assignment: dict[str, Any] | None = None
        types: dict[str, tuple[str, frozenset[str]]] = {}
        for name in names:
            rev = changed.get(name, 0)
            if rev < floor:
                rev = floor
            entry: dict[str, orjson.Fragment] = {}
            status = status_cache.get(name) if want_status else None
            info = info_cache.get(name) if want_info else None
            if (want_status and (status is None or status[0] != rev)) or (want_info and (info is None or info[0] != rev)):
                summary = store.connector_summary(name)
                if summary is None:  # deleted meanwhile
                    continue
                cls = summary.config.get("connector.class", "")
                kind = types.get(cls)
                if kind is None:
                    kind = types[cls] = (herder._type(summary), herder._password_keys(summary.config))
                if want_status and (status is None or status[0] != rev):
                    if assignment is None:
                        assignment = herder.assignment()
                    built = herder._status(summary, store.get_statuses(name), assignment, addresses, kind[0])
                    status = built_status[name] = (rev, orjson.Fragment(orjson.dumps(built)))
                if want_info and (info is None or info[0] != rev):
                    built = herder._info(summary, kind[0], kind[1])
                    info = built_info[name] = (rev, orjson.Fragment(orjson.dumps(built)))
            if want_status:
                entry["status"] = status[1]
            if want_info:
                entry["info"] = info[1]
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
