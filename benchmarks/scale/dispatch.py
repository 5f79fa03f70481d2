#!/usr/bin/env python
"""In-process: what the coordinator's Celery dispatch costs per generation, whole views against deltas.

``run.py``'s simulated workers have no Celery queue, so the fast path real agents get their views by
(``GroupCoordinator.dispatch`` → ``CeleryDispatcher.send`` → the broker) never shows there. This
measures it alone: a ``ClusterStateMachine`` filled with CONNECTORS file source connectors of TASKS
tasks over WORKERS workers (``expand.py``'s content), a ``GroupCoordinator`` on it as the active
coordinator (no Raft thread, no REST), every worker live and reachable, and a dispatcher that does
what sending costs the leader: it encodes each message as Celery's task body, with Celery's own
serializer (``kombu.serialization.dumps``, JSON), and counts the bytes. No broker: what a broker
then does with the bytes is not in the figures.

ROUNDS rounds, each of two generations, one per side in turn: MANY connectors created (their
configs and task configs written, the coordinator poked for each), then one generation that places
their connectors and tasks round-robin over all workers (a few on each, as every generation did
while ``run.py``'s 10,000 connectors were created). Every worker's view is made ready first
(``_cached_view``, as the heartbeats would have), then ``dispatch()`` is timed (process CPU): on
the **whole** side the workers' reports do not ask for deltas (agents before view deltas), on the
**deltas** side they do (``view_deltas``). Each side's messages are checked: applied in order to the
view each worker held, they must give every worker exactly the coordinator's view.

On the deltas side each worker's report names the view it holds (``view_digest``), as an agent's
heartbeat does, and the dispatch starts each delta from that view (``GroupCoordinator.dispatch``).
From b64cc87 until the named-view base, the dispatch sent whole views whatever a worker asked, and
both sides measured whole views.

Usage: ``python benchmarks/scale/dispatch.py [--connectors 10000] [--tasks 10] [--workers 100]
[--rounds 3] [--no-record]``; results are appended to ``RESULTS.md`` beside this file.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks" / "scale"))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, as the other benchmarks
#: connectors created before each measured generation
MANY = 50


class EncodingDispatcher:
    """Encodes each message as Celery's task body with Celery's serializer; keeps the bytes and the
    last message per worker (to check them). Reaches every worker."""

    def __init__(self) -> None:
        from kombu.serialization import dumps

        self._dumps = dumps
        self.bytes = 0
        self.messages: list[tuple[str, dict]] = []

    def reaches(self, worker_id: str) -> bool:
        return True

    def send(self, worker_id: str, view: dict) -> None:
        _, _, body = self._dumps(((view,), {}, {}), serializer="json")  # (args, kwargs, embed), as Celery's body
        self.bytes += len(body)
        self.messages.append((worker_id, view))


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connectors", type=int, default=10_000)
    parser.add_argument("--tasks", type=int, default=10)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    args = parser.parse_args()

    from benchmarks._common import machine
    from expand import fill_state
    from raftnode.state import ClusterStateMachine
    from webapp.coordinator.coordinator import GroupCoordinator
    from webapp.coordinator.viewdelta import DELTA_FROM, apply_view_delta
    from webapp.storage.raft import RaftMetadataStore

    started, load = datetime.now(UTC), os.getloadavg()[0]
    t0 = time.perf_counter()
    state = ClusterStateMachine()
    fill_state(state, args.connectors, args.tasks, args.workers)
    print(f"state filled: {args.connectors:,} connectors x {args.tasks} tasks over {args.workers} workers "
          f"in {time.perf_counter() - t0:.1f} s", flush=True)

    class Replica:  # what the coordinator and the Raft store read of a member: a leader's applied state
        is_leader = True

    replica = Replica()
    replica.state = state
    dispatcher = EncodingDispatcher()
    coordinator = GroupCoordinator(raft=replica, store=RaftMetadataStore(replica), node_id="bench",
                                   dispatcher=dispatcher)
    coordinator.epoch = state.assignment["epoch"]
    workers = sorted({o for o in state.assignment["tasks"].values()})
    coordinator.last_seen = {w: float("inf") for w in workers}  # every worker live throughout

    held: dict[str, dict] = {}

    def deliver() -> None:
        """Apply the messages sent since the last call, in order, to the views the workers hold."""
        for worker_id, message in dispatcher.messages:
            view = apply_view_delta(held.get(worker_id), message) if DELTA_FROM in message else message
            if view is None:
                raise AssertionError(f"a delta to {worker_id} not from the view it held")
            held[worker_id] = view
        dispatcher.messages.clear()

    def check() -> None:
        for w in workers:
            view, digest = coordinator._cached_view(w)
            if {k: held[w][k] for k in view} != view or held[w]["digest"] != digest:
                raise AssertionError(f"{w} holds another view than the coordinator's")

    coordinator.dispatch()  # every worker's first view, whole
    deliver()
    results: dict[str, list[dict]] = {"whole": [], "deltas": []}
    for r in range(args.rounds):
        for side in ("whole", "deltas"):
            coordinator.reported = {w: {"view_deltas": True, "view_digest": held[w]["digest"]} if side == "deltas"
                                    else {} for w in workers}
            batch = [f"batch-{r}-{side}-{i}" for i in range(MANY)]
            for name in batch:
                state._put_connector_config(name, {"connector.class": "X", "tasks.max": str(args.tasks)}, None,
                                            False, _doApply=True)
                state._put_task_configs(name, None, 0, [{"task.id": str(t)} for t in range(args.tasks)],
                                        _doApply=True)
                coordinator.poke(name)
            keys = [k for name in batch for k in [name] + [f"{name}-{t}" for t in range(args.tasks)]]
            spots = {k: workers[(r * 17 + i) % len(workers)] for i, k in enumerate(keys)}
            a = state.assignment
            state._set_assignment(a["epoch"], a["generation"] + 1, {k: spots[k] for k in batch},
                                  {k: w for k, w in spots.items() if k not in set(batch)}, a["generation"],
                                  _doApply=True)
            for w in workers:  # ready, as the heartbeats since the generation would have left them
                coordinator._cached_view(w)
            dispatcher.bytes = 0
            c0, w0 = time.process_time(), time.perf_counter()
            coordinator.dispatch()
            cpu, wall = time.process_time() - c0, time.perf_counter() - w0
            sent = len(dispatcher.messages)
            results[side].append({"cpu_ms": cpu * 1000, "wall_ms": wall * 1000, "bytes": dispatcher.bytes,
                                  "messages": sent})
            deliver()
            check()
            print(f"round {r + 1}/{args.rounds} {side:6s}: {sent} messages, {dispatcher.bytes / 2**20:7.2f} MiB, "
                  f"{cpu * 1000:7.1f} ms of CPU", flush=True)

    def med(side: str, key: str) -> float:
        return statistics.median(x[key] for x in results[side])

    rows = [
        ("CPU of one `dispatch()` (ms, median of rounds)", med("whole", "cpu_ms"), med("deltas", "cpu_ms")),
        ("bytes encoded for the broker (MiB)", med("whole", "bytes") / 2**20, med("deltas", "bytes") / 2**20),
        ("messages", med("whole", "messages"), med("deltas", "messages")),
    ]
    lines = [f"## {started:%Y-%m-%d %H:%M} UTC — {machine()} — the Celery dispatch, whole views against deltas", "",
             f"`python benchmarks/scale/dispatch.py --connectors {args.connectors} --tasks {args.tasks} "
             f"--workers {args.workers} --rounds {args.rounds}` (load average {load:.2f} at start): one generation "
             f"placing {MANY} new connectors' {MANY * (args.tasks + 1)} instances round-robin over "
             f"{args.workers} workers; per round: "
             + "; ".join(f"whole {w['cpu_ms']:.0f} ms / deltas {d['cpu_ms']:.0f} ms"
                         for w, d in zip(results["whole"], results["deltas"])) + ".", "",
             "| per generation | whole views | deltas | deltas / whole |", "|---|---|---|---|"]
    for what, whole, delta in rows:
        lines.append(f"| {what} | {whole:,.1f} | {delta:,.2f} | {delta / whole if whole else 0:.3f} |")
    text = "\n".join(lines)
    print(text)
    if not args.no_record:
        with open(Path(__file__).with_name("RESULTS.md"), "a") as fh:
            fh.write("\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
