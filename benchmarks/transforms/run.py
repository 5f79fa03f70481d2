#!/usr/bin/env python
"""Transforms benchmark: the SMT chain on Arrow batches against the same chain per record in Python.

What a task's ``mapInArrow`` worker does for each Arrow batch: take a batch of
records (struct values with six fields), run a chain of five transformations
and a predicate, and hand back an Arrow batch. Measured on the Python worker
alone (no Spark, no Kafka), records per second, median of ``--rounds``:

* RaftConnect: ``TransformationChain.apply`` on a :class:`RecordBatch`
  (columnar, pyarrow compute);
* baseline: the same semantics written record by record the way a plain Python
  SMT runtime would (``to_pylist`` → dict operations per record →
  ``Table.from_pylist``), checked to give the same output.

Chain: InsertField$Value (topic + static field), ReplaceField$Value (exclude +
rename), Cast$Value (int64 → string, string → int32), MaskField$Value,
RegexRouter, and Filter on TopicNameMatches (drops a third of the records).

Usage: ``python benchmarks/transforms/run.py [--records 200000] [--rounds 5]``;
results are appended to ``benchmarks/transforms/RESULTS.md`` with the machine.
"""
from __future__ import annotations

import argparse
import os
import platform
import re
import statistics
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

import pyarrow as pa  # noqa: E402

from webapp.runtime.transforms import RecordBatch, TransformationChain, headers_type  # noqa: E402

CONFIG = {
    "transforms": "ins,rep,cast,mask,route,drop",
    "transforms.ins.type": "InsertField$Value", "transforms.ins.topic.field": "src",
    "transforms.ins.static.field": "origin", "transforms.ins.static.value": "bench",
    "transforms.rep.type": "ReplaceField$Value", "transforms.rep.exclude": "note",
    "transforms.rep.renames": "amount:amount_str",
    "transforms.cast.type": "Cast$Value", "transforms.cast.spec": "id:string,qty:int32",
    "transforms.mask.type": "MaskField$Value", "transforms.mask.fields": "email",
    "transforms.route.type": "RegexRouter", "transforms.route.regex": "orders-(.*)",
    "transforms.route.replacement": "clean-$1",
    "transforms.drop.type": "Filter", "transforms.drop.predicate": "eu",
    "predicates": "eu", "predicates.eu.type": "TopicNameMatches", "predicates.eu.pattern": "clean-eu",
}
SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False}, {"field": "qty", "type": "string", "optional": True},
    {"field": "amount", "type": "double", "optional": True}, {"field": "email", "type": "string", "optional": True},
    {"field": "note", "type": "string", "optional": True}, {"field": "city", "type": "string", "optional": True}]}


def make_batch(n: int) -> RecordBatch:
    regions = ["us", "eu", "ap"]
    value = pa.array([{"id": i, "qty": str(i % 50), "amount": i * 0.5, "email": f"u{i}@x.org", "note": "n" * 20,
                       "city": "Paris"} for i in range(n)],
                     pa.struct([("id", pa.int64()), ("qty", pa.string()), ("amount", pa.float64()),
                                ("email", pa.string()), ("note", pa.string()), ("city", pa.string())]))
    table = pa.table({"key": pa.nulls(n), "value": value,
                      "topic": pa.array([f"orders-{regions[i % 3]}" for i in range(n)]),
                      "partition": pa.array([i % 4 for i in range(n)], pa.int32()),
                      "offset": pa.array(range(n), pa.int64()), "timestamp": pa.array([0] * n, pa.int64()),
                      "headers": pa.array([[]] * n, headers_type())})
    return RecordBatch(table, None, SCHEMA, sink=True)


def per_record(batch: RecordBatch) -> pa.Table:
    """The baseline: the same chain as plain Python over each record."""
    route = re.compile("orders-(.*)")
    eu = re.compile("clean-eu")
    out = []
    for r in batch.table.to_pylist():
        v = dict(r["value"])
        v["src"] = r["topic"]
        v["origin"] = "bench"
        v.pop("note")
        v["amount_str"] = v.pop("amount")
        v["id"] = str(v["id"])
        v["qty"] = None if v["qty"] is None else int(v["qty"])
        v["email"] = None if v["email"] is None else ""
        m = route.fullmatch(r["topic"])
        topic = m.expand(r"clean-\g<1>") if m else r["topic"]
        if eu.fullmatch(topic):
            continue
        out.append({**r, "value": v, "topic": topic})
    return pa.Table.from_pylist(out)


def timed(fn, rounds: int) -> float:
    times = []
    for _ in range(rounds):
        t0 = time.perf_counter()
        fn()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    return f"{cpu}, {os.cpu_count()} cores, Python {platform.python_version()}, pyarrow {pa.__version__}"


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--records", type=int, default=200_000)
    ap.add_argument("--rounds", type=int, default=5)
    args = ap.parse_args()
    chain = TransformationChain.from_config(CONFIG)
    batch = make_batch(args.records)
    ours, base = chain.apply(batch), per_record(batch)
    ours_rows = [(r.topic, dict(sorted(r.value.items()))) for r in ours.to_records()]
    base_rows = [(r["topic"], dict(sorted(r["value"].items()))) for r in base.to_pylist()]
    if ours_rows != base_rows:
        raise SystemExit("outputs differ: the benchmark would compare different work")
    t_ours = timed(lambda: chain.apply(batch), args.rounds)
    t_base = timed(lambda: per_record(batch), args.rounds)
    n = args.records
    rows = [f"| chain of 6 SMTs + predicate on Arrow batches, {n:,} records | {n / t_ours:,.0f} records/s "
            f"({t_ours * 1000:.0f} ms) | per-record Python {n / t_base:,.0f} records/s ({t_base * 1000:.0f} ms); "
            f"ratio {t_base / t_ours:.1f}x faster |"]
    stamp = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    text = (f"\n## {stamp} — {machine()}\n\n| what | result | baseline |\n|---|---|---|\n" + "\n".join(rows) + "\n")
    print(text)
    results = Path(__file__).with_name("RESULTS.md")
    if not results.exists():
        results.write_text("# Transforms benchmark results\n\n`python benchmarks/transforms/run.py` (see its "
                           "docstring for what is measured and the baseline). Measured on a shared, loaded "
                           "machine: compare the ratio, not the absolute numbers.\n")
    with open(results, "a") as fh:
        fh.write(text)


if __name__ == "__main__":
    main()
