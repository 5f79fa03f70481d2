#!/usr/bin/env python
"""In-process: ``GET /connectors?expand=status|info`` at 10,000 connectors × 10 tasks, before and after.

Issue 16 asks for p50 <= 300 ms of these two reads at 10,000 connectors; ``run.py`` measures them
over HTTP on a live cluster, which this 2-core machine cannot hold at that scale. This measures
what the leader does for them, in one process, without HTTP: the Herder's selector (the REST
view's call: ``Herder.connectors_listed``, which keeps encoded entries between lists, where the
tree has it; ``Herder.connectors_expanded`` otherwise) and the REST renderer (the first of DRF's
``DEFAULT_RENDERER_CLASSES``) turning its result into the response body.

The same measurement runs on two source trees in the same run, alternately, each in its own
child process: BASELINE (a git revision, default the commit before the bulk reads) and this
checkout. Each child puts its tree first on ``sys.path``, fills a metadata store with CONNECTORS
file source connectors of 10 config keys, TASKS task configs each, a RUNNING status per connector
and task (every 50th task FAILED with a trace, every 70th without a status) and an assignment
over WORKERS workers, then times one first list and ROUNDS more rounds of each expansion (wall clock and the process's
CPU time), CHURN connectors reporting a status for their task 0 before each round (a console
polling a live cluster; the first list, with nothing cached, is reported apart). Children run one at a time, BASELINE first, PASSES times each. Reported: the best and
the median of every round of every pass (best-of-N: the machine is shared, and the best round is
the one least disturbed by others), the ratio of the bests, and whether both trees rendered the
same bytes.

Stores (``--store``):

* ``raft`` (default): a ``ClusterStateMachine`` filled by applying its commands directly, read
  through ``RaftMetadataStore`` as a leader reads its replica.
* ``postgresql`` / ``mariadb``: a ``RelationalMetadataStore`` on the local server (``--url``; a
  database ``raftconnect_bench_<random>`` by default, dropped at the end), filled once with
  bulk inserts before the children run; the Raft assignment the Herder reads is filled as above.

Usage: ``python benchmarks/scale/expand.py [--connectors 10000] [--tasks 10] [--workers 100]
[--rounds 5] [--passes 2] [--store raft|postgresql|mariadb] [--baseline REV] [--no-record]``;
results are appended to ``RESULTS.md`` beside this file with the machine and its load average.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import statistics
import sys
import time
import uuid
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
#: the last commit before the store's bulk reads and the orjson renderer
DEFAULT_BASELINE = "d68665d"
SOURCE = "raftconnect.connectors.file.FileSourceConnector"
URLS = {"postgresql": "postgresql://postgres@127.0.0.1:5432/{db}", "mariadb": "mysql://root@127.0.0.1:3306/{db}"}


# ----------------------------------------------------------------------------- the cluster's content
def connector_config(i: int, name: str, tasks: int) -> dict[str, str]:
    """Connector ``i``'s config: 10 keys, as a file source's would have."""
    return {"connector.class": SOURCE, "tasks.max": str(tasks), "path": f"/data/in/{name}", "format": "csv",
            "topic": f"topic-{i % 500}", "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": "true", "errors.tolerance": "none", "batch.size": "50000"}


def cluster(connectors: int, tasks: int, workers: int):
    """Yield the commands of the whole cluster as ``(command, args)`` of ``ClusterStateMachine``."""
    names = [f"conn-{i:05d}" for i in range(connectors)]
    for w in range(workers):
        yield "_register_member", (f"w{w:03d}", {"roles": ["worker"], "rest_address": f"10.0.{w // 250}.{w % 250}:8083"})
    owner = {name: f"w{i % workers:03d}" for i, name in enumerate(names)}
    task_owner = {f"{n}-{t}": f"w{(i * tasks + t) % workers:03d}" for i, n in enumerate(names) for t in range(tasks)}
    for i, name in enumerate(names):
        config = connector_config(i, name, tasks)
        yield "_put_connector_config", (name, config, "STOPPED" if i % 97 == 0 else None, False)
        yield "_put_task_configs", (name, None, 0, [dict(config, **{"task.id": str(t)}) for t in range(tasks)])
    yield "_set_assignment", (0, 1, owner, task_owner)
    n = 0
    for name in names:
        yield "_put_status", (name, None, owner[name], 1, {"state": "RUNNING", "trace": None})
        for t in range(tasks):
            n += 1
            if n % 70 == 0:
                continue  # never reported: UNASSIGNED
            failed = n % 50 == 0
            yield "_put_status", (name, t, task_owner[f"{name}-{t}"], 1,
                                  {"state": "FAILED" if failed else "RUNNING",
                                   "trace": "org.apache.kafka.connect.errors.ConnectException: boom\n\tat x.y(Z.java:1)"
                                   if failed else None})


def fill_state(state, connectors: int, tasks: int, workers: int, *, metadata: bool = True) -> None:
    """Apply the cluster's commands to ``state`` (``metadata=False``: members and assignment only)."""
    for command, args in cluster(connectors, tasks, workers):
        if not metadata and command not in ("_register_member", "_set_assignment"):
            continue
        out = getattr(state, command)(*args, _doApply=True)
        if isinstance(out, dict) and "rejected" in out:
            raise RuntimeError(f"{command}: {out}")


