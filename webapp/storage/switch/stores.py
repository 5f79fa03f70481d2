"""The metadata stores one node can use, by name (:class:`StoreSet`), and the errors of a switch request.

Owns building, preparing, replacing and closing the node's stores (``raft``, ``RAFTCONNECT_STORE_<NAME>``
URLs, run-time stores replicated through Raft). Must not route writes or run a switch.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable

from raftnode.state import STORE_RAFT

from ..base import MetadataStore, StoreUnavailable
from ..registry import create_store
from ..relational import redact_url

__all__ = ["StoreSet", "SwitchError", "UnknownStore"]

log = logging.getLogger("webapp.storage.switch")  # one logger name for the switch, whatever the module


class SwitchError(Exception):
    """A switch request that cannot be taken; ``status`` is the HTTP status (400, 404, 409, 503)."""

    def __init__(self, message: str, status: int = 409):
        super().__init__(message)
        self.status = status


class UnknownStore(SwitchError):
    """No store of that name is configured on this node."""

    def __init__(self, name: str, known: list[str]):
        super().__init__(f"Unknown metadata store {name!r}; configured stores: {', '.join(known)} "
                         f"(add one with POST /raftconnect/v1/metadata-store/stores or on the admin page)", 404)



class StoreSet:
    """The metadata stores one node can use, by name (see module docstring).

    Two sources: stores configured on this node by environment variable (``urls``, node-local)
    and stores added at run time, replicated through Raft (``specs``, the same on every member).
    A name in both is the environment's (``describe`` says so). A run-time store is built from its
    spec's URL and password once ``resolve`` has turned their config-provider references into
    values on this node; a store removed or replaced in ``specs`` is closed on the next lookup.

    Args:
        raft_store: the node's ``raft`` store.
        urls: ``{name: url}`` of stores configured by environment (names lower case; ``raft`` is reserved).
        fence: the fencing check handed to every built store (``raft.state.check_fence``).
        factory: ``(name, url, fence) -> MetadataStore``; defaults to
            :func:`webapp.storage.registry.create_store`.
        specs: ``() -> {name: spec}``, the run-time stores (``ClusterStateMachine.store_specs``);
            default none.
        resolve: ``(name, spec) -> url`` with every reference resolved (may raise ``ValueError``
            naming the reference, never the value); required when ``specs`` is given.
    """

    def __init__(self, raft_store: MetadataStore, urls: dict[str, str], fence: Callable,
                 factory: Callable[..., MetadataStore] = create_store,
                 specs: Callable[[], dict[str, dict[str, Any]]] | None = None,
                 resolve: Callable[[str, dict[str, Any]], str] | None = None):
        self.env_urls = {k.lower(): v for k, v in urls.items() if k.lower() != STORE_RAFT}
        if any(k.lower() == STORE_RAFT for k in urls):
            log.warning("RAFTCONNECT_STORE_RAFT is ignored: 'raft' is the built-in Raft store")
        self._fence = fence
        self._factory = factory
        self._specs = specs or dict
        self._resolve = resolve
        self._stores: dict[str, MetadataStore] = {STORE_RAFT: raft_store}
        self._built_from: dict[str, Any] = {}  # name -> the env URL or spec a built store came from
        self._lock = threading.Lock()

    def specs(self) -> dict[str, dict[str, Any]]:
        """The run-time stores not shadowed by an environment store: ``{name: spec}`` (a copy)."""
        return {k: dict(v) for k, v in list(self._specs().items()) if k not in self.env_urls and k != STORE_RAFT}

    @property
    def urls(self) -> dict[str, str]:
        """``{name: url}`` of every configured store but ``raft``: environment URLs (may hold passwords:
        show them only through ``redact_url``) and run-time stores' URLs (references, no passwords)."""
        return {**{k: v["url"] for k, v in self.specs().items()}, **self.env_urls}

    def source(self, name: str) -> str | None:
        """Where store ``name`` is configured: ``"raft"`` (built in), ``"environment"``, ``"cluster"``
        (added at run time) or ``None`` (unknown here)."""
        if name == STORE_RAFT:
            return "raft"
        if name in self.env_urls:
            return "environment"
        return "cluster" if name in self.specs() else None

    def names(self) -> list[str]:
        """``raft`` first, then the configured stores, sorted."""
        return [STORE_RAFT] + sorted(self.urls)

    def describe(self) -> list[dict[str, Any]]:
        """``[{"name", "backend", "url", "source", ...}]``, safe to show.

        ``url`` is ``None`` for raft, redacted for environment stores, and as added (references,
        never a password) for run-time stores, which also carry ``password`` (the reference or
        ``None``), ``added_at`` (unix seconds) and ``added_by``. ``shadows``: an environment
        store whose name is also a run-time store's (the environment's is used on this node).
        """
        out: list[dict[str, Any]] = [{"name": STORE_RAFT, "backend": "raft", "url": None, "source": "raft"}]
        specs = self.specs()
        shadowed = set(self._specs()) & set(self.env_urls)
        for name in sorted(self.urls):
            if name in self.env_urls:
                url = self.env_urls[name]
                entry = {"name": name, "backend": _scheme(url), "url": redact_url(url), "source": "environment"}
                if name in shadowed:
                    entry["shadows"] = "a store added at run time has this name too; this node uses its own"
            else:
                spec = specs[name]
                entry = {"name": name, "backend": _scheme(spec["url"]), "url": spec["url"], "source": "cluster",
                         "password": spec.get("password"), "added_at": spec.get("added_at"),
                         "added_by": spec.get("added_by")}
            out.append(entry)
        return out

    def _origin(self, name: str) -> Any:
        if name in self.env_urls:
            return self.env_urls[name]
        spec = self._specs().get(name) if name != STORE_RAFT else None  # no copy: every read passes here
        return None if spec is None else (spec["url"], spec.get("password"))

    def _url(self, name: str) -> str:
        if name in self.env_urls:
            return self.env_urls[name]
        spec = self.specs()[name]
        if self._resolve is None:
            raise StoreUnavailable(f"metadata store {name!r} was added at run time, but this node cannot resolve "
                                   "config-provider references")
        try:
            return self._resolve(name, spec)
        except ValueError as exc:
            raise StoreUnavailable(f"metadata store {name!r} cannot be built on this node: {exc}") from None

    def get(self, name: str) -> MetadataStore:
        """The store ``name``, built and prepared on first use (and again after its definition changed).

        Errors: :class:`UnknownStore`; :class:`StoreUnavailable` when it cannot be
        prepared or its references cannot be resolved here (the next call tries again);
        :class:`ValueError` for a bad URL.
        """
        origin = self._origin(name) if name != STORE_RAFT else None
        store = self._stores.get(name)
        if store is not None and (name == STORE_RAFT or self._built_from.get(name) == origin):
            return store
        if origin is None:
            self._drop(name)
            raise UnknownStore(name, self.names())
        with self._lock:
            store = self._stores.get(name)
            if store is not None and self._built_from.get(name) == origin:
                return store
            if store is not None:  # removed and added again with another URL: build it anew
                self._stores.pop(name)
                store.close()
            store = self._factory(name, self._url(name), self._fence)
            try:
                store.prepare()
            except Exception:
                store.close()
                raise
            self._stores[name] = store
            self._built_from[name] = origin
        return store

    def prune(self) -> list[str]:
        """Close the built stores no longer configured (removed at run time); returns their names."""
        gone = [n for n in list(self._stores) if n != STORE_RAFT and self._origin(n) is None]
        for name in gone:
            self._drop(name)
        return gone

    def _drop(self, name: str) -> None:
        with self._lock:
            store = self._stores.pop(name, None) if name != STORE_RAFT else None
            self._built_from.pop(name, None)
        if store is not None:
            store.close()

    def close(self) -> None:
        """Close every built store except ``raft`` (which the node owns)."""
        with self._lock:
            for name, store in list(self._stores.items()):
                if name != STORE_RAFT:
                    store.close()
                    del self._stores[name]
            self._built_from.clear()


def _scheme(url: str) -> str:
    return url.split("://", 1)[0].lower() if "://" in url else ""

