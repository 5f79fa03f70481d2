#!/usr/bin/env python
"""Metadata store benchmark: offset commits through the leader per backend, and the cost of switching stores.

Everything runs in this process against the real servers: a single-member Raft
group, the node's ``StoreSet`` + ``StoreRouter`` + ``SwitchManager`` wired as
``runnode`` wires them (``tests/storage/test_switch.py`` does the same), at the
node's GIL switch interval (``RAFT_SWITCH_INTERVAL_S``, 1 ms; until 2026-12-02
CPython's 5 ms default, at which MariaDB's per-call ratio measured ~0.1 lower). There is
no HTTP: a call to ``router.commit_offsets`` is what the internal REST endpoint
calls on the leader after it decoded a worker's request.

Part 1 — offset commits per backend (``raft``, PostgreSQL, MariaDB, and the Redis
plugin when ``raftconnect_redis_store`` is importable). The active store is
switched with ``SwitchManager``; the assignment gives every task to worker
``w1``; THREADS threads (default 32) each commit fenced offsets of their own
task (2 partitions per commit) through ``router.commit_offsets`` for SECONDS
(default 10): commits/s and p50/p99 latency. A second router side commits BATCH tasks' offsets
(default 8) per ``router.commit_offsets_many`` call, as the leader receives a busy agent's commits
through ``POST /raftconnect/v1/internal/offsets``. Each router thread opens its store connection
before the clock starts, as the baseline does. Baseline, in the same run, with the
same threads and duration, alternating with the router in ROUNDS rounds (default
2: router, baseline, router, baseline) so that load drift on a shared machine
hits both sides alike. Each side also reports its CPU per commit, of this process (the
router's Python or the baseline's) and of the database server's processes (from ``/proc``):
where a side's time goes, on a machine where both share the cores:

* PostgreSQL / MariaDB — direct batched upserts into a scratch table with the
  offsets table's columns (``CREATE TABLE ... LIKE`` the store's table) in the
  same database: psycopg ``executemany`` / PyMySQL ``executemany`` of 100 rows
  (50 commits x 2 partitions) per transaction;
* raft — ``raft.propose("_commit_offsets", ...)`` directly, one commit per
  proposal exactly as the Raft store proposes it, without the router;
* Redis — redis-py pipelines of 50 ``HSET``s (50 commits x 2 fields) per round trip.

Part 2 — switching 10,000 connectors' worth of metadata (each: a config of 10
keys, 2 task configs, connector + 2 task statuses, 4 offsets), loaded into the
Raft store in batches, then raft -> postgresql -> mariadb -> raft while
LOAD_THREADS threads (default 8) commit offsets through the router the whole
time. Per switch: the switch's own ``duration_s``, ``prepare_s``, ``copy_s``,
``commit_stall_ms`` and ``longest_gate_wait_ms`` (its write-gate wait; from its
progress in Raft), the longest single write the load threads saw while the
switch ran, and their writes/s during the switch vs the BEFORE_S seconds before
it. Progress is printed as the switch goes. Every switch's digest is checked against the
expected counts, the config/status digests must not change from switch to
switch, and every acknowledged load write must be in the final store.

Usage: ``python benchmarks/stores/run.py [--threads 32] [--seconds 10] [--rounds 2] [--batch 8]
[--connectors 10000] [--load-threads 8] [--only writes|switch] [--backends mariadb,...] [--no-record]``.
Creates scratch databases ``rc_bench_<random>`` on PostgreSQL 127.0.0.1:5432
(user postgres) and MariaDB 127.0.0.1:3306 (user root) and drops them at the
end; Redis keys go under a random prefix and are deleted. Results are appended
to ``RESULTS.md`` next to this file, with the machine.
"""
from __future__ import annotations

import argparse
import collections
import hashlib
import json
import logging
import os
import platform
import shlex
import shutil
import sys
import tempfile
import threading
import time
import uuid
from datetime import datetime, timezone
from pathlib import Path
from typing import Any, Callable

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes
_WORK = Path(tempfile.mkdtemp(prefix="rc-bench-stores-"))
os.environ.setdefault("RAFTCONNECT_DATA_DIR", str(_WORK / "node"))

PG = {"host": "127.0.0.1", "port": 5432, "user": "postgres"}
MARIA = {"host": "127.0.0.1", "port": 3306, "user": "root", "password": ""}
REDIS_URL = "redis://127.0.0.1:6379/0"
WORKER = "w1"
BEFORE_S = 5.0  # load measured this long before each switch
TICK_S = 3.0  # progress lines at least this often


