#!/usr/bin/env python
"""The test suite under CPU starvation: ``make test``'s pytest run, ``--runs`` times in a row, while
``stress-ng`` keeps every core busy (issue 19 item 6: a suite that never flakes).

Each run is a fresh ``pytest -m "not chaos" -n 2 --dist loadfile`` on this checkout (as ``make test``); the stressor is one
``stress-ng --cpu N`` for the whole campaign (N = the number of cores, at normal priority, so the
tests compete for every core). The campaign stops at the first failing run. Every run appends one
row to ``RESULTS.md`` beside this script: start time, duration, passed / failed / skipped counts,
the load average at the end, the failing test ids; the machine line heads each campaign.

Usage: ``python benchmarks/stress/run.py [--runs 3] [--pytest-args "-x"]`` (``make stress``).
Needs ``stress-ng`` (Debian package of that name); exits 2 without it, 1 if a run failed.
"""
from __future__ import annotations

import argparse
import os
import re
import shlex
import shutil
import subprocess
import sys
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine  # noqa: E402

RESULTS = Path(__file__).with_name("RESULTS.md")
_SUMMARY = re.compile(r"(\d+) (passed|failed|skipped|errors?|xfailed|xpassed)")


def summarize(output: str) -> dict[str, int]:
    """Counts from pytest's last summary line, e.g. ``{"passed": 880, "failed": 1, "skipped": 1}``."""
    lines = [line for line in output.splitlines() if re.search(r"\b(passed|failed)\b.* in [\d.]+s", line)]
    counts: dict[str, int] = {}
    for n, word in _SUMMARY.findall(lines[-1] if lines else ""):
        counts["errors" if word.startswith("error") else word] = int(n)
    return counts


def failures(output: str) -> list[str]:
    """Test ids of ``FAILED``/``ERROR`` lines of pytest's short summary (``-ra``)."""
    return re.findall(r"^(?:FAILED|ERROR) (\S+)", output, flags=re.M)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--runs", type=int, default=3)
    ap.add_argument("--workers", type=int, default=2, help="pytest-xdist processes, as make test (TEST_WORKERS)")
    ap.add_argument("--pytest-args", default="", help="extra pytest arguments, e.g. a test path")
    args = ap.parse_args()
    if shutil.which("stress-ng") is None:
        print("stress-ng is not installed (Debian: apt-get install stress-ng)", file=sys.stderr)
        return 2
    cores = os.cpu_count() or 1
    stressor = subprocess.Popen(["stress-ng", "--cpu", str(cores), "--quiet"],
                                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    started = datetime.now(timezone.utc)
    with RESULTS.open("a") as out:
        out.write(f"\n## {started:%Y-%m-%d %H:%M} UTC — {machine()}\n\n"
                  f"`stress-ng --cpu {cores}` for the whole campaign; "
                  f"`pytest -ra -m \"not chaos\" -n {args.workers} --dist loadfile {args.pytest_args}`, {args.runs} runs, stop at the first failure.\n\n"
                  "| run | started (UTC) | minutes | passed | failed | skipped | load at end | failing tests |\n"
                  "|---|---|---|---|---|---|---|---|\n")
    status = 0
    try:
        for run in range(1, args.runs + 1):
            t0 = time.monotonic()
            begun = datetime.now(timezone.utc)
            print(f"== run {run} of {args.runs} under stress-ng --cpu {cores}", flush=True)
            proc = subprocess.run([sys.executable, "-m", "pytest", "-ra", "-p", "no:cacheprovider", "-m", "not chaos",
                                   "-n", str(args.workers), "--dist", "loadfile", *shlex.split(args.pytest_args)], cwd=ROOT, text=True,
                                  stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
            sys.stdout.write(proc.stdout[-4000:])
            minutes = (time.monotonic() - t0) / 60
            counts = summarize(proc.stdout)
            failed = failures(proc.stdout)
            with RESULTS.open("a") as out:
                out.write(f"| {run} | {begun:%H:%M} | {minutes:.1f} | {counts.get('passed', 0)} | "
                          f"{counts.get('failed', 0) + counts.get('errors', 0)} | {counts.get('skipped', 0)} | "
                          f"{os.getloadavg()[0]:.1f} | {', '.join(f'`{t}`' for t in failed) or '-'} |\n")
            if proc.returncode != 0:
                print(f"run {run} failed (pytest exit {proc.returncode}); campaign stopped", file=sys.stderr)
                status = 1
                break
    finally:
        stressor.terminate()
        stressor.wait(timeout=30)
    return status


if __name__ == "__main__":
    sys.exit(main())
