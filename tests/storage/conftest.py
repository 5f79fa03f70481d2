"""Fixtures of the metadata store tests: one real backend per parameter (raft, postgresql, mariadb).

``backend`` is module-scoped and parametrized: each parameter starts a real
single-member Raft group (the fencing authority of every backend, as on a node)
and, for the relational backends, creates a database ``raftconnect_test_<random>``
on the local server, prepares it and drops it at the end. A server that is down
makes the tests error — they never skip.
"""
from __future__ import annotations

import uuid
from dataclasses import dataclass

import pytest

from raftnode import RaftConfig, RaftNode
from webapp.storage.base import MetadataStore
from webapp.kafka.embedded import free_port

from tools.databases import drop_database  # noqa: F401 - tests import it from here

PG_URL = "postgresql://postgres@127.0.0.1:5432/{db}"
MARIADB_URL = "mysql://root@127.0.0.1:3306/{db}"
REDIS_URL = "redis://127.0.0.1:6379/0"


def set_pg_connections(db: str, allowed: bool) -> None:
    """Let clients connect to PostgreSQL database ``db`` again, or refuse them and end the sessions it has
    (a database outage that the server itself stays up for)."""
    import psycopg

    with psycopg.connect(PG_URL.format(db="postgres"), autocommit=True) as conn:
        conn.execute(f'ALTER DATABASE "{db}" ALLOW_CONNECTIONS {"true" if allowed else "false"}')
        if not allowed:
            conn.execute("SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE datname = %s", (db,))


def start_raft(data_dir: str) -> RaftNode:
    node = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=data_dir, password="test-secret"))
    assert node.wait_ready(15), node.status()
    node.propose("_become_coordinator", node.term, "n1")
    return node


@dataclass
class Backend:
    """A store under test plus the Raft group whose assignment fences its writes."""

    kind: str
    store: MetadataStore
    raft: RaftNode
    url: str | None = None

    def reopen(self) -> MetadataStore:
        """A second, independent handle on the same data (as another node would have); caller closes it."""
        from webapp.storage.registry import create_store

        return create_store(self.kind, self.url, fence=self.raft.state.check_fence)

    def assign(self, connectors: dict[str, str], tasks: dict[str, str]) -> int:
        """Commit a new assignment (``{name: worker}``, ``{"name-i": worker}``); returns its generation."""
        generation = self.raft.state.assignment["generation"] + 1
        self.raft.propose("_set_assignment", self.raft.term, generation, connectors, tasks)
        return generation


@pytest.fixture(autouse=True)
def _db_access(django_db_blocker):
    """The stores manage their own connections on runtime aliases; let them (no Django test DB)."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture(scope="module", params=["raft", "postgresql", "mariadb", "redis"])
def backend(request, tmp_path_factory, django_db_blocker):
    kind = request.param
    raft = start_raft(str(tmp_path_factory.mktemp(f"raft-{kind}")))
    try:
        if kind == "raft":
            from webapp.storage.raft import RaftMetadataStore

            yield Backend(kind, RaftMetadataStore(raft), raft)
            return
        if kind == "redis":  # the example third-party plugin, found through its entry point
            from webapp.storage.registry import create_store

            prefix = f"raftconnect_test_{uuid.uuid4().hex[:10]}:"
            store = create_store("redis", f"{REDIS_URL}?prefix={prefix}", fence=raft.state.check_fence)
            try:
                store.prepare()
                yield Backend(kind, store, raft, f"{REDIS_URL}?prefix={prefix}")
            finally:
                import redis

                client = redis.Redis.from_url(REDIS_URL)
                keys = list(client.scan_iter(f"{prefix}*"))
                if keys:
                    client.delete(*keys)
                client.close()
                store.close()
            return
        from webapp.storage.relational import RelationalMetadataStore

        db = f"raftconnect_test_{uuid.uuid4().hex[:10]}"
        url = (PG_URL if kind == "postgresql" else MARIADB_URL).format(db=db)
        with django_db_blocker.unblock():
            store = RelationalMetadataStore(kind, url, fence=raft.state.check_fence)
            try:
                store.prepare()
                yield Backend(kind, store, raft, url)
            finally:
                store.close()
                drop_database(store.backend, db)
    finally:
        raft.destroy()
