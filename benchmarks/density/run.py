#!/usr/bin/env python
"""Benchmark: 1,000 tasks on one node — landing time, idle cost, restart.

One ``raft,worker`` node with the embedded Kafka. ``--pipelines`` (default 500)
pairs of a FileSourceConnector on its own small CSV (``--rows`` rows, default 20)
→ its own topic → a FileSinkConnector writing Parquet, each with ``tasks.max=1``:
1,000 tasks by default, all created through the public REST API.

Measures, and prints next to the goals of issue 13:

* **landed**: seconds from the last create until every sink's committed offsets
  cover its rows (``GET /connectors/{name}/offsets``) — goal ≤ 120 s;
* **idle**: once everything landed and settled, the node's whole process tree
  (node, agent, engine worker processes, any JVM) over a 30 s window: CPU cores
  used (from /proc utime+stime), RSS and threads — goals ≤ 0.1 core, ≤ 2.5 GB,
  ≤ 300 threads;
* **restart**: SIGTERM, then the node started again on the same data dir;
  seconds until every task is reported RUNNING by the new agent's heartbeats
  (``/raftconnect/v1/task-metrics`` comes from the leader's memory of heartbeats
  received since it started, so no status left from before can count) — goal ≤ 30 s.

Appends a row to RESULTS.md with the machine and its load.
Usage: ``python benchmarks/density/run.py [--pipelines 500] [--rows 20]``.
"""
from __future__ import annotations

import argparse
import os
import shutil
import sys
import tempfile
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from benchmarks._common import machine  # noqa: E402

SOURCE = "raftconnect.connectors.file.FileSourceConnector"
SINK = "raftconnect.connectors.file.FileSinkConnector"
TICK = os.sysconf("SC_CLK_TCK")
PAGE = os.sysconf("SC_PAGE_SIZE")




def tree(root: int) -> dict[int, tuple[int, int, int]]:
    """``{pid: (cpu ticks, rss bytes, threads)}`` of ``root`` and all its descendants, from /proc."""
    stats: dict[int, list[str]] = {}
    children: dict[int, list[int]] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                raw = f.read()
        except OSError:
            continue
        fields = raw[raw.rindex(")") + 2:].split()
        stats[int(entry)] = fields
        children.setdefault(int(fields[1]), []).append(int(entry))
    out, todo = {}, [root]
    while todo:
        pid = todo.pop()
        f = stats.get(pid)
        if f is None:
            continue
        # after the ")": state ppid ... utime(11) stime(12) ... num_threads(17) ... rss(21)
        out[pid] = (int(f[11]) + int(f[12]), int(f[21]) * PAGE, int(f[17]))
        todo.extend(children.get(pid, []))
    return out


