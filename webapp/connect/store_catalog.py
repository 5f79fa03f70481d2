"""Metadata stores added, tested and removed at run time: the services behind the REST resources and the admin page.

Owns the rules for a store added at run time: its name, its URL, that its secrets are
config-provider references and never values (``${env:VAR}``, ``${file:/path:key}``,
``${directory:/path:key}``, resolved by :mod:`webapp.runtime.config_providers` on each node when it
builds the store), and turning such a spec into the URL a node connects with. The definitions
live in Raft (``ClusterStateMachine.store_specs``, command ``_zz_store_spec``), so every member
knows them without a restart or a per-node environment edit; stores configured by environment
variable (``RAFTCONNECT_STORE_<NAME>``) keep working beside them and cannot be removed here.

Services (keyword-only, run on the Raft leader; the REST layer forwards writes there):
:func:`store_add`, :func:`store_remove`, :func:`store_test`. Errors are :class:`StoreCatalogError`
with an HTTP status. A password never appears in a message, a log line or a result: specs hold
references only, and the stores redact resolved URLs (``redact_url``).

Part of the node assembly layer (it may use the runtime's config providers, which the storage
layer must not import); must not hold switch logic (``webapp.storage.switch`` owns it).
"""
from __future__ import annotations

import logging
import re
import time
from typing import Any, Callable
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

from raftnode import CommandRejected, RaftNode, RaftUnavailable
from webapp.runtime.config_providers import PATTERN, ConfigProviderError, providers, transform
from webapp.storage.base import MetadataStore, StoreError
from webapp.storage.registry import ENV_PREFIX, create_store, plugin_backends
from webapp.storage.relational import SCHEMES, database_settings
from webapp.storage.switch import StoreSet

__all__ = ["StoreCatalogError", "NAME_PATTERN", "validate_spec", "resolve_spec", "store_add", "store_remove",
           "store_test"]

log = logging.getLogger(__name__)

#: A store name: lower case, as environment-configured names are.
NAME_PATTERN = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
_MARK = "RAFTCONNECTREFERENCE"  # stands for a reference while the URL is parsed
#: query parameters that would carry a secret
_SECRET_PARAM = re.compile(r"pass|pwd|secret", re.I)


class StoreCatalogError(Exception):
    """A store request that cannot be taken; ``status`` is the HTTP status (400, 404, 409, 503)."""

    def __init__(self, message: str, status: int = 400):
        super().__init__(message)
        self.status = status


def _masked(url: str) -> str:
    return PATTERN.sub(_MARK, url)


def _check_references(value: str, what: str) -> None:
    enabled = providers()
    for m in PATTERN.finditer(value):
        if m[1] not in enabled:
            raise StoreCatalogError(f"{what}: unknown config provider {m[1]!r} in {m[0]} "
                                    f"(enabled: {', '.join(enabled) or 'none'})")