def log(msg: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {msg}", flush=True)


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank, :func:`benchmarks._common.quantile`) of ``values``; 0 when empty."""
    from benchmarks._common import quantile

    return quantile(values, p / 100) if values else 0.0


def machine() -> dict[str, str]:
    cpu = "unknown CPU"
    try:
        cpu = next(l.split(":", 1)[1].strip() for l in open("/proc/cpuinfo") if l.startswith("model name"))
    except (OSError, StopIteration):
        pass
    mem = os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES") / 2**30
    return {"nproc": str(os.cpu_count()), "cpu": cpu, "ram": f"{mem:.0f} GiB",
            "python": platform.python_version()}


def server_versions(with_redis: bool) -> dict[str, str]:
    import psycopg
    import pymysql

    out = {}
    with psycopg.connect(dbname="postgres", **PG) as c:
        out["postgresql"] = c.execute("SHOW server_version").fetchone()[0]
    c = pymysql.connect(**MARIA)
    try:
        with c.cursor() as cur:
            cur.execute("SELECT VERSION()")
            out["mariadb"] = cur.fetchone()[0]
    finally:
        c.close()
    if with_redis:
        import redis

        out["redis"] = redis.Redis.from_url(REDIS_URL).info("server")["redis_version"]
    return out


# --------------------------------------------------------------------------- scratch databases
def drop_databases(db: str) -> None:
    import psycopg
    import pymysql

    try:
        with psycopg.connect(dbname="postgres", autocommit=True, **PG) as c:
            c.execute(f'DROP DATABASE IF EXISTS "{db}" WITH (FORCE)')
    except Exception as exc:  # noqa: BLE001 - reported, the other server is still cleaned
        log(f"WARNING: could not drop PostgreSQL database {db}: {exc}")
    try:
        c = pymysql.connect(**MARIA)
        try:
            with c.cursor() as cur:
                cur.execute(f"DROP DATABASE IF EXISTS `{db}`")
        finally:
            c.close()
    except Exception as exc:  # noqa: BLE001
        log(f"WARNING: could not drop MariaDB database {db}: {exc}")


def drop_redis_prefix(prefix: str) -> None:
    import redis

    client = redis.Redis.from_url(REDIS_URL)
    keys = list(client.scan_iter(f"{prefix}*", count=1000))
    for i in range(0, len(keys), 500):
        client.delete(*keys[i:i + 500])


# --------------------------------------------------------------------------- the node
class Node:
    """A single-member Raft group with the node's store router and switch manager, in this process."""

    def __init__(self, urls: dict[str, str], data_dir: Path):
        from raftnode import RaftConfig, RaftNode
        from webapp.kafka.embedded import free_port
        from webapp.storage.raft import RaftMetadataStore
        from webapp.storage.switch import StoreRouter, StoreSet, SwitchManager

        self.raft = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(data_dir),
                                        password="bench-secret"))
        if not self.raft.wait_ready(20):
            raise RuntimeError(f"Raft member not ready: {self.raft.status()}")
        self.raft.propose("_become_coordinator", self.raft.term, "n1")
        self.stores = StoreSet(RaftMetadataStore(self.raft), urls, fence=self.raft.state.check_fence)
        self.router = StoreRouter(self.raft, self.stores)
        self.manager = SwitchManager(self.raft, self.router, progress_interval=0.5)

    def assign(self, connectors: list[str], tasks_per_connector: int = 1) -> int:
        """Give every connector and task to worker ``w1`` in a new generation; returns it."""
        gen = self.raft.state.assignment["generation"] + 1
        self.raft.propose("_set_assignment", self.raft.term, gen, {n: WORKER for n in connectors},
                          {f"{n}-{t}": WORKER for n in connectors for t in range(tasks_per_connector)},
                          timeout=60)
        return gen

    def switch(self, target: str, on_tick: Callable[[], str] | None = None) -> dict[str, Any]:
        """Run a switch to ``target`` and watch it; returns the final switch record plus observed phase times."""
        t0 = time.monotonic()
        self.manager.begin(target)
        phases: dict[str, float] = {}
        last_print = 0.0
        last_phase = None
        while True:
            sw = self.raft.state.switch
            now = time.monotonic()
            phase = sw["phase"]
            if phase not in phases:
                phases[phase] = now - t0
            if phase != last_phase or now - last_print >= TICK_S:
                prog = sw.get("progress") or {}
                bits = [f"{sw['source']} -> {sw['target']}: {phase:9s} at {now - t0:5.1f} s"]
                if "names_total" in prog:
                    bits.append(f"copied {prog.get('names_copied', 0)}/{prog['names_total']}")
                if "names_verified" in prog:
                    bits.append(f"verified {prog['names_verified']}")
                if on_tick is not None:
                    bits.append(on_tick())
                log("  " + ", ".join(bits))
                last_print, last_phase = now, phase
            if phase in ("completed", "aborted"):
                break
            if now - t0 > 900:
                raise TimeoutError(f"switch to {target} still in phase {phase} after 900 s")
            time.sleep(0.1)
        out = json.loads(json.dumps(self.raft.state.switch))
        out["observed_phases"] = phases
        out["observed_s"] = time.monotonic() - t0
        if out["phase"] != "completed":
            log(f"  SWITCH ABORTED: {out.get('error')}")
        return out

    def close(self) -> None:
        self.manager.stop()
        self.stores.close()
        self.raft.destroy()


