#!/usr/bin/env python
"""What the offset group commit itself costs per commit: its handoffs between threads, with no database.

``run.py``'s one-commit-per-call row has 32 threads each waiting for its own commit, so its rate is
32 over one commit's latency, and a commit's latency holds more than the database's statement: the
queue, the flush's Python, and the handoffs between threads (a waiting caller is woken by the flush
that wrote its commit, and must then get the GIL back). This measures those handoffs alone, on this
machine, with :class:`~webapp.storage.relational.group_commit.OffsetGroupCommit` as the store uses
it and a simulated store in place of the database:

* the store's flush: ``--flush-us`` µs of Python CPU (rows, JSON, the driver) plus ``--row-us`` per
  commit in the batch, then ``--statement-ms`` of waiting with the GIL released (the server's
  statement and its round trip, as a blocking socket read is);
* each of ``--threads`` callers (default 32): ``--caller-us`` µs of Python CPU before each commit (the
  router, the fence check, building the offsets), then one ``submit``, for ``--seconds``.

Simulated CPU is spent in a loop reading ``time.thread_time()``, so it is real CPU under the GIL, and
is counted. Per side: commits/s, latency p50, commits per flush, this process's CPU per commit and
how much of it is not the simulated work (**overhead**: the group commit's own Python, the locks'
wake-ups, the GIL's hand-overs, the kernel's thread switches). Sides: the callers as given, and one
caller (the same work without contention). Also: what one ``threading.Lock.release()`` costs the
thread that calls it (holding the GIL) when another thread sleeps on the lock, averaged over 10
waiters at a time: the wake-up a flush pays for every commit it wrote.

Usage: ``python benchmarks/stores/group_commit.py [--threads 32] [--seconds 6] [--rounds 2]
[--max-flushes 2] [--no-record]``. Results go to ``RESULTS_GROUP_COMMIT.md`` beside this file.
"""
from __future__ import annotations

import argparse
import sys
import threading
import time
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))

from benchmarks._common import machine, quantile, record, short_commit  # noqa: E402
from webapp.storage.relational.group_commit import OffsetGroupCommit  # noqa: E402

#: the GIL switch interval of a process that hosts a Raft member (runnode's RAFT_SWITCH_INTERVAL_S)
SWITCH_INTERVAL_S = 0.001


class _Work:
    """Busy CPU under the GIL, counted per thread (``spent`` is summed once the threads are done)."""

    def __init__(self) -> None:
        self.local = threading.local()
        self.totals: list[float] = []
        self.lock = threading.Lock()

    def spend(self, us: float) -> None:
        t0 = time.thread_time()
        end = t0 + us / 1e6
        while time.thread_time() < end:
            pass
        self.local.spent = getattr(self.local, "spent", 0.0) + time.thread_time() - t0

    def close_thread(self) -> None:
        with self.lock:
            self.totals.append(getattr(self.local, "spent", 0.0))
        self.local.spent = 0.0


class SimulatedStore:
    """The part of a relational store a group commit calls (``upsert``, ``_commit_offsets_of``), with no database."""

    upsert = True

    def __init__(self, work: _Work, flush_us: float, row_us: float, statement_ms: float) -> None:
        self.work, self.flush_us, self.row_us, self.statement_s = work, flush_us, row_us, statement_ms / 1000
        self.flushes = 0
        self.commits = 0

    def _commit_offsets_of(self, entries_by_connector: dict[str, list]) -> None:
        n = sum(len(e) for e in entries_by_connector.values())
        with self.work.lock:  # up to max_flushes flushes run at once
            self.flushes += 1
            self.commits += n
        self.work.spend(self.flush_us + self.row_us * n)
        time.sleep(self.statement_s)  # the GIL is released, as in a blocking socket read


def one_side(args, threads: int) -> dict:
    """``threads`` callers for ``args.seconds``; the side's figures."""
    work = _Work()
    store = SimulatedStore(work, args.flush_us, args.row_us, args.statement_ms)
    group = OffsetGroupCommit(store, max_flushes=args.max_flushes)
    lat: list[list[float]] = [[] for _ in range(threads)]
    start = threading.Barrier(threads + 1)
    stop_at = [0.0]

    def caller(i: int) -> None:
        start.wait()
        n = 0
        mine = lat[i]
        while time.monotonic() < stop_at[0]:
            work.spend(args.caller_us)
            t0 = time.perf_counter()
            group.submit(f"connector-{i}", [({"partition": 0}, {"position": n}, 1, n)])
            mine.append(time.perf_counter() - t0)
            n += 1
        work.close_thread()

    ts = [threading.Thread(target=caller, args=(i,), name=f"caller-{i}") for i in range(threads)]
    for t in ts:
        t.start()
    cpu0 = time.process_time()
    t0 = time.monotonic()
    stop_at[0] = t0 + args.seconds
    start.wait()
    for t in ts:
        t.join()
    elapsed = time.monotonic() - t0
    cpu = time.process_time() - cpu0
    commits = sum(len(x) for x in lat)
    all_lat = [x for xs in lat for x in xs]
    spent = sum(work.totals)
    return {"threads": threads, "rate": commits / elapsed, "p50_ms": quantile(all_lat, 0.5) * 1000,
            "per_flush": store.commits / max(store.flushes, 1), "cpu_us": cpu / commits * 1e6,
            "work_us": spent / commits * 1e6, "overhead_us": (cpu - spent) / commits * 1e6}


