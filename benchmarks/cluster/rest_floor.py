#!/usr/bin/env python
"""How far any HTTP front over Raft can go on this machine: the floor between raw pysyncobj and the REST API.

Issue 16 asks REST config writes from 32 clients for half of raw pysyncobj's rate (``run.py``'s
writes row). Raw pysyncobj's clients are method calls in the members' own process; the REST API's
are HTTP clients on the same cores. This puts a third side between them, the **HTTP floor**
(``floor_member.py``): three raw pysyncobj members with the raw side's tuning, each behind the node's
own REST server (granian, 16 Python threads), whose application only decodes the JSON body, proposes
it and encodes an answer; and a fourth, **HTTP over RaftNode**: the same with RaftConnect's own Raft
member (``raftnode.RaftNode``: group commit, immediate sends) and its config-write command, the REST
API's Raft path without the web layer. Whatever a write through RaftConnect's REST API costs beyond the floor is
Django, DRF and RaftConnect's own work (authentication, validation, the store, group commit);
whatever the floor costs beyond raw pysyncobj, any HTTP API over a Python Raft member pays here.

Per round, one side after the other (``--rounds``, default 2, so that load drift on a shared machine
hits all alike), each on fresh members: ``--writes`` (default 3,000) writes of the same file-source
connector config over 200 keys from ``--clients`` (default 32) clients — ``run.py``'s urllib3
clients for both HTTP sides, method calls for raw pysyncobj — after 400 warm-up writes (raw
pysyncobj's on a cluster of their own: it warms this process, its members hold no connections to warm). Per side:
writes/s and p50 latency; for the HTTP sides, CPU per write of the leader, both followers and the
clients (this process), from ``/proc``.

Usage: ``python benchmarks/cluster/rest_floor.py [--clients 32] [--writes 3000] [--rounds 2]
[--no-record]``. Results are appended to ``RESULTS_REST_FLOOR.md`` next to this file, with the machine.
"""
from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(Path(__file__).resolve().parent))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from benchmarks._common import machine, quantile, record, short_commit  # noqa: E402

SIDES = ("raw pysyncobj", "HTTP floor", "HTTP over RaftNode", "RaftConnect REST")


@dataclass
class FloorMember:
    """A running ``floor_member.py`` process, shaped as ``run._rest_load`` expects a member."""

    url: str
    proc: subprocess.Popen
    auth: tuple[str, str] | None = None

    def is_leader(self) -> bool:
        import urllib3

        try:
            resp = urllib3.request("GET", f"{self.url}/leader", timeout=2, retries=False)
        except urllib3.exceptions.HTTPError:
            return False
        return resp.status == 200 and resp.json()["leader"]


def _start_floor(work: Path, raftnode: bool) -> list[FloorMember]:
    """Three ``floor_member.py`` processes (``--raftnode`` with ``raftnode``) in a fresh directory, once one
    of them leads."""
    from tools.launcher import wait_for
    from webapp.kafka.embedded import free_port

    data = Path(tempfile.mkdtemp(dir=work))
    raft = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    members = []
    for i, me in enumerate(raft):
        port = free_port()
        (data / str(i)).mkdir()
        log = open(data / f"{i}.log", "w")  # noqa: SIM115 - the process's, closed with it
        argv = [sys.executable, str(Path(__file__).with_name("floor_member.py")), "--raft", me,
                "--peers", ",".join(x for x in raft if x != me), "--http-port", str(port), "--data", str(data / str(i))]
        proc = subprocess.Popen(argv + (["--raftnode"] if raftnode else []), stdout=log, stderr=subprocess.STDOUT)
        members.append(FloorMember(url=f"http://127.0.0.1:{port}", proc=proc))
    wait_for(lambda: any(m.is_leader() for m in members), 60, what="a floor member to lead")
    return members


