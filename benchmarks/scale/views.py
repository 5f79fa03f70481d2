#!/usr/bin/env python
"""In-process: the coordinator building every worker's view at 10,000 connectors × 10 tasks, before and after.

The full scale run (``run.py``, 10,000 connectors over 100 workers) found the leader spending half
its time in ``GroupCoordinator._cached_view``: every create and task-config write poked the
coordinator, which rebuilt every worker's view from the store, and so did every new generation.
This measures that work alone, in one process, on two source trees in the same run (each in
its own child process, alternately, as ``expand.py`` does): BASELINE (a git revision, default
the commit before per-connector fragments) and this checkout.

Each child fills a ``ClusterStateMachine`` with CONNECTORS file source connectors of 10 config
keys and TASKS task configs each, an assignment over WORKERS workers (``expand.py``'s content),
and runs a ``GroupCoordinator`` on it as the active coordinator (no Raft thread, no REST). Then,
ROUNDS times each, the process CPU time (and wall time) to have every worker's view ready
(``_cached_view`` of each worker, as the heartbeats and the dispatch ask for them):

* **cold** — no view cached (a new coordinator);
* **new generation** — the assignment committed again with the next generation, nothing moved
  (what every rebalance does to every worker, e.g. while connectors are being created);
* **one connector changed** — one connector's task configs written and the coordinator poked
  for it, as the Herder and the task-config endpoint do;
* **one connector created** — a new connector's config and task configs written and the
  coordinator poked for it, before any rebalance assigns it: no view names it (what every
  heartbeat between two generations met while connectors were being created);
* **one connector placed** — the rebalance after that create: a new generation that places the
  connector and its TASKS tasks on 1 + TASKS workers and moves nothing else;
* **50 connectors placed** — 50 connectors created (each poked), then one generation that places
  their instances round-robin over all workers: a few on each, as every generation did while the
  full run's 10,000 connectors were created and their 100,000 tasks placed;
* **rebalance after 5 creates** — not the views: the CPU of ``GroupCoordinator.rebalance`` itself
  (the assignor and the commit, applied at once; no dispatch) after 5 connectors were created,
  the coordinator having made the generation before (as its loop does while connectors are being
  created).

Each phase of each round also checks that the two trees' views hold the same tasks. Usage: ``python
benchmarks/scale/views.py [--connectors 10000] [--tasks 10] [--workers 100] [--rounds 3]
[--passes 2] [--baseline REV] [--no-record]``; results are appended to ``RESULTS.md`` beside
this file with the machine and its load average.
"""
from __future__ import annotations

import argparse
import hashlib
import inspect
import json
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: the last commit before per-connector view fragments and named pokes
DEFAULT_BASELINE = "d4fb0ad"
#: connectors created together before the "many placed" phase's generation places them all
MANY = 50
#: connectors created before the measured rebalance
FEW = 5
REBALANCE = f"rebalance after {FEW} creates"
PHASES = ("cold", "new generation", "one connector changed", "one connector created", "one connector placed",
          f"{MANY} connectors placed", REBALANCE)


