#!/usr/bin/env python
"""Cluster benchmarks: assignor, metadata writes, leader failover, task failover.

Every figure is measured next to a baseline in the same run and reported as a
ratio where one applies:

* assignor — time to assign 10,000 tasks over 100 workers (goal <= 50 ms) and tasks
  moved when one worker leaves, against the minimum any assignor must move (the
  leaver's tasks);
* metadata writes — connector config writes through REST (``PUT
  /connectors/{n}/config``) on a 3-member cluster, sequential and with 32
  concurrent clients (each a kept-alive ``http.client`` connection), writes/s, p50/p99, as the node serves them
  (REST fast path on) and with every request through Django's full path; baseline: raw pysyncobj ``@replicated``
  calls on a 3-member cluster with the same tuning, same concurrency; best of
  ``--repeat`` rounds (default 3) per side, the machine being shared; with the CPU each
  process spent per REST write (leader, followers, the clients in this process), from ``/proc``, and
  of the leader's: its REST threads, its Raft thread and its context switches per write (how often
  its threads hand the GIL to each other);
* leader failover — ``kill -9`` of the leader, N trials (default 20): seconds until
  a REST write on a survivor succeeds, p50/p99 (goal p99 <= 3 s); baseline: the
  Raft election alone (time until a survivor reports LEADER);
* isolated leader — both followers SIGSTOPped: seconds until the leader steps
  down (goal <= 3 s; pysyncobj's default ``leaderFallbackTimeout`` is 30 s);
* task failover — ``kill -9`` of a worker-only node: seconds until its tasks are
  RUNNING elsewhere (goal <= session timeout + 2 s = 7 s).

Usage: ``python benchmarks/cluster/run.py [--trials 20] [--repeat 3] [--only NAME ...]``; results
are appended to ``benchmarks/cluster/RESULTS.md`` with the machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import threading
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from datetime import datetime, timezone
from pathlib import Path
from unittest import mock

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
from webapp.kafka.embedded import free_port  # noqa: E402 - after the path: this checkout's webapp, not an installed one
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from benchmarks._common import cpu_ticks, machine, quantile, thread_stats  # noqa: E402

SOURCE = "raftconnect.connectors.file.FileSourceConnector"


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank) of ``values`` (:func:`benchmarks._common.quantile`)."""
    return quantile(values, p / 100)




# --------------------------------------------------------------------------- assignor
def bench_assignor() -> list[str]:
    from webapp.coordinator.assignor import Assignment, WeightedRoundRobinAssignor

    workers = {f"w{i:03d}": 1.0 + (i % 3) for i in range(100)}
    tasks = [f"c{i // 10}-{i % 10}" for i in range(10_000)]
    connectors = sorted({t.rsplit("-", 1)[0] for t in tasks})
    a = WeightedRoundRobinAssignor(0.5)
    times = []
    for _ in range(7):
        t0 = time.perf_counter()
        first = a.assign(workers=workers, leader_worker="w000", connectors=connectors, tasks=tasks)
        times.append(time.perf_counter() - t0)
    gone = "w050"
    left = {w: v for w, v in workers.items() if w != gone}
    t0 = time.perf_counter()
    after = a.assign(workers=left, leader_worker="w000", connectors=connectors, tasks=tasks, previous=first)
    incremental = time.perf_counter() - t0
    moved = sum(1 for t, w in after.tasks.items() if first.tasks[t] != w)
    minimum = sum(1 for w in first.tasks.values() if w == gone)
    assert isinstance(after, Assignment)
    return [f"| assignor: 10,000 tasks over 100 workers, full | {statistics.median(times) * 1000:.1f} ms (median of 7) | goal <= 50 ms |",
            f"| assignor: one worker leaves, incremental | {incremental * 1000:.1f} ms; {moved} tasks moved | minimum possible {minimum} (ratio {moved / max(minimum, 1):.2f}) |"]