def fill_relational(url: str, connectors: int, tasks: int, workers: int) -> None:
    """Create and fill the store at ``url`` with bulk inserts (this checkout's code)."""
    from raftnode.state import ClusterStateMachine
    from webapp.storage.models import CONNECTOR_TASK, Connector, Status
    from webapp.storage.relational import RelationalMetadataStore

    state = ClusterStateMachine()  # the same content as the raft store's, then copied row by row
    fill_state(state, connectors, tasks, workers)
    store = RelationalMetadataStore("bench", url)
    try:
        store.prepare()
        Connector.objects.using(store.alias).bulk_create(
            [Connector(name=n, config=r["config"], target_state=r["target_state"], task_configs=r["tasks"])
             for n, r in state.connectors.items()], batch_size=1000)
        rows = []
        for name, st in state.statuses.items():
            for task, s in [(CONNECTOR_TASK, st["connector"]), *((int(k), v) for k, v in st["tasks"].items())]:
                if s is not None:
                    rows.append(Status(connector=name, task=task, state=s["state"], trace=s.get("trace"),
                                       worker_id=s["worker_id"], generation=s["generation"]))
        Status.objects.using(store.alias).bulk_create(rows, batch_size=5000)
    finally:
        store.close()


# ----------------------------------------------------------------------------- one tree, one child
def child(args: argparse.Namespace) -> None:
    """Measure the tree ``args.tree`` (this process imports its code only); print one JSON line."""
    sys.path.insert(0, str(ROOT))
    from benchmarks._trees import enter

    enter(args.tree)
    from rest_framework.settings import api_settings

    from raftnode.state import ClusterStateMachine
    from webapp.connect.herder import Herder

    state = ClusterStateMachine()
    t0 = time.perf_counter()
    if args.store == "raft":
        from webapp.storage.raft import RaftMetadataStore

        class Replica:  # what RaftMetadataStore reads: the member's applied state
            pass

        replica = Replica()
        replica.state = state
        fill_state(state, args.connectors, args.tasks, args.workers)
        store = RaftMetadataStore(replica)
    else:
        from webapp.storage.relational import RelationalMetadataStore

        fill_state(state, args.connectors, args.tasks, args.workers, metadata=False)
        store = RelationalMetadataStore("bench", args.url)
    fill_s = time.perf_counter() - t0
    herder = Herder(store=store, members=lambda: state.members, assignment=lambda: state.assignment)
    renderer = api_settings.DEFAULT_RENDERER_CLASSES[0]()
    out: dict[str, Any] = {"renderer": f"{type(renderer).__module__}.{type(renderer).__name__}", "fill_s": fill_s}
    listed = getattr(herder, "connectors_listed", herder.connectors_expanded)  # the REST view's call
    names = sorted(state.connectors)
    churned = 0
    for expand in args.expand.split(","):
        rounds, cold = [], []
        for r in range(args.rounds + 1):
            if r:  # between two lists, CHURN connectors report a status (a console polling a live cluster)
                generation = state.assignment["generation"]
                for _ in range(args.churn):
                    name = names[churned % len(names)]
                    churned += 1
                    owner = state.assignment["tasks"].get(f"{name}-0")
                    state._put_status(name, 0, owner, generation, {"state": "RUNNING", "trace": None}, _doApply=True)
            w0, c0 = time.perf_counter(), time.process_time()
            data = listed([expand])
            w1, c1 = time.perf_counter(), time.process_time()
            body = renderer.render(data, "application/json", {})
            w2, c2 = time.perf_counter(), time.process_time()
            del data
            (rounds if r else cold).append({"select": w1 - w0, "render": w2 - w1, "total": w2 - w0,
                           "select_cpu": c1 - c0, "render_cpu": c2 - c1, "total_cpu": c2 - c0})
        out[expand] = {"rounds": rounds, "cold": cold, "bytes": len(body), "sha256": hashlib.sha256(body).hexdigest(),
                       "parsed_sha256": hashlib.sha256(json.dumps(json.loads(body), sort_keys=True).encode()).hexdigest()}
    store.close()
    print(json.dumps(out))


def run_child(tree: str, args: argparse.Namespace, url: str | None) -> dict[str, Any]:
    from benchmarks._trees import run_child as run

    extra = ["--store", args.store, "--connectors", str(args.connectors), "--tasks", str(args.tasks), "--workers",
             str(args.workers), "--rounds", str(args.rounds), "--expand", args.expand, "--churn", str(args.churn)]
    return run(__file__, tree, extra + (["--url", url] if url else []))