def child(args: argparse.Namespace) -> None:
    """Measure the tree ``args.tree`` (this process imports its code only); print one JSON line."""
    sys.path.insert(0, str(ROOT))
    from benchmarks._trees import enter

    enter(args.tree)
    from raftnode.state import ClusterStateMachine
    from webapp.coordinator.coordinator import GroupCoordinator
    from webapp.storage.raft import RaftMetadataStore

    sys.path.insert(0, str(ROOT / "benchmarks" / "scale"))
    from expand import fill_state

    state = ClusterStateMachine()
    fill_state(state, args.connectors, args.tasks, args.workers)

    class Commands:  # the coordinator's assignment commits, applied at once
        def set_assignment(self, *, epoch, generation, connectors, tasks, base_generation=None, timeout=None):
            out = state._set_assignment(epoch, generation, connectors, tasks, base_generation, _doApply=True)
            if isinstance(out, dict) and "rejected" in out:
                raise RuntimeError(f"set_assignment: {out}")

    class Replica:  # what the coordinator and RaftMetadataStore read of a member: a leader's applied state
        is_leader = True

    replica = Replica()
    replica.state = state
    replica.commands = Commands()
    store = RaftMetadataStore(replica)
    workers = sorted({o for o in state.assignment["tasks"].values()})
    names = sorted(state.connectors)
    named_poke = "name" in inspect.signature(GroupCoordinator.poke).parameters
    # a tree from before incremental assignments commits the whole assignment (the same state)
    incremental = "base_generation" in inspect.signature(ClusterStateMachine._set_assignment).parameters

    def new_coordinator() -> GroupCoordinator:
        c = GroupCoordinator(raft=replica, store=store, node_id="bench")
        c.epoch = state.assignment["epoch"]
        return c

    def all_views(c: GroupCoordinator) -> tuple[float, float, str]:
        w0, c0 = time.perf_counter(), time.process_time()
        views = [c._cached_view(w)[0] for w in workers]
        w1, c1 = time.perf_counter(), time.process_time()
        tasks = sorted(k for v in views for k in v["tasks"])
        return w1 - w0, c1 - c0, hashlib.sha256(json.dumps(tasks).encode()).hexdigest()

    out: dict[str, Any] = {phase: [] for phase in PHASES}
    checks: list[str] = []  # the views' tasks after each phase of each round, in order

    def measure(c: GroupCoordinator, phase: str) -> None:
        wall, cpu, check = all_views(c)
        out[phase].append({"wall": wall, "cpu": cpu})
        checks.append(check)

    def poke(c: GroupCoordinator, name: str) -> None:
        if named_poke:
            c.poke(name)
        else:
            c.poke()

    def create(c: GroupCoordinator, name: str) -> None:
        """A connector's config and TASKS task configs written, and the coordinator poked for it."""
        state._put_connector_config(name, {"connector.class": "X", "tasks.max": str(args.tasks)}, None, False,
                                    _doApply=True)
        state._put_task_configs(name, None, 0, [{"task.id": str(t)} for t in range(args.tasks)], _doApply=True)
        poke(c, name)

    def place(connectors: dict[str, str], tasks: dict[str, str]) -> None:
        """A new generation that places ``connectors`` and ``tasks`` ({key: worker}) and moves nothing else."""
        a = state.assignment
        if incremental:
            state._set_assignment(a["epoch"], a["generation"] + 1, connectors, tasks, a["generation"], _doApply=True)
        else:
            state._set_assignment(a["epoch"], a["generation"] + 1, {**a["connectors"], **connectors},
                                  {**a["tasks"], **tasks}, _doApply=True)

    for r in range(args.rounds):
        c = new_coordinator()
        measure(c, "cold")
        a = state.assignment
        state._set_assignment(a["epoch"], a["generation"] + 1, dict(a["connectors"]), dict(a["tasks"]), _doApply=True)
        measure(c, "new generation")
        name = names[(r * 7919) % len(names)]
        rec = state.connectors[name]
        state._put_task_configs(name, None, 0, [dict(t, round=str(r)) for t in rec["tasks"]], _doApply=True)
        poke(c, name)
        measure(c, "one connector changed")
        created = f"created-{r}"
        create(c, created)
        measure(c, "one connector created")
        # the rebalance after it: its instances on 1 + TASKS workers, a new generation
        spots = [workers[(r * 13 + i) % len(workers)] for i in range(args.tasks + 1)]
        place({created: spots[0]}, {f"{created}-{t}": spots[t + 1] for t in range(args.tasks)})
        measure(c, "one connector placed")
        batch = [f"batch-{r}-{i}" for i in range(MANY)]
        for made in batch:
            create(c, made)
        keys = [k for made in batch for k in [made] + [f"{made}-{t}" for t in range(args.tasks)]]
        spots = {k: workers[(r * 17 + i) % len(workers)] for i, k in enumerate(keys)}
        batched = set(batch)
        place({k: spots[k] for k in batch}, {k: w for k, w in spots.items() if k not in batched})
        measure(c, f"{MANY} connectors placed")
        c.last_seen = {w: float("inf") for w in workers}  # every worker live for the whole round
        c.dispatch = lambda force=False: None
        c.rebalance()  # the generation before is the coordinator's own
        for i in range(FEW):
            create(c, f"few-{r}-{i}")
        w0, c0 = time.perf_counter(), time.process_time()
        if not c.rebalance():
            raise RuntimeError("the rebalance after the creates committed nothing")
        out[REBALANCE].append({"wall": time.perf_counter() - w0, "cpu": time.process_time() - c0})
        checks.append(all_views(c)[2])
    out["tasks_sha256"] = checks
    print(json.dumps(out))


