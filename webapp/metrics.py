"""Prometheus metrics of a node, served at ``/metrics`` (authenticated, text exposition format).

Owns the metric objects updated on the hot paths (store write and offset
commit latency, leader changes) and a collector that reads the node's state at
scrape time (Raft term, role, commit and applied index and their lag, members,
the assignment generation, tasks per worker, task states). Uses
prometheus-client's default registry.

Not exported yet: records/s and consumer lag per task, which the worker
agents know and do not yet report to the leader.
"""
from __future__ import annotations

from typing import Any, Iterator

from prometheus_client import Counter, Histogram
from prometheus_client.core import GaugeMetricFamily, REGISTRY
from prometheus_client.registry import Collector

__all__ = ["STORE_WRITE_SECONDS", "OFFSET_COMMIT_SECONDS", "LEADER_CHANGES", "NodeCollector", "install"]

_BUCKETS = (0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0)

#: Seconds per metadata write through the node's store router, by active store and kind of write.
STORE_WRITE_SECONDS = Histogram("raftconnect_store_write_seconds", "Metadata store write latency (leader)",
                                ["store", "kind"], buckets=_BUCKETS)
#: Seconds per offset commit through the store router (a subset of the writes above).
OFFSET_COMMIT_SECONDS = Histogram("raftconnect_offset_commit_seconds", "Offset commit latency (leader)",
                                  ["store"], buckets=_BUCKETS)
#: Raft role changes seen by this member.
LEADER_CHANGES = Counter("raftconnect_raft_leader_changes", "Raft leadership changes seen by this member")


class NodeCollector(Collector):
    """Gauges read from the running node at each scrape; nothing when no node runs in the process."""

    def collect(self) -> Iterator[GaugeMetricFamily]:
        from webapp.connect.node import NodeNotReady, current

        try:
            node = current()
        except NodeNotReady:
            return
        if node.raft is None:
            return
        st = node.raft.status()

        def gauge(name: str, doc: str, value: float, labels: dict[str, str] | None = None) -> GaugeMetricFamily:
            g = GaugeMetricFamily(name, doc, labels=list(labels or {}))
            g.add_metric(list((labels or {}).values()), value)
            return g

        yield gauge("raftconnect_raft_term", "Current Raft term", st["term"])
        yield gauge("raftconnect_raft_is_leader", "1 on the Raft leader", 1.0 if st["state"] == "LEADER" else 0.0)
        role = GaugeMetricFamily("raftconnect_raft_role", "Raft role of this member (1 for the current one)",
                                 labels=["role"])
        for r in ("LEADER", "FOLLOWER", "CANDIDATE"):
            role.add_metric([r.lower()], 1.0 if st["state"] == r else 0.0)
        yield role
        yield gauge("raftconnect_raft_commit_index", "Raft commit index", st["commit_index"])
        yield gauge("raftconnect_raft_applied_index", "Raft last applied index", st["applied_index"])
        yield gauge("raftconnect_raft_commit_lag", "Commit index minus applied index on this member",
                    max(0, st["commit_index"] - st["applied_index"]))
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
        yield from self._task_states(state)
        store = GaugeMetricFamily("raftconnect_metadata_store_active", "The active metadata store", labels=["store"])
        store.add_metric([state.active_store], 1.0)
        yield store

    @staticmethod
    def _task_states(state: Any) -> Iterator[GaugeMetricFamily]:
        """Tasks by reported state; only while the raft store is active (its statuses are in memory)."""
        if state.active_store != "raft":
            return
        by_state: dict[str, int] = {}
        for st in list(state.statuses.values()):
            for t in list((st.get("tasks") or {}).values()):
                by_state[t["state"]] = by_state.get(t["state"], 0) + 1
        g = GaugeMetricFamily("raftconnect_tasks", "Tasks by reported state", labels=["state"])
        for s in ("UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING"):
            g.add_metric([s], by_state.get(s, 0))
        yield g


_installed = False


def install() -> None:
    """Register :class:`NodeCollector` in the default registry (idempotent)."""
    global _installed
    if not _installed:
        REGISTRY.register(NodeCollector())
        _installed = True
