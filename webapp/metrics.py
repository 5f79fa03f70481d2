"""Prometheus metrics of a node, served at ``/metrics`` (authenticated, text exposition format).

Owns the metric objects updated on the hot paths (store write and offset
commit latency, leader changes) and a collector that reads the node's state at
scrape time (Raft term, role, commit and applied index and their lag, members,
the assignment generation, tasks per worker, task states). Uses
prometheus-client's default registry.

Per-task figures (records, batches, records/s over the last 30 s, last batch
time, a sink task's consumer lag; :class:`~webapp.runtime.task_metrics.TaskMetrics`)
are exported by the node whose agent runs the task, from the agent's tasks file
(:func:`own_agent_tasks`), labelled with the agent's worker id: as each Kafka
Connect worker exports its own tasks' MBeans, so one scrape answer grows with the
tasks of one worker, not of the cluster (a leader exporting every task from the
heartbeats took over 30 s and 1.26 GB of RSS per scrape at 100,000 tasks,
benchmarks/scale). Task states come from the active metadata
store: from memory for the ``raft`` store, otherwise read at most once per
:data:`STATUS_CACHE_SECONDS` (one read per connector).

Must not import the node or anything above it (``webapp.connect``, storage,
coordinator): the node and the stores import this module for the hot-path
metrics, so the collector is handed a callable that returns the node
(:func:`install`) instead of looking it up itself.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, REGISTRY
from prometheus_client.registry import Collector

from webapp.agent_tasks import read_agent_tasks
from webapp.states import STATES

__all__ = ["STORE_WRITE_SECONDS", "OFFSET_COMMIT_SECONDS", "LEADER_CHANGES", "REST_FAST_PATH", "STATUS_CACHE_SECONDS",
           "NodeCollector",
           "NodeProvider", "install", "own_agent_tasks"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: Seconds per metadata write through the node's store router, by active store and kind of write.
STORE_WRITE_SECONDS = Histogram("raftconnect_store_write_seconds", "Metadata store write latency (leader)",
                                ["store", "kind"], buckets=_BUCKETS)
#: Seconds per offset commit through the store router (a subset of the writes above).
OFFSET_COMMIT_SECONDS = Histogram("raftconnect_offset_commit_seconds", "Offset commit latency (leader)",
                                  ["store"], buckets=_BUCKETS)
#: Raft role changes seen by this member.
LEADER_CHANGES = Counter("raftconnect_raft_leader_changes", "Raft leadership changes seen by this member")
#: REST requests answered by the fast path (``webapp.connect.api.fastpath``) rather than Django's full path.
REST_FAST_PATH = Counter("raftconnect_rest_fast_path_requests",
                         "REST requests answered by the fast path (the leader's POST /connectors and "
                         "PUT /connectors/{name}/config)")
#: Seconds a relational/plugin store's task states are reused between scrapes.
STATUS_CACHE_SECONDS = 10.0

#: The observed states exported as ``raftconnect_tasks{state=...}`` (all of them, zeros included).
TASK_STATES = STATES

#: Returns the node running in this process, or None while none runs (see :func:`install`).
NodeProvider = Callable[[], Any]


def own_agent_tasks(node: Any) -> dict[str, dict[str, dict[str, Any]]]:
    """``{worker id: {task key: entry}}`` of the agent this node runs; ``{}`` when there is none.

    An entry is ``{"state", "connector", "task", "type", ...TaskMetrics.as_json()}`` as
    :class:`~webapp.agent_tasks.AgentTasksWriter` wrote it. Nothing while the
    node's agent process has exited, or when the file was written by another process
    than it or not rewritten for :data:`~webapp.agent_tasks.TASKS_MAX_AGE_S`
    (a node started without an agent, e.g. in tests, reads any fresh file). The caller
    must not modify the entries.
    """
    options = getattr(node, "options", None)
    data_dir = getattr(options, "data_dir", None)
    if not data_dir:
        return {}
    agent = getattr(node, "agent", None)
    pid = None
    if agent is not None:
        if agent.poll() is not None:
            return {}
        pid = agent.pid
    found = read_agent_tasks(data_dir, pid=pid)
    return {} if found is None else {found[0]: found[1]}


class NodeCollector(Collector):
    """Gauges read from the running node at each scrape; nothing when no node runs in the process.

    Args:
        node_provider: called at each scrape; returns the node (a ``ConnectNode``: ``raft``,
            ``store``, ``coordinator``, ``options``, ``agent``) or None when no node runs.
    """

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self._node_provider()
        if node is None:
            return
        yield from self._task_metrics(node)  # on every node whose agent runs tasks, worker-only ones included
        if node.raft is None:
            return
        st = node.raft.status()

        def gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=list(labels or {}))
            g.add_metric(list((labels or {}).values()), value)
            return g

        def counters(*families: tuple[str, str, float]) -> Iterator[CounterMetricFamily]:
            for name, doc, value in families:  # (name without _total, help, value)
                c = CounterMetricFamily(name, doc)
                c.add_metric([], value)
                yield c

        yield gauge("raftconnect_raft_term", "Current Raft term", st["term"])
        yield gauge("raftconnect_raft_is_leader", "1 on the Raft leader", 1.0 if st["state"] == "LEADER" else 0.0)
        role = GaugeMetricFamily("raftconnect_raft_role", "Raft role of this member (1 for the current one)",
                                 labels=["role"])
        for r in ("LEADER", "FOLLOWER", "CANDIDATE"):
            role.add_metric([r.lower()], 1.0 if st["state"] == r else 0.0)
        yield role
        yield gauge("raftconnect_raft_commit_index", "Raft commit index", st["commit_index"])
        yield gauge("raftconnect_raft_applied_index", "Raft last applied index", st["applied_index"])
        journal = st.get("journal")
        if journal is not None:
            yield gauge("raftconnect_raft_journal_ok", "1 while this member's Raft journal can be written "
                        "(0: full disk or I/O errors; it acknowledges nothing new)", 1.0 if journal["ok"] else 0.0)
            yield from counters(("raftconnect_raft_journal_write_failures", "Writes of the Raft journal (entries, "
                                 "term and vote, commit index) that failed since the member started",
                                 journal["failures"]))
        ticks = st.get("ticks")
        if ticks is not None:  # raftnode.ticks: a starved Raft thread is what turns a busy member into an election
            yield gauge("raftconnect_raft_longest_tick_gap_seconds", "Longest gap between two ticks of this "
                        "member's Raft thread since it started (a leader sends nothing meanwhile)",
                        ticks["longest_gap_s"])
            yield from counters(
                ("raftconnect_raft_held_up_ticks", "Gaps between two ticks of this member's Raft thread of at "
                 "least half the election timeout, each logged with its parts", ticks["held_up"]),
                ("raftconnect_raft_elections_started", "Elections this member started (its election timeout "
                 "passed with nothing from a leader), each logged with why", ticks["elections_started"]),
                ("raftconnect_raft_step_downs", "Times this member stopped leading because no majority answered "
                 "within the leader fallback timeout, each logged with why", ticks["step_downs"]))
        yield gauge("raftconnect_raft_commit_lag", "Commit index minus applied index on this member",
                    max(0, st["commit_index"] - st["applied_index"]))
        committer = node.raft.group_commit
        if committer is not None:  # the leader's group commit: commands / entries is how well writes batch
            gc = committer.stats()
            yield from counters(
                ("raftconnect_raft_proposals", "Raft log entries this member proposed as leader (group "
                 "commit) since it started", gc["proposals"]),
                ("raftconnect_raft_proposed_commands", "Commands (config writes, statuses, offset commits) "
                 "those entries carried", gc["commands"]),
                ("raftconnect_raft_proposal_seconds", "Seconds those entries took from proposal to apply, "
                 "summed (over raftconnect_raft_proposals: the mean commit round, which a queued write "
                 "waits up to twice)", gc["seconds"]))
        state = node.raft.state
        a = state.assignment
        yield gauge("raftconnect_assignment_generation", "Generation of the committed assignment", a["generation"])
        members = GaugeMetricFamily("raftconnect_members", "Registered cluster members by role", labels=["role"])
        counts: dict[str, int] = {"raft": 0, "worker": 0}
        for m in list(state.members.values()):
            for r in m.get("roles", []):
                counts[r] = counts.get(r, 0) + 1
        for r, n in sorted(counts.items()):
            members.add_metric([r], n)
        yield members
        per_worker = GaugeMetricFamily("raftconnect_worker_tasks", "Tasks assigned per worker", labels=["worker"])
        tasks: dict[str, int] = {}
        for w in list(a["tasks"].values()):
            tasks[w] = tasks.get(w, 0) + 1
        for w, n in sorted(tasks.items()):
            per_worker.add_metric([w], n)
        yield per_worker
        yield from self._task_states(node, state)
        store = GaugeMetricFamily("raftconnect_metadata_store_active", "The active metadata store", labels=["store"])
        store.add_metric([state.active_store], 1.0)
        yield store
        if "worker" in node.options.roles:
            agent = node.agent
            yield gauge("raftconnect_agent_up", "1 while this node's worker agent process runs",
                        1.0 if agent is not None and agent.poll() is None else 0.0)
            restarts = CounterMetricFamily("raftconnect_agent_restarts", "Times this node started its worker agent "
                                           "again after it exited")
            restarts.add_metric([], getattr(node, "agent_restarts", 0))
            yield restarts

    def __init__(self, node_provider: NodeProvider) -> None:
        self._node_provider = node_provider
        self._lock = threading.Lock()
        self._states_cache: tuple[float, str, dict[str, int]] | None = None

    def _task_states(self, node: Any, state: Any) -> Iterator[GaugeMetricFamily]:
        """Tasks by reported state in the active store (raft: in memory; others: cached reads)."""
        if state.active_store == "raft":
            by_state = self._count_states(list(state.statuses.values()))
        else:
            with self._lock:
                cached = self._states_cache
                if cached and cached[1] == state.active_store and time.monotonic() - cached[0] < STATUS_CACHE_SECONDS:
                    by_state = cached[2]
                else:
                    try:
                        by_state = self._count_states(node.store.get_statuses(n) for n in node.store.connector_names())
                    except Exception:  # store unreachable: leave the metric out rather than fail the scrape
                        return
                    self._states_cache = (time.monotonic(), state.active_store, by_state)
        g = GaugeMetricFamily("raftconnect_tasks", "Tasks by reported state", labels=["state"])
        for s in TASK_STATES:
            g.add_metric([s], by_state.get(s, 0))
        yield g

    @staticmethod
    def _count_states(statuses) -> dict[str, int]:
        by_state: dict[str, int] = {}
        for st in statuses:
            for t in list(((st or {}).get("tasks") or {}).values()):
                by_state[t["state"]] = by_state.get(t["state"], 0) + 1
        return by_state

    @staticmethod
    def _task_metrics(node: Any) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
        """Per-task figures of the tasks this node's agent runs (:func:`own_agent_tasks`)."""
        reported = own_agent_tasks(node)
        if not reported:
            return
        labels = ["connector", "task", "worker"]
        records = CounterMetricFamily("raftconnect_task_records", "Records done by the task since it started on "
                                      "its worker (source: produced; sink: written and committed)", labels=labels)
        batches = CounterMetricFamily("raftconnect_task_batches", "Micro-batches done by the task since it started "
                                      "on its worker", labels=labels)
        rate = GaugeMetricFamily("raftconnect_task_records_per_second", "Records per second over the last 30 s",
                                 labels=labels)
        last = GaugeMetricFamily("raftconnect_task_last_batch_seconds", "Duration of the task's last micro-batch",
                                 labels=labels)
        lag = GaugeMetricFamily("raftconnect_task_lag_records", "Consumer lag of a sink task: Kafka end offset "
                                "minus committed position, summed over its partitions (when known)", labels=labels)
        running = GaugeMetricFamily("raftconnect_task_running", "Tasks running on each worker by the state the "
                                    "agent reports", labels=["worker", "state"])
        for worker, tasks in sorted(reported.items()):
            states: dict[str, int] = {}
            for key, t in sorted(tasks.items()):
                if not isinstance(t, dict):
                    continue
                states[t.get("state", "UNKNOWN")] = states.get(t.get("state", "UNKNOWN"), 0) + 1
                if "connector" not in t:
                    continue
                lv = [str(t["connector"]), str(t["task"]), worker]
                records.add_metric(lv, float(t.get("records", 0)))
                batches.add_metric(lv, float(t.get("batches", 0)))
                rate.add_metric(lv, float(t.get("records_per_second", 0.0)))
                last.add_metric(lv, float(t.get("last_batch_seconds", 0.0)))
                if t.get("lag") is not None:
                    lag.add_metric(lv, float(t["lag"]))
            for st, n in sorted(states.items()):
                running.add_metric([worker, st], n)
        yield from (records, batches, rate, last, lag, running)


_installed = False


def install(node_provider: NodeProvider) -> None:
    """Register a :class:`NodeCollector` reading ``node_provider()`` in the default registry.

    Idempotent: the first call's provider stays (a process has one node at a time, so callers
    pass the same process-wide lookup).
    """
    global _installed
    if not _installed:
        REGISTRY.register(NodeCollector(node_provider))
        _installed = True
