"""The JDBC source on a real node copies a table created after it started (``table.poll.interval.ms``).

A scratch PostgreSQL database with no table: the connector runs with no task; a table created afterwards
is found by the worker's recheck of the connector's task split, gets a task, and its rows reach Kafka.
"""
from __future__ import annotations

import json
import uuid

import psycopg
import pytest

from tests.kafka_helpers import read_messages
from tools.databases import scratch_database
from tools.launcher import NodeProcess, wait_for
from webapp.kafka.embedded import free_port

pytestmark = pytest.mark.integration


@pytest.fixture
def pg_db():
    with scratch_database("postgresql", "newtables") as name:
        yield name


def test_a_table_created_after_the_connector_started_is_copied(tmp_path, kafka, pg_db):
    node = NodeProcess(node_id="n1", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "n1"),
                       bootstrap_servers=kafka.bootstrap_servers).start(timeout=90)
    try:
        c = node.client()
        prefix = f"nt-{uuid.uuid4().hex[:8]}-"
        c.create_connector("new-tables", {
            "connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector",
            "connection.url": f"jdbc:postgresql://127.0.0.1:5432/{pg_db}", "connection.user": "postgres",
            "mode": "incrementing", "incrementing.column.name": "id", "topic.prefix": prefix,
            "poll.interval.ms": "200", "table.poll.interval.ms": "500", "tasks.max": "2"})
        wait_for(lambda: c.status("new-tables")["connector"]["state"] == "RUNNING", 120,
                 what="the connector to run")
        assert c.status("new-tables")["tasks"] == []  # no table yet: no work

        with psycopg.connect(f"host=127.0.0.1 user=postgres dbname={pg_db}", autocommit=True) as conn:
            conn.execute("CREATE TABLE orders (id bigserial PRIMARY KEY, item text NOT NULL)")
            conn.execute("INSERT INTO orders (item) SELECT 'item ' || g FROM generate_series(1, 25) g")

        wait_for(lambda: c.all_running("new-tables", 1), 120, what="a task for the new table")
        assert not c.failures("new-tables")

        def copied() -> list | None:  # every row in the topic (it is created with the first of them)
            messages = read_messages(kafka.bootstrap_servers, prefix + "orders", timeout=10)
            return messages if len(messages) >= 25 else None

        messages = wait_for(copied, 120, interval=1.0, what="the new table's rows in Kafka")
        items = sorted(json.loads(m.value())["payload"]["item"] for m in messages)
        assert items == sorted(f"item {i}" for i in range(1, 26))
    finally:
        node.stop()