def child_args(args: argparse.Namespace) -> list[str]:
    """The options a child of :func:`child` is run with."""
    return ["--connectors", str(args.connectors), "--tasks", str(args.tasks), "--workers", str(args.workers),
            "--rounds", str(args.rounds)]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sys.path.insert(0, str(ROOT))
    from benchmarks._trees import add_arguments

    add_arguments(parser, DEFAULT_BASELINE)
    parser.add_argument("--rounds", type=int, default=3, help="rounds of the three phases in each child")
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0

    sys.path.insert(0, str(ROOT))
    from benchmarks._common import machine

    from benchmarks._trees import alternate, extract

    baseline_tree, rev, head = extract(args.baseline, "bench-views-")
    load_start = os.getloadavg()[0]
    results = alternate(__file__, str(baseline_tree), child_args(args), args.passes)
    load_end = os.getloadavg()[0]

    def figures(label: str, phase: str, key: str) -> tuple[float, float]:
        values = [r[key] for res in results[label] for r in res[phase]]
        return min(values) * 1000, statistics.median(values) * 1000

    same = {tuple(res["tasks_sha256"]) for res in results["before"] + results["after"]}
    n = args.passes * args.rounds
    lines = [f"## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {machine()} — every worker's view, in process", "",
             f"Command: `python benchmarks/scale/views.py --connectors {args.connectors} --tasks {args.tasks} "
             f"--workers {args.workers} --rounds {args.rounds} --passes {args.passes}` — {args.connectors:,} connectors, "
             f"{args.connectors * args.tasks:,} tasks, {args.workers} workers; before = {rev}, after = {head}. "
             f"Process CPU time to have all {args.workers} views ready, best of {n} rounds per figure "
             f"({args.passes} alternating child processes per tree × {args.rounds} rounds), median beside it, "
             f"median wall time in brackets; load average (1 min) {load_start:.2f} at start, "
             f"{load_end:.2f} at end. Views of both trees held the same tasks in every round: "
             f"{'yes' if len(same) == 1 else 'NO'}.", "",
             "| all views ready after (last row: the rebalance alone) | before: CPU best (median) [wall median] | after: CPU best (median) [wall median] | ratio (best CPU) |",
             "|---|---|---|---|"]
    for phase in PHASES:
        b_best, b_med = figures("before", phase, "cpu")
        a_best, a_med = figures("after", phase, "cpu")
        _, b_wall = figures("before", phase, "wall")
        _, a_wall = figures("after", phase, "wall")
        lines.append(f"| {phase} | {b_best:,.0f} ms ({b_med:,.0f}) [{b_wall:,.0f}] | {a_best:,.0f} ms ({a_med:,.0f}) "
                     f"[{a_wall:,.0f}] | **{b_best / max(a_best, 1e-3):.1f}×** |")
    text = "\n".join(lines) + "\n"
    print(text)
    if not args.no_record:
        with (Path(__file__).with_name("RESULTS.md")).open("a") as fh:
            fh.write("\n" + text)
        print(f"recorded in {Path(__file__).with_name('RESULTS.md')}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
