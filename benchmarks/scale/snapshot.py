#!/usr/bin/env python
"""Raft snapshot of a large cluster state: size, time to take it, time to restore a member from it.

Issue 16 item 1 asks for the snapshot's size and the time to take and to restore it at
10,000 connectors and 100,000 tasks. This measures exactly that, in this process, without
REST or workers (``benchmarks/scale/run.py`` measures the cluster around it):

1. a single-member ``RaftNode`` whose state is filled by applying commands directly
   (``_doApply``, as every member applies committed entries): CONNECTORS connector
   configs of 10 keys, TASKS task configs each, a RUNNING status per connector and task,
   one source offset per task, and an assignment of everything over WORKERS workers;
2. **take**: ``forceLogCompaction()``; time until pysyncobj has written the new snapshot
   file (it serializes in a forked child, so the Raft thread is not blocked meanwhile);
   the file's size;
3. **restore**: the member is stopped and a fresh ``RaftNode`` started on the same data
   directory; time until it is ready with every connector loaded, and the state digest
   (``ClusterStateMachine.digest()``) compared with the original.

Usage: ``python benchmarks/scale/snapshot.py [--connectors 10000] [--tasks 10] [--workers 100]
[--no-record]``; results are appended to ``RESULTS.md`` beside this file with the machine.
"""
from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, record
from raftnode import RaftConfig, RaftNode
from webapp.kafka.embedded import free_port


def fill(node: RaftNode, connectors: int, tasks: int, workers: int) -> None:
    """Apply the commands of a cluster of ``connectors`` × ``tasks`` straight to the state (see module docstring)."""
    sm = node.state

    def apply(command: str, *args):
        out = getattr(sm, command)(*args, _doApply=True)
        assert not (isinstance(out, dict) and "rejected" in out), out

    names = [f"conn-{i:05d}" for i in range(connectors)]
    owner = {}
    for i, name in enumerate(names):
        config = {"connector.class": "raftconnect.connectors.file.FileSourceConnector", "tasks.max": str(tasks),
                  "path": f"/data/in/{name}", "format": "csv", "topic": f"topic-{i % 500}",
                  "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                  "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                  "value.converter.schemas.enable": "true", "errors.tolerance": "none", "batch.size": "50000"}
        apply("_put_connector_config", name, config, None, False)
        apply("_put_task_configs", name, None, 0, [dict(config, **{"task.id": str(t)}) for t in range(tasks)])
        owner[name] = f"w{i % workers:03d}"
    task_owner = {f"{n}-{t}": f"w{(i * tasks + t) % workers:03d}" for i, n in enumerate(names) for t in range(tasks)}
    apply("_set_assignment", 0, 1, owner, task_owner)
    for i, name in enumerate(names):
        apply("_put_status", name, None, owner[name], 1, {"state": "RUNNING", "trace": None})
        for t in range(tasks):
            apply("_put_status", name, t, task_owner[f"{name}-{t}"], 1, {"state": "RUNNING", "trace": None})
            apply("_commit_offsets", name, t, task_owner[f"{name}-{t}"], 1,
                  [[f'{{"filename":"/data/in/{name}/part-{t}.csv"}}', {"filename": f"/data/in/{name}/part-{t}.csv"},
                    {"position": 1_000_000 + t}]])


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connectors", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    work = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    cfg = RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(work / "raft"))
    snap = work / "raft" / "raft.snapshot"
    node = RaftNode(cfg)
    try:
        assert node.wait_ready(30), node.status()
        t0 = time.perf_counter()
        fill(node, args.connectors, args.tasks, args.workers)
        fill_s = time.perf_counter() - t0
        node.propose("_put_topics", "conn-00000", ["t"])  # one committed entry after the fill, as in a live cluster
        digest = node.state.digest()
        before = snap.stat().st_mtime_ns if snap.exists() else None
        t0 = time.perf_counter()
        node.syncobj.forceLogCompaction()
        deadline = time.monotonic() + 600
        while not (snap.exists() and snap.stat().st_mtime_ns != before and node.status()["log_size"] <= 2):
            if time.monotonic() > deadline:
                raise TimeoutError("no snapshot written in 600 s")
            time.sleep(0.01)
        take_s = time.perf_counter() - t0
        size = snap.stat().st_size
    finally:
        node.destroy()
    t0 = time.perf_counter()
    restored = RaftNode(cfg)
    try:
        deadline = time.monotonic() + 600
        while not (restored.status()["ready"] and len(restored.state.connectors) == args.connectors):
            if time.monotonic() > deadline:
                raise TimeoutError("the restored member did not load the snapshot in 600 s")
            time.sleep(0.01)
        restore_s = time.perf_counter() - t0
        same = restored.state.digest() == digest
    finally:
        restored.destroy()
    tasks = args.connectors * args.tasks
    rows = [
        (f"| state filled by direct apply ({args.connectors:,} connectors, {tasks:,} tasks, {args.workers} workers; "
         f"configs, task configs, statuses, offsets, assignment) | {fill_s:.1f} s | |"),
        f"| take: forceLogCompaction -> snapshot file written | {take_s:.2f} s; {size / 2**20:.1f} MiB (gzip) | |",
        (f"| restore: fresh RaftNode on the data dir -> ready with all connectors | {restore_s:.2f} s; state digest "
         f"{'equal' if same else 'DIFFERENT'} | |"),
    ]
    text = (f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {machine()} — Raft snapshot\n\n"
            f"Command: `python benchmarks/scale/snapshot.py --connectors {args.connectors} --tasks {args.tasks} "
            f"--workers {args.workers}`; load average (1 min) at end {Path('/proc/loadavg').read_text().split()[0]}.\n\n"
            "| what | result | goal / baseline |\n|---|---|---|\n" + "\n".join(rows) + "\n")
    record(__file__, text, keep=not args.no_record)
    return 0 if same else 1


if __name__ == "__main__":
    sys.exit(main())
