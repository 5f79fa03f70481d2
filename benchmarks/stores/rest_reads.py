#!/usr/bin/env python
"""REST reads on a node whose active metadata store is PostgreSQL or MariaDB, against the Raft store.

Three real node processes (``manage.py runnode``, Raft only, the default REST server), each its own one-member
cluster started with a different active store (``RAFTCONNECT_METADATA_STORE``): ``raft`` (the
baseline: metadata in the node's memory), PostgreSQL and MariaDB (scratch databases
``rc_rest_<random>``, dropped at the end). Each gets the same CONNECTORS file-source connectors
(default 20) through ``PUT /connectors/{name}/config``. Then THREADS clients (default 32, one
kept-alive urllib3 connection each) read ``GET /connectors/{name}/status`` of random connectors,
REQUESTS reads per side (default 2,000), the three nodes taking turns in ROUNDS rounds
(default 3) so that load drift on a shared machine hits all alike. Each row: reads/s (best
round), p50/p99, the node's CPU per read (from ``/proc``) and the ratio to the Raft store's
reads/s in the same run.

What it watches: that a relational store costs a REST request its queries, not a new
connection. Until commit d468b45 each request that touched the store opened one (Django's
``CONN_MAX_AGE`` 0): a server process on PostgreSQL, ~40 ms of CPU with PyMySQL.
``--repo DIR`` runs the nodes from another checkout (e.g. a ``git worktree`` of an older
commit) to compare.

Usage: ``python benchmarks/stores/rest_reads.py [--connectors 20] [--threads 32]
[--requests 2000] [--rounds 3] [--repo DIR] [--no-record]``; results are appended to
``RESULTS_REST.md`` next to this file, with the machine.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import sys
import tempfile
import threading
import time
import uuid
from concurrent.futures import ThreadPoolExecutor
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from benchmarks._common import cpu_ticks, machine, quantile, record, short_commit  # noqa: E402

STORES = {"raft": None, "postgresql": "postgresql://postgres@127.0.0.1:5432/{db}",
          "mariadb": "mysql://root@127.0.0.1:3306/{db}"}


def log(msg: str) -> None:
    print(f"[{datetime.now():%H:%M:%S}] {msg}", flush=True)


def reads(node, names: list[str], threads: int, total: int) -> tuple[float, list[float], float]:
    """``(elapsed s, latencies s, node CPU ms per read)`` of ``total`` status reads from ``threads`` clients."""
    import urllib3

    host, port = node.url.split("://", 1)[1].rsplit(":", 1)
    pool = urllib3.HTTPConnectionPool(host, int(port), maxsize=threads, block=True,
                                      timeout=urllib3.Timeout(30.0), retries=False)
    headers = urllib3.make_headers(basic_auth=":".join(node.auth))
    lat: list[float] = []
    lock = threading.Lock()
    rnd = random.Random(7)
    paths = [f"/connectors/{rnd.choice(names)}/status" for _ in range(total)]

    def one(path: str) -> None:
        t0 = time.perf_counter()
        resp = pool.request("GET", path, headers=headers)
        if resp.status != 200:
            raise RuntimeError(f"GET {path}: HTTP {resp.status} {resp.data[:300]!r}")
        with lock:
            lat.append(time.perf_counter() - t0)

    before = cpu_ticks(node.proc.pid)[:2]
    t0 = time.perf_counter()
    with ThreadPoolExecutor(threads) as ex:
        list(ex.map(one, paths))
    elapsed = time.perf_counter() - t0
    after = cpu_ticks(node.proc.pid)[:2]
    pool.close()
    cpu_ms = (sum(after) - sum(before)) * 1000 / os.sysconf("SC_CLK_TCK") / total
    return elapsed, lat, cpu_ms


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connectors", type=int, default=20)
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--requests", type=int, default=2000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--repo", help="run the nodes from this checkout (default: this one)")
    parser.add_argument("--no-record", action="store_true", help="print the results, do not append to RESULTS_REST.md")
    args = parser.parse_args()
    import django

    django.setup()
    import tools.launcher
    from tools.databases import drop_database
    from tools.launcher import NodeProcess
    from webapp.kafka.embedded import free_port

    repo = Path(args.repo).resolve() if args.repo else ROOT
    tools.launcher.REPO_ROOT = repo
    commit = short_commit(repo, "unknown")
    work = Path(tempfile.mkdtemp(prefix="bench-rest-reads-"))
    csv = work / "w.csv"
    csv.write_text("a\n1\n")
    os.environ["RAFTCONNECT_FILE_ALLOWED_PATHS"] = str(work)  # inherited by the nodes
    db = f"rc_rest_{uuid.uuid4().hex[:8]}"
    nodes: dict[str, NodeProcess] = {}
    names = [f"c{i}" for i in range(args.connectors)]
    results: dict[str, list[tuple[float, list[float], float]]] = {s: [] for s in STORES}
    started = datetime.now(timezone.utc)
    try:
        for store, url in STORES.items():
            env = {} if url is None else {"RAFTCONNECT_STORE_SQL": url.format(db=db), "RAFTCONNECT_METADATA_STORE": "sql"}
            log(f"starting a node on the {store} store (code of {repo}, {commit})")
            nodes[store] = NodeProcess(node_id=f"n-{store}", rest_port=free_port(), raft_port=free_port(),
                                       data_dir=str(work / store), bootstrap_servers="127.0.0.1:9", roles="raft",
                                       env=env).start(timeout=120)
            import urllib3

            node = nodes[store]
            http = urllib3.PoolManager(headers=urllib3.make_headers(basic_auth=":".join(node.auth)))
            for n in names:
                resp = http.request("PUT", f"{node.url}/connectors/{n}/config",
                                    json={"connector.class": "FileSourceConnector", "path": str(csv), "format": "csv",
                                          "topic": "t"})
                if resp.status >= 300:
                    raise RuntimeError(f"PUT {n}: HTTP {resp.status} {resp.data[:300]!r}")
            reads(node, names, args.threads, 100)  # warm
        for r in range(args.rounds):
            for store, node in nodes.items():
                results[store].append(reads(node, names, args.threads, args.requests))
                el, lat, cpu = results[store][-1]
                log(f"round {r + 1}/{args.rounds} {store}: {args.requests / el:,.0f} reads/s, p50 "
                    f"{quantile(lat, 0.5) * 1000:.1f} ms, node CPU {cpu:.2f} ms per read")
    finally:
        for node in nodes.values():
            node.stop()
        for kind in ("postgresql", "mysql"):
            drop_database(kind, db)
        shutil.rmtree(work, ignore_errors=True)
    best = {s: min(runs, key=lambda x: x[0]) for s, runs in results.items() if runs}
    base = args.requests / best["raft"][0]
    lines = [f"## {started:%Y-%m-%d %H:%M} UTC — {machine()}", "",
             f"Nodes running commit {commit}; `GET /connectors/{{name}}/status`, {args.threads} clients, "
             f"{args.requests:,} reads per round, best of {args.rounds} alternating rounds, {args.connectors} connectors.", "",
             "| active store | reads/s | p50 / p99 ms | node CPU ms per read | / raft store, same run |",
             "|---|---|---|---|---|"]
    for store, (el, lat, cpu) in best.items():
        rate = args.requests / el
        per_round = ", ".join(f"{args.requests / e:,.0f}" for e, _, _ in results[store])
        lines.append(f"| {store} | {rate:,.0f} (rounds: {per_round}) | {quantile(lat, 0.5) * 1000:.1f} / "
                     f"{quantile(lat, 0.99) * 1000:.1f} | {cpu:.2f} | {rate / base:.2f} |")
    record(__file__, "\n" + "\n".join(lines) + "\n", keep=not args.no_record, results="RESULTS_REST.md")
    return 0


if __name__ == "__main__":
    sys.exit(main())