def _stop_floor(members: list[FloorMember]) -> None:
    for m in members:
        m.proc.terminate()
    for m in members:
        try:
            m.proc.wait(20)
        except subprocess.TimeoutExpired:
            m.proc.kill()
            m.proc.wait()


def _side(kafka, work: Path, side: str, clients: int, writes: int) -> dict:
    """One round of ``side`` on fresh members: ``{"writes/s", "p50 ms", "cpu": {who: ms per write}}``."""
    from run import _raw_pysyncobj_writes, _rest_load, _rest_writes, bench_config, warmed_cluster

    if side == "raw pysyncobj":
        _raw_pysyncobj_writes(clients, 400)
        elapsed, lat = _raw_pysyncobj_writes(clients, writes)
        return {"writes/s": writes / elapsed, "p50 ms": quantile(lat, 0.5) * 1000, "cpu": {}}
    if side in ("HTTP floor", "HTTP over RaftNode"):
        members = _start_floor(work, raftnode=side == "HTTP over RaftNode")
        try:
            leader = next(m for m in members if m.is_leader())
            path = str(work / "w.csv")  # named in the config only: the floor checks nothing

            def request(i):
                return "PUT", f"/k/bench-{i % 200}", bench_config(i, path)

            _rest_load(leader, 4, 400, request)
            elapsed, lat, cpu = _rest_load(leader, clients, writes, request, members)
        finally:
            _stop_floor(members)
    else:
        with warmed_cluster(kafka, work) as (cluster, leader, csv):
            elapsed, lat, cpu = _rest_writes(leader, clients, writes, str(csv), cluster.nodes)
    cpu.pop("leader threads", None)
    return {"writes/s": writes / elapsed, "p50 ms": quantile(lat, 0.5) * 1000,
            "cpu": {who: u + s for who, (u, s) in cpu.items()}}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--clients", type=int, default=32)
    parser.add_argument("--writes", type=int, default=3000)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    import django

    django.setup()
    from webapp.kafka.embedded import EmbeddedKafka

    results: dict[str, list[dict]] = {s: [] for s in SIDES}
    work = Path(tempfile.mkdtemp(prefix="bench-rest-floor-"))
    started = time.monotonic()
    with EmbeddedKafka(log_dir=work / "kafka") as kafka:
        for r in range(args.rounds):
            for side in SIDES:
                res = _side(kafka, work, side, args.clients, args.writes)
                results[side].append(res)
                cpu = ", ".join(f"{who} {ms:.2f}" for who, ms in res["cpu"].items())
                print(f"  round {r + 1}/{args.rounds}, {side}: {res['writes/s']:,.0f} writes/s, p50 "
                      f"{res['p50 ms']:.1f} ms{'; CPU ms per write: ' + cpu if cpu else ''} "
                      f"({time.monotonic() - started:.0f} s)", flush=True)
    raw = [x["writes/s"] for x in results["raw pysyncobj"]]
    lines = [f"\n## {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC — {machine()}\n\n",
             (f"{args.clients} clients, {args.writes:,} writes per round and side, {args.rounds} rounds; commit "
              f"{short_commit(ROOT)}. Per round: writes/s, its ratio to raw pysyncobj's in the same round, p50; "
              "for the HTTP sides, CPU ms per write of each process (leader, followers, the clients).\n\n"),
             "| side | rounds |\n|---|---|\n"]
    for side in SIDES:
        cells = []
        for x, base in zip(results[side], raw):
            cpu = ", ".join(f"{who} {ms:.2f}" for who, ms in x["cpu"].items())
            cells.append(f"{x['writes/s']:,.0f}/s ({x['writes/s'] / base:.2f}x), p50 {x['p50 ms']:.1f} ms"
                         + (f"; CPU {cpu}" if cpu else ""))
        lines.append(f"| {side} | {'; '.join(cells)} |\n")
    record(__file__, "".join(lines), keep=not args.no_record, results="RESULTS_REST_FLOOR.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
