"""Metadata store benchmark: offset commits through the leader's store router per backend, and switch cost.

Part 1, per backend (raft, PostgreSQL, MariaDB, the Redis plugin): THREADS
threads commit fenced offsets (2 partitions per commit) through the node's
``StoreRouter`` for SECONDS — the path the internal REST endpoint calls, without
HTTP. Baseline in the same run: the same number of commits written directly
to the same server in batches (psycopg / PyMySQL ``executemany`` of 100 rows per
transaction into a scratch table shaped like the offsets table; for raft, 100
commits per Raft log entry; for Redis, a pipeline of 100 HSETs).

Part 2: 10,000 connectors' worth of metadata (config of 10 keys, 2 task
configs, connector and 2 task statuses, 4 offsets each) switched
raft → postgresql → mariadb → raft with LOAD_THREADS threads committing offsets
throughout; per switch: duration, commit stall, and the longest single write
the load saw.

Run: ``.venv/bin/python benchmarks/stores/run.py`` (``make bench``). Needs the
local PostgreSQL, MariaDB and Redis; creates and drops scratch databases.
"""
from __future__ import annotations

import os
import sys
import tempfile
import threading
import time
import uuid
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
os.environ.setdefault("RAFTCONNECT_DATA_DIR", tempfile.mkdtemp(prefix="rc-bench-"))

import django  # noqa: E402

django.setup()

from raftnode import RaftConfig, RaftNode  # noqa: E402
from webapp.connect.launcher import wait_for  # noqa: E402
from webapp.connectors.api import ConnectorTaskId, SourceOffset, partition_key  # noqa: E402
from webapp.kafka.embedded import free_port  # noqa: E402
from webapp.storage.raft import RaftMetadataStore  # noqa: E402
from webapp.storage.switch import StoreRouter, StoreSet, SwitchManager  # noqa: E402

THREADS = int(os.environ.get("BENCH_THREADS", "32"))
SECONDS = float(os.environ.get("BENCH_SECONDS", "6"))
CONNECTORS = int(os.environ.get("BENCH_CONNECTORS", "10000"))
LOAD_THREADS = 8
WORKER = "w1"


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


class Node:
    """An in-process Raft member with the node's store router and switch manager."""

    def __init__(self, urls: dict[str, str]):
        self.raft = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=tempfile.mkdtemp(),
                                        password="bench"))
        assert self.raft.wait_ready(15)
        self.raft.propose("_become_coordinator", self.raft.term, "n1")
        self.stores = StoreSet(RaftMetadataStore(self.raft), urls, fence=self.raft.state.check_fence)
        self.router = StoreRouter(self.raft, self.stores)
        self.manager = SwitchManager(self.raft, self.router)

    def switch(self, target: str) -> dict:
        self.manager.begin(target)
        last = None
        def done():
            nonlocal last
            sw = self.raft.state.switch
            if sw["phase"] != last:
                last = sw["phase"]
                log(f"  switch {sw['source']} -> {sw['target']}: {last} {sw.get('progress', {})}"[:160])
            return sw["phase"] in ("completed", "aborted")
        wait_for(done, 600, interval=0.5, what="switch")
        sw = dict(self.raft.state.switch)
        if sw["phase"] != "completed":
            raise RuntimeError(f"switch aborted: {sw['error']}")
        return sw

    def assign(self, names: list[str]) -> int:
        gen = self.raft.state.assignment["generation"] + 1
        self.raft.propose("_set_assignment", self.raft.term, gen, {n: WORKER for n in names},
                          {f"{n}-0": WORKER for n in names}, timeout=60)
        return gen

    def close(self) -> None:
        self.stores.close()
        self.raft.destroy()


def hammer(fn, threads: int, seconds: float) -> tuple[int, list[float], float]:
    """Run ``fn(thread_index, n)`` in a loop on ``threads`` threads; returns (calls, latencies s, elapsed s)."""
    stop = time.monotonic() + seconds
    lat: list[list[float]] = [[] for _ in range(threads)]

    def run(i: int) -> None:
        n = 0
        while time.monotonic() < stop:
            n += 1
            t0 = time.monotonic()
            fn(i, n)
            lat[i].append(time.monotonic() - t0)

    ts = [threading.Thread(target=run, args=(i,)) for i in range(threads)]
    t0 = time.monotonic()
    for t in ts:
        t.start()
    for t in ts:
        t.join()
    flat = [x for xs in lat for x in xs]
    return len(flat), flat, time.monotonic() - t0


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(len(s) * p))] * 1000 if s else 0.0


