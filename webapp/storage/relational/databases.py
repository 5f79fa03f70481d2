"""Store URLs of the relational backends: which schemes exist, their Django ``DATABASES`` entries,
and the redaction of their passwords.

Owns turning ``postgresql://``, ``mysql://`` and ``oracle://`` URLs into Django settings and
making PyMySQL stand in for mysqlclient. Must not open a connection or import the store.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

try:  # mysqlclient (C) when it was built (it needs MariaDB's client headers); else PyMySQL stands in for it
    import MySQLdb
except ImportError:  # pragma: no cover - depends on what is installed
    import pymysql

    pymysql.install_as_MySQLdb()
    import MySQLdb

import dj_database_url

__all__ = ["CONNECT_TIMEOUT", "CONN_MAX_AGE_S", "SCHEMES", "database_settings", "mysql_driver", "mysql_driver_name",
           "redact_url"]

#: URL scheme → canonical backend name (``postgresql`` or ``mysql``).
SCHEMES = {
    "postgresql": "postgresql", "postgres": "postgresql", "pgsql": "postgresql",
    "mysql": "mysql", "mariadb": "mysql",
    "oracle": "oracle",
}

CONNECT_TIMEOUT = 5  # seconds; an unreachable server must turn into StoreUnavailable quickly
#: seconds a thread keeps its connection to a store between requests (Django's ``CONN_MAX_AGE``)
CONN_MAX_AGE_S = 600


def mysql_driver():
    """The DB-API module Django's MySQL backend uses here: ``MySQLdb`` of mysqlclient, or PyMySQL standing in.

    Both take ``connect(host=, port=, user=, password=, database=)``."""
    return MySQLdb


def mysql_driver_name() -> str:
    """``"mysqlclient"`` or ``"PyMySQL"``: which driver :func:`mysql_driver` is (for diagnostics and benchmarks)."""
    return "PyMySQL" if MySQLdb.__name__ == "pymysql" else "mysqlclient"


def redact_url(url: str) -> str:
    """``url`` with its password (if any) replaced by ``***``; safe to show in messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<unparseable url>"
    if parts.password is None:
        return url
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    netloc = f"{parts.username or ''}:***@{host}"
    if parts.port is not None:
        netloc += f":{parts.port}"
    return urlunsplit((parts.scheme, netloc, parts.path, parts.query, parts.fragment))


def database_settings(url: str) -> dict[str, Any]:
    """Django ``DATABASES`` entry for a store URL (``postgresql://``, ``mysql://`` or
    ``oracle://user:password@host:port/service``; aliases in :data:`SCHEMES`).

    Adds a connect timeout, persistent connections checked before reuse (``CONN_MAX_AGE`` of
    :data:`CONN_MAX_AGE_S`, ``CONN_HEALTH_CHECKS``) and, for MySQL, utf8mb4 and READ COMMITTED
    isolation. Django's default closes a connection at the end of every request: each REST call
    that read or wrote the store opened a new one, ~40 ms of CPU with PyMySQL (it builds an SSL
    context with the system's CA certificates for each connection) and a new server process on
    PostgreSQL (benchmarks/stores, issue 16).
    Errors: :class:`ValueError` for another scheme or a URL without a database
    name (the message carries the redacted URL).
    """
    scheme = url.split("://", 1)[0].lower() if "://" in url else ""
    backend = SCHEMES.get(scheme)
    if backend is None:
        raise ValueError(f"not a relational store URL: {redact_url(url)} (schemes: {', '.join(sorted(SCHEMES))})")
    cfg = dj_database_url.parse(backend + url[len(scheme):])
    if not cfg.get("NAME"):
        raise ValueError(f"store URL names no database: {redact_url(url)}")
    cfg["CONN_MAX_AGE"] = CONN_MAX_AGE_S  # dj_database_url sets 0 and False
    cfg["CONN_HEALTH_CHECKS"] = True
    options = cfg.setdefault("OPTIONS", {})
    if backend == "oracle":  # python-oracledb (thin mode, no Oracle client libraries needed)
        options.setdefault("tcp_connect_timeout", float(CONNECT_TIMEOUT))
        options.setdefault("retry_count", 0)
    else:
        options.setdefault("connect_timeout", CONNECT_TIMEOUT)
    if backend == "mysql":
        options.setdefault("charset", "utf8mb4")
        options.setdefault("isolation_level", "read committed")
    return cfg

