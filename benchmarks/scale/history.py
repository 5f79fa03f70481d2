#!/usr/bin/env python
"""In-process: the memory of the console's task history at N tasks, before and after its sample budget.

The leader samples every running task's counters for the console's charts
(``webapp.console.history.TaskHistory``). At issue 16's scale (100,000 tasks) the scale run's
leader grew by ~10,000 live objects a second for as long as the load ran (the memory census),
and an allocation trace named the history's rings. This fills one history with KEEP_SECONDS of
samples for TASKS tasks, as the sampler would (one sample round every 5 s; every task's counters
moving), on two source trees in the same run, each in its own child process: BASELINE (a git
revision, default the commit before the budget) and this checkout. Reported per tree: the
growth of RSS and of Python's allocated blocks after a full collection, the samples each task
keeps, the seconds between samples, and the sampler's CPU time per minute.

Usage: ``python benchmarks/scale/history.py [--tasks 100000] [--baseline REV] [--no-record]``;
results are appended to ``RESULTS.md`` beside this file.
"""
from __future__ import annotations

import argparse
import gc
import json
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DEFAULT_BASELINE = "e748f62"


def _rss() -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith("VmRSS:")) * 1024


def child(args: argparse.Namespace) -> None:
    """Measure ``args.tree``'s TaskHistory; print one JSON line."""
    sys.path.insert(0, str(ROOT))
    from benchmarks._trees import enter

    enter(args.tree)
    from webapp.console.history import KEEP_SECONDS, SAMPLE_SECONDS, TaskHistory

    keys = [f"conn-{i // 10:05d}-{i % 10}" for i in range(args.tasks)]
    workers = [f"w{w:03d}" for w in range(100)]
    gc.collect()
    r0, b0 = _rss(), sys.getallocatedblocks()
    history = TaskHistory()
    t0 = 1_000_000.0
    rounds = int(KEEP_SECONDS / SAMPLE_SECONDS) + 2
    cpu = []
    for r in range(rounds):
        reported = {w: {"tasks": {}} for w in workers}
        for i, key in enumerate(keys):  # what heartbeats leave in coordinator.reported: fresh dicts
            reported[workers[i % 100]]["tasks"][key] = {"records": 1000 * r + i, "lag": r, "errors": {}}
        c0 = time.process_time()
        history.sample(t0 + SAMPLE_SECONDS * r, reported)
        cpu.append(time.process_time() - c0)
        del reported
    gc.collect()
    r1, b1 = _rss(), sys.getallocatedblocks()
    body = history.series("conn-00000", now=t0 + SAMPLE_SECONDS * (rounds - 1))
    points = len(body["tasks"][0]["points"]) if body["tasks"] else 0
    print(json.dumps({"rss": r1 - r0, "blocks": b1 - b0, "points_per_task": points,
                      "interval": body.get("interval"),
                      "cpu_per_minute_s": sum(cpu) / (rounds * SAMPLE_SECONDS / 60)}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--tasks", type=int, default=100_000)
    parser.add_argument("--baseline", default=DEFAULT_BASELINE)
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--tree", default=".", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0
    sys.path.insert(0, str(ROOT))
    from benchmarks._common import machine, record
    from benchmarks._trees import extract, run_child, uncommitted

    started = datetime.now(UTC)
    tree, rev, head = extract(args.baseline, "rc-bench-history-")
    dirty = uncommitted("benchmarks/scale/RESULTS.md")
    print(f"baseline {rev} ...", flush=True)
    before = run_child(__file__, str(tree), ["--tasks", str(args.tasks)])
    print(f"  {before}\nthis checkout ({head}) ...", flush=True)
    after = run_child(__file__, str(ROOT), ["--tasks", str(args.tasks)])
    print(f"  {after}", flush=True)
    text = (f"\n## {started:%Y-%m-%d %H:%M} UTC — {machine()} — console task history\n\n"
            f"Command: `python benchmarks/scale/history.py --tasks {args.tasks}` — 15 minutes of samples "
            f"(every 5 s, as the sampler ticks) of {args.tasks:,} tasks in one process.\n\n"
            "| tree | RSS growth | allocated blocks | points per task | seconds between samples "
            "| sampler CPU per minute |\n|---|---|---|---|---|---|\n")
    after_label = f"this checkout ({head}{' plus uncommitted changes' if dirty else ''})"
    for label, res in ((f"baseline {rev}", before), (after_label, after)):
        text += (f"| {label} | {res['rss'] / 2**20:,.0f} MiB | {res['blocks']:,} | {res['points_per_task']} | "
                 f"{res['interval']:g} | {res['cpu_per_minute_s'] * 1000:,.0f} ms |\n")
    text += (f"\nRatio (this checkout / baseline): RSS {after['rss'] / before['rss']:.2f}, "
             f"blocks {after['blocks'] / max(before['blocks'], 1):.3f}.\n")
    record(__file__, text, keep=not args.no_record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