def baseline_sql(kind: str, db: str, threads: int, seconds: float) -> float:
    """Direct batched offset upserts into a scratch table; commits/s (2 rows per commit, 100 rows per txn)."""
    if kind == "postgresql":
        import psycopg

        def conn():
            return psycopg.connect(f"host=127.0.0.1 port=5432 user=postgres dbname={db}", autocommit=False)
        ddl = ("CREATE TABLE IF NOT EXISTS bench_offset (connector varchar(255), key_hash varchar(64), "
               "partition_key text, part jsonb, off jsonb, PRIMARY KEY (connector, key_hash))")
        sql = ("INSERT INTO bench_offset VALUES (%s,%s,%s,%s,%s) ON CONFLICT (connector, key_hash) DO UPDATE "
               "SET partition_key=EXCLUDED.partition_key, part=EXCLUDED.part, off=EXCLUDED.off")
    else:
        import pymysql

        def conn():
            return pymysql.connect(host="127.0.0.1", port=3306, user="root", password="", database=db)
        ddl = ("CREATE TABLE IF NOT EXISTS bench_offset (connector varchar(255), key_hash varchar(64), "
               "partition_key text, part json, off json, PRIMARY KEY (connector, key_hash))")
        sql = ("INSERT INTO bench_offset VALUES (%s,%s,%s,%s,%s) ON DUPLICATE KEY UPDATE "
               "partition_key=VALUES(partition_key), part=VALUES(part), off=VALUES(off)")
    c = conn()
    with c.cursor() as cur:
        cur.execute(ddl)
    c.commit()
    c.close()
    conns = [conn() for _ in range(threads)]

    def batch(i: int, n: int) -> None:
        rows = []
        for j in range(50):  # 50 commits x 2 partitions = 100 rows
            for p in (0, 1):
                rows.append((f"c{i}", f"h{p}", f'{{"p":{p}}}', f'{{"p":{p}}}', f'{{"o":{n * 50 + j}}}'))
        with conns[i].cursor() as cur:
            cur.executemany(sql, rows)
        conns[i].commit()

    calls, _, elapsed = hammer(batch, threads, seconds)
    for c in conns:
        c.close()
    return calls * 50 / elapsed


def bench_backend(node: Node, target: str, kind: str, db: str | None) -> dict:
    if target != node.raft.state.active_store:
        node.switch(target)
    names = [f"b{uuid.uuid4().hex[:6]}-{i}" for i in range(THREADS)]
    for n in names:
        node.router.put_connector_config(n, {"connector.class": "FileStreamSource"})
    gen = node.assign(names)

    def commit(i: int, n: int) -> None:
        node.router.commit_offsets(ConnectorTaskId(names[i], 0),
                                   [SourceOffset({"p": 0}, {"o": n}), SourceOffset({"p": 1}, {"o": n})],
                                   worker_id=WORKER, generation=gen)

    calls, lat, elapsed = hammer(commit, THREADS, SECONDS)
    rate = calls / elapsed
    if kind in ("postgresql", "mysql"):
        base = baseline_sql(kind, db, THREADS, SECONDS)
        base_what = "executemany, 100 rows per transaction"
    elif kind == "raft":
        def direct(i: int, n: int) -> None:
            entries = [[partition_key({"p": p}), {"p": p}, {"o": n * 50 + j}] for j in range(50) for p in (0, 1)]
            node.raft.propose("_commit_offsets", f"{names[i]}-direct", None, "", 0, entries)
        c2, _, e2 = hammer(direct, THREADS, SECONDS)
        base, base_what = c2 * 50 / e2, "100 offsets per Raft entry, no router/fencing"
    else:
        import redis

        client = redis.Redis.from_url("redis://127.0.0.1:6379/0")
        prefix = f"rc_bench_{uuid.uuid4().hex[:6]}:"

        def direct(i: int, n: int) -> None:
            pipe = client.pipeline(transaction=False)
            for j in range(50):
                pipe.hset(f"{prefix}{i}", mapping={"p0": n * 50 + j, "p1": n * 50 + j})
            pipe.execute()
        c2, _, e2 = hammer(direct, THREADS, SECONDS)
        base, base_what = c2 * 50 / e2, "pipelines of 50 HSETs"
        for k in client.scan_iter(f"{prefix}*"):
            client.delete(k)
    out = {"backend": target, "rate": rate, "p50": pct(lat, 0.5), "p99": pct(lat, 0.99), "base": base,
           "base_what": base_what}
    log(f"{target}: {rate:.0f} commits/s (p50 {out['p50']:.1f} ms, p99 {out['p99']:.1f} ms); "
        f"direct {base:.0f}/s ({base_what}); ratio {rate / base:.2f}")
    return out


def load_metadata(node: Node, n: int) -> None:
    """Write ``n`` connectors' metadata into the active (raft) store through the router, 32 threads."""
    names = [f"conn-{i:05d}" for i in range(n)]
    def put(i: int) -> None:
        for name in names[i::32]:
            cfg = {"connector.class": "FileStreamSource", **{f"key.{k}": f"value-{k}-{name}" for k in range(9)}}
            node.router.put_connector_config(name, cfg)
            node.router.put_task_configs(name, [{"task": "0"}, {"task": "1"}], worker_id=None, generation=0)
            node.router.alter_offsets(name, [SourceOffset({"file": f"f{p}"}, {"position": p}) for p in range(4)])
    run_threads(put, 32)
    log(f"  configs and offsets of {n} connectors written")
    gen = node.raft.state.assignment["generation"] + 1
    node.raft.propose("_set_assignment", node.raft.term, gen, {nm: WORKER for nm in names},
                      {f"{nm}-{t}": WORKER for nm in names for t in (0, 1)}, timeout=60)

    def status(i: int) -> None:
        for name in names[i::32]:
            for task in (None, 0, 1):
                node.router.put_status(name, task, {"state": "RUNNING", "trace": None}, worker_id=WORKER,
                                       generation=gen)
    run_threads(status, 32)
    log(f"  statuses of {n} connectors written")