# ------------------------------------------------------------------- metadata writes
def raw_member(me: str, others: list[str], data_dir: str):
    """A raw pysyncobj member at ``me`` with the baseline's tuning, journal in ``data_dir``: a key-value
    map with one replicated call, ``put(k, v)``. The raw side of the writes row, and each member of
    ``rest_floor.py``'s HTTP floor (``floor_member.py``)."""
    from pysyncobj import SyncObj, SyncObjConf, replicated

    class KV(SyncObj):
        def __init__(self) -> None:
            super().__init__(me, others, SyncObjConf(password="bench", autoTickPeriod=0.005, appendEntriesPeriod=0.01,
                                                    journalFile=os.path.join(data_dir, "j"), raftMinTimeout=0.4,
                                                    raftMaxTimeout=1.2))
            self.data: dict = {}

        @replicated
        def put(self, k, v):
            self.data[k] = v

    return KV()


def _raw_pysyncobj_writes(concurrency: int, total: int) -> tuple[float, list[float]]:
    """Baseline: a 3-member raw pysyncobj cluster in this process with our tuning.

    pysyncobj's own options only: RaftConnect's group commit and its immediate send of a
    proposal (``RaftConfig.append_entries_immediately``) are what is measured against it.
    pysyncobj's ``appendEntriesUseBatch=False`` is not a fair baseline either: here it
    logged "truncating already-applied log entries" under 32 clients and a run failed
    with a DISCARDED command (see ``raftnode/node.py``, ``RaftConfig``).
    """
    d = tempfile.mkdtemp()
    ports = [free_port() for _ in range(3)]
    addrs = [f"127.0.0.1:{p}" for p in ports]
    nodes = []
    for i, a in enumerate(addrs):
        os.makedirs(os.path.join(d, str(i)))
        nodes.append(raw_member(a, [x for x in addrs if x != a], os.path.join(d, str(i))))
    deadline = time.time() + 20
    while not any(n._isLeader() for n in nodes) and time.time() < deadline:
        time.sleep(0.05)
    leader = next(n for n in nodes if n._isLeader())
    lat: list[float] = []
    lock = threading.Lock()

    from pysyncobj import FAIL_REASON
    from pysyncobj.syncobj import SyncObjException

    def one(i):
        t0 = time.perf_counter()
        while True:  # as RaftNode.propose: again after an outcome that proves it was not applied
            try:
                current = next((n for n in nodes if n._isLeader()), leader)
                current.put(f"k{i}", {"connector.class": SOURCE, "i": str(i)}, sync=True, timeout=10)
                break
            except SyncObjException as exc:  # an election on a starved machine: DISCARDED, NOT_LEADER, ...
                if exc.errorCode not in (FAIL_REASON.DISCARDED, FAIL_REASON.NOT_LEADER, FAIL_REASON.MISSING_LEADER,
                                         FAIL_REASON.QUEUE_FULL) or time.perf_counter() - t0 > 30:
                    raise
                time.sleep(0.02)
        with lock:
            lat.append(time.perf_counter() - t0)

    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, range(total)))
    elapsed = time.perf_counter() - t0
    for n in nodes:
        n.destroy()
    return elapsed, lat