# --------------------------------------------------------------------------- closed-loop load
class Hammer:
    """``threads`` threads calling ``op(i, n)`` in a loop for ``seconds``; ``op`` returns the commits it made.

    ``prepare(i)``, when given, runs in thread ``i`` before the clock starts: the router side opens
    its threads' store connections there, as the baseline opens its own before it is timed (each
    PyMySQL connection costs ~40 ms of CPU: timed, 32 of them were a tenth of a 5 s round).
    """

    def __init__(self, label: str, threads: int, seconds: float, op: Callable[[int, int], int],
                 prepare: Callable[[int], None] | None = None):
        self.label, self.threads, self.seconds, self.op, self.prepare = label, threads, seconds, op, prepare
        self.lat: list[list[float]] = [[] for _ in range(threads)]
        self.done = [0] * threads
        self.errors: collections.Counter = collections.Counter()
        self._err_lock = threading.Lock()
        self._barrier: threading.Barrier | None = None
        self.t0 = self.stop_at = 0.0

    def _error(self, exc: BaseException) -> None:
        with self._err_lock:
            self.errors[f"{type(exc).__name__}: {str(exc)[:160]}"] += 1

    def _run(self, i: int) -> None:
        from django.db import connections

        n = 0
        try:
            if self.prepare is not None:
                try:
                    self.prepare(i)
                except Exception as exc:  # noqa: BLE001 - reported; the barrier must still be reached
                    self._error(exc)
            self._barrier.wait()
            stop_at = self.stop_at
            while time.monotonic() < stop_at:
                n += 1
                t0 = time.perf_counter()
                try:
                    k = self.op(i, n)
                except Exception as exc:  # noqa: BLE001 - counted and reported, the thread goes on
                    self._error(exc)
                    continue
                self.lat[i].append(time.perf_counter() - t0)
                self.done[i] += k
        finally:
            connections.close_all()  # this thread's Django connections (relational stores)

    def run(self, on_start: Callable[[], None] | None = None) -> dict[str, Any]:
        """Run the threads; ``on_start()`` is called once every thread is prepared, just before the clock starts."""
        def start() -> None:
            if on_start is not None:
                on_start()
            self.t0 = time.monotonic()
            self.stop_at = self.t0 + self.seconds

        self._barrier = threading.Barrier(self.threads + 1, action=start)
        ts = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(self.threads)]
        for t in ts:
            t.start()
        self._barrier.wait()
        t0, stop_at = self.t0, self.stop_at
        prev, prev_t = 0, t0
        while any(t.is_alive() for t in ts):
            time.sleep(min(TICK_S, max(0.05, stop_at - time.monotonic() + 0.05)))
            now, total = time.monotonic(), sum(self.done)
            if now - prev_t >= 1.0:
                log(f"    {self.label}: {total:,} commits in {now - t0:4.1f} s, "
                    f"{(total - prev) / (now - prev_t):,.0f}/s over the last {now - prev_t:.1f} s"
                    + (f", {sum(self.errors.values())} errors" if self.errors else ""))
                prev, prev_t = total, now
        for t in ts:
            t.join()
        elapsed = time.monotonic() - t0
        lat = [x for xs in self.lat for x in xs]
        return {"commits": sum(self.done), "calls": len(lat), "elapsed": elapsed, "lat": lat,
                "rate": sum(self.done) / elapsed, "p50_ms": pct(lat, 50) * 1000, "p99_ms": pct(lat, 99) * 1000,
                "max_ms": max(lat, default=0.0) * 1000, "errors": dict(self.errors)}


def offsets_of(n: int) -> list:
    from webapp.plugin import SourceOffset

    return [SourceOffset({"partition": p}, {"position": n}) for p in (0, 1)]


# --------------------------------------------------------------------------- part 1: baselines
class SqlDirect:
    """Direct batched upserts into a copy of the offsets table; 100 rows = 50 commits per transaction."""

    def __init__(self, kind: str, db: str, threads: int):
        from webapp.plugin import partition_key
        from webapp.storage.models import Offset

        self.kind, self.threads = kind, threads
        src = Offset._meta.db_table
        table = f"bench_offset_{uuid.uuid4().hex[:6]}"
        if kind == "postgresql":
            import psycopg

            self.connect = lambda: psycopg.connect(dbname=db, **PG)
            ddl = f'CREATE TABLE "{table}" (LIKE "{src}" INCLUDING ALL)'
            self.upsert = (f'INSERT INTO "{table}" (connector, key_hash, partition_key, "partition", "offset") '
                           "VALUES (%s, %s, %s, %s, %s) ON CONFLICT (connector, key_hash) DO UPDATE SET "
                           'partition_key = EXCLUDED.partition_key, "partition" = EXCLUDED."partition", '
                           '"offset" = EXCLUDED."offset"')
            self.drop = f'DROP TABLE "{table}"'
        else:
            # the store's own driver (mysqlclient, or PyMySQL standing in for it: webapp.storage.relational)
            from webapp.storage.relational.databases import mysql_driver

            driver = mysql_driver()
            self.connect = lambda: driver.connect(database=db, **MARIA)
            ddl = f"CREATE TABLE `{table}` LIKE `{src}`"
            self.upsert = (f"INSERT INTO `{table}` (connector, key_hash, partition_key, `partition`, `offset`) "
                           "VALUES (%s, %s, %s, %s, %s) ON DUPLICATE KEY UPDATE partition_key = "
                           "VALUES(partition_key), `partition` = VALUES(`partition`), `offset` = VALUES(`offset`)")
            self.drop = f"DROP TABLE `{table}`"
        self.admin = self.connect()
        with self.admin.cursor() as cur:
            cur.execute(ddl)
        self.admin.commit()
        self.conns = [self.connect() for _ in range(threads)]
        self.keys = [partition_key({"partition": p}) for p in (0, 1)]

    def batch(self, i: int, n: int) -> int:
        rows = []
        for j in range(50):
            pos = n * 50 + j
            for p in (0, 1):
                # the store hashes the key of every row too; keep that cost in the baseline
                rows.append((f"direct-{i}", hashlib.sha256(self.keys[p].encode()).hexdigest(), self.keys[p],
                             json.dumps({"partition": p}), json.dumps({"position": pos})))
        with self.conns[i].cursor() as cur:
            cur.executemany(self.upsert, rows)
        self.conns[i].commit()
        return 50

    def close(self) -> None:
        for c in self.conns:
            c.close()
        with self.admin.cursor() as cur:
            cur.execute(self.drop)
        self.admin.commit()
        self.admin.close()


