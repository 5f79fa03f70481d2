"""IBM Db2 metadata stores (``webapp.storage.db2``, driver from the ``[db2]`` extra): what can be checked without a Db2 server.

No Db2 server runs on these machines. Checked here: a ``db2://`` URL maps
to the Db2 store on the ``ibm_db_django``
engine, and an unreachable server gives the store's unavailable error, after
the driver's login timeout, with the password redacted. The offsets replace
path the Db2 store uses (no upsert) is the Oracle one, exercised on PostgreSQL in
``test_oracle.py``.
"""
from __future__ import annotations

import sys

import pytest
from django.db import connections

from webapp.kafka.embedded import free_port
from webapp.storage.base import StoreUnavailable
from webapp.storage.registry import create_store
from webapp.storage.relational import RelationalMetadataStore


@pytest.fixture(autouse=True)
def _db_access(django_db_blocker):
    with django_db_blocker.unblock():
        yield


def test_db2_url_maps_to_the_db2_store_on_ibm_db_django():
    from webapp.storage.db2 import LOGIN_TIMEOUT, Db2MetadataStore

    store = create_store("db2main", "db2://db2inst1:Top-Secret@db2.example:50000/RCMETA?currentschema=RC", None)
    try:
        assert type(store) is Db2MetadataStore and isinstance(store, RelationalMetadataStore)
        cfg = connections[store.alias].settings_dict
        assert cfg["ENGINE"] == "ibm_db_django"
        assert (cfg["NAME"], cfg["USER"], cfg["HOST"], cfg["PORT"]) == ("RCMETA", "db2inst1", "db2.example", "50000")
        assert cfg["CURRENTSCHEMA"] == "RC"
        import ibm_db

        assert cfg["OPTIONS"]["conn_options"][ibm_db.SQL_ATTR_LOGIN_TIMEOUT] == LOGIN_TIMEOUT
        assert cfg["OPTIONS"]["conn_options"][ibm_db.SQL_ATTR_AUTOCOMMIT] == ibm_db.SQL_AUTOCOMMIT_ON
        assert type(connections[store.alias]).__module__ == "ibm_db_django.base"
        assert store.backend == "db2" and store.upsert is False
        assert "Top-Secret" not in repr(store) and "Top-Secret" not in store.safe_url
    finally:
        store.close()


def test_db2_store_without_the_driver_names_the_extra(monkeypatch):
    monkeypatch.setitem(sys.modules, "ibm_db", None)  # what a node without `raftconnect[db2]` sees
    with pytest.raises(ValueError) as err:
        create_store("db2main", "db2://db2inst1:Top-Secret@db2.example:50000/RCMETA", None)
    assert "raftconnect[db2]" in str(err.value) and "Top-Secret" not in str(err.value)


def test_db2_url_without_a_database_is_refused_without_the_password():
    with pytest.raises(ValueError) as err:
        create_store("db2main", "db2://db2inst1:Top-Secret@db2.example:50000/", None)
    assert "Top-Secret" not in str(err.value) and "database name" in str(err.value)


def test_unreachable_db2_is_unavailable_without_the_password():
    store = create_store("db2main", f"db2://db2inst1:Top-Secret@127.0.0.1:{free_port()}/RCMETA", None)
    try:
        with pytest.raises(StoreUnavailable) as err:
            store.prepare()
        with pytest.raises(StoreUnavailable):  # a read, too, maps the driver's error
            store.connector_names()
    finally:
        store.close()
    message = str(err.value)
    assert "Top-Secret" not in message
    assert "db2main" in message and "db2://db2inst1:***@127.0.0.1" in message and "SQL30081N" in message


def test_db2_deadlock_victims_are_retried_like_the_other_backends():
    from django.db import OperationalError

    from webapp.storage.relational.store import lock_conflict as _lock_conflict

    assert _lock_conflict(OperationalError("[IBM][CLI Driver][DB2/LINUXX8664] SQL0911N  The current transaction "
                                           "has been rolled back because of a deadlock or timeout.  Reason code "
                                           "\"2\".  SQLSTATE=40001 SQLCODE=-911"))
    assert not _lock_conflict(OperationalError("[IBM][CLI Driver] SQL30081N  A communication error has been "
                                               "detected.  SQLSTATE=08001 SQLCODE=-30081"))
