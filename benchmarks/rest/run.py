#!/usr/bin/env python
"""REST benchmark: ``GET /connectors?expand=status`` with 1,000 connectors, and status reads per second.

One real node process (``manage.py runnode``, Raft only, waitress) holds
CONNECTORS connectors (default 1,000; created through ``POST /connectors``).
It is started with ``RAFTCONNECT_BENCH_BASELINE=1``, which mounts plain Django
views (no DRF, no authentication, no role check, no forwarding decision;
``tools/bench_views.py``, mounted by ``tools.settings``) returning the same JSON from the same server,
the baseline of every row:

1. ``GET /connectors?expand=status`` — one client, REQUESTS sequential requests
   (default 50) per side, interleaved (real, plain, stored, real, ...): p50/p99 latency of the real endpoint (HTTP basic,
   credentials cached after the first check) vs the plain view computing the
   same body from the Herder, vs the plain view returning the stored bytes
   (the floor: waitress + Django + transfer of the same body).
2. ``GET /connectors/{name}/status`` — THREADS threads (default 8) reading random
   connectors' status for SECONDS (default 10) per side: requests/s and p50/p99,
   real endpoint vs plain view.

Sides alternate in ROUNDS rounds (default 2) so load drift on a shared machine
hits both alike; each row reports the ratio real/baseline. Results are appended
to RESULTS.md next to this file with the machine.

Usage: ``python benchmarks/rest/run.py [--connectors 1000] [--requests 50]
[--threads 8] [--seconds 10] [--rounds 2] [--no-record]``.
"""
from __future__ import annotations

import argparse
import os
import platform
import random
import statistics
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

import requests

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from tools.launcher import NodeProcess  # noqa: E402
from webapp.kafka.embedded import free_port  # noqa: E402

SOURCE = "raftconnect.connectors.file.FileSourceConnector"


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def machine() -> str:
    cpu = platform.processor() or platform.machine()
    try:
        for line in open("/proc/cpuinfo"):
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
        mem = next(int(line.split()[1]) for line in open("/proc/meminfo") if line.startswith("MemTotal")) // 1024 // 1024
    except OSError:
        mem = 0
    return f"{cpu}, nproc {os.cpu_count()}, {mem} GiB RAM, Python {platform.python_version()}"


def create_connectors(node: NodeProcess, n: int, path: str) -> None:
    def one(i: int) -> None:
        s = requests.Session()
        cfg = {"connector.class": SOURCE, "path": path, "format": "csv", "topic": f"bench-{i}", "tasks.max": "1"}
        r = s.post(f"{node.url}/connectors", json={"name": f"bench-{i:05d}", "config": cfg}, auth=node.auth, timeout=60)
        if r.status_code not in (201, 409):
            raise RuntimeError(f"create bench-{i}: {r.status_code} {r.text}")

    with ThreadPoolExecutor(8) as pool:
        list(pool.map(one, range(n)))


def interleaved(targets: dict[str, tuple[str, object]], n: int) -> dict[str, list[float]]:
    """``n`` rounds of one request to each ``{side: (url, auth)}`` in turn: latencies per side (s)."""
    sessions = {side: requests.Session() for side in targets}
    for side, (url, auth) in targets.items():
        sessions[side].get(url, auth=auth, timeout=60).raise_for_status()  # warm (credential cache, connection)
    out: dict[str, list[float]] = {side: [] for side in targets}
    for _ in range(n):
        for side, (url, auth) in targets.items():
            t0 = time.perf_counter()
            r = sessions[side].get(url, auth=auth, timeout=60)
            out[side].append(time.perf_counter() - t0)
            r.raise_for_status()
    return out