def _rest_load(leader, concurrency: int, total: int, request: Callable[[int], tuple[str, str, dict | None]],
               members=(), via=None) -> tuple[float, list[float], dict]:
    """``(elapsed s, latencies s, CPU ms per request)``: ``total`` requests from ``concurrency`` clients.

    The clients send to ``via`` (a member, which forwards writes to the leader) or to the leader itself.

    ``request(i)`` gives the ``i``-th request as ``(method, path, JSON body or None)``; an answer of
    300 or more raises ``RuntimeError``. The CPU figures say where a request's cost lies:
    ``{"leader"|"follower N"|"client": (user, system)}`` in ms of CPU per request, from ``/proc`` for
    the ``members`` (NodeProcess; the leader alone when ``members`` is empty) and ``os.times`` for
    this process (the clients); for a leader running as a process, also ``"leader threads"``: its
    CPU per request by thread (:func:`_leader_threads`, a dict, not a pair).
    """
    import base64
    import http.client

    import orjson

    # Each client is one kept-alive connection of the standard library's ``http.client``: the clients run
    # on the same 2 cores as the members, and what they spend is taken from the cluster under test (the
    # raw baseline's clients are plain method calls). ``requests`` cost ~0.5 ms of CPU per call more
    # than urllib3; urllib3's pool and response objects ~0.3 ms more than ``http.client`` (0.59 against
    # ~0.3 ms per write at 32 clients, benchmarks/cluster/RESULTS.md, 2026-12-01).
    target = via or leader
    host, port = target.url.split("://", 1)[1].rsplit(":", 1)
    headers = {"Content-Type": "application/json"}
    if target.auth:
        headers["Authorization"] = "Basic " + base64.b64encode(":".join(target.auth).encode()).decode()
    lat: list[float] = []
    lock = threading.Lock()
    local = threading.local()
    opened: list[http.client.HTTPConnection] = []

    def one(i):
        method, path, body = request(i)
        conn = getattr(local, "conn", None)
        if conn is None:
            conn = local.conn = http.client.HTTPConnection(host, int(port), timeout=30.0)
            with lock:
                opened.append(conn)
        t0 = time.perf_counter()
        conn.request(method, path, body=None if body is None else orjson.dumps(body), headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        if resp.status >= 300:
            raise RuntimeError(f"{method} {path}: HTTP {resp.status} {data[:300]!r}")
        with lock:
            lat.append(time.perf_counter() - t0)

    running = [m for m in members if m.proc is not None] or [leader]
    pids = {"leader": leader.proc.pid} if leader in running else {}
    pids.update({f"follower {n}": m.proc.pid for n, m in enumerate((m for m in running if m is not leader), 1)})
    before = {k: cpu_ticks(p)[:2] for k, p in pids.items()}
    threads0 = thread_stats(leader.proc.pid) if leader.proc is not None else {}
    me0 = os.times()
    t0 = time.perf_counter()
    with ThreadPoolExecutor(concurrency) as ex:
        list(ex.map(one, range(total)))
    elapsed = time.perf_counter() - t0
    me1 = os.times()
    for conn in opened:
        conn.close()
    tick_ms = 1000 / os.sysconf("SC_CLK_TCK")
    cpu = {k: tuple((a - b) * tick_ms / total for a, b in zip(cpu_ticks(p)[:2], before[k])) for k, p in pids.items()}
    cpu["client"] = ((me1.user - me0.user) * 1000 / total, (me1.system - me0.system) * 1000 / total)
    if threads0:
        cpu["leader threads"] = _leader_threads(threads0, thread_stats(leader.proc.pid), total, tick_ms)
    return elapsed, lat, cpu


def _leader_threads(before: dict, after: dict, total: int, tick_ms: float) -> dict[str, float]:
    """Where the leader's CPU went between two :func:`thread_stats` readings, per request.

    ``{"rest ms": CPU of the REST server's threads (the Python threads that run the WSGI calls, which
    name themselves ``rest``, and granian's Rust threads, ``tokio-rt-worker``), "rest python ms": the
    Python ones' part of it, "raft ms": the Raft
    thread's (named ``raft``), "other ms": every other thread's, "switches": context switches of all
    threads}``. Before the threads named themselves (commit e40b0f3 and earlier), the first Python
    thread granian started kept the main thread's name and was counted with the others.
    """
    from raftnode import RaftNode
    from webapp.connect.restserver import REST_THREAD_NAME

    ms = {"rest ms": 0, "rest python ms": 0, "raft ms": 0, "other ms": 0}
    switches = 0
    for tid, (name, ticks, sw) in after.items():
        _, ticks0, sw0 = before.get(tid, (name, 0, 0))
        switches += sw - sw0
        if name == REST_THREAD_NAME or name.startswith("tokio-rt-worker"):
            ms["rest ms"] += ticks - ticks0
            if name == REST_THREAD_NAME:
                ms["rest python ms"] += ticks - ticks0
        elif name == RaftNode.RAFT_THREAD_NAME:
            ms["raft ms"] += ticks - ticks0
        else:
            ms["other ms"] += ticks - ticks0
    return {**{k: v * tick_ms / total for k, v in ms.items()}, "switches": switches / total}


def _metric_families(leader) -> dict:
    """The leader's ``/metrics`` as ``{family name: prometheus_client Metric}`` (one authenticated GET)."""
    import urllib3
    from prometheus_client.parser import text_string_to_metric_families

    headers = urllib3.make_headers(basic_auth=":".join(leader.auth)) if leader.auth else {}
    resp = urllib3.request("GET", f"{leader.url}/metrics", headers=headers, timeout=30, retries=False)
    return {f.name: f for f in text_string_to_metric_families(resp.data.decode())}


def raft_rounds(leader) -> tuple[float, float, float] | None:
    """The leader's group-commit counters from its ``/metrics``: ``(entries proposed, commands they carried,
    seconds from proposal to apply, summed)``; ``None`` when it exports no seconds (before commit a927dcc)."""
    names = ("raftconnect_raft_proposals", "raftconnect_raft_proposed_commands", "raftconnect_raft_proposal_seconds")
    found = {n: f.samples[0].value for n, f in _metric_families(leader).items() if n in names and f.samples}
    return tuple(found[n] for n in names) if all(n in found for n in names) else None


def _rest_writes(leader, concurrency: int, total: int, path: str, members=(), via=None
                 ) -> tuple[float, list[float], dict]:
    """:func:`_rest_load` of ``total`` ``PUT /connectors/bench-<i % 200>/config`` (file source on ``path``),
    sent to ``via`` (a follower, which forwards them) or to the leader."""
    def put(i: int) -> tuple[str, str, dict]:
        return "PUT", f"/connectors/bench-{i % 200}/config", bench_config(i, path)

    return _rest_load(leader, concurrency, total, put, members, via)


def bench_config(i: int, path: str) -> dict[str, str]:
    """The ``i``-th write's connector config: a file source on ``path``, CSV, topic ``t<i % 50>``, one task."""
    return {"connector.class": SOURCE, "path": path, "format": "csv", "topic": f"t{i % 50}", "tasks.max": "1"}


@contextmanager
def warmed_cluster(kafka, work: Path, env: dict[str, str] | None = None, members: int = 3):
    """A fresh Raft-only cluster of ``members`` members (``tools.launcher.LocalCluster``) under ``work``,
    ready for :func:`_rest_writes`: yields ``(cluster, leader, csv)``, stopped after.

    ``env`` is set in this process while the members start (they inherit it), then restored. Before
    it yields, 400 writes from 4 clients create the 200 connectors the writes use (file sources on
    ``csv``, ``work / "w.csv"``) and warm connections and caches.
    """
    from tools.launcher import LocalCluster

    csv = work / "w.csv"
    csv.write_text("a\n1\n")
    with mock.patch.dict(os.environ, env or {}):
        cluster = LocalCluster(data_dir=tempfile.mkdtemp(dir=work), bootstrap_servers=kafka.bootstrap_servers,
                               raft_roles="raft", raft_nodes=members, file_allowed_paths=[str(work)]).start()
    try:
        leader = cluster.leader()
        _rest_writes(leader, 4, 400, str(csv))
        yield cluster, leader, csv
    finally:
        cluster.stop()


def fast_path_served(leader) -> float | None:
    """Requests the leader's REST fast path answered (``raftconnect_rest_fast_path_requests_total`` of its
    ``/metrics``); ``None`` when it exports no such counter (before commit 'REST fast path')."""
    family = _metric_families(leader).get("raftconnect_rest_fast_path_requests")
    return None if family is None else sum(s.value for s in family.samples if s.name.endswith("_total"))


def _cpu_text(cpu: dict) -> str:
    split = cpu.pop("leader threads", None)
    text = "; ".join(f"{who} {u + s_:.2f} ({u:.2f} user + {s_:.2f} sys)" for who, (u, s_) in cpu.items())
    if split:
        text += (f"; of the leader's: REST threads {split['rest ms']:.2f} (Python {split['rest python ms']:.2f}), "
                 f"Raft thread {split['raft ms']:.2f}, "
                 f"other threads {split['other ms']:.2f}; leader context switches per write {split['switches']:.1f}")
    return text


def _writes_result(total: int, run: tuple) -> str:
    """``N writes/s, p50, p99; CPU ms per write: ...`` of one :func:`_rest_writes` run of ``total`` writes."""
    elapsed, lat, cpu = run
    return (f"{total / elapsed:,.0f} writes/s, p50 {pct(lat, 50) * 1000:.1f} ms, p99 {pct(lat, 99) * 1000:.1f} ms; "
            f"CPU ms per write: {_cpu_text(cpu)}")


def _best(runs: dict[str, list]) -> dict[str, tuple]:
    """Each side's fastest round (the shortest elapsed time)."""
    return {side: min(rs, key=lambda x: x[0]) for side, rs in runs.items()}


def bench_writes(kafka, work: Path, repeat: int = 1) -> list[str]:
    """REST config writes against raw pysyncobj, 1 and 32 clients; each side best of ``repeat`` (highest writes/s).

    Three sides, measured back to back in each round: the REST API as a node serves it (its fast path
    on, ``webapp.connect.api.fastpath``), the same on a second cluster whose members run every request
    through Django's full path (``RAFTCONNECT_REST_FAST_PATH=0``), and raw pysyncobj. The machine is
    shared (2 cores, other people's tests): every round of each side is printed, and the row gives
    the best of each with the ratio of the bests and the ratios of each round.
    """
    from tools.launcher import LocalCluster

    from webapp.connect.api.fastpath import ENV as FAST_PATH_ENV

    csv = work / "w.csv"
    csv.write_text("a\n1\n")
    rows = []
    clusters = {}
    try:
        # raft-only members: the metadata path is measured without agents running the connectors
        for side, flag in (("REST", "1"), ("REST, full path", "0")):
            with mock.patch.dict(os.environ, {FAST_PATH_ENV: flag}):
                clusters[side] = LocalCluster(data_dir=str(work / f"writes-{flag}"),
                                              bootstrap_servers=kafka.bootstrap_servers, raft_roles="raft",
                                              file_allowed_paths=[str(work)]).start()
        leaders = {side: c.leader() for side, c in clusters.items()}
        for leader in leaders.values():
            _rest_writes(leader, 1, 20, str(csv))  # warm: connections, caches
        for conc, total in ((1, 300), (32, 2000)):
            runs: dict[str, list] = {side: [] for side in (*clusters, "raw")}
            served0 = fast_path_served(leaders["REST"])
            for r in range(repeat):
                for side, cluster in clusters.items():
                    runs[side].append(_rest_writes(leaders[side], conc, total, str(csv), cluster.nodes))
                runs["raw"].append(_raw_pysyncobj_writes(conc, total) + ({},))
                print(f"  {conc} client(s), round {r + 1}/{repeat}: " + "; ".join(
                    f"{side} {total / runs[side][-1][0]:,.0f}/s p50 {pct(runs[side][-1][1], 50) * 1000:.1f} ms"
                    for side in runs), flush=True)
            served = fast_path_served(leaders["REST"])
            fast_share = (f"; fast path answered {(served - served0) / (total * repeat):.0%} of them"
                          if served is not None and served0 is not None else "")
            best = _best(runs)
            b_el, b_lat, _ = best["raw"]
            for side in clusters:
                r_el = best[side][0]
                rounds = ", ".join(f"{b[0] / r[0]:.2f}" for r, b in zip(runs[side], runs["raw"]))
                rows.append(
                    f"| connector config writes via {side}, {conc} client(s), best of {repeat} | "
                    f"{_writes_result(total, best[side])}{fast_share if side == 'REST' else ''} | raw pysyncobj "
                    f"{total / b_el:,.0f} writes/s, p50 {pct(b_lat, 50) * 1000:.1f} ms, p99 {pct(b_lat, 99) * 1000:.1f} ms; "
                    f"ratio {(total / r_el) / (total / b_el):.2f} (per round: {rounds}) |")
                print(rows[-1], flush=True)
        rows += _forwarded_writes(clusters, leaders, str(csv), repeat)
    finally:
        for cluster in clusters.values():
            cluster.stop()
    return rows


def _forwarded_writes(clusters: dict, leaders: dict, path: str, repeat: int, conc: int = 32,
                      total: int = 2000) -> list[str]:
    """Rows of ``conc`` clients writing configs through a follower, which forwards each write to the leader
    (behind a load balancer, two writes in three arrive at a follower): on the cluster whose leader answers
    forwarded writes on its fast path and on the one where every request takes the full path (as every
    forwarded write did before the fast path took them). Best of ``repeat`` rounds each."""
    runs: dict[str, list] = {side: [] for side in clusters}
    for r in range(repeat):
        for side, cluster in clusters.items():
            follower = next(n for n in cluster.nodes if n is not leaders[side] and n.proc is not None)
            runs[side].append(_rest_writes(leaders[side], conc, total, path, cluster.nodes, via=follower))
        print(f"  {conc} clients through a follower, round {r + 1}/{repeat}: " + "; ".join(
            f"{side} {total / runs[side][-1][0]:,.0f}/s" for side in runs), flush=True)
    best = _best(runs)
    full = best["REST, full path"][0]
    rows = []
    for side in clusters:
        r_el = best[side][0]
        rounds = ", ".join(f"{f[0] / r[0]:.2f}" for r, f in zip(runs[side], runs["REST, full path"]))
        baseline = ("" if side == "REST, full path" else
                    f"full path (every forwarded write through Django and DRF on the leader too) "
                    f"{total / full:,.0f} writes/s; ratio {full / r_el:.2f} (per round: {rounds})")
        rows.append(f"| connector config writes via {side}, {conc} clients through a follower (forwarded), best of "
                    f"{repeat} | {_writes_result(total, best[side])} | {baseline} |")
        print(rows[-1], flush=True)
    return rows


# ------------------------------------------------------------------ leader failover
def bench_leader_failover(kafka, work: Path, trials: int) -> list[str]:
    from tools.launcher import LocalCluster, wait_for

    csv = work / "f.csv"
    csv.write_text("a\n1\n")
    write_times, election_times = [], []
    for trial in range(trials):
        cluster = LocalCluster(data_dir=str(work / f"failover-{trial}"), bootstrap_servers=kafka.bootstrap_servers,
                               file_allowed_paths=[str(work)]).start()
        try:
            leader = cluster.leader()
            survivors = [n for n in cluster.nodes if n is not leader]
            cfg = {"connector.class": SOURCE, "path": str(csv), "format": "csv", "topic": "t", "tasks.max": "1"}
            leader.client().request("PUT", "/connectors/warm/config", json=cfg)
            leader.kill()
            t0 = time.perf_counter()
            done = threading.Event()

            def elected():
                wait_for(lambda: any(s.client().request("GET", "/raftconnect/v1/raft")["state"] == "LEADER"
                                     for s in survivors), 30, interval=0.01, what="election")
                election_times.append(time.perf_counter() - t0)
                done.set()

            th = threading.Thread(target=elected)
            th.start()
            survivors[0].client().request("PUT", "/connectors/after/config", json=cfg)
            write_times.append(time.perf_counter() - t0)
            th.join()
            print(f"  trial {trial + 1}: write ok after {write_times[-1]:.2f} s (election {election_times[-1]:.2f} s)",
                  flush=True)
        finally:
            cluster.stop()
    return [f"| leader kill -9 -> REST write on a survivor succeeds ({trials} trials) | p50 {pct(write_times, 50):.2f} s, "
            f"p99 {pct(write_times, 99):.2f} s, max {max(write_times):.2f} s | election alone p50 {pct(election_times, 50):.2f} s, "
            f"p99 {pct(election_times, 99):.2f} s; goal p99 <= 3 s |"]


# --------------------------------------------------------------- isolated leader
def bench_isolated_leader(kafka, work: Path, trials: int) -> list[str]:
    import signal

    from tools.launcher import LocalCluster, wait_for

    times: list[float] = []
    for trial in range(trials):
        cluster = LocalCluster(data_dir=str(work / f"isolated-{trial}"), bootstrap_servers=kafka.bootstrap_servers,
                               raft_roles="raft").start()
        try:
            leader = cluster.leader()
            others = [n for n in cluster.nodes if n is not leader]
            for n in others:
                n.signal(signal.SIGSTOP)
            t0 = time.perf_counter()
            try:
                wait_for(lambda: leader.client().request("GET", "/raftconnect/v1/raft")["state"] != "LEADER", 30,
                         interval=0.02, what="step down")
                times.append(time.perf_counter() - t0)
            finally:
                for n in others:
                    n.signal(signal.SIGCONT)
            print(f"  trial {trial + 1}: isolated leader stepped down after {times[-1]:.2f} s", flush=True)
        finally:
            cluster.stop()
    return [f"| isolated leader (both followers SIGSTOPped) steps down ({trials} trials) | p50 {pct(times, 50):.2f} s, "
            f"max {max(times):.2f} s | goal <= 3 s; pysyncobj default leaderFallbackTimeout 30 s |"]


# -------------------------------------------------------------------- task failover
def bench_task_failover(kafka, work: Path, trials: int) -> list[str]:
    from tools.launcher import LocalCluster, wait_for

    csv = work / "t.csv"
    csv.write_text("id\n" + "".join(f"{i}\n" for i in range(100)))
    times = []
    for trial in range(trials):
        cluster = LocalCluster(data_dir=str(work / f"taskfail-{trial}"), bootstrap_servers=kafka.bootstrap_servers,
                               raft_nodes=2, worker_nodes=1, file_allowed_paths=[str(work)]).start()
        try:
            c = cluster.leader().client()
            worker = cluster.nodes[-1]
            for i in range(3):
                c.request("PUT", f"/connectors/s{i}/config",
                          json={"connector.class": SOURCE, "path": str(csv), "format": "csv", "topic": f"tf{i}",
                                "tasks.max": "1"})

            def on_worker():
                view = c.request("GET", "/raftconnect/v1/cluster")
                node = next(n for n in view["nodes"] if n["id"] == worker.node_id)
                return node["tasks"] and all(
                    t["state"] == "RUNNING" for s in ("s0", "s1", "s2") for t in c.status(s)["tasks"]) and node["tasks"]

            moved = wait_for(on_worker, 120, what="a RUNNING task on the worker-only node")
            worker.kill()
            t0 = time.perf_counter()

            def running_elsewhere():
                for key in moved:
                    name, _, num = key.rpartition("-")
                    t = c.status(name)["tasks"][int(num)]
                    if t["state"] != "RUNNING" or t["worker_id"] == worker.url.split("//")[1]:
                        return False
                return True

            wait_for(running_elsewhere, 60, interval=0.05, what="tasks RUNNING elsewhere")
            times.append(time.perf_counter() - t0)
            print(f"  trial {trial + 1}: tasks RUNNING elsewhere after {times[-1]:.2f} s", flush=True)
        finally:
            cluster.stop()
    return [f"| worker kill -9 -> its tasks RUNNING elsewhere ({trials} trials) | p50 {pct(times, 50):.2f} s, "
            f"max {max(times):.2f} s | goal <= session timeout 5 s + 2 s; Kafka Connect default waits up to "
            f"scheduled.rebalance.max.delay.ms = 300 s |"]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--trials", type=int, default=20)
    parser.add_argument("--task-trials", type=int, default=5)
    parser.add_argument("--repeat", type=int, default=3, help="rounds of the writes benchmark; best of each side")
    parser.add_argument("--only", nargs="*", choices=["assignor", "writes", "leader", "isolated", "task"])
    args = parser.parse_args()
    import django

    django.setup()
    from webapp.kafka.embedded import EmbeddedKafka

    only = set(args.only or ["assignor", "writes", "leader", "isolated", "task"])
    rows: list[str] = []
    if "assignor" in only:
        rows += bench_assignor()
        print("\n".join(rows), flush=True)
    work = Path(tempfile.mkdtemp(prefix="bench-cluster-"))
    with EmbeddedKafka(log_dir=work / "kafka") as kafka:
        if "writes" in only:
            rows += bench_writes(kafka, work, args.repeat)
        if "leader" in only:
            rows += bench_leader_failover(kafka, work, args.trials)
            print(rows[-1], flush=True)
        if "isolated" in only:
            rows += bench_isolated_leader(kafka, work, args.task_trials)
            print(rows[-1], flush=True)
        if "task" in only:
            rows += bench_task_failover(kafka, work, args.task_trials)
            print(rows[-1], flush=True)
    out = Path(__file__).with_name("RESULTS.md")
    if not out.exists():
        out.write_text("# Cluster benchmark results\n\n`python benchmarks/cluster/run.py` (see its docstring for "
                       "what each row measures and its baseline).\n")
    with out.open("a") as fh:
        fh.write(f"\n## {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC — {machine()}\n\n| what | result | baseline / goal |\n|---|---|---|\n")
        fh.write("\n".join(rows) + "\n")
    print(f"recorded in {out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
