#!/usr/bin/env python
"""In-process: the leader's memory at 10,000 connectors × 10 tasks with and without the malloc settings.

Issue 16 asks for at most 1 GB per Raft member; the run at full scale (``run.py``) measured 1.31 GB
on the leader for ~0.5 GB of live objects. This measures what the node's malloc settings
(:mod:`webapp.connect.malloc`: two arenas, ``malloc_trim`` every 30 s) do to that gap, in one
process without HTTP: each child fills a ``ClusterStateMachine`` as ``expand.py`` does, then runs
ROUNDS rounds of the leader's large allocations from 16 threads (as many as the node's REST
threads): every worker's assignment view built and encoded (``ViewBuilder.build`` and the REST
renderer, ~1 MB each), the connector list with ``expand=status`` (cached) and the uncached list of
both expansions (~15 MB), the view caches dropped after each round as a new coordinator epoch does.

Two kinds of child, alternating, PASSES each: ``glibc defaults`` (the baseline: no setting) and
``node settings`` (``configure_from_env`` with its defaults, as ``runnode`` applies them, plus one
trim at the end of each round standing in for the trimmer's next tick). Reported per kind: the
peak RSS (``VmHWM``), the RSS after the rounds, and the CPU time of the rounds; the ratio of the
medians.

With ``--views REV``, it measures instead the live memory of the coordinator's view caches on two
source trees (REV, the baseline, and this checkout), alternately in child processes with the node's
malloc settings: the growth of RSS, after a full collection and a trim, from filling the state
(``fill_state``), from reading every connector's record into the cache (``ViewBuilder.record``) and
from building every worker's view (``ViewBuilder.build``).

Usage: ``python benchmarks/scale/memory.py [--connectors 10000] [--tasks 10] [--workers 100]
[--rounds 3] [--passes 2] [--views REV] [--no-record]``; results are appended to ``RESULTS.md``
beside this file.
"""
from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import threading
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
THREADS = 16


def _status(key: str) -> int:
    with open("/proc/self/status") as fh:
        return next(int(line.split()[1]) for line in fh if line.startswith(key + ":")) * 1024


def _shares(state) -> dict[str, tuple[list[str], list[str], list[str]]]:
    """``{worker: (connector names, task keys, names of every connector either belongs to)}``, as the
    coordinator's ``_owned`` gives them."""
    a = state.assignment
    owned: dict[str, tuple[list[str], list[str], set[str]]] = {}
    for name, worker in a["connectors"].items():
        owned.setdefault(worker, ([], [], set()))[0].append(name)
    for key, worker in a["tasks"].items():
        entry = owned.setdefault(worker, ([], [], set()))
        entry[1].append(key)
        entry[2].add(key.rpartition("-")[0])
    return {w: (c, t, sorted(names | set(c))) for w, (c, t, names) in owned.items()}


def views_child(args: argparse.Namespace) -> None:
    """Measure the view caches' live memory on ``args.tree``; print one JSON line."""
    import ctypes
    import gc

    libc = ctypes.CDLL("libc.so.6")  # the node's settings (webapp.connect.malloc), whichever tree
    libc.mallopt(-8, 2)  # M_ARENA_MAX
    sys.path.insert(0, str(ROOT))
    from benchmarks._trees import enter

    enter(args.tree)

    from benchmarks.scale.expand import fill_state
    from raftnode.state import ClusterStateMachine
    from webapp.coordinator.views import ViewBuilder
    from webapp.storage.raft import RaftMetadataStore

    def live() -> int:
        gc.collect()
        libc.malloc_trim(0)
        return _status("VmRSS")

    class Replica:  # what RaftMetadataStore reads: the member's applied state
        state = ClusterStateMachine()

    state = Replica.state
    r0 = live()
    fill_state(state, args.connectors, args.tasks, args.workers)
    r1 = live()
    views = ViewBuilder(lambda: state, RaftMetadataStore(Replica()))
    for name in list(state.connectors):
        views.record(name)
    r2 = live()
    built = {w: views.build(w, state.assignment, share) for w, share in _shares(state).items()}
    r3 = live()
    print(json.dumps({"state": r1 - r0, "records": r2 - r1, "views": r3 - r2, "n": len(built)}))


