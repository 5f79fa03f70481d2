"""StoreSet with environment stores and stores added at run time: sources, shadowing, rebuild and close."""
from __future__ import annotations

import pytest

from webapp.storage.base import StoreUnavailable
from webapp.storage.switch import StoreSet, UnknownStore


class _Store:
    """Stands in for a built store: records the URL it was built with and whether it was closed."""

    def __init__(self, name, url, fence):
        self.name, self.url, self.closed = name, url, False

    def prepare(self):
        pass

    def close(self):
        self.closed = True


def make(specs: dict, env: dict | None = None) -> StoreSet:
    def resolve(name, spec):
        if "${env:MISSING}" in (spec.get("password") or ""):
            raise ValueError("cannot resolve ${env:MISSING}: environment variable MISSING is not set")
        return spec["url"].replace("@", ":resolved@") if spec.get("password") else spec["url"]

    return StoreSet(object(), env or {}, fence=None, factory=_Store, specs=lambda: specs, resolve=resolve)


def test_sources_and_the_environment_winning_a_shared_name():
    specs = {"pg": {"url": "postgresql://a@h/db", "password": None, "added_at": 1.0, "added_by": "root"},
             "maria": {"url": "mysql://root@h/db", "password": "${env:PW}", "added_at": 2.0, "added_by": "root"}}
    stores = make(specs, env={"PG": "postgresql://env:secret@h/db"})
    assert stores.names() == ["raft", "maria", "pg"]
    assert [stores.source(n) for n in ("raft", "pg", "maria", "nope")] == ["raft", "environment", "cluster", None]
    described = {s["name"]: s for s in stores.describe()}
    assert described["pg"]["url"] == "postgresql://env:***@h/db" and "shadows" in described["pg"]
    assert described["maria"]["password"] == "${env:PW}" and described["maria"]["added_by"] == "root"
    assert "secret" not in str(described) and "resolved" not in str(described)
    assert stores.get("maria").url == "mysql://root:resolved@h/db"
    assert stores.get("pg").url == "postgresql://env:secret@h/db"


def test_a_redefined_store_is_rebuilt_and_a_removed_one_closed():
    specs = {"pg": {"url": "postgresql://a@h/one", "password": None}}
    stores = make(specs)
    first = stores.get("pg")
    assert stores.get("pg") is first
    specs["pg"] = {"url": "postgresql://a@h/two", "password": None}
    second = stores.get("pg")
    assert first.closed and second.url == "postgresql://a@h/two"
    del specs["pg"]
    assert stores.prune() == ["pg"] and second.closed
    with pytest.raises(UnknownStore):
        stores.get("pg")


def test_a_reference_this_node_cannot_resolve_makes_the_store_unavailable_here():
    stores = make({"pg": {"url": "postgresql://a@h/db", "password": "${env:MISSING}"}})
    with pytest.raises(StoreUnavailable, match="MISSING is not set"):
        stores.get("pg")
