"""Connections: the allowed-hosts check, psycopg / PyMySQL connections, identifier quoting.

Owns :func:`host_violation` (``raftconnect.jdbc.allowed.hosts`` entries: names,
``*.domain``, IPs, CIDR blocks, with resolution of a name), :func:`connect` (which
checks it again before every connection, also on Spark's workers) and :func:`quote`.

Must not import anything of this project (see :mod:`webapp.connectors.jdbc.dbio`).
"""
from __future__ import annotations

import ipaddress as _ipaddress
import socket as _socket
from typing import Any, Mapping, Sequence

__all__ = ["ALLOWED_HOSTS_SETTING", "HostNotAllowed", "host_violation", "connect", "quote"]


#: the worker setting that limits the hosts a JDBC connector may connect to, as messages name it
ALLOWED_HOSTS_SETTING = "raftconnect.jdbc.allowed.hosts (RAFTCONNECT_JDBC_ALLOWED_HOSTS)"


class HostNotAllowed(PermissionError):
    """``connection.url`` names a host (or port) outside ``raftconnect.jdbc.allowed.hosts``; the message says which."""


def _entry(text: str) -> tuple[str, int | None]:
    """``(host pattern, port or None)`` of one allow-list entry: ``host``, ``host:port``, ``*.domain[:port]``,
    an IP, ``[v6]:port`` or a CIDR block (``10.0.0.0/8``, no port)."""
    text = text.strip()
    if text.startswith("["):
        host, _, rest = text[1:].partition("]")
        return host.lower(), int(rest[1:]) if rest.startswith(":") and rest[1:].isdigit() else None
    if text.count(":") == 1:
        host, _, port = text.partition(":")
        if port.isdigit():
            return host.lower(), int(port)
    return text.lower(), None


def _network(pattern: str):
    try:
        return _ipaddress.ip_network(pattern, strict=False)
    except ValueError:
        return None


def host_violation(host: str, port: int, allowed: Sequence[str] | None) -> str | None:
    """Why a connection to ``host:port`` is not allowed by the entries ``allowed``, or ``None`` when it is.

    ``allowed`` empty or ``None``: every host is allowed (the setting is optional).
    Entries (comma-separated in the setting): a host name matched case-insensitively
    as the URL writes it, ``*.example.com`` for any name under that domain, an IP
    address or a CIDR block; any but a block may end in ``:port`` (``[v6]:port``),
    which then must match too. A name in the URL is resolved only against IP/CIDR
    entries, and then every address it resolves to must be inside one. A name that
    does not resolve matches no IP entry.
    """
    entries = [_entry(e) for e in (allowed or []) if e and e.strip()]
    if not entries:
        return None
    name = (host or "").strip().lower().strip("[]")
    port = int(port)
    literal = _network(name) if name and "/" not in name else None
    addresses = None
    for pattern, want_port in entries:
        if want_port is not None and want_port != port:
            continue
        if pattern.startswith("*."):
            if name.endswith(pattern[1:]) and len(name) > len(pattern) - 1:
                return None
            continue
        net = _network(pattern)
        if net is None:
            if name == pattern:
                return None
            continue
        if literal is not None:
            if literal.network_address in net:
                return None
            continue
        if addresses is None:
            try:
                addresses = {_ipaddress.ip_address(info[4][0].split("%")[0])
                             for info in _socket.getaddrinfo(name, port, proto=_socket.IPPROTO_TCP)}
            except (OSError, ValueError):
                addresses = set()
        if addresses and all(a in net for a in addresses):
            return None
    return (f"Host {host}:{port} of connection.url is not allowed by {ALLOWED_HOSTS_SETTING}; "
            f"allowed: {', '.join(e.strip() for e in allowed if e and e.strip())}")


def connect(params: Mapping[str, Any], autocommit: bool = False):
    """A DB-API connection for ``params`` (``dialect``, ``host``, ``port``, ``database``, ``user``, ``password``).

    PostgreSQL sessions run with ``TimeZone=UTC`` and load uuid/json/jsonb as text;
    MySQL/MariaDB sessions with ``time_zone='+00:00'``, utf8mb4, READ COMMITTED and a
    ``sql_mode`` without ``NO_BACKSLASH_ESCAPES`` (the sink's literals escape with backslashes).

    ``params["allowed_hosts"]`` (the node's ``raftconnect.jdbc.allowed.hosts``, put there by the
    connector on the worker) is checked again here, before every connection, on the driver and on
    Spark's workers alike. Errors: :class:`HostNotAllowed`; the driver's own errors.
    """
    problem = host_violation(params["host"], params["port"], params.get("allowed_hosts"))
    if problem is not None:
        raise HostNotAllowed(problem)
    if params["dialect"] == "postgresql":
        import psycopg
        from psycopg.types.string import TextLoader

        conn = psycopg.connect(host=params["host"], port=int(params["port"]), dbname=params["database"],
                               user=params.get("user") or None, password=params.get("password") or None,
                               autocommit=autocommit, options="-c TimeZone=UTC -c DateStyle=ISO",
                               **dict(params.get("options") or {}))
        for name in ("uuid", "json", "jsonb"):
            conn.adapters.register_loader(name, TextLoader)
        return conn
    import pymysql

    conn = pymysql.connect(host=params["host"], port=int(params["port"]), user=params.get("user") or "root",
                           password=params.get("password") or "", database=params["database"] or None,
                           charset="utf8mb4", autocommit=autocommit, binary_prefix=True,
                           init_command="SET time_zone='+00:00'", **dict(params.get("options") or {}))
    with conn.cursor() as cur:  # no gap locks: concurrent partitions insert their offset rows without deadlocks
        cur.execute("SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED")
        # the sink renders string literals with backslash escapes (_literals): a server whose sql_mode
        # has NO_BACKSLASH_ESCAPES would read a record's backslash as a plain character and its quote as
        # the end of the literal. Pin the session's mode without it (keeping the server's other modes).
        cur.execute("SELECT @@SESSION.sql_mode")
        modes = [m for m in (cur.fetchone()[0] or "").split(",") if m]
        if "NO_BACKSLASH_ESCAPES" in modes:
            cur.execute("SET SESSION sql_mode = %s", (",".join(m for m in modes if m != "NO_BACKSLASH_ESCAPES"),))
    return conn


def quote(dialect: str, name: str) -> str:
    """``name`` quoted as an identifier; a dotted name is quoted part by part."""
    q = '"' if dialect == "postgresql" else "`"
    return ".".join(q + part.replace(q, q + q) + q for part in name.split("."))
