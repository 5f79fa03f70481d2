#!/usr/bin/env python
"""In-process: one scrape of a leader's ``/metrics`` at 10,000 connectors × 10 tasks, before and after.

``run.py`` found that on a live cluster at 100,000 tasks the leader's ``/metrics`` took over 30 s
and grew the leader past 1 GB of RSS (all tasks' series from the heartbeats), and then, with each
node exporting only its own agent's tasks, still 6.6 s (each connector's status and config read
on its own). This measures what the leader's two collectors (``webapp.metrics.NodeCollector`` and
``webapp.connect_metrics.ConnectMetricsCollector``) and prometheus-client's text encoder do for one
scrape, without HTTP, on two source trees in the same run: BASELINE (a git revision, default the
last commit before this work) and this checkout, alternately, each in its own child process.

Each child fills a Raft store as ``expand.py`` does (CONNECTORS file sources of TASKS tasks over
WORKERS workers, statuses RUNNING, a few FAILED or never reported) and hands both trees the same
leader: a coordinator holding every worker's last heartbeat report (every task with its metrics,
what the baseline exported) and, in the node's data directory, its own agent's tasks file (the
tasks of one worker, what this checkout exports). Every timed scrape uses new collectors, so the
status cache of ``connect_metrics`` is cold, as it is for a Prometheus scraping every 15 s or more.

Reported per tree: the best and median wall time of SCRAPES scrapes per child over PASSES children,
the process CPU time, the answer's size and sample count, and how much the child's peak RSS grew
during the scrapes (``ru_maxrss``).

A second row measures a Prometheus scraping the same leader again and again (``steady``): the same
collectors for every scrape, and between two scrapes CHANGED connectors each see one task's status
change (applied as the Raft log applies it). Since the leader keeps each connector's lines between
scrapes (``webapp.connect_metrics.ConnectorSeries``) only those are read and encoded again; a tree
without it reads everything once its 5 s status cache ran out, which the child forces by
advancing the collectors' clock. Both trees' answers are compared sample by sample.

Usage: ``python benchmarks/scale/scrape.py [--connectors 10000] [--tasks 10] [--workers 100]
[--scrapes 3] [--changed 20] [--passes 2] [--baseline REV] [--no-record]``; results are appended to
``RESULTS.md`` beside this file with the machine and its load average.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: the last commit before the leader kept each connector's series between scrapes (d8431a4: before each
#: node exported only its own agent's tasks)
DEFAULT_BASELINE = "1bc8745"


def child(args: argparse.Namespace) -> None:
    """Measure the tree ``args.tree`` (this process imports its product code only); print one JSON line."""
    sys.path.insert(0, str(ROOT))
    from benchmarks._trees import enter

    enter(args.tree)
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from expand import fill_state  # noqa: I001 - this directory's helper, after the tree is entered
    from prometheus_client import CollectorRegistry, generate_latest

    from raftnode.state import ClusterStateMachine
    from webapp import connect_metrics, metrics
    from webapp.connect.herder import Herder
    from webapp.storage.raft import RaftMetadataStore

    state = ClusterStateMachine()
    fill_state(state, args.connectors, args.tasks, args.workers)
    replica = SimpleNamespace(state=state)
    store = RaftMetadataStore(replica)
    herder = Herder(store=store, members=lambda: state.members, assignment=lambda: state.assignment)
    reported: dict[str, dict[str, Any]] = {}
    for key, worker in state.assignment["tasks"].items():
        name, _, task = key.rpartition("-")
        entry = {"state": "RUNNING", "connector": name, "task": int(task), "records": 12_000, "batches": 40,
                 "last_batch_seconds": 0.2, "records_per_second": 10.0, "batch_seconds_total": 8.0,
                 "phases": {"read": 2.0, "encode": 1.0, "produce": 3.0}}
        reported.setdefault(worker, {"tasks": {}})["tasks"][key] = entry
    own_worker = sorted(reported)[0]
    data_dir = tempfile.mkdtemp(prefix="bench-scrape-")
    with open(os.path.join(data_dir, "agent-tasks.json"), "w", encoding="utf-8") as fh:
        json.dump({"pid": os.getpid(), "worker_id": own_worker, "written_at": time.monotonic(),
                   "tasks": {k: {**v, "type": "source"} for k, v in reported[own_worker]["tasks"].items()}}, fh)
    raft = SimpleNamespace(state=state, group_commit=None,  # no group commit: its two counters only
                           status=lambda: {"term": 3, "state": "LEADER", "commit_index": 10, "applied_index": 10})
    node = SimpleNamespace(raft=raft, herder=herder, store=store, agent=None,
                           coordinator=SimpleNamespace(active=True, reported=reported),
                           options=SimpleNamespace(roles=["raft"], data_dir=data_dir))
    clock = [0.0]

    def collectors():
        registry = CollectorRegistry()
        registry.register(metrics.NodeCollector(lambda: node))
        connect = connect_metrics.ConnectMetricsCollector(lambda: node, clock=lambda: clock[0])
        registry.register(connect)
        tail = getattr(connect, "connector_exposition", None)  # absent before the kept series
        return lambda: generate_latest(registry) + (tail() if tail is not None else b"")

    def timed(scrape, into):
        w0, c0 = time.perf_counter(), time.process_time()
        body = scrape()
        into.append({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0})
        return body

    rss_before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    scrapes: list[dict[str, float]] = []
    body = b""
    for _ in range(args.scrapes):
        body = timed(collectors(), scrapes)
    rss_after = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    samples = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))

    steady: list[dict[str, float]] = []
    scrape = collectors()
    scrape()
    names = sorted(state.connectors)
    step = max(1, len(names) // max(1, args.changed))
    generation = state.assignment["generation"]
    for i in range(args.scrapes):
        for name in names[i % step::step][:args.changed]:  # one task of each flips between RUNNING and FAILED
            owner = state.assignment["tasks"][f"{name}-1"]
            was = (state.statuses.get(name, {}).get("tasks", {}).get("1") or {}).get("state")
            failed = was != "FAILED"
            state._put_status(name, 1, owner, generation, {"state": "FAILED" if failed else "RUNNING",
                                                          "trace": "boom" if failed else None}, _doApply=True)
        clock[0] += 3600.0  # the baseline's 5 s status cache ran out, as between two 15 s scrapes
        steady_body = timed(scrape, steady)
    print(json.dumps({"scrapes": scrapes, "steady": steady, "bytes": len(body), "samples": samples,
                      "rss_growth_kib": rss_after - rss_before, "own_tasks": len(reported[own_worker]["tasks"]),
                      "steady_digest": digest(steady_body)}))


def digest(body: bytes) -> str:
    """SHA-256 of the answer's samples and family headers, order aside (the families' order may differ)."""
    import hashlib

    from prometheus_client.parser import text_string_to_metric_families

    rows = sorted((f.name, f.documentation, f.type, s.name, sorted(s.labels.items()), s.value)
                  for f in text_string_to_metric_families(body.decode()) for s in f.samples)
    return hashlib.sha256(json.dumps(rows).encode()).hexdigest()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sys.path.insert(0, str(ROOT))
    from benchmarks._trees import add_arguments

    add_arguments(parser, DEFAULT_BASELINE)
    parser.add_argument("--scrapes", type=int, default=3, help="timed scrapes per child and kind")
    parser.add_argument("--changed", type=int, default=20, help="connectors changed between two steady scrapes")
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0

    sys.path.insert(0, str(ROOT))
    from benchmarks._common import machine, record
    from benchmarks._trees import alternate, extract, uncommitted

    baseline_tree, rev, head = extract(args.baseline, "bench-scrape-")
    dirty = uncommitted("benchmarks/scale/RESULTS.md")
    load_start = Path("/proc/loadavg").read_text().split()[0]
    extra = ["--connectors", str(args.connectors), "--tasks", str(args.tasks), "--workers", str(args.workers),
             "--scrapes", str(args.scrapes), "--changed", str(args.changed)]
    results = alternate(__file__, str(baseline_tree), extra, args.passes)
    load_end = Path("/proc/loadavg").read_text().split()[0]

    def walls(label: str, kind: str = "scrapes") -> list[float]:
        return [s["wall"] for r in results[label] for s in r[kind]]

    def cpus(label: str, kind: str = "scrapes") -> list[float]:
        return [s["cpu"] for r in results[label] for s in r[kind]]

    def cell(label: str) -> str:
        w, c, first = walls(label), cpus(label), results[label][0]
        growth = max(r["rss_growth_kib"] for r in results[label]) / 1024
        return (f"{min(w) * 1000:,.0f} ms (median {statistics.median(w) * 1000:,.0f}; CPU {min(c) * 1000:,.0f}); "
                f"{first['bytes'] / 2**20:,.1f} MiB, {first['samples']:,} samples; peak RSS +{growth:,.0f} MiB")

    def steady(label: str) -> str:
        w, c = walls(label, "steady"), cpus(label, "steady")
        return f"{min(w) * 1000:,.1f} ms (median {statistics.median(w) * 1000:,.1f}; CPU {min(c) * 1000:,.1f})"

    ratio = min(walls("before")) / min(walls("after"))
    steady_ratio = min(walls("before", "steady")) / min(walls("after", "steady"))
    same = len({r["steady_digest"] for label in results for r in results[label]}) == 1
    own = results["after"][0]["own_tasks"]
    text = (f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {machine()} — one leader scrape, in process\n\n"
            f"Command: `python benchmarks/scale/scrape.py --connectors {args.connectors} --tasks {args.tasks} "
            f"--workers {args.workers} --scrapes {args.scrapes} --passes {args.passes}` — {args.connectors:,} "
            f"connectors, {args.connectors * args.tasks:,} tasks reported by {args.workers} workers, {own:,} of them "
            f"by the leader's own agent; before = {rev}, after = {head}{' plus uncommitted changes' if dirty else ''}. "
            f"Best of {args.passes * args.scrapes} scrapes per tree ({args.passes} alternating child processes × "
            f"{args.scrapes}), new collectors each (cold caches); load average (1 min) {load_start} at start, "
            f"{load_end} at end (2 cores shared with other sessions).\n\n"
            "| what | before | after | ratio (best before / best after) |\n|---|---|---|---|\n"
            f"| leader `/metrics`: both collectors + text encoding | {cell('before')} | {cell('after')} | "
            f"**{ratio:.1f}×** |\n"
            f"| the same leader scraped again, {args.changed} connectors changed since the last scrape (kept "
            f"collectors) | {steady('before')} | {steady('after')} | **{steady_ratio:.0f}×** |\n\n"
            f"The two trees' last steady answers {'are' if same else 'are NOT'} the same, sample by sample.\n")
    record(__file__, text, keep=not args.no_record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