def validate_spec(*, name: Any, url: Any, password: Any = None) -> dict[str, Any]:
    """``{"name", "url", "password"}`` checked and normalized, or :class:`StoreCatalogError` (400).

    ``name`` matches :data:`NAME_PATTERN` and is not ``raft``; ``url`` names a known backend
    (``postgresql://``, ``mysql://``/``mariadb://``, ``oracle://`` or a plugin's scheme) and, for
    relational stores, a database; a password in it must be one config-provider reference, as
    must ``password`` (``None`` or empty: none). The password goes into the URL's user info when
    the store is built, so ``password`` needs a user name in the URL.
    """
    if not isinstance(name, str) or not NAME_PATTERN.match(name.strip()):
        raise StoreCatalogError("name must be 1 to 63 lower-case letters, digits or _, starting with a letter")
    name = name.strip()
    if name == "raft":
        raise StoreCatalogError("raft is the built-in Raft store; choose another name")
    if not isinstance(url, str) or "://" not in url:
        raise StoreCatalogError("url must be a store URL such as postgresql://user@host:5432/database")
    url = url.strip()
    if password in ("", None):
        password = None
    elif not isinstance(password, str) or not PATTERN.fullmatch(password.strip()):
        raise StoreCatalogError("password must be a config-provider reference such as ${env:PG_PASSWORD} or "
                                "${file:/etc/raftconnect/secrets.properties:pg.password}, never the password itself")
    else:
        password = password.strip()
    masked = _masked(url)
    try:
        parts = urlsplit(masked)
        in_url = parts.password
    except ValueError as exc:
        raise StoreCatalogError(f"url is not a valid URL: {exc}") from None
    if in_url not in (None, "", _MARK):
        raise StoreCatalogError("url holds a password in clear; put a config-provider reference in its place "
                                "(postgresql://user:${env:PG_PASSWORD}@host/db) or use the password field")
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if _SECRET_PARAM.search(key) and value not in ("", _MARK):
            raise StoreCatalogError(f"url parameter {key} holds a secret in clear; use a config-provider reference")
    if password is not None and in_url:
        raise StoreCatalogError("give the password either in the url or in the password field, not both")
    if password is not None and not parts.username:
        raise StoreCatalogError("a password needs a user name in the url (postgresql://user@host/db)")
    scheme = parts.scheme.lower()
    if scheme in SCHEMES:
        try:
            database_settings(masked)
        except ValueError as exc:
            raise StoreCatalogError(str(exc).replace(_MARK, "${...}")) from None
    else:
        plugins = {k.lower() for k in plugin_backends()}
        if scheme not in plugins and name not in plugins:
            known = sorted(set(SCHEMES) | plugins)
            raise StoreCatalogError(f"no metadata store backend for scheme {scheme!r}; known schemes: "
                                    f"{', '.join(known)}")
    _check_references(url, "url")
    if password:
        _check_references(password, "password")
    return {"name": name, "url": url, "password": password}


def resolve_spec(name: str, spec: dict[str, Any]) -> str:
    """The URL node code connects with: ``spec``'s references resolved on this node, the password
    (URL-quoted) put into the user info.

    Errors: :class:`ValueError` (a ``ConfigProviderError``) naming the reference that failed and
    why, never a resolved value.
    """
    def value(ref: str, what: str) -> str:
        return transform({f"store {name} {what}": ref})[f"store {name} {what}"]

    url = PATTERN.sub(lambda m: quote(value(m[0], "url"), safe=""), spec["url"])
    if spec.get("password"):
        secret = quote(value(spec["password"], "password"), safe="")
        parts = urlsplit(url)
        userinfo, host = parts.netloc.rsplit("@", 1)
        url = urlunsplit(parts._replace(netloc=f"{userinfo.split(':', 1)[0]}:{secret}@{host}"))
    return url


def _propose(fn: Callable[..., dict], **kwargs: Any) -> dict:
    try:
        return fn(**kwargs)
    except CommandRejected as exc:
        raise StoreCatalogError(exc.reason, exc.code or 409) from None
    except RaftUnavailable as exc:
        raise StoreCatalogError(str(exc), 503) from None


def _entry(stores: StoreSet, name: str) -> dict[str, Any]:
    return next(s for s in stores.describe() if s["name"] == name)


def store_add(*, raft: RaftNode, stores: StoreSet, name: Any, url: Any, password: Any = None,
              user: str) -> dict[str, Any]:
    """Add metadata store ``name`` on every node (through Raft); returns its entry as
    :meth:`StoreSet.describe` shows it.

    Nothing is connected to: :func:`store_test` does that. Errors: :class:`StoreCatalogError` —
    400 a bad spec (:func:`validate_spec`), 409 the name exists (here or in this node's
    environment), 503 no leader.
    """
    spec = validate_spec(name=name, url=url, password=password)
    name = spec["name"]
    if stores.source(name) == "environment":
        raise StoreCatalogError(f"Metadata store {name} is configured by {ENV_PREFIX}{name.upper()} on this node; "
                                "choose another name", 409)
    _propose(raft.commands.zz_store_spec, name=name, spec={"url": spec["url"], "password": spec["password"],
                                                           "added_by": user}, now=time.time())
    log.info("metadata store %s added by %s: %s", name, user, spec["url"])  # references only, no password
    return _entry(stores, name)


