"""IBM Db2 metadata stores (URL scheme ``db2``); the driver comes with the ``raftconnect[db2]`` extra.

Owns mapping ``db2://user:password@host:50000/DBNAME[?currentschema=S&security=SSL]``
to a Django database alias on IBM's ``ibm_db_django`` backend (driver ``ibm_db``,
whose wheel ships IBM's CLI driver) and the three places where Db2 differs from
the shared :class:`~webapp.storage.relational.RelationalMetadataStore`, which
does everything else (schema by this project's migrations, transactions,
fencing, writer lease, group commit, switch support):

* the writer-lease check takes Db2's shared row lock
  (``WITH RS USE AND KEEP SHARE LOCKS``, the counterpart of ``FOR SHARE``);
* offsets are replaced (delete, insert) instead of upserted: ``ibm_db_django``
  does not implement ``bulk_create(update_conflicts=True)``;
* ``prepare()`` creates no database (on Db2 that is an instance administrator's
  ``CREATE DATABASE``, not SQL a user runs): it applies the migrations to the
  named database, in the user's default schema or ``currentschema``.

``ibm_db_django`` declares no JSON support, so Django's checks would refuse the
store's ``JSONField`` columns; the store only writes and reads them whole (no
JSON lookups) and they are created as ``NCLOB``, so :meth:`Db2MetadataStore.prepare`
declares the support on its own connection before migrating.

IBM's driver is not among RaftConnect's own dependencies (its wheel carries the
CLI driver, about 130 MB unpacked): ``pip install 'raftconnect[db2]'`` adds
``ibm_db``, ``ibm_db_django`` and the ``Jinja2`` that ``ibm_db_django``'s schema
editor imports without declaring it. Without them a ``db2://`` store is refused
with a message saying so. This module must not import the driver at import time.

No Db2 server runs where this was written: the URL mapping and the unavailable
path are tested, the contract suite has never run against Db2.

Errors: as :class:`~webapp.storage.relational.RelationalMetadataStore`; an
unreachable server gives ``StoreUnavailable`` after the login timeout
(:data:`LOGIN_TIMEOUT` seconds) with the password redacted.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import parse_qs, unquote, urlsplit

from django.db import connections

from .relational import FenceCheck, RelationalMetadataStore, redact_url

__all__ = ["Db2MetadataStore", "db2_settings", "LOGIN_TIMEOUT", "DEFAULT_PORT"]

#: Seconds the CLI driver waits to log in (connect) before failing.
LOGIN_TIMEOUT = 5
#: Db2's usual TCP port.
DEFAULT_PORT = 50000


def db2_settings(url: str) -> dict[str, Any]:
    """Django ``DATABASES`` entry (ENGINE ``ibm_db_django``) for a ``db2://`` URL.

    Query parameters: ``currentschema`` (schema of the tables), ``security``
    (``SSL``). Errors: :class:`ValueError` for another scheme, a URL without a
    database name, or ``ibm_db`` not installed (messages show the URL with its
    password redacted).
    """
    try:
        import ibm_db  # the CLI driver is loaded only when a Db2 store is configured
    except ImportError:
        raise ValueError(f"Db2 store {redact_url(url)} needs IBM's driver: pip install 'raftconnect[db2]'") from None

    try:
        parts = urlsplit(url)
        port = parts.port or DEFAULT_PORT
    except ValueError:
        raise ValueError(f"not a Db2 store URL: {redact_url(url)}") from None
    if parts.scheme.lower() != "db2":
        raise ValueError(f"not a Db2 store URL: {redact_url(url)}")
    name = unquote(parts.path.lstrip("/"))
    if not name or not parts.hostname:
        raise ValueError(f"Db2 store URL needs a host and a database name: {redact_url(url)}")
    query = {k.lower(): v[-1] for k, v in parse_qs(parts.query).items()}
    cfg: dict[str, Any] = {
        "ENGINE": "ibm_db_django",
        "NAME": name,
        "USER": unquote(parts.username or ""),
        "PASSWORD": unquote(parts.password or ""),
        "HOST": parts.hostname,
        "PORT": str(port),
        # ibm_db_django passes these to ibm_db_dbi.connect() as they are: keep its autocommit default.
        "OPTIONS": {"conn_options": {ibm_db.SQL_ATTR_AUTOCOMMIT: ibm_db.SQL_AUTOCOMMIT_ON,
                                     ibm_db.SQL_ATTR_LOGIN_TIMEOUT: LOGIN_TIMEOUT}},
    }
    if "currentschema" in query:
        cfg["CURRENTSCHEMA"] = query["currentschema"]
    if "security" in query:
        cfg["SECURITY"] = query["security"]
    return cfg


class Db2MetadataStore(RelationalMetadataStore):
    """Metadata in an IBM Db2 database (see module docstring).

    Args:
        name: the store's configured name.
        url: ``db2://user:password@host:50000/DBNAME``.
        fence: fencing check for worker writes, as for the relational stores.
    """

    LEASE_LOCKS = {"db2": "WITH RS USE AND KEEP SHARE LOCKS"}
    CREATES_DATABASE = ()
    PING_SQL = {"db2": "SELECT 1 FROM SYSIBM.SYSDUMMY1"}

    def __init__(self, name: str, url: str, fence: FenceCheck | None = None):
        super().__init__(name, url, fence)
        self.upsert = False

    @classmethod
    def settings_for_url(cls, url: str) -> dict[str, Any]:
        return db2_settings(url)

    @classmethod
    def backend_for_engine(cls, engine: str) -> str:
        return "db2"

    def prepare(self) -> None:
        """Apply this project's migrations to the Db2 database (see module docstring); idempotent.

        Errors: ``StoreUnavailable`` (server unreachable, login refused, ...).
        """
        connections[self.alias].features.supports_json_field = True  # this thread's connection, used by migrate
        super().prepare()