def idle_sample(pid: int, window: float) -> tuple[float, float, int]:
    """(cores used over ``window`` seconds, RSS bytes, threads) of the process tree at ``pid``."""
    a = tree(pid)
    time.sleep(window)
    b = tree(pid)
    ticks = sum(v[0] for v in b.values()) - sum(a[p][0] for p in b if p in a)
    return ticks / TICK / window, sum(v[1] for v in b.values()), sum(v[2] for v in b.values())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--pipelines", type=int, default=500)
    parser.add_argument("--rows", type=int, default=20)
    parser.add_argument("--idle-window", type=float, default=30.0)
    args = parser.parse_args()

    from tools.launcher import NodeProcess, wait_for
    from webapp.kafka.embedded import EmbeddedKafka, free_port

    n, tasks = args.pipelines, 2 * args.pipelines
    work = Path(tempfile.mkdtemp(prefix="bench-density-"))
    data, out = work / "in", work / "out"
    data.mkdir()
    for i in range(n):
        with open(data / f"p{i}.csv", "w") as f:
            f.write("id,name,value\n")
            f.writelines(f"{r},row-{i}-{r},{r * 0.5}\n" for r in range(args.rows))
    try:
        with EmbeddedKafka(log_dir=work / "kafka") as kafka:
            node = NodeProcess(node_id="density", rest_port=free_port(), raft_port=free_port(),
                               data_dir=str(work / "node"), bootstrap_servers=kafka.bootstrap_servers,
                               file_allowed_paths=[str(data), str(out)])
            node.start(timeout=120)
            try:
                c = node.client()
                t0 = time.monotonic()

                def create(i: int) -> None:
                    c.create_connector(f"src-{i}", {"connector.class": SOURCE, "path": str(data / f"p{i}.csv"),
                                                    "format": "csv", "topic": f"t{i}", "tasks.max": "1"})
                    c.create_connector(f"sink-{i}", {"connector.class": SINK, "topics": f"t{i}",
                                                     "path": str(out / f"p{i}"), "format": "parquet",
                                                     "tasks.max": "1"})

                with ThreadPoolExecutor(8) as pool:
                    list(pool.map(create, range(n)))
                created = time.monotonic()
                print(f"created {2 * n} connectors in {created - t0:.1f} s", flush=True)
                pending = set(range(n))

                def landed() -> bool:
                    def done(i: int) -> bool:
                        return c.sink_offsets_total(f"sink-{i}") >= args.rows
                    with ThreadPoolExecutor(8) as pool:
                        finished = {i for i, ok in zip(sorted(pending), pool.map(done, sorted(pending))) if ok}
                    pending.difference_update(finished)
                    print(f"  {n - len(pending)}/{n} pipelines landed ({time.monotonic() - created:.0f} s)", flush=True)
                    return not pending
                wait_for(landed, 900, interval=2.0, what="every pipeline's rows in its sink")
                landed_s = time.monotonic() - created
                print(f"landed: {landed_s:.1f} s after the last create (goal <= 120)", flush=True)
                time.sleep(15)  # let the last batches, commits and backoffs settle
                cores, rss, threads = idle_sample(node.proc.pid, args.idle_window)
                print(f"idle: {cores:.3f} cores (goal <= 0.1), {rss / 2**30:.2f} GB RSS (goal <= 2.5), "
                      f"{threads} threads (goal <= 300)", flush=True)
            finally:
                node.stop()
            # restart on the same data dir: every task must be RUNNING again, reported by the new agent
            node = NodeProcess(node_id="density", rest_port=node.rest_port, raft_port=node.raft_port,
                               data_dir=str(work / "node"), bootstrap_servers=kafka.bootstrap_servers,
                               file_allowed_paths=[str(data), str(out)])
            t_restart = time.monotonic()
            node.start(timeout=120)
            try:
                c = node.client()

                def all_running() -> bool:
                    body = c.request("GET", "/raftconnect/v1/task-metrics")
                    return sum(1 for t in body.get("tasks", []) if t.get("state") == "RUNNING") >= tasks
                wait_for(all_running, 300, interval=0.5, what="every task RUNNING after the restart")
                restart_s = time.monotonic() - t_restart
                print(f"restart: every task RUNNING {restart_s:.1f} s after the new process started (goal <= 30)",
                      flush=True)
            finally:
                node.stop()
    finally:
        shutil.rmtree(work, ignore_errors=True)
    ok = landed_s <= 120 and cores <= 0.1 and rss <= 2.5 * 2**30 and threads <= 300 and restart_s <= 30
    results = Path(__file__).with_name("RESULTS.md")
    if not results.exists():
        results.write_text(
            "# Density benchmark results\n\n"
            "`python benchmarks/density/run.py`: N pipelines (a FileSource on a small CSV → its own topic → a "
            "FileSink to Parquet, tasks.max=1 each: 2N tasks) on one raft,worker node, created through REST. "
            "Landed: from the last create until every sink's committed offsets cover its rows. Idle: the node's "
            "process tree (node, agent, engine processes, JVM if any) over 30 s once settled. Restart: SIGTERM and "
            "start on the same data dir until every task is RUNNING in the new agent's heartbeats. Goals: landed "
            "≤ 120 s, idle ≤ 0.1 core, ≤ 2.5 GB, ≤ 300 threads, restart ≤ 30 s.\n\n"
            "| date | tasks | create s | landed s | idle cores | RSS GB | threads | restart s | goals | load | machine |\n"
            "|---|---|---|---|---|---|---|---|---|---|---|\n")
    with results.open("a") as fh:
        fh.write(f"| {datetime.now(timezone.utc):%Y-%m-%d} | {tasks} | {created - t0:.1f} | {landed_s:.1f} | "
                 f"{cores:.3f} | {rss / 2**30:.2f} | {threads} | {restart_s:.1f} | {'met' if ok else 'NOT met'} | "
                 f"{os.getloadavg()[0]:.1f} | {machine()} |\n")
    print(f"recorded in {results}")
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