def run_threads(fn, threads: int) -> None:
    ts = [threading.Thread(target=fn, args=(i,)) for i in range(threads)]
    for t in ts:
        t.start()
    for t in ts:
        t.join()


def bench_switches(urls: dict[str, str]) -> list[dict]:
    node = Node(urls)
    try:
        load_metadata(node, CONNECTORS)
        names = [f"load-{i}" for i in range(LOAD_THREADS)]
        for n in names:
            node.router.put_connector_config(n, {"connector.class": "FileStreamSource"})
        gen = node.assign(names)
        results = []
        for target in ("pg", "maria", "raft"):
            stop = threading.Event()
            lat: list[float] = []
            count = [0]

            def load(i: int) -> None:
                n = 0
                while not stop.is_set():
                    n += 1
                    t0 = time.monotonic()
                    node.router.commit_offsets(ConnectorTaskId(names[i], 0), [SourceOffset({"p": 0}, {"o": n})],
                                               worker_id=WORKER, generation=gen)
                    lat.append(time.monotonic() - t0)
                    count[0] += 1
            ts = [threading.Thread(target=load, args=(i,)) for i in range(LOAD_THREADS)]
            for t in ts:
                t.start()
            time.sleep(2)
            before = count[0] / 2
            t0, c0 = time.monotonic(), count[0]
            sw = node.switch(target)
            during = (count[0] - c0) / (time.monotonic() - t0)
            stop.set()
            for t in ts:
                t.join()
            r = {"switch": f"{sw['source']} -> {target}", "duration_s": sw["progress"]["duration_s"],
                 "commit_stall_ms": sw["progress"]["commit_stall_ms"], "longest_write_ms": max(lat) * 1000,
                 "before": before, "during": during, "names": sw["progress"]["names_total"],
                 "digest": {k: v["count"] for k, v in sw["progress"]["digest"].items()}}
            log(f"{r['switch']}: {r['duration_s']:.1f} s for {r['names']} names, commit stall "
                f"{r['commit_stall_ms']:.0f} ms, longest write {r['longest_write_ms']:.0f} ms, "
                f"writes/s {before:.0f} before, {during:.0f} during")
            results.append(r)
        return results
    finally:
        node.close()


def drop(kind: str, db: str) -> None:
    sys.path.insert(0, str(ROOT))
    from tests.storage.conftest import drop_database

    drop_database(kind, db)


def main() -> None:
    db = f"rc_bench_{uuid.uuid4().hex[:8]}"
    urls = {"pg": f"postgresql://postgres@127.0.0.1:5432/{db}", "maria": f"mysql://root@127.0.0.1:3306/{db}"}
    try:
        import raftconnect_redis_store  # noqa: F401

        urls["redis"] = f"redis://127.0.0.1:6379/0?prefix=rc_bench_{db}:"
    except ImportError:
        log("raftconnect_redis_store is not installed: skipping the Redis plugin")
    log(f"part 1: offset commits through the store router, {THREADS} threads x {SECONDS:.0f} s per backend")
    node = Node(urls)
    rows = []
    try:
        for target, kind in (("raft", "raft"), ("pg", "postgresql"), ("maria", "mysql"), ("redis", "redis")):
            if target in urls or target == "raft":
                rows.append(bench_backend(node, target, kind, db))
    finally:
        node.close()
    log(f"part 2: switching {CONNECTORS} connectors' metadata under a {LOAD_THREADS}-thread load")
    try:
        switches = bench_switches(urls)
    finally:
        drop("postgresql", db)
        drop("mysql", db)
    print("\n| backend | commits/s via router | p50 ms | p99 ms | direct batched/s | ratio |")
    print("|---|---|---|---|---|---|")
    for r in rows:
        print(f"| {r['backend']} | {r['rate']:.0f} | {r['p50']:.1f} | {r['p99']:.1f} | {r['base']:.0f} "
              f"({r['base_what']}) | {r['rate'] / r['base']:.2f} |")
    print("\n| switch | names | duration s | commit stall ms | longest write ms | writes/s before | during |")
    print("|---|---|---|---|---|---|---|")
    for r in switches:
        print(f"| {r['switch']} | {r['names']} | {r['duration_s']:.1f} | {r['commit_stall_ms']:.0f} | "
              f"{r['longest_write_ms']:.0f} | {r['before']:.0f} | {r['during']:.0f} |")


if __name__ == "__main__":
    main()
