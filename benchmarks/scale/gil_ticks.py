#!/usr/bin/env python
"""How long a Raft-like tick thread waits for the GIL beside busy threads, at two switch intervals.

At 10,000 connectors the leader's process runs 16 REST threads that are nearly always busy, and
followers called elections against a live leader (benchmarks/scale/run.py). The Raft thread's tick
blocks a few times (poll, send, receive); each time it must get the GIL back, and CPython hands
the GIL over once per switch interval (``sys.setswitchinterval``, 5 ms by default) to one of the
threads waiting for it. This measures that alone: BUSY threads run pure-Python work while one
thread ticks as pysyncobj's does (a 5 ms ``select`` on a socket pair, a send and a receive), and
the time from one tick's end to the next's is recorded for ``--seconds`` per interval, in a child
process per interval (the interval is process-wide), alternating ``--rounds`` times.

Usage: ``python benchmarks/scale/gil_ticks.py [--busy 16] [--seconds 8] [--rounds 2]
[--intervals 0.005,0.001] [--no-record]``; results are appended to ``RESULTS.md`` beside this file.
"""
from __future__ import annotations

import argparse
import json
import os
import select
import socket
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def child(interval: float, busy: int, seconds: float) -> dict[str, float]:
    """Tick gaps (seconds) with ``busy`` busy threads at switch ``interval``: p50, p99, max, ticks."""
    sys.setswitchinterval(interval)
    stop = threading.Event()

    def burn() -> None:
        x = 0
        while not stop.is_set():
            for i in range(1000):
                x += i * i
            _ = {i: str(i) for i in range(200)}

    threads = [threading.Thread(target=burn, daemon=True) for _ in range(busy)]
    for t in threads:
        t.start()
    a, b = socket.socketpair()
    gaps: list[float] = []
    last = time.monotonic()
    end = last + seconds
    while last < end:
        select.select([a], [], [], 0.005)
        b.send(b"x")
        a.recv(16)
        now = time.monotonic()
        gaps.append(now - last)
        last = now
    stop.set()
    gaps.sort()
    return {"ticks": len(gaps), "p50": gaps[len(gaps) // 2], "p99": gaps[int(len(gaps) * 0.99)], "max": gaps[-1]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--busy", type=int, default=16, help="busy threads (runnode's default REST threads)")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--intervals", default="0.005,0.001", help="switch intervals, seconds; the first is the baseline")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--child", type=float, help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child is not None:
        print(json.dumps(child(args.child, args.busy, args.seconds)))
        return 0

    sys.path.insert(0, str(ROOT))
    from benchmarks._common import machine, record

    intervals = [float(v) for v in args.intervals.split(",")]
    load_start = os.getloadavg()[0]
    results: dict[float, list[dict[str, float]]] = {iv: [] for iv in intervals}
    for r in range(args.rounds):
        for iv in intervals:
            out = subprocess.run([sys.executable, __file__, "--child", str(iv), "--busy", str(args.busy),
                                  "--seconds", str(args.seconds)], check=True, capture_output=True, text=True)
            results[iv].append(json.loads(out.stdout))
            print(f"round {r + 1}, switch interval {iv * 1000:g} ms: {results[iv][-1]}", file=sys.stderr, flush=True)
    load_end = os.getloadavg()[0]

    def median(iv: float, key: str) -> float:
        values = sorted(res[key] for res in results[iv])
        return values[len(values) // 2]

    base = intervals[0]
    lines = [f"## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {machine()} — a tick thread beside busy threads (GIL)", "",
             f"Command: `python benchmarks/scale/gil_ticks.py --busy {args.busy} --seconds {args.seconds:g} "
             f"--rounds {args.rounds}` — {args.busy} busy threads, one thread ticking as pysyncobj's does "
             f"(5 ms select, a send, a receive); median over {args.rounds} alternating child processes of each "
             f"figure; load average (1 min) {load_start:.2f} at start, {load_end:.2f} at end.", "",
             "| switch interval | ticks in the run | gap p50 | gap p99 | gap max | p99 against the baseline |",
             "|---|---|---|---|---|---|"]
    for iv in intervals:
        ratio = median(base, "p99") / max(median(iv, "p99"), 1e-9)
        lines.append(f"| {iv * 1000:g} ms{' (default, baseline)' if iv == base else ''} | {median(iv, 'ticks'):.0f} | "
                     f"{median(iv, 'p50') * 1000:.1f} ms | {median(iv, 'p99') * 1000:.1f} ms | "
                     f"{median(iv, 'max') * 1000:.0f} ms | {ratio:.1f}× shorter |")
    record(__file__, "\n" + "\n".join(lines) + "\n", keep=not args.no_record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
