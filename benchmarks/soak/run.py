#!/usr/bin/env python
"""Soak: a running pipeline plus connector churn for ``--minutes``; memory and threads must stay flat.

One ``raft,worker`` node with the embedded Kafka. A writer appends rows to a CSV
file all the time; a FileSourceConnector follows it (a whole-file split picks up
appended lines) into a topic that a FileSinkConnector writes as Parquet. Every
``--churn-seconds`` a short-lived pipeline is created, paused, resumed and
deleted. Every 10 s the node process and the agent (with its engine worker
processes) are sampled from /proc: RSS and threads.

Goal (issue 13): after the first 5 minutes, agent and node RSS grow ≤ 5 % and the
thread count stays flat. Writes every sample to ``samples-<date>.csv`` beside
this script and a row to RESULTS.md. Usage:
``python benchmarks/soak/run.py [--minutes 30] [--churn-seconds 5]``.
"""
from __future__ import annotations

import argparse
import csv
import os
import platform
import shutil
import sys
import tempfile
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from benchmarks._common import machine  # noqa: E402
from density.run import tree  # noqa: E402  (same /proc sampling as the density benchmark)

SOURCE = "raftconnect.connectors.file.FileSourceConnector"
SINK = "raftconnect.connectors.file.FileSinkConnector"