class RedisDirect:
    """redis-py pipelines of 50 HSETs (50 commits of 2 partitions) per round trip."""

    def __init__(self, prefix: str):
        import redis

        from webapp.plugin import partition_key

        self.client = redis.Redis.from_url(REDIS_URL)
        self.prefix = prefix
        self.keys = [partition_key({"partition": p}) for p in (0, 1)]

    def batch(self, i: int, n: int) -> int:
        pipe = self.client.pipeline(transaction=False)
        for j in range(50):
            pos = n * 50 + j
            pipe.hset(f"{self.prefix}direct:off:{i}", mapping={
                self.keys[p]: json.dumps([{"partition": p}, {"position": pos}]) for p in (0, 1)})
        pipe.execute()
        return 50

    def close(self) -> None:
        self.client.close()


#: the server processes whose CPU a backend's commits cost (``/proc/<pid>/comm``); raft runs in this process
SERVER_PROCESSES = {"pg": ("postgres",), "maria": ("mariadbd", "mysqld"), "redis": ("redis-server",), "raft": ()}


def cpu_seconds(server: tuple[str, ...]) -> tuple[float, float]:
    """``(this process, the processes named in server)``: CPU seconds (user + system) used so far.

    The server's figure sums, over every process of that name, its own CPU and that of its
    children it has reaped (``/proc/<pid>/stat`` utime, stime, cutime, cstime): PostgreSQL runs
    one process per connection, and a connection closed between two readings leaves its CPU in
    the postmaster's children time.
    """
    from benchmarks._common import cpu_ticks

    me = os.times()
    total = 0
    if server:
        for pid in os.listdir("/proc"):
            if not pid.isdigit():
                continue
            try:
                with open(f"/proc/{pid}/comm") as fh:
                    if fh.read().strip() not in server:
                        continue
                total += sum(cpu_ticks(pid))
            except OSError:  # gone meanwhile
                continue
    return me.user + me.system, total / os.sysconf("SC_CLK_TCK")


def merge(parts: list[dict[str, Any]]) -> dict[str, Any]:
    """One result from several rounds of :class:`Hammer`."""
    lat = [x for p in parts for x in p["lat"]]
    errors: collections.Counter = collections.Counter()
    for p in parts:
        errors.update(p["errors"])
    commits, elapsed = sum(p["commits"] for p in parts), sum(p["elapsed"] for p in parts)
    per_commit = lambda key: sum(p.get(key, 0.0) for p in parts) * 1e6 / commits if commits else 0.0  # noqa: E731
    return {"commits": commits, "elapsed": elapsed, "rate": commits / elapsed if elapsed else 0.0,
            "client_us": per_commit("client_cpu_s"), "server_us": per_commit("server_cpu_s"),
            "rounds": [round(p["rate"]) for p in parts], "p50_ms": pct(lat, 50) * 1000,
            "p99_ms": pct(lat, 99) * 1000, "max_ms": max(lat, default=0.0) * 1000, "errors": dict(errors)}


