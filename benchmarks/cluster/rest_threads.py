#!/usr/bin/env python
"""REST config writes at 32 clients on a 3-member cluster's leader, by the leader's ``--rest-threads``.

Each side is a fresh 3-member Raft-only cluster (``tools.launcher.LocalCluster``, real ``runnode``
processes) whose members run with ``RAFTCONNECT_REST_THREADS`` set to one of ``--threads-list``
(default 16, 4, 2; 16 is the default of ``--rest-threads``). Per round and side: 400 warm-up writes,
then ``--writes`` (default 3,000) ``PUT /connectors/{name}/config`` over 200 file-source connectors
from ``--clients`` (default 32) clients, as ``run.py``'s writes row. The sides take turns for
``--rounds`` rounds (default 2) so that load drift on a shared machine hits them alike. Each cell:
writes/s, and per write the leader's CPU split as in ``run.py`` (REST threads, the Raft thread, the
others) and the leader's context switches.

What it shows: whether a write's cost on the leader depends on how many REST threads it has. A
write waits for its commit on its REST thread, so fewer threads mean smaller group-commit batches
(a costlier Raft thread per write); more threads could mean more of them contending for the GIL.

Usage: ``python benchmarks/cluster/rest_threads.py [--threads-list 16,4,2] [--clients 32] [--writes 3000]
[--rounds 2] [--no-record]``. Results are appended to ``RESULTS_REST_THREADS.md`` next to this file, with
the machine.
"""
from __future__ import annotations

import argparse
import os
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from benchmarks._common import machine, record, short_commit  # noqa: E402


def _side(kafka, work: Path, rest_threads: int, clients: int, writes: int) -> dict[str, float]:
    """One round on a fresh cluster whose members run ``rest_threads`` REST threads:
    ``{"writes/s", "leader ms", "rest ms", "raft ms", "switches"}`` (CPU and switches per write)."""
    from run import _rest_writes, warmed_cluster

    # the members inherit RAFTCONNECT_REST_THREADS
    with warmed_cluster(kafka, work, {"RAFTCONNECT_REST_THREADS": str(rest_threads)}) as (cluster, leader, csv):
        elapsed, _, cpu = _rest_writes(leader, clients, writes, str(csv), cluster.nodes)
    split = cpu.get("leader threads", {})
    return {"writes/s": writes / elapsed, "leader ms": sum(cpu["leader"]), "rest ms": split.get("rest ms", 0.0),
            "raft ms": split.get("raft ms", 0.0), "switches": split.get("switches", 0.0)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads-list", default="16,4,2", help="REST thread counts to compare (default: %(default)s)")
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    counts = [int(x) for x in args.threads_list.split(",") if x.strip()]
    if not counts or min(counts) < 1:
        parser.error("--threads-list: positive integers, comma-separated")
    import django

    django.setup()
    from webapp.kafka.embedded import EmbeddedKafka

    results: dict[int, list[dict[str, float]]] = {n: [] for n in counts}
    work = Path(tempfile.mkdtemp(prefix="bench-rest-threads-"))
    with EmbeddedKafka(log_dir=work / "kafka") as kafka:
        for r in range(args.rounds):
            for n in counts:
                res = _side(kafka, work, n, args.clients, args.writes)
                results[n].append(res)
                print(f"  round {r + 1}/{args.rounds}, {n} REST threads: {res['writes/s']:,.0f} writes/s, leader "
                      f"{res['leader ms']:.2f} ms per write", flush=True)
    commit = short_commit(ROOT)
    lines = [f"\n## {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC — {machine()}\n\n",
             f"{args.clients} clients, {args.writes:,} config writes per round, {args.rounds} rounds; commit {commit}. "
             "Per round: writes/s (leader CPU ms per write = REST threads + Raft thread + other threads; context "
             "switches per write).\n\n",
             "| `--rest-threads` | rounds |\n|---|---|\n"]
    for n in counts:
        cells = "; ".join(f"{x['writes/s']:,.0f}/s ({x['leader ms']:.2f} = {x['rest ms']:.2f} + {x['raft ms']:.2f} "
                          f"+ {x['leader ms'] - x['rest ms'] - x['raft ms']:.2f}; {x['switches']:.1f} switches)"
                          for x in results[n])
        lines.append(f"| {n} | {cells} |\n")
    record(__file__, "".join(lines), keep=not args.no_record, results="RESULTS_REST_THREADS.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