def child(args: argparse.Namespace) -> None:
    """Run the workload once in this process; print one JSON line."""
    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("RAFTCONNECT_DEVELOPMENT", "1")
    from webapp.connect import malloc

    settings = args.kind == "node"
    if settings:  # as runnode does, before any thread starts
        malloc.configure_from_env({})
    import django

    django.setup()
    from benchmarks.scale.expand import fill_state
    from raftnode.state import ClusterStateMachine
    from webapp.connect.api.renderers import ConnectJSONRenderer
    from webapp.connect.herder import Herder
    from webapp.coordinator.views import ViewBuilder
    from webapp.storage.raft import RaftMetadataStore

    class Replica:  # what RaftMetadataStore reads: the member's applied state
        state = ClusterStateMachine()

    state = Replica.state
    fill_state(state, args.connectors, args.tasks, args.workers)
    filled = _status("VmRSS")
    store = RaftMetadataStore(Replica())
    herder = Herder(store=store, members=lambda: state.members, assignment=lambda: state.assignment)
    views = ViewBuilder(lambda: state, store)
    shares = _shares(state)
    workers = sorted(shares)
    renderer = ConnectJSONRenderer()

    def job(i: int) -> None:
        for _ in range(3):
            if i % 4 == 0:
                renderer.render(herder.connectors_listed(["status"]))
            for w in workers[i::THREADS]:
                view, _ = views.build(w, state.assignment, shares[w])
                renderer.render(view)
            if i % 4 == 1:
                renderer.render(herder.connectors_expanded(["status", "info"]))

    c0 = time.process_time()
    for _ in range(args.rounds):
        threads = [threading.Thread(target=job, args=(i,)) for i in range(THREADS)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        views.clear()
        if settings:
            malloc.trim()
    cpu = time.process_time() - c0
    print(json.dumps({"filled": filled, "peak": _status("VmHWM"), "end": _status("VmRSS"), "cpu": cpu}))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connectors", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--passes", type=int, default=2)
    parser.add_argument("--views", metavar="REV", help="measure the view caches against revision REV instead")
    parser.add_argument("--no-record", action="store_true")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--kind", choices=("glibc", "node"), help=argparse.SUPPRESS)
    parser.add_argument("--tree", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.child:
        views_child(args) if args.tree else child(args)
        return 0
    sys.path.insert(0, str(ROOT))
    from benchmarks._common import machine, record, short_commit

    if args.views:
        return compare_views(args, machine())

    head = short_commit(ROOT, "")
    load_start = Path("/proc/loadavg").read_text().split()[0]
    env = {k: v for k, v in os.environ.items() if not k.startswith("RAFTCONNECT_MALLOC_") and k != "MALLOC_ARENA_MAX"}
    results: dict[str, list[dict]] = {"glibc": [], "node": []}
    for p in range(args.passes):
        for kind in ("glibc", "node"):
            out = subprocess.run([sys.executable, __file__, "--child", "--kind", kind, "--connectors",
                                  str(args.connectors), "--tasks", str(args.tasks), "--workers", str(args.workers),
                                  "--rounds", str(args.rounds)], capture_output=True, text=True, env=env, check=True)
            results[kind].append(json.loads(out.stdout.strip().splitlines()[-1]))
            print(f"pass {p + 1}: {kind} {results[kind][-1]}", file=sys.stderr)
    load_end = Path("/proc/loadavg").read_text().split()[0]

    def med(kind: str, key: str) -> float:
        return statistics.median(r[key] for r in results[kind])

    mib = 2**20
    rows = []
    for key, what in (("filled", "RSS after filling the state (before any setting matters)"),
                      ("peak", "peak RSS (VmHWM) over the rounds"), ("end", "RSS after the rounds")):
        b, a = med("glibc", key), med("node", key)
        rows.append(f"| {what} | {b / mib:,.0f} MiB | {a / mib:,.0f} MiB | {a / b:.2f}× |")
    b, a = med("glibc", "cpu"), med("node", "cpu")
    rows.append(f"| CPU time of the rounds | {b:.1f} s | {a:.1f} s | {a / b:.2f}× |")
    text = (f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {machine()} — leader memory, in process, malloc settings\n\n"
            f"Command: `python benchmarks/scale/memory.py --connectors {args.connectors} --tasks {args.tasks} "
            f"--workers {args.workers} --rounds {args.rounds} --passes {args.passes}` (commit {head}) — "
            f"{THREADS} threads building and encoding every worker's view and the connector lists; median of "
            f"{args.passes} child processes per kind, alternating; load average (1 min) {load_start} at start, "
            f"{load_end} at end.\n\n"
            "| what | glibc defaults (baseline) | node settings (2 arenas, trim) | ratio |\n|---|---|---|---|\n"
            + "\n".join(rows) + "\n")
    record(__file__, text, keep=not args.no_record)
    return 0


def compare_views(args: argparse.Namespace, machine: str) -> int:
    """The ``--views REV`` comparison: each tree's caches measured in PASSES alternating children."""
    from benchmarks._common import record
    from benchmarks._trees import extract, run_child, uncommitted

    tree, rev, head = extract(args.views, "bench-memory-")
    dirty = uncommitted("benchmarks/scale/RESULTS.md")
    extra = ["--connectors", str(args.connectors), "--tasks", str(args.tasks), "--workers", str(args.workers)]
    results: dict[str, list[dict]] = {"before": [], "after": []}
    for p in range(args.passes):
        for label, path in (("before", str(tree)), ("after", str(ROOT))):
            results[label].append(run_child(__file__, path, extra))
            print(f"pass {p + 1}: {label} {results[label][-1]}", file=sys.stderr)
    mib = 2**20
    rows = []
    for key, what in (("state", "the replicated state (filled)"), ("records", "the view cache's connector records"),
                      ("views", "every worker's view (fragments and views)")):
        b = statistics.median(r[key] for r in results["before"])
        a = statistics.median(r[key] for r in results["after"])
        rows.append(f"| {what} | {b / mib:,.0f} MiB | {a / mib:,.0f} MiB | {a / b:.2f}× |")
    text = (f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {machine} — view caches' live memory, in process\n\n"
            f"Command: `python benchmarks/scale/memory.py --views {args.views} --connectors {args.connectors} "
            f"--tasks {args.tasks} --workers {args.workers} --passes {args.passes}` — before = {rev}, after = {head}"
            f"{' plus uncommitted changes' if dirty else ''}; growth of RSS after a full collection and a trim, "
            f"median of {args.passes} child processes per tree, alternating.\n\n"
            "| live memory of | before | after | ratio |\n|---|---|---|---|\n" + "\n".join(rows) + "\n")
    record(__file__, text, keep=not args.no_record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
