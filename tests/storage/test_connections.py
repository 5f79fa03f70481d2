"""A relational store's connections across requests: kept, checked before reuse, closed with the store.

Each test runs the store in a thread of its own that sends Django's ``request_started`` and
``request_finished`` signals around each call, as a REST thread of a node does around a REST
request. Real PostgreSQL and MariaDB servers.
"""
from __future__ import annotations

import threading
import uuid
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.signals import request_finished, request_started
from django.db import connections

from webapp.storage.relational import RelationalMetadataStore

from .conftest import MARIADB_URL, PG_URL, drop_database


@pytest.fixture(params=["postgresql", "mariadb"])
def store(request):
    db = f"raftconnect_test_{uuid.uuid4().hex[:10]}"
    s = RelationalMetadataStore(request.param, (PG_URL if request.param == "postgresql" else MARIADB_URL).format(db=db))
    s.prepare()
    yield s
    s.close()
    drop_database(s.backend, db)


class RequestThread:
    """One thread, kept for the test, that runs each call as one request (signals around it)."""

    def __init__(self) -> None:
        self._pool = ThreadPoolExecutor(1)

    def request(self, fn):
        def run():
            request_started.send(sender=None)
            try:
                return fn()
            finally:
                request_finished.send(sender=None)
        return self._pool.submit(run).result(timeout=30)

    def run(self, fn):
        """``fn()`` in the thread, outside any request."""
        return self._pool.submit(fn).result(timeout=30)

    def close(self) -> None:
        self._pool.submit(connections.close_all).result(timeout=30)
        self._pool.shutdown()


@pytest.fixture
def thread():
    t = RequestThread()
    yield t
    t.close()


def _raw(alias: str):
    """This thread's DB-API connection on ``alias`` (``None`` when it has none open)."""
    return connections[alias].connection


def _is_open(raw) -> bool:
    return not raw.closed if hasattr(raw, "closed") else raw.open  # psycopg / PyMySQL


def test_a_store_keeps_its_connection_from_one_request_to_the_next(store, thread):
    first = thread.request(lambda: (store.connector_names(), _raw(store.alias))[1])
    second = thread.request(lambda: (store.connector_names(), _raw(store.alias))[1])
    assert first is not None and second is first and _is_open(second)


def test_a_connection_the_server_dropped_is_replaced_at_the_next_request(store, thread):
    def server_side_id():
        with connections[store.alias].cursor() as cur:
            cur.execute("SELECT pg_backend_pid()" if store.backend == "postgresql" else "SELECT CONNECTION_ID()")
            return cur.fetchone()[0]

    victim = thread.request(server_side_id)
    killer = RelationalMetadataStore("killer", store.safe_url)
    try:
        with connections[killer.alias].cursor() as cur:
            cur.execute("SELECT pg_terminate_backend(%s)" if store.backend == "postgresql" else "KILL %s", [victim])
    finally:
        killer.close()
    # no StoreUnavailable: the connection is checked before its first use in a request, and reopened
    assert thread.request(lambda: store.connector_names()) == []
    assert thread.request(server_side_id) != victim


def test_a_closed_stores_connection_in_another_thread_closes_at_that_threads_next_request_end(store, thread):
    other = RelationalMetadataStore("closed-soon", store.safe_url)
    raw = thread.request(lambda: (other.connector_names(), _raw(other.alias))[1])
    assert _is_open(raw)
    done = threading.Event()
    threading.Thread(target=lambda: (other.close(), done.set())).start()  # as a switch or an edit closes it
    assert done.wait(30)
    assert thread.run(lambda: _is_open(raw))  # nothing closes it from outside its thread
    thread.request(lambda: store.connector_names())  # any request of that thread
    assert not _is_open(raw)
    assert thread.run(lambda: getattr(connections._connections, other.alias, None)) is None
