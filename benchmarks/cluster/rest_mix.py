#!/usr/bin/env python
"""REST requests at 32 clients on a 3-member cluster's leader: config writes, config reads and ``GET /``,
this checkout against another one (``--baseline DIR``) in the same run.

Each side is a fresh 3-member (``--members``) Raft-only cluster (``tools.launcher.LocalCluster``, real ``runnode``
processes, the code of its checkout) with 200 file-source connectors. Per round and side: 2,000
``PUT /connectors/{name}/config`` (as ``run.py``'s writes), then 3,000 ``GET /connectors/{name}/config``
and 3,000 ``GET /`` (no authentication), each from THREADS clients (default 32) on kept-alive urllib3
connections. The sides take turns (baseline, this, baseline, this, ...) for ROUNDS rounds (default
2) so that load drift on a shared machine hits both alike. Each row: requests/s of every round, the
leader's CPU per request (``/proc``), and the ratio of the best rounds (this / baseline).

What it watches: the REST server's own cost per request. Until commit 64137d4 waitress's loop
spun while a task thread held a channel's output (``restserver._quiet_channel_class``), ~100 loop
turns per request under 32 clients.

Usage: ``python benchmarks/cluster/rest_mix.py [--baseline DIR|COMMIT] [--threads 32] [--rounds 2] [--members 3]
[--no-record]``. The baseline is a checkout's directory, or a commit checked out for the run (a
temporary ``git worktree`` sharing this checkout's ``.venv`` and console build); by default
1a1b332, the commit before the quiet channel. Results are appended to ``RESULTS_REST_MIX.md`` next to this file, with the machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")

from benchmarks._common import machine, record, short_commit  # noqa: E402

#: worktrees :func:`_checkout` made, removed at the end of the run
_WORKTREES: list[Path] = []
KINDS = ("PUT /connectors/{name}/config", "GET /connectors/{name}/config", "GET /")
#: the leader's mean commit round during the writes: (ms, commands per entry), when it exports it
ROUND = "raft round"


def _reads(leader, path_of, total: int, threads: int) -> tuple[float, float]:
    """``(requests/s, leader CPU ms per request)`` of ``total`` GETs of ``path_of(i)`` from ``threads`` clients."""
    from run import _rest_load

    elapsed, _, cpu = _rest_load(leader, threads, total, lambda i: ("GET", path_of(i), None))
    return total / elapsed, sum(cpu["leader"])


def _side(repo: Path, kafka, work: Path, threads: int, members: int = 3) -> dict[str, tuple[float, float]]:
    """One round on a fresh cluster of ``members`` members running ``repo``'s code: ``{kind: (requests/s,
    leader CPU ms per request)}``."""
    import tools.launcher
    from run import _rest_writes, raft_rounds, warmed_cluster

    tools.launcher.REPO_ROOT = repo
    try:
        with warmed_cluster(kafka, work, members=members) as (cluster, leader, csv):
            before = raft_rounds(leader)
            elapsed, _, cpu = _rest_writes(leader, threads, 2000, str(csv), cluster.nodes)
            after = raft_rounds(leader)
            out = {KINDS[0]: (2000 / elapsed, sum(cpu["leader"]))}
            if before and after and after[0] > before[0]:  # the writes' mean commit round, commands per entry
                entries = after[0] - before[0]
                out[ROUND] = (1000 * (after[2] - before[2]) / entries, (after[1] - before[1]) / entries)
            out[KINDS[1]] = _reads(leader, lambda i: f"/connectors/bench-{i % 200}/config", 3000, threads)
            out[KINDS[2]] = _reads(leader, lambda i: "/", 3000, threads)
            return out
    finally:
        tools.launcher.REPO_ROOT = ROOT


def _checkout(baseline: str) -> Path:
    """``baseline``'s directory, or a temporary ``git worktree`` of commit ``baseline`` (with links to this
    checkout's ``.venv`` and console build, which git does not hold). Errors: ``SystemExit`` when
    neither."""
    if Path(baseline).is_dir():
        return Path(baseline).resolve()
    where = Path(tempfile.mkdtemp(prefix="bench-rest-mix-baseline-")) / "repo"
    done = subprocess.run(["git", "-C", str(ROOT), "worktree", "add", "--detach", str(where), baseline],
                          capture_output=True, text=True)
    if done.returncode != 0:
        raise SystemExit(f"--baseline {baseline}: neither a directory nor a commit here ({done.stderr.strip()})")
    (where / ".venv").symlink_to(ROOT / ".venv")
    dist = ROOT / "webapp" / "console" / "dist"
    if dist.is_dir() and not (where / "webapp" / "console" / "dist").exists():
        (where / "webapp" / "console" / "dist").symlink_to(dist)
    print(f"baseline {baseline} checked out at {where}", flush=True)
    _WORKTREES.append(where)
    return where


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default="1a1b332",
                        help="checkout directory or commit to compare against (default: %(default)s)")
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--members", type=int, default=3, help="Raft members per cluster (1: a single node)")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    import django

    django.setup()
    try:
        return _run(args)
    finally:
        for where in _WORKTREES:
            subprocess.run(["git", "-C", str(ROOT), "worktree", "remove", "--force", str(where)], capture_output=True)


def _run(args) -> int:
    """The measured rounds of :func:`main` and their record."""
    from webapp.kafka.embedded import EmbeddedKafka

    sides = [("this", ROOT)] + ([("baseline", _checkout(args.baseline))] if args.baseline else [])
    results: dict[str, list[dict[str, tuple[float, float]]]] = {name: [] for name, _ in sides}
    work = Path(tempfile.mkdtemp(prefix="bench-rest-mix-"))
    with EmbeddedKafka(log_dir=work / "kafka") as kafka:
        for r in range(args.rounds):
            for name, repo in reversed(sides):  # the baseline first in each round
                res = _side(repo, kafka, work, args.threads, args.members)
                results[name].append(res)
                print(f"  round {r + 1}/{args.rounds}, {name} ({short_commit(repo)}): "
                      + "; ".join(f"{k} {v[0]:,.0f}/s {v[1]:.2f} ms" for k, v in res.items() if k in KINDS)
                      + (f"; commit round {res[ROUND][0]:.1f} ms, {res[ROUND][1]:.1f} commands per entry"
                         if ROUND in res else ""), flush=True)
    lines = [f"\n## {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC — {machine()}\n",
             f"{args.threads} clients, {args.members}-member cluster, {args.rounds} rounds per side; this checkout "
             f"{short_commit(ROOT)}"
             + (f", baseline {short_commit(sides[1][1])}" if args.baseline else "") + ".\n",
             "| request | this: requests/s per round (leader CPU ms per request) | "
             + ("baseline: requests/s per round (leader CPU ms per request) | best / best |" if args.baseline else "")
             + "\n|---|---|" + ("---|---|" if args.baseline else "") + "\n"]
    for kind in KINDS:
        row = [kind]
        for name, _ in sides:
            row.append(", ".join(f"{x[kind][0]:,.0f} ({x[kind][1]:.2f})" for x in results[name]))
        if args.baseline:
            best = {name: max(x[kind][0] for x in results[name]) for name, _ in sides}
            row.append(f"{best['this'] / best['baseline']:.2f}")
        lines.append("| " + " | ".join(row) + " |\n")
    for name, _ in sides:
        rounds = [x[ROUND] for x in results[name] if ROUND in x]
        if rounds:
            lines.append(f"\n{name}: the leader's mean commit round during the writes (proposal to apply, "
                         "`raftconnect_raft_proposal_seconds`), per round: "
                         + ", ".join(f"{ms:.1f} ms with {c:.1f} commands per entry" for ms, c in rounds) + ".\n")
    record(__file__, "".join(lines), keep=not args.no_record, results="RESULTS_REST_MIX.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
