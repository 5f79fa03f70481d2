"""Scratch databases on the machine's PostgreSQL and MariaDB for tests, benchmarks and demos.

Not part of the product (nothing under ``webapp`` or ``raftnode`` imports it). The servers are
the development ones: PostgreSQL on 127.0.0.1:5432 as ``postgres`` (trust authentication) and
MariaDB/MySQL on 127.0.0.1:3306 as ``root`` with an empty password. ``kind`` is ``"postgresql"``
or ``"mysql"`` (``"mariadb"`` is taken as ``"mysql"``). Errors are the drivers' own
(``psycopg.OperationalError``, ``pymysql.err.OperationalError``) when a server is down.
"""
from __future__ import annotations

import uuid
from contextlib import contextmanager
from typing import Iterator

__all__ = ["PG_ADMIN_DSN", "MYSQL_ADMIN", "create_database", "drop_database", "scratch_database"]

#: psycopg connection string of the PostgreSQL maintenance database
PG_ADMIN_DSN = "host=127.0.0.1 port=5432 user=postgres dbname=postgres"
#: PyMySQL connection arguments of the MariaDB/MySQL server (no database selected)
MYSQL_ADMIN = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}


def _is_pg(kind: str) -> bool:
    if kind in ("postgresql", "postgres"):
        return True
    if kind in ("mysql", "mariadb"):
        return False
    raise ValueError(f"unknown database kind {kind!r} (postgresql or mysql)")


def _admin_execute(kind: str, pg_sql: str, mysql_sql: str) -> None:
    """Run one statement on the server of ``kind`` outside any database (autocommit)."""
    if _is_pg(kind):
        import psycopg

        with psycopg.connect(PG_ADMIN_DSN, autocommit=True) as conn:
            conn.execute(pg_sql)
        return
    import pymysql

    conn = pymysql.connect(**MYSQL_ADMIN, autocommit=True)
    try:
        with conn.cursor() as cur:
            cur.execute(mysql_sql)
    finally:
        conn.close()


def create_database(kind: str, name: str) -> None:
    """Create database ``name`` (MariaDB: ``utf8mb4`` with the binary collation, so text compares exactly)."""
    _admin_execute(kind, f'CREATE DATABASE "{name}"',
                   f"CREATE DATABASE `{name}` CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")


def drop_database(kind: str, name: str) -> None:
    """Drop database ``name`` if it exists (PostgreSQL: ``WITH (FORCE)``, closing other sessions on it)."""
    _admin_execute(kind, f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)', f"DROP DATABASE IF EXISTS `{name}`")


@contextmanager
def scratch_database(kind: str, prefix: str = "rc") -> Iterator[str]:
    """A new, uniquely named database (``<prefix>_<10 hex>``) for the ``with`` block; dropped after it."""
    name = f"{prefix}_{uuid.uuid4().hex[:10]}"
    create_database(kind, name)
    try:
        yield name
    finally:
        drop_database(kind, name)