def bench_writes(args, db: str, urls: dict[str, str], redis_prefix: str | None) -> list[dict[str, Any]]:
    from webapp.plugin import ConnectorTaskId, partition_key
    from webapp.storage.relational.databases import mysql_driver_name
    from webapp.storage.base import OffsetCommit

    node = Node(urls, _WORK / "raft-writes")
    rows = []
    try:
        plan = [("raft", "raft"), ("pg", "postgresql"), ("maria", "mariadb")]
        if "redis" in urls:
            plan.append(("redis", "redis"))
        if args.backends:
            plan = [(store, label) for store, label in plan if label in args.backends]
        for store, label in plan:
            log(f"part 1: {label}")
            if node.raft.state.active_store != store:
                sw = node.switch(store)
                if sw["phase"] != "completed":
                    rows.append({"backend": label, "error": f"switch aborted: {sw.get('error')}"})
                    continue
            names = [f"w-{store}-{i}" for i in range(args.threads)]
            batched = [f"w-{store}-b{i}" for i in range(args.threads * args.batch)]  # thread i: [i*batch, ...)
            for n in names + batched:
                node.router.put_connector_config(n, {"connector.class": "FileStreamSource", "tasks.max": "1"})
                node.router.put_task_configs(n, [{"task.class": "FileStreamSourceTask"}], worker_id=None,
                                             generation=0)
            gen = node.assign(names + batched)

            def commit(i: int, n: int) -> int:
                node.router.commit_offsets(ConnectorTaskId(names[i], 0), offsets_of(n), worker_id=WORKER,
                                           generation=gen)
                return 1

            def commit_many(i: int, n: int) -> int:
                commits = [OffsetCommit(ConnectorTaskId(batched[i * args.batch + k], 0), offsets_of(n), gen)
                           for k in range(args.batch)]
                fenced = [e for e in node.router.commit_offsets_many(commits, worker_id=WORKER) if e is not None]
                if fenced:
                    raise fenced[0]
                return args.batch

            def propose(i: int, n: int) -> int:
                entries = [[partition_key(o.partition), dict(o.partition), dict(o.offset)] for o in offsets_of(n)]
                node.raft.propose("_commit_offsets", names[i], 0, WORKER, gen, entries, timeout=10.0)
                return 1

            direct: Any = None
            if store == "raft":
                base_op, base_what = propose, "raw `raft.propose(\"_commit_offsets\")`, 1 commit per proposal"
            elif store in ("pg", "maria"):
                direct = SqlDirect("postgresql" if store == "pg" else "mysql", db, args.threads)
                base_op = direct.batch
                base_what = ("psycopg" if store == "pg" else mysql_driver_name()) + \
                    " `executemany` upsert, 100 rows (50 commits) per transaction"
            else:
                direct = RedisDirect(redis_prefix)
                base_op, base_what = direct.batch, "redis-py pipeline of 50 `HSET`s (50 commits) per round trip"
            # Alternate router and baseline rounds so that load drift on a shared machine hits both alike.
            router_parts, many_parts, base_parts = [], [], []
            server = SERVER_PROCESSES[store]

            def measured(hammer: Hammer) -> dict[str, Any]:
                at_start: list[tuple[float, float]] = []
                out = hammer.run(on_start=lambda: at_start.append(cpu_seconds(server)))
                c1, s1 = cpu_seconds(server)
                (c0, s0), = at_start
                return {**out, "client_cpu_s": c1 - c0, "server_cpu_s": s1 - s0}

            connect = None
            if store in ("pg", "maria"):
                alias = node.router.stores.get(store).alias

                def connect(i: int) -> None:
                    from django.db import connections

                    connections[alias].ensure_connection()

            try:
                for r in range(args.rounds):
                    router_parts.append(measured(Hammer(f"{label} via router, round {r + 1}/{args.rounds}",
                                                        args.threads, args.seconds / args.rounds, commit,
                                                        prepare=connect)))
                    many_parts.append(measured(Hammer(f"{label} via router, {args.batch} per call, round {r + 1}/"
                                                      f"{args.rounds}", args.threads, args.seconds / args.rounds,
                                                      commit_many, prepare=connect)))
                    base_parts.append(measured(Hammer(f"{label} direct, round {r + 1}/{args.rounds}", args.threads,
                                                      args.seconds / args.rounds, base_op)))
            finally:
                if direct is not None:
                    direct.close()
            router, many, base = merge(router_parts), merge(many_parts), merge(base_parts)
            row = {"backend": label, "router": router, "many": many, "base": base, "base_what": base_what,
                   "ratio": router["rate"] / base["rate"] if base["rate"] else 0.0,
                   "many_ratio": many["rate"] / base["rate"] if base["rate"] else 0.0}
            rows.append(row)
            log(f"  {label}: router {router['rate']:,.0f} commits/s (rounds {router['rounds']}; p50 "
                f"{router['p50_ms']:.1f} ms, p99 {router['p99_ms']:.1f} ms, max {router['max_ms']:.0f} ms); "
                f"{args.batch} per call {many['rate']:,.0f}/s; direct {base['rate']:,.0f}/s (rounds "
                f"{base['rounds']}); ratios {row['ratio']:.2f}, {row['many_ratio']:.2f}")
            for what, res in (("router", router), ("router, batched", many), ("direct", base)):
                if res["errors"]:
                    log(f"  ERRORS ({what}): {res['errors']}")
    finally:
        node.close()
    return rows


