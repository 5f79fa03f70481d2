"""Store URLs from the environment and backend lookup (built-in schemes and entry-point plugins)."""
from __future__ import annotations

import textwrap

import pytest

from webapp.storage.registry import ENTRY_POINT_GROUP, create_store, store_urls_from_env
from webapp.storage.relational import RelationalMetadataStore, redact_url


def test_store_urls_from_env_lower_cases_names_and_skips_empty_values():
    env = {"RAFTCONNECT_STORE_PG": "postgresql://postgres@127.0.0.1:5432/raftconnect",
           "RAFTCONNECT_STORE_MariaDB": "mysql://root@127.0.0.1:3306/raftconnect",
           "RAFTCONNECT_STORE_EMPTY": " ", "RAFTCONNECT_STORE_": "x", "OTHER": "y"}
    assert store_urls_from_env(env) == {"mariadb": "mysql://root@127.0.0.1:3306/raftconnect",
                                        "pg": "postgresql://postgres@127.0.0.1:5432/raftconnect"}


def test_redact_url_hides_only_the_password():
    assert redact_url("postgresql://u:p%40ss@db.example:5432/x?sslmode=require") == \
        "postgresql://u:***@db.example:5432/x?sslmode=require"
    assert redact_url("mysql://root@127.0.0.1:3306/x") == "mysql://root@127.0.0.1:3306/x"


@pytest.mark.parametrize("url,backend", [("postgresql://postgres@127.0.0.1:5432/raftconnect", "postgresql"),
                                         ("postgres://postgres@127.0.0.1/raftconnect", "postgresql"),
                                         ("mysql://root@127.0.0.1:3306/raftconnect", "mysql"),
                                         ("mariadb://root:pw@127.0.0.1:3306/raftconnect", "mysql")])
def test_relational_schemes_give_the_relational_store(url, backend):
    store = create_store("s", url, None)
    try:
        assert isinstance(store, RelationalMetadataStore) and store.backend == backend and store.name == "s"
    finally:
        store.close()


def test_unknown_scheme_is_a_clear_value_error_without_the_password():
    with pytest.raises(ValueError, match="unknown scheme 'mongodb'") as exc:
        create_store("cache", "mongodb://u:Top-Secret@127.0.0.1:27017/0", None)
    assert "Top-Secret" not in str(exc.value) and "postgresql" in str(exc.value) and "redis" in str(exc.value)


def test_the_redis_plugin_is_installed_and_unreachable_redis_hides_the_password():
    from raftconnect_redis_store import RedisMetadataStore

    from webapp.kafka.embedded import free_port
    from webapp.storage.base import StoreUnavailable

    store = create_store("cache", f"redis://:Top-Secret@127.0.0.1:{free_port()}/0", None)
    assert isinstance(store, RedisMetadataStore)  # found through the raftconnect.metadata_stores entry point
    try:
        with pytest.raises(StoreUnavailable, match="unavailable") as exc:
            store.prepare()
        assert "Top-Secret" not in str(exc.value) and "***" in str(exc.value)
    finally:
        store.close()
    with pytest.raises(ValueError, match="names no database"):
        create_store("pg", "postgresql://postgres:Top-Secret@127.0.0.1:5432", None)


def test_third_party_backends_are_found_through_entry_points(tmp_path, monkeypatch):
    (tmp_path / "memstore_plugin.py").write_text(textwrap.dedent("""
        class MemStore:
            def __init__(self, name, url, fence):
                self.name, self.url, self.fence = name, url, fence
    """))
    dist = tmp_path / "memstore_plugin-0.1.dist-info"
    dist.mkdir()
    (dist / "METADATA").write_text("Metadata-Version: 2.1\nName: memstore-plugin\nVersion: 0.1\n")
    (dist / "entry_points.txt").write_text(
        f"[{ENTRY_POINT_GROUP}]\nmem = memstore_plugin:MemStore\nspecial = memstore_plugin:MemStore\n")
    monkeypatch.syspath_prepend(str(tmp_path))

    def fence(connector, task, worker_id, generation):
        return None

    by_scheme = create_store("m", "mem://anything", fence)
    assert type(by_scheme).__name__ == "MemStore" and by_scheme.url == "mem://anything" and by_scheme.fence is fence
    by_name = create_store("special", "custom://x", None)
    assert type(by_name).__name__ == "MemStore" and by_name.name == "special"