# ----------------------------------------------------------------------------- the comparison
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sys.path.insert(0, str(ROOT))
    from benchmarks._trees import add_arguments

    add_arguments(parser, DEFAULT_BASELINE)
    parser.add_argument("--rounds", type=int, default=5, help="rounds per expansion in each child")
    parser.add_argument("--store", choices=("raft", "postgresql", "mariadb"), default="raft")
    parser.add_argument("--url", help="relational store URL (default: a new database on the local server)")
    parser.add_argument("--expand", default="status,info")
    parser.add_argument("--churn", type=int, default=100,
                        help="connectors whose task 0 reports a status between two timed lists")
    args = parser.parse_args()
    if args.child:
        child(args)
        return 0

    sys.path.insert(0, str(ROOT))
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "webapp.settings")
    os.environ.setdefault("RAFTCONNECT_DEVELOPMENT", "1")
    from benchmarks._common import machine, record
    from tools.databases import drop_database

    from benchmarks._trees import extract, uncommitted

    baseline_tree, rev, head = extract(args.baseline, "bench-expand-")
    dirty = uncommitted("benchmarks/scale/RESULTS.md")

    url, db = args.url, None
    load_start = Path("/proc/loadavg").read_text().split()[0]
    if args.store != "raft" and url is None:
        import django

        django.setup()
        db = f"raftconnect_bench_{uuid.uuid4().hex[:10]}"
        url = URLS[args.store].format(db=db)
        t0 = time.perf_counter()
        fill_relational(url, args.connectors, args.tasks, args.workers)
        print(f"filled {args.store} in {time.perf_counter() - t0:.1f} s", file=sys.stderr)
    results: dict[str, list[dict[str, Any]]] = {"before": [], "after": []}
    try:
        for p in range(args.passes):
            for label, tree in (("before", str(baseline_tree)), ("after", str(ROOT))):
                results[label].append(run_child(tree, args, url))
                print(f"pass {p + 1}: {label} done", file=sys.stderr)
    finally:
        if db:
            drop_database(args.store, db)
    load_end = Path("/proc/loadavg").read_text().split()[0]

    def figures(label: str, expand: str, key: str, rounds: str = "rounds") -> tuple[float, float]:
        values = [r[key] for res in results[label] for r in res[expand][rounds]]
        return min(values) * 1000, statistics.median(values) * 1000

    n = args.passes * args.rounds
    rows = []
    for expand in args.expand.split(","):
        same = {results[label][0][expand]["sha256"] for label in results}
        same_parsed = {results[label][0][expand]["parsed_sha256"] for label in results}
        body = results["after"][0][expand]["bytes"]
        for key, what in (("select", "selector"), ("render", "rendering"), ("total", "selector + rendering")):
            (b_best, b_med), (a_best, a_med) = figures("before", expand, key), figures("after", expand, key)
            (bc, _), (ac, _) = figures("before", expand, key + "_cpu"), figures("after", expand, key + "_cpu")
            rows.append(f"| expand={expand}: {what} | {b_best:,.0f} ms (median {b_med:,.0f}; CPU {bc:,.0f}) | "
                        f"{a_best:,.0f} ms (median {a_med:,.0f}; CPU {ac:,.0f}) | **{b_best / a_best:.1f}×** |")
        (b_best, b_med), (a_best, a_med) = figures("before", expand, "total", "cold"), figures("after", expand, "total", "cold")
        rows.append(f"| expand={expand}: first list of a process (nothing cached), selector + rendering | "
                    f"{b_best:,.0f} ms (median {b_med:,.0f}) | {a_best:,.0f} ms (median {a_med:,.0f}) | "
                    f"{b_best / a_best:.1f}× |")
        rows.append(f"| expand={expand}: body | {results['before'][0][expand]['bytes']:,} bytes | {body:,} bytes | "
                    + ("identical bytes" if len(same) == 1 else
                       "same JSON value, different bytes" if len(same_parsed) == 1 else "**DIFFERENT JSON**") + " |")
    renderers = f"{results['before'][0]['renderer']} -> {results['after'][0]['renderer']}"
    text = (f"\n## {datetime.now(UTC):%Y-%m-%d %H:%M} UTC — {machine()} — expand, in process ({args.store} store)\n\n"
            f"Command: `python benchmarks/scale/expand.py --store {args.store} --connectors {args.connectors} "
            f"--tasks {args.tasks} --workers {args.workers} --rounds {args.rounds} --passes {args.passes} "
            f"--churn {args.churn}` — {args.connectors:,} connectors, {args.connectors * args.tasks:,} tasks, "
            f"{args.churn} connectors reporting a status between two timed lists; before = {rev}, after = {head}"
            f"{' plus uncommitted changes' if dirty else ''}; renderer {renderers}. Best of {n} rounds per "
            f"figure ({args.passes} alternating child processes per tree × {args.rounds} rounds), median beside "
            f"it, and the least process CPU time of a round; load average (1 min) {load_start} at start, "
            f"{load_end} at end (2 cores shared with other sessions).\n\n"
            "| what | before | after | ratio (best before / best after) |\n|---|---|---|---|\n"
            + "\n".join(rows) + "\n")
    record(__file__, text, keep=not args.no_record)
    return 0


if __name__ == "__main__":
    sys.exit(main())