# --------------------------------------------------------------------------- part 2: switching
def load_metadata(node: Node, n: int) -> tuple[list[str], int]:
    """Put ``n`` connectors' metadata into the (active) Raft store in batches of 200 names; returns names, generation."""
    from webapp.plugin import SourceOffset
    from webapp.storage.base import ConnectorRecord, NameSnapshot

    names = [f"conn-{i:05d}" for i in range(n)]
    t0 = time.monotonic()
    gen = node.assign(names, tasks_per_connector=2)
    raft_store = node.stores.get("raft")
    for i in range(0, n, 200):
        snaps = []
        for name in names[i:i + 200]:
            config = {"connector.class": "FileStreamSource", "tasks.max": "2", "topic": f"t-{name}",
                      "file": f"/data/{name}/input.csv", "key.converter": "org.apache.kafka.connect.json.JsonConverter",
                      "value.converter": "org.apache.kafka.connect.json.JsonConverter",
                      "batch.size": "2000", "poll.interval.ms": "1000", "errors.tolerance": "none",
                      "description": f"benchmark connector {name}"}
            tasks = [{"task.class": "FileStreamSourceTask", "file": f"/data/{name}/part-{t}.csv",
                      "topic": f"t-{name}"} for t in range(2)]
            status = {"state": "RUNNING", "trace": None, "worker_id": WORKER, "generation": gen}
            statuses = {"connector": dict(status), "tasks": {"0": dict(status), "1": dict(status)}}
            offsets = [SourceOffset({"file": f"/data/{name}/part-{k}.csv"}, {"position": 1000 * k + 7})
                       for k in range(4)]
            snaps.append(NameSnapshot(name, ConnectorRecord(name, config, "STARTED", tasks), statuses, offsets))
        raft_store.import_names(snaps)
        if (i // 200) % 10 == 9:
            log(f"  loaded {i + 200:,}/{n:,} connectors")
    log(f"  {n:,} connectors loaded into raft in {time.monotonic() - t0:.1f} s")
    return names, gen


class Load:
    """LOAD_THREADS threads committing offsets through the router until stopped; every write is timed."""

    def __init__(self, node: Node, names: list[str], gen: int):
        self.node, self.names, self.gen = node, names, gen
        self.records: list[list[tuple[float, float]]] = [[] for _ in names]  # (start, latency)
        self.acked = [0] * len(names)
        self.errors: list[tuple[float, str]] = []
        self.stop_event = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(i,), daemon=True) for i in range(len(names))]

    def _run(self, i: int) -> None:
        from django.db import connections

        from webapp.plugin import ConnectorTaskId, SourceOffset

        name, n = self.names[i], 0
        task = ConnectorTaskId(name, 0)
        try:
            while not self.stop_event.is_set():
                n += 1
                offs = [SourceOffset({"file": f"/data/{name}/part-{k}.csv"}, {"position": 10_000_000 + n})
                        for k in (0, 1)]
                t0 = time.monotonic()
                try:
                    self.node.router.commit_offsets(task, offs, worker_id=WORKER, generation=self.gen)
                except Exception as exc:  # noqa: BLE001 - counted and reported
                    self.errors.append((t0, f"{type(exc).__name__}: {str(exc)[:160]}"))
                    time.sleep(0.01)
                    continue
                self.records[i].append((t0, time.monotonic() - t0))
                self.acked[i] = n
        finally:
            connections.close_all()

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def stop(self) -> None:
        self.stop_event.set()
        for t in self.threads:
            t.join(60)

    def count(self) -> int:
        return sum(len(r) for r in self.records)

    def window(self, t0: float, t1: float) -> tuple[int, float, int]:
        """Writes that completed in [t0, t1]; the longest write overlapping it (s); errors in it."""
        done, longest = 0, 0.0
        for recs in self.records:
            for start, lat in reversed(recs):
                if start + lat < t0 - 120:
                    break
                if t0 <= start + lat <= t1:
                    done += 1
                if start <= t1 and start + lat >= t0:
                    longest = max(longest, lat)
        errs = sum(1 for at, _ in self.errors if t0 <= at <= t1)
        return done, longest, errs


def bench_switches(args, urls: dict[str, str]) -> dict[str, Any]:
    from webapp.storage.switch import snapshot_digest

    node = Node({k: v for k, v in urls.items() if k in ("pg", "maria")}, _WORK / "raft-switch")
    out: dict[str, Any] = {"switches": [], "checks": []}
    load = None
    try:
        log(f"part 2: loading {args.connectors:,} connectors' metadata into raft")
        names, gen = load_metadata(node, args.connectors)
        expected = {"config": args.connectors, "statuses": 3 * args.connectors, "offsets": 4 * args.connectors}
        load = Load(node, names[:args.load_threads], gen)
        load.start()
        log(f"  {args.load_threads} load threads committing offsets through the router")
        digests = []
        for target in ("pg", "maria", "raft"):
            tb = time.monotonic()
            c0 = load.count()
            time.sleep(BEFORE_S)
            before = (load.count() - c0) / (time.monotonic() - tb)
            _, longest_before, _ = load.window(tb, time.monotonic())
            log(f"switch {node.raft.state.active_store} -> {target}: load {before:,.0f} writes/s before, "
                f"longest write {longest_before * 1000:.0f} ms")
            tick = {"t": time.monotonic(), "c": load.count()}

            def on_tick() -> str:
                now, c = time.monotonic(), load.count()
                rate = (c - tick["c"]) / max(1e-6, now - tick["t"])
                _, longest, errs = load.window(tick["t"], now)
                tick.update(t=now, c=c)
                return f"load {rate:,.0f} writes/s, longest {longest * 1000:.0f} ms" + \
                    (f", {errs} errors" if errs else "")

            t0 = time.monotonic()
            sw = node.switch(target, on_tick)
            t1 = time.monotonic()
            done, longest, errs = load.window(t0, t1)
            prog = sw.get("progress") or {}
            rec = {"switch": f"{sw['source']} -> {sw['target']}", "phase": sw["phase"], "error": sw.get("error"),
                   "duration_s": prog.get("duration_s"), "commit_stall_ms": prog.get("commit_stall_ms"),
                   "gate_wait_ms": prog.get("longest_gate_wait_ms"), "prepare_s": prog.get("prepare_s"),
                   "copy_s": prog.get("copy_s"), "names": prog.get("names_total"),
                   "longest_write_ms": longest * 1000, "longest_before_ms": longest_before * 1000,
                   "before": before, "during": done / (t1 - t0), "errors": errs,
                   "digest": prog.get("digest") or {}}
            out["switches"].append(rec)
            log(f"  {rec['switch']} {sw['phase']}: duration_s {rec['duration_s']}, commit stall "
                f"{rec['commit_stall_ms']} ms, gate wait {rec['gate_wait_ms']} ms, longest load write "
                f"{rec['longest_write_ms']:.0f} ms, writes/s {before:,.0f} before / {rec['during']:,.0f} during"
                + (f", {errs} load errors" if errs else ""))
            if sw["phase"] != "completed":
                out["checks"].append(f"switch {rec['switch']} aborted: {sw.get('error')}")
                break
            counts = {k: v["count"] for k, v in rec["digest"].items()}
            if counts != expected:
                out["checks"].append(f"{rec['switch']}: digest counts {counts}, expected {expected}")
            digests.append(rec["digest"])
        for kind in ("config", "statuses"):
            if len({d[kind]["sha256"] for d in digests if kind in d}) > 1:
                out["checks"].append(f"the {kind} digest changed between switches (nothing wrote {kind})")
        load.stop()
        # every acknowledged load write is in the final store, with its latest value
        final = node.router
        for i, name in enumerate(load.names):
            got = {o.partition["file"]: o.offset["position"] for o in final.get_offsets(name)}
            for k in (0, 1):
                want = 10_000_000 + load.acked[i]
                if load.acked[i] and got.get(f"/data/{name}/part-{k}.csv") != want:
                    out["checks"].append(f"{name} part-{k}: final store has "
                                         f"{got.get(f'/data/{name}/part-{k}.csv')}, last acknowledged {want}")
        final_counts = {k: v["count"] for k, v in snapshot_digest(final.active).items()}
        if final_counts != expected:
            out["checks"].append(f"final store counts {final_counts}, expected {expected}")
        out["load_errors"] = collections.Counter(e for _, e in load.errors)
        out["final_store"] = node.raft.state.active_store
        log(f"  final store {out['final_store']}: {final_counts}; checks: "
            + ("; ".join(out["checks"]) if out["checks"] else "all passed"))
    finally:
        if load is not None:
            load.stop()
        node.close()
    return out