def hammer(url_for, auth, threads: int, seconds: float) -> tuple[int, list[float]]:
    stop = time.monotonic() + seconds
    lat: list[float] = []
    lock = threading.Lock()
    errors: list[str] = []

    def worker() -> None:
        s = requests.Session()
        mine = []
        while time.monotonic() < stop:
            t0 = time.perf_counter()
            r = s.get(url_for(), auth=auth, timeout=60)
            mine.append(time.perf_counter() - t0)
            if r.status_code != 200:
                errors.append(f"{r.status_code} {r.text[:200]}")
                break
        with lock:
            lat.extend(mine)

    ts = [threading.Thread(target=worker) for _ in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    if errors:
        raise RuntimeError(errors[0])
    return len(lat), lat


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--connectors", type=int, default=1000)
    ap.add_argument("--requests", type=int, default=50)
    ap.add_argument("--threads", type=int, default=8)
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--no-record", action="store_true")
    a = ap.parse_args()

    load_start = os.getloadavg()[0]
    with tempfile.TemporaryDirectory(prefix="rc-bench-rest-") as tmp:
        csv = Path(tmp) / "in.csv"
        csv.write_text("a\n1\n")
        node = NodeProcess(node_id="bench", rest_port=free_port(), raft_port=free_port(), data_dir=f"{tmp}/n",
                           bootstrap_servers="127.0.0.1:9", roles="raft",
                           env={"RAFTCONNECT_BENCH_BASELINE": "1", "DJANGO_SETTINGS_MODULE": "tools.settings"},
                           file_allowed_paths=[tmp])
        node.start(timeout=120)
        try:
            t0 = time.monotonic()
            create_connectors(node, a.connectors, str(csv))
            created_s = time.monotonic() - t0
            real_all = f"{node.url}/connectors?expand=status"
            base_all = f"{node.url}/raftconnect/v1/bench/connectors-status"
            real_body = requests.get(real_all, auth=node.auth, timeout=60)
            base_body = requests.get(base_all, timeout=60)
            assert len(real_body.json()) == a.connectors and real_body.json() == base_body.json(), "bodies differ"
            size_kib = len(real_body.content) / 1024
            print(f"{a.connectors} connectors created in {created_s:.1f} s; body {size_kib:.0f} KiB", flush=True)

            lat: dict[str, list[float]] = {"real": [], "plain": [], "static": []}
            names = [f"bench-{i:05d}" for i in range(a.connectors)]
            rps: dict[str, list[float]] = {"real": [], "plain": []}
            slat: dict[str, list[float]] = {"real": [], "plain": []}
            for r in range(a.rounds):
                got = interleaved({"real": (real_all, node.auth), "plain": (base_all, None),
                                   "static": (base_all + "?static=1", None)}, a.requests)
                for side, values in got.items():
                    lat[side] += values
                print(f"round {r + 1}: expand=status p50 real {pct(lat['real'], .5) * 1e3:.1f} ms, "
                      f"plain {pct(lat['plain'], .5) * 1e3:.1f} ms", flush=True)
                for side, url, auth in (("real", f"{node.url}/connectors/{{}}/status", node.auth),
                                        ("plain", f"{node.url}/raftconnect/v1/bench/status/{{}}", None)):
                    n, ls = hammer(lambda u=url: u.format(random.choice(names)), auth, a.threads, a.seconds)
                    rps[side].append(n / a.seconds)
                    slat[side] += ls
                    print(f"round {r + 1}: status reads {side}: {n / a.seconds:.0f}/s", flush=True)
        finally:
            node.stop()

    ms = lambda v: v * 1e3  # noqa: E731
    rows = [
        ("`GET /connectors?expand=status` p50 ms", ms(pct(lat["real"], .5)), ms(pct(lat["plain"], .5)),
         ms(pct(lat["static"], .5))),
        ("`GET /connectors?expand=status` p99 ms", ms(pct(lat["real"], .99)), ms(pct(lat["plain"], .99)),
         ms(pct(lat["static"], .99))),
    ]
    srows = [
        ("status reads/s", statistics.mean(rps["real"]), statistics.mean(rps["plain"])),
        ("status read p50 ms", ms(pct(slat["real"], .5)), ms(pct(slat["plain"], .5))),
        ("status read p99 ms", ms(pct(slat["real"], .99)), ms(pct(slat["plain"], .99))),
    ]
    now = datetime.now(timezone.utc).strftime("%Y-%m-%d %H:%M UTC")
    out = [f"## {now} — {machine()}", "",
           f"Load average (1 min) at start {load_start:.2f}, at end {os.getloadavg()[0]:.2f} (the machine is shared).", "",
           f"Command: `python benchmarks/rest/run.py --connectors {a.connectors} --requests {a.requests} "
           f"--threads {a.threads} --seconds {a.seconds:g} --rounds {a.rounds}`", "",
           f"{a.connectors} connectors (Raft-only node, no worker: every status UNASSIGNED), "
           f"`expand=status` body {size_kib:.0f} KiB.", "",
           "| measure | RaftConnect (DRF, basic auth, roles) | plain Django view, same body computed | ratio | "
           "plain Django view, stored bytes | ratio |",
           "|---|---:|---:|---:|---:|---:|"]
    for label, real, plain, static in rows:
        out.append(f"| {label} | {real:.1f} | {plain:.1f} | {real / plain:.2f} | {static:.1f} | {real / static:.2f} |")
    out += ["", f"Status reads: {a.threads} threads x {a.seconds:g} s per side, {a.rounds} alternating rounds, "
                "random connectors.", "",
            "| measure | RaftConnect | plain Django view | ratio |", "|---|---:|---:|---:|"]
    for label, real, plain in srows:
        out.append(f"| {label} | {real:.1f} | {plain:.1f} | {real / plain:.2f} |")
    text = "\n".join(out) + "\n"
    print("\n" + text)
    if not a.no_record:
        results = Path(__file__).with_name("RESULTS.md")
        if not results.exists():
            results.write_text("# REST benchmark results\n\n`python benchmarks/rest/run.py` (see its docstring for "
                               "what each row measures and its baseline).\n\n")
        with results.open("a") as fh:
            fh.write("\n" + text)


if __name__ == "__main__":
    main()
