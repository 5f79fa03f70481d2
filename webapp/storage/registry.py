"""Which metadata stores a node knows, and building one from its URL.

Owns reading configured stores from the environment
(``RAFTCONNECT_STORE_<NAME>=<URL>``) and mapping a URL to a backend class:
PostgreSQL, MySQL/MariaDB and Oracle URLs go to
:class:`~webapp.storage.relational.RelationalMetadataStore`, Db2 URLs to
:class:`~webapp.storage.db2.Db2MetadataStore` (imported only then: its driver is
the optional ``raftconnect[db2]`` extra); anything else is
looked up among third-party backends registered in the entry-point group
``raftconnect.metadata_stores``, whose entry names are URL schemes or store names
and whose values are :class:`~webapp.storage.base.MetadataStore` classes
constructed as ``cls(name=name, url=url, fence=fence)``. The ``raft`` store is not
built here: it needs the node's Raft member (:mod:`webapp.storage.raft`).
"""
from __future__ import annotations

import os
from importlib.metadata import entry_points
from typing import Mapping

from .base import MetadataStore
from .relational import SCHEMES, FenceCheck, RelationalMetadataStore, redact_url

__all__ = ["ENV_PREFIX", "ENTRY_POINT_GROUP", "store_urls_from_env", "create_store", "plugin_backends"]

ENV_PREFIX = "RAFTCONNECT_STORE_"
ENTRY_POINT_GROUP = "raftconnect.metadata_stores"


def store_urls_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """``{name: url}`` from ``RAFTCONNECT_STORE_<NAME>=<URL>`` variables (names lower-cased, empty values skipped).

    ``environ`` defaults to :data:`os.environ`. The URLs may hold passwords: show
    them only through :func:`~webapp.storage.relational.redact_url`.
    """
    env = os.environ if environ is None else environ
    out = {}
    for key, value in env.items():
        if key.startswith(ENV_PREFIX) and len(key) > len(ENV_PREFIX) and value.strip():
            out[key[len(ENV_PREFIX):].lower()] = value.strip()
    return dict(sorted(out.items()))


def plugin_backends() -> dict[str, type]:
    """Third-party backends: ``{entry name (scheme or store name): class}`` of group ``raftconnect.metadata_stores``.

    Errors: whatever importing a plugin raises (a broken plugin is not hidden).
    """
    return {ep.name: ep.load() for ep in entry_points(group=ENTRY_POINT_GROUP)}


def create_store(name: str, url: str, fence: FenceCheck | None) -> MetadataStore:
    """A metadata store named ``name`` for ``url``, not yet prepared (call its ``prepare()`` if it has one).

    ``postgresql``/``postgres``/``mysql``/``mariadb``/``oracle`` URLs → :class:`RelationalMetadataStore`;
    ``db2`` URLs → :class:`~webapp.storage.db2.Db2MetadataStore`; otherwise an entry point of ``raftconnect.metadata_stores`` named like the
    URL's scheme, else like ``name``. ``fence`` is the fencing check handed to
    the store (see :mod:`webapp.storage.relational`).

    Errors: :class:`ValueError` for an unknown scheme (the message lists the
    known ones and shows the URL with its password redacted) or a bad URL.
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    if scheme in SCHEMES:
        return RelationalMetadataStore(name, url, fence)
    if scheme == "db2":
        from .db2 import Db2MetadataStore

        return Db2MetadataStore(name, url, fence)
    plugins = {k.lower(): v for k, v in plugin_backends().items()}
    cls = plugins.get(scheme) or plugins.get(name.lower())
    if cls is None:
        known = sorted(set(SCHEMES) | {"db2"} | set(plugins))
        raise ValueError(f"no metadata store backend for {redact_url(url)!r} (store {name!r}): "
                         f"unknown scheme {scheme or '<none>'!r}; known schemes: {', '.join(known)}")
    return cls(name=name, url=url, fence=fence)