def release_cost_us(waiters: int = 10, rounds: int = 200) -> float:
    """Mean µs of one ``Lock.release()`` in the releasing thread when a thread sleeps on that lock."""
    total = 0.0
    for _ in range(rounds):
        locks = [threading.Lock() for _ in range(waiters)]
        for lock in locks:
            lock.acquire()
        asleep = threading.Barrier(waiters + 1)

        def wait(lock: threading.Lock, asleep: threading.Barrier = asleep) -> None:
            asleep.wait()
            lock.acquire()

        ts = [threading.Thread(target=wait, args=(lock,)) for lock in locks]
        for t in ts:
            t.start()
        asleep.wait()
        time.sleep(0.002)  # each waiter is now asleep in its acquire
        t0 = time.perf_counter()
        for lock in locks:
            lock.release()
        total += time.perf_counter() - t0
        for t in ts:
            t.join()
    return total / rounds / waiters * 1e6


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=32)
    parser.add_argument("--seconds", type=float, default=6.0, help="per side and round")
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--max-flushes", type=int, default=2, help="as the MySQL/MariaDB store (PostgreSQL: 4)")
    parser.add_argument("--caller-us", type=float, default=25.0, help="each caller's Python CPU per commit")
    parser.add_argument("--flush-us", type=float, default=50.0, help="a flush's Python CPU besides its rows")
    parser.add_argument("--row-us", type=float, default=3.0, help="a flush's Python CPU per commit it writes")
    parser.add_argument("--statement-ms", type=float, default=1.2, help="the statement's time, GIL released")
    parser.add_argument("--no-record", action="store_true")
    args = parser.parse_args()
    sys.setswitchinterval(SWITCH_INTERVAL_S)

    started = datetime.now(timezone.utc)
    sides: dict[int, list[dict]] = {args.threads: [], 1: []}
    for r in range(args.rounds):
        for threads, results in sides.items():
            res = one_side(args, threads)
            results.append(res)
            print(f"round {r + 1}/{args.rounds}, {threads} caller(s): {res['rate']:,.0f} commits/s, p50 "
                  f"{res['p50_ms']:.2f} ms, {res['per_flush']:.1f} commits per flush, CPU {res['cpu_us']:.0f} µs "
                  f"per commit of which simulated work {res['work_us']:.0f}, overhead {res['overhead_us']:.0f}",
                  flush=True)
    wake = release_cost_us()
    print(f"Lock.release() with a sleeping waiter: {wake:.1f} µs in the releasing thread")

    def cell(results: list[dict], key: str, fmt: str) -> str:
        return " / ".join(format(x[key], fmt) for x in results)

    lines = [f"\n## {started:%Y-%m-%d %H:%M} UTC — {machine()}\n",
             (f"Commit {short_commit(ROOT)}; `{' '.join(['python', 'benchmarks/stores/group_commit.py'] + sys.argv[1:])}`: "
              f"max {args.max_flushes} flushes at a time, caller {args.caller_us:g} µs, flush {args.flush_us:g} µs + "
              f"{args.row_us:g} µs per commit + {args.statement_ms:g} ms with the GIL released; switch interval "
              f"{SWITCH_INTERVAL_S * 1000:g} ms; {args.rounds} rounds of {args.seconds:g} s per side (one figure per "
              "round).\n"),
             "| callers | commits/s | p50 ms | commits per flush | CPU µs per commit | of it simulated work | overhead µs per commit |",
             "|---|---|---|---|---|---|---|"]
    for threads, results in sides.items():
        lines.append(f"| {threads} | {cell(results, 'rate', ',.0f')} | {cell(results, 'p50_ms', '.2f')} | "
                     f"{cell(results, 'per_flush', '.1f')} | {cell(results, 'cpu_us', '.0f')} | "
                     f"{cell(results, 'work_us', '.0f')} | {cell(results, 'overhead_us', '.0f')} |")
    lines.append(f"\n`Lock.release()` with a thread asleep on the lock: {wake:.1f} µs in the releasing thread.\n")
    text = "\n".join(lines)
    out = Path(__file__).with_name("RESULTS_GROUP_COMMIT.md")
    if not args.no_record and not out.exists():
        out.write_text("# Offset group commit: the handoffs' cost\n\n`python benchmarks/stores/group_commit.py` "
                       "(see its docstring for what each column measures).\n")
    record(__file__, text + "\n", keep=not args.no_record, results=out.name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