# --------------------------------------------------------------------------- report
def report(args, started: datetime, mach: dict[str, str], versions: dict[str, str], writes, switches,
           notes: list[str], load_avg: tuple[str, str]) -> str:
    lines = [f"## {started:%Y-%m-%d %H:%M} UTC — {mach['cpu']}, nproc {mach['nproc']}, {mach['ram']} RAM, "
             f"Python {mach['python']}", ""]
    lines.append("Servers: " + ", ".join(f"{k} {v}" for k, v in versions.items()) + ". "
                 f"Load average (1 min) at start {load_avg[0]}, at end {load_avg[1]} (the machine is shared).")
    lines.append("")
    lines.append(f"Command: `{args.command}`")
    lines.append("")
    if writes:
        lines += [f"### Offset commits through the leader ({args.threads} threads x {args.seconds:g} s per side "
                  f"in {args.rounds} alternating rounds, 2 partitions per commit; in-process router, no HTTP)", "",
                  f"| backend | via `router.commit_offsets` | p50 / p99 / max ms | direct baseline, same run | "
                  f"baseline commits/s | router / direct | via `router.commit_offsets_many`, {args.batch} commits "
                  f"per call: commits/s, p50 ms, / direct | CPU µs per commit, this process + server: router / "
                  f"{args.batch} per call / direct |",
                  "|---|---|---|---|---|---|---|---|"]
        for r in writes:
            if "error" in r:
                lines.append(f"| {r['backend']} | {r['error']} | | | | | | |")
                continue
            ro, m, b = r["router"], r["many"], r["base"]
            err = f" ({sum(ro['errors'].values())} errors)" if ro["errors"] else ""
            rounds = lambda x: " / ".join(f"{v:,}" for v in x["rounds"])  # noqa: E731
            cpu = lambda x: f"{x['client_us']:.0f} + {x['server_us']:.0f}"  # noqa: E731
            lines.append(f"| {r['backend']} | {ro['rate']:,.0f} commits/s ({rounds(ro)}){err} | "
                         f"{ro['p50_ms']:.1f} / {ro['p99_ms']:.1f} / {ro['max_ms']:.0f} | {r['base_what']} | "
                         f"{b['rate']:,.0f} ({rounds(b)}) | {r['ratio']:.2f} | {m['rate']:,.0f} ({rounds(m)}), "
                         f"{m['p50_ms']:.1f}, **{r['many_ratio']:.2f}** | {cpu(ro)} / {cpu(m)} / {cpu(b)} |")
        lines.append("")
    if switches:
        sw = switches["switches"]
        lines += [f"### Store switch, {args.connectors:,} connectors ({args.connectors:,} configs of 10 keys with "
                  f"2 task configs, {3 * args.connectors:,} statuses, {4 * args.connectors:,} offsets), "
                  f"{args.load_threads} threads committing offsets throughout", "",
                  "| switch | `duration_s` | prepare / copy / verify+commit+finish s | "
                  "`commit_stall_ms` | `longest_gate_wait_ms` (gate wait) | longest load write ms during "
                  "(before) | writes/s before → during |",
                  "|---|---|---|---|---|---|---|"]
        for r in sw:
            if r["duration_s"] is not None and r["prepare_s"] is not None and r["copy_s"] is not None:
                rest = r["duration_s"] - r["prepare_s"] - r["copy_s"]
                phases = f"{r['prepare_s']:.1f} / {r['copy_s']:.1f} / {rest:.1f}"
            else:
                phases = "-"
            state = "" if r["phase"] == "completed" else f" **{r['phase']}: {r['error']}**"
            lines.append(f"| {r['switch']}{state} | {r['duration_s']} | {phases} | {r['commit_stall_ms']} | "
                         f"{r['gate_wait_ms']} | {r['longest_write_ms']:,.0f} ({r['longest_before_ms']:,.0f}) | "
                         f"{r['before']:,.0f} → {r['during']:,.0f} |")
        lines.append("")
        lines.append("Checks (digest counts per switch, unchanged config/status digests, every acknowledged load "
                     "write in the final store): " + ("; ".join(switches["checks"]) if switches["checks"]
                                                       else "all passed") + ".")
        if switches.get("load_errors"):
            lines.append(f"Load errors: {dict(switches['load_errors'])}.")
        lines.append("")
    if notes:
        lines += [f"* {n}" for n in notes] + [""]
    return "\n".join(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=10.0, help="per backend and side, over all rounds")
    parser.add_argument("--rounds", type=int, default=2, help="router/baseline alternations per backend")
    parser.add_argument("--batch", type=int, default=8,
                        help="commits per router.commit_offsets_many call (a busy agent's batch)")
    parser.add_argument("--connectors", type=int, default=10_000)
    parser.add_argument("--load-threads", type=int, default=8)
    parser.add_argument("--only", choices=["writes", "switch"])
    parser.add_argument("--backends", type=lambda v: v.split(","), default=None,
                        help="part 1 for these only, comma-separated (raft,postgresql,mariadb,redis; default all)")
    parser.add_argument("--no-record", action="store_true", help="print the results, do not append to RESULTS.md")
    args = parser.parse_args()
    args.command = "python " + " ".join(shlex.quote(a) for a in
                                         [os.path.relpath(__file__, ROOT) if Path(__file__).resolve().is_relative_to(ROOT)
                                          else __file__] + sys.argv[1:])
    import django

    django.setup()
    logging.getLogger("webapp").setLevel(logging.WARNING)
    from webapp.connect.management.commands.runnode import RAFT_SWITCH_INTERVAL_S
    from webapp.storage.relational import RelationalMetadataStore

    # this process is a Raft member serving writes, as a node's is: the same GIL switch interval
    sys.setswitchinterval(RAFT_SWITCH_INTERVAL_S)

    started = datetime.now(timezone.utc)
    load_start = open("/proc/loadavg").read().split()[0]
    try:
        RelationalMetadataStore("probe", "postgresql://postgres@127.0.0.1:5432/unused").close()
    except TypeError as exc:  # abstract methods left: the switch support is not there yet
        log(f"RelationalMetadataStore cannot be instantiated yet ({exc})")
        return 2
    notes: list[str] = []
    try:
        import raftconnect_redis_store  # noqa: F401
        have_redis = True
    except ImportError:
        have_redis = False
        log("raftconnect_redis_store is not importable: the Redis plugin backend is skipped")
        notes.append("Redis plugin backend skipped: `raftconnect_redis_store` was not importable.")
    mach, versions = machine(), server_versions(have_redis)
    log(f"{mach['cpu']}, nproc {mach['nproc']}, {mach['ram']}, Python {mach['python']}; "
        + ", ".join(f"{k} {v}" for k, v in versions.items()))
    db = f"rc_bench_{uuid.uuid4().hex[:10]}"
    redis_prefix = f"rc_bench_{uuid.uuid4().hex[:10]}:"
    urls = {"pg": f"postgresql://postgres@127.0.0.1:5432/{db}", "maria": f"mysql://root@127.0.0.1:3306/{db}"}
    if have_redis:
        urls["redis"] = f"{REDIS_URL}?prefix={redis_prefix}"
    log(f"scratch database {db} on PostgreSQL and MariaDB" + (f", Redis prefix {redis_prefix}" if have_redis else ""))
    writes, switches = [], None
    try:
        if args.only in (None, "writes"):
            writes = bench_writes(args, db, urls, redis_prefix if have_redis else None)
        if args.only in (None, "switch"):
            drop_databases(db)  # part 2 starts from empty databases (part 1 left leases of another Raft group)
            switches = bench_switches(args, urls)
    finally:
        drop_databases(db)
        if have_redis:
            drop_redis_prefix(redis_prefix)
        shutil.rmtree(_WORK, ignore_errors=True)
        log(f"dropped {db}" + (" and the Redis keys" if have_redis else ""))
    text = report(args, started, mach, versions, writes, switches, notes,
                  (load_start, open("/proc/loadavg").read().split()[0]))
    print("\n" + text)
    if not args.no_record:
        out = Path(__file__).with_name("RESULTS.md")
        if not out.exists():
            out.write_text("# Metadata store benchmark results\n\n`python benchmarks/stores/run.py` (see its "
                           "docstring for what each row measures and its baseline).\n")
        with out.open("a") as fh:
            fh.write("\n" + text)
        log(f"recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
