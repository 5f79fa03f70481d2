"""Oracle metadata stores: what can be checked without an Oracle server.

No Oracle server runs on these machines. Checked here: the URL maps to Django's
Oracle backend, an unreachable server fails fast with the password redacted,
and the offsets replace path Oracle uses (no upsert) is correct on a real
PostgreSQL database.
"""
from __future__ import annotations

import time
import uuid

import pytest

from webapp.plugin import ConnectorTaskId, SourceOffset
from webapp.kafka.embedded import free_port
from webapp.storage.base import StoreUnavailable
from webapp.storage.relational import RelationalMetadataStore, database_settings

from .conftest import PG_URL, drop_database


def test_oracle_url_maps_to_djangos_oracle_backend():
    cfg = database_settings("oracle://scott:tiger@db.example:1521/FREEPDB1")
    assert cfg["ENGINE"] == "django.db.backends.oracle"
    assert (cfg["USER"], cfg["HOST"], cfg["PORT"], cfg["NAME"]) == ("scott", "db.example", "1521", "FREEPDB1")
    assert cfg["OPTIONS"]["tcp_connect_timeout"] > 0
    store = RelationalMetadataStore("ora", "oracle://scott:tiger@db.example:1521/FREEPDB1")
    try:
        assert store.backend == "oracle" and store.upsert is False and "tiger" not in repr(store)
    finally:
        store.close()


def test_unreachable_oracle_is_unavailable_quickly_without_the_password():
    store = RelationalMetadataStore("ora", f"oracle://scott:Top-Secret@127.0.0.1:{free_port()}/FREEPDB1")
    t0 = time.monotonic()
    try:
        with pytest.raises(StoreUnavailable) as err:
            store.prepare()
    finally:
        store.close()
    assert time.monotonic() - t0 < 30
    assert "Top-Secret" not in str(err.value) and "oracle" in str(err.value)


@pytest.fixture
def pg_store(django_db_blocker):
    db = f"raftconnect_replace_{uuid.uuid4().hex[:8]}"
    with django_db_blocker.unblock():
        store = RelationalMetadataStore("pg", PG_URL.format(db=db))
        try:
            store.prepare()
            store.upsert = False  # take the path Django's Oracle backend needs
            yield store
        finally:
            store.close()
            drop_database("postgresql", db)


def test_replace_path_keeps_the_latest_offset_and_removes(pg_store):
    task = ConnectorTaskId("c", 0)
    pg_store.commit_offsets(task, [SourceOffset({"p": 0}, {"o": 1}), SourceOffset({"p": 1}, {"o": 1})],
                            worker_id="w", generation=1)
    pg_store.commit_offsets(task, [SourceOffset({"p": 0}, {"o": 2}), SourceOffset({"p": 0}, {"o": 3})],
                            worker_id="w", generation=1)
    pg_store.alter_offsets("c", [({"p": 1}, None)])
    assert [(o.partition, o.offset) for o in pg_store.get_offsets("c")] == [({"p": 0}, {"o": 3})]