def store_remove(*, raft: RaftNode, stores: StoreSet, name: str, user: str) -> None:
    """Remove the run-time metadata store ``name`` from every node (the store's data is left as it is).

    Errors: :class:`StoreCatalogError` — 400 ``raft``, 404 unknown, 409 configured by environment,
    the active store or part of a running switch, 503 no leader.
    """
    source = stores.source(name)
    if source == "raft":
        raise StoreCatalogError("raft is the built-in Raft store and cannot be removed", 400)
    if source == "environment":
        raise StoreCatalogError(f"Metadata store {name} is configured by {ENV_PREFIX}{name.upper()} on the nodes; "
                                "remove that variable there instead", 409)
    _propose(raft.commands.zz_store_spec, name=name, spec=None, now=time.time())
    stores.prune()
    log.info("metadata store %s removed by %s", name, user)


def _timed(checks: list[dict[str, Any]], check: str, fn: Callable[[], str]) -> bool:
    t0 = time.monotonic()
    try:
        message, ok = fn(), True
    except (StoreError, ValueError, ConfigProviderError) as exc:
        message, ok = str(exc), False
    except Exception as exc:  # noqa: BLE001 - a plugin's own error: reported, not raised
        message, ok = f"{type(exc).__name__}: {exc}", False
    checks.append({"check": check, "ok": ok, "message": message,
                   "elapsed_ms": round((time.monotonic() - t0) * 1000, 1)})
    return ok


def store_test(*, stores: StoreSet, name: str,
               factory: Callable[..., MetadataStore] = create_store) -> dict[str, Any]:
    """Connect to store ``name`` from this node and check its schema, on a handle of its own.

    Checks, in order, each stopping the rest when it fails: ``resolve`` (the references resolve
    here), ``connect`` (the server answers; the database and schema are created or migrated if
    missing, as a switch's prepare would), ``schema`` (every migration applied, the tables
    readable; counts the connector names the store holds, which a switch to it replaces).

    Returns ``{"name", "ok": bool, "checks": [{"check", "ok", "message", "elapsed_ms"}],
    "connectors": int | None}``. Errors: :class:`StoreCatalogError` 404 for an unknown store.
    """
    source = stores.source(name)
    if source is None:
        raise StoreCatalogError(f"Unknown metadata store {name!r}; configured stores: {', '.join(stores.names())}",
                                404)
    checks: list[dict[str, Any]] = []
    result: dict[str, Any] = {"name": name, "ok": False, "checks": checks, "connectors": None}
    if source == "raft":
        result["ok"] = _timed(checks, "connect", lambda: "the built-in Raft store is this cluster's own log")
        return result
    url: dict[str, str] = {}

    def resolve() -> str:
        if source == "environment":
            url["v"] = stores.env_urls[name]
            return f"configured by {ENV_PREFIX}{name.upper()} on this node"
        spec = stores.specs()[name]
        url["v"] = resolve_spec(name, spec)
        refs = PATTERN.findall(spec["url"] + (spec.get("password") or ""))
        if not refs:
            return "no references to resolve"
        return f"{len(refs)} reference{'' if len(refs) == 1 else 's'} resolved on this node"

    if not _timed(checks, "resolve", resolve):
        return result
    handle: dict[str, MetadataStore] = {}

    def connect() -> str:
        handle["s"] = store = factory(name, url["v"], None)
        store.prepare()
        store.ping()
        return "connected; database and schema are in place"

    def schema() -> str:
        store = handle["s"]
        problems = store.schema_problems() if hasattr(store, "schema_problems") else []
        if problems:
            raise ValueError("; ".join(problems))
        result["connectors"] = n = len(store.all_names())
        return (f"schema up to date; the store holds {n} connector name{'' if n == 1 else 's'}, which a switch "
                "to it replaces" if n else "schema up to date; the store is empty")

    try:
        result["ok"] = _timed(checks, "connect", connect) and _timed(checks, "schema", schema)
    finally:
        if "s" in handle:
            handle["s"].close()
    return result