def agent_pid(node_pid: int) -> int | None:
    """The Celery agent among the node's children."""
    for pid in tree(node_pid):
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as f:
                if b"celery" in f.read():
                    return pid
        except OSError:
            continue
    return None


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--minutes", type=float, default=30.0)
    parser.add_argument("--churn-seconds", type=float, default=5.0)
    parser.add_argument("--warmup-minutes", type=float, default=5.0)
    args = parser.parse_args()
    assert args.minutes > args.warmup_minutes, "--minutes must be longer than --warmup-minutes"

    from tools.launcher import NodeProcess, wait_for
    from webapp.kafka.embedded import EmbeddedKafka, free_port

    work = Path(tempfile.mkdtemp(prefix="bench-soak-"))
    feed = work / "feed.csv"
    feed.write_text("id,name,value\n")
    stop = threading.Event()
    samples: list[dict] = []
    churned = 0

    def writer() -> None:
        n = 0
        while not stop.is_set():
            with open(feed, "a") as f:
                f.writelines(f"{n + i},name-{n + i},{(n + i) * 0.25}\n" for i in range(200))
            n += 200
            stop.wait(0.2)  # ~1,000 rows/s

    try:
        with EmbeddedKafka(log_dir=work / "kafka") as kafka:
            node = NodeProcess(node_id="soak", rest_port=free_port(), raft_port=free_port(),
                               data_dir=str(work / "node"), bootstrap_servers=kafka.bootstrap_servers,
                               file_allowed_paths=[str(work)])  # feed, small and out (node/ stays refused)
            node.start(timeout=120)
            try:
                c = node.client()
                small = work / "small.csv"
                small.write_text("id,v\n" + "".join(f"{i},{i}\n" for i in range(50)))
                c.create_connector("feed-src", {"connector.class": SOURCE, "path": str(feed), "format": "csv",
                                                "topic": "feed", "tasks.max": "1"})
                c.create_connector("feed-sink", {"connector.class": SINK, "topics": "feed",
                                                 "path": str(work / "out"), "format": "parquet", "tasks.max": "1"})
                threading.Thread(target=writer, daemon=True).start()
                wait_for(lambda: c.all_running("feed-src", 1) and c.all_running("feed-sink", 1), 120,
                         what="the long-running pipeline RUNNING")
                t0 = time.monotonic()
                end = t0 + args.minutes * 60
                next_sample = next_churn = t0
                while time.monotonic() < end:
                    now = time.monotonic()
                    if now >= next_churn:  # one short-lived pipeline: create, pause, resume, delete
                        name = f"churn-{churned % 4}"
                        if name in c.connectors():
                            c.delete(name)
                        c.create_connector(name, {"connector.class": SOURCE, "path": str(small), "format": "csv",
                                                  "topic": f"churn-{churned}", "tasks.max": "1"})
                        c.pause(name)
                        c.resume(name)
                        churned += 1
                        next_churn = now + args.churn_seconds
                    if now >= next_sample:
                        agent = agent_pid(node.proc.pid)
                        whole = tree(node.proc.pid)
                        agent_tree = tree(agent) if agent else {}
                        n = whole.get(node.proc.pid, (0, 0, 0))
                        samples.append({"seconds": round(now - t0, 1),
                                        "node_rss_mb": round(n[1] / 2**20, 1), "node_threads": n[2],
                                        "agent_rss_mb": round(sum(v[1] for v in agent_tree.values()) / 2**20, 1),
                                        "agent_threads": sum(v[2] for v in agent_tree.values()),
                                        "sink_records": c.sink_offsets_total("feed-sink")})
                        s = samples[-1]
                        print(f"  {s['seconds']:>7.0f} s  node {s['node_rss_mb']} MB / {s['node_threads']} threads, "
                              f"agent {s['agent_rss_mb']} MB / {s['agent_threads']} threads, "
                              f"{s['sink_records']:,} records in the sink, {churned} pipelines churned", flush=True)
                        next_sample = now + 10
                    time.sleep(0.2)
                failures = c.failures("feed-src") + c.failures("feed-sink")
                if failures:
                    raise RuntimeError("the long-running pipeline failed:\n" + "\n".join(failures))
            finally:
                stop.set()
                node.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)

    stamp = f"{datetime.now(timezone.utc):%Y-%m-%dT%H%M}"
    out = Path(__file__).with_name(f"samples-{stamp}.csv")
    with out.open("w", newline="") as f:
        w = csv.DictWriter(f, fieldnames=list(samples[0]))
        w.writeheader()
        w.writerows(samples)
    after = [s for s in samples if s["seconds"] >= args.warmup_minutes * 60]
    base, last = after[0], after[-1]

    def growth(key: str) -> float:
        return (max(s[key] for s in after[-3:]) - base[key]) / base[key] * 100

    node_g, agent_g = growth("node_rss_mb"), growth("agent_rss_mb")
    total = [s["agent_threads"] + s["node_threads"] for s in after]
    threads = (min(total), max(total))
    # "flat": no growth. Churn starts and ends short-lived threads (connector start-up pool, a
    # watcher thread that runs only while something is watched), so compare the highest count of
    # the first five minutes after the warm-up with the highest of the last five
    window = max(1, int(300 / 10))
    first_max, last_max = max(total[:window]), max(total[-window:])
    ok = node_g <= 5 and agent_g <= 5 and last_max - first_max <= max(5, first_max // 20)
    print(f"after {args.warmup_minutes:.0f} min: node RSS {base['node_rss_mb']} -> {last['node_rss_mb']} MB "
          f"({node_g:+.1f} %), agent RSS {base['agent_rss_mb']} -> {last['agent_rss_mb']} MB ({agent_g:+.1f} %), "
          f"threads {threads[0]}..{threads[1]} (highest in the first 5 min {first_max}, in the last 5 min "
          f"{last_max}); goal <= 5 %, threads flat: {'met' if ok else 'NOT met'}")
    results = Path(__file__).with_name("RESULTS.md")
    if not results.exists():
        results.write_text(
            "# Soak results\n\n"
            "`python benchmarks/soak/run.py`: a file pipeline following a CSV that grows ~1,000 rows/s, plus a "
            "short-lived pipeline created, paused, resumed and deleted every few seconds, on one raft,worker node. "
            "RSS and threads of the node process and of the agent (with its engine worker processes) every 10 s; "
            "growth measured from the first sample after the warm-up to the largest of the last three. Goal: "
            "≤ 5 % growth, threads flat.\n\n"
            "| date | minutes | churned | node RSS MB | node growth | agent RSS MB | agent growth | threads | goal | "
            "samples | load | machine |\n|---|---|---|---|---|---|---|---|---|---|---|---|\n")
    with results.open("a") as fh:
        fh.write(f"| {datetime.now(timezone.utc):%Y-%m-%d} | {args.minutes:.0f} | {churned} | "
                 f"{base['node_rss_mb']}→{last['node_rss_mb']} | {node_g:+.1f} % | "
                 f"{base['agent_rss_mb']}→{last['agent_rss_mb']} | {agent_g:+.1f} % | {threads[0]}..{threads[1]}, "
                 f"highest {first_max}→{last_max} | "
                 f"{'met' if ok else 'NOT met'} | {out.name} | {os.getloadavg()[0]:.1f} | {machine()} |\n")
    print(f"recorded in {results} and {out}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
