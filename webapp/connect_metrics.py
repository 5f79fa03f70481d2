"""Kafka Connect's metric groups in Prometheus, under the names Connect dashboards expect.

Kafka Connect publishes its metrics as JMX MBeans (``kafka.connect:type=<group>,
connector=..., task=...``); Prometheus gets them through the JMX exporter, whose
usual rules (lower-cased, ``-`` → ``_``, the object's ``type`` then the attribute:
``kafka_connect_<group>_<attribute>``, labels ``connector`` and ``task``) give the
names Connect's Grafana dashboards and alerts are built on, e.g.
``kafka_connect_task_error_metrics_total_records_skipped{connector,task}``. This
module exports the same names, computed from what RaftConnect knows, beside the
``raftconnect_*`` metrics of :mod:`webapp.metrics`, in prometheus-client's
default registry (``/metrics``).

Where the figures come from (nothing here writes cluster state):

* per task: the tasks file of this node's own agent
  (:func:`webapp.metrics.own_agent_tasks`; :class:`~webapp.runtime.task_metrics.TaskMetrics`
  and the connector's type), so each node exports the task groups of the tasks it
  runs, as each Connect worker does; a ``worker`` label names the worker running
  the task;
* task states per connector: the Herder's ConnectorStateInfo (the active metadata
  store), read at most every :data:`STATUS_CACHE_SECONDS`;
* rebalance figures: the committed assignment (every Raft member has it).

Groups and attributes exported (Connect's names; what they mean here):

* ``connect-worker-metrics``: ``connector_count``, ``task_count`` (per ``worker``, from
  the assignment); per ``connector``: ``connector_total_task_count``,
  ``connector_running_task_count``, ``connector_paused_task_count``,
  ``connector_failed_task_count``, ``connector_unassigned_task_count``,
  ``connector_restarting_task_count``, ``connector_destroyed_task_count`` (always 0);
* ``connect-worker-rebalance-metrics``: ``epoch`` (the assignment generation),
  ``completed_rebalances_total`` (generations committed: every rebalance commits one),
  ``rebalancing`` (0: an assignment is committed at once);
* ``connector-metrics``: ``kafka_connect_connector_metrics{connector, connector_class,
  connector_type, status}`` = 1 (the MBean's string attributes as labels, as the
  exporter's rules for them do);
* ``connector-task-metrics``: ``kafka_connect_connector_task_metrics{connector, task, status}`` = 1,
  ``batch_size_avg`` (records per batch since the task started), ``running_ratio`` and
  ``pause_ratio`` (1 or 0 now; Connect's are time fractions), ``offset_commit_avg_time_ms``;
* ``source-task-metrics``: ``source_record_poll_total`` (written + skipped), ``source_record_write_total``,
  ``source_record_poll_rate``, ``source_record_write_rate`` (records/s over 30 s),
  ``poll_batch_avg_time_ms``;
* ``sink-task-metrics``: ``sink_record_read_total``, ``sink_record_send_total``,
  ``sink_record_read_rate``, ``sink_record_send_rate``, ``put_batch_avg_time_ms``,
  ``offset_commit_completion_total`` (committed batches);
* ``task-error-metrics``: ``total_record_errors``, ``total_record_failures``,
  ``total_records_skipped`` (records dropped by ``errors.tolerance=all``),
  ``total_errors_logged``, ``total_retries``, ``deadletterqueue_produce_requests``,
  ``deadletterqueue_produce_failures``, ``last_error_timestamp`` — 0 for every running
  task until something fails, so a dashboard sees the series before the first loss.

All are gauges, as the JMX exporter reports JMX attributes without type rules;
counts are since the task last started on its worker (Connect's counters restart
with the task too).
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Iterator

from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from webapp.metrics import own_agent_tasks

__all__ = ["ConnectMetricsCollector", "install", "STATUS_CACHE_SECONDS", "PREFIX", "ERROR_ATTRIBUTES"]

#: every name starts with this (the JMX exporter's ``kafka.connect`` domain)
PREFIX = "kafka_connect_"
#: seconds the connectors' statuses are reused between scrapes
STATUS_CACHE_SECONDS = 5.0
#: task-error-metrics attributes, in Connect's order
ERROR_ATTRIBUTES = ("total_record_errors", "total_record_failures", "total_records_skipped", "total_errors_logged",
                    "total_retries", "deadletterqueue_produce_requests", "deadletterqueue_produce_failures",
                    "last_error_timestamp")
_TASK_STATES = ("running", "paused", "failed", "unassigned", "restarting")


def _gauge(group: str, attribute: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}{group}_{attribute}", doc, labels=labels)


class ConnectMetricsCollector(Collector):
    """Reads the node in this process at scrape time and yields Connect's metric groups (see module docstring)."""

    def __init__(self, node_provider: Callable[[], Any] | None = None, clock=time.monotonic) -> None:
        """``node_provider()``: the node of this process or None (the web layer passes
        ``webapp.connect.node.current_or_none``; this module never imports the node)."""
        self._node_provider = node_provider or (lambda: None)
        self._clock = clock
        self._lock = threading.Lock()
        # (read at, statuses, infos, (node id, connector names)): see _statuses
        self._cache: tuple[float, list[dict[str, Any]], dict[str, dict[str, Any]], tuple] | None = None

    def collect(self) -> Iterator[GaugeMetricFamily]:
        node = self._node_provider()
        if node is None:
            return
        own = own_agent_tasks(node)
        if own:
            yield from self._tasks(own)
        if node.raft is None:
            return
        assignment = node.raft.state.assignment
        yield from self._rebalance(assignment)
        coordinator = node.coordinator
        if coordinator is None or not coordinator.active:
            return  # the connectors' states and the workers' counts once per cluster: on the leader
        yield from self._workers(assignment)
        statuses, infos = self._statuses(node)
        yield from self._connectors(statuses, infos)

    # ------------------------------------------------------------------ groups
    @staticmethod
    def _rebalance(assignment: dict[str, Any]) -> Iterator[GaugeMetricFamily]:
        g = "connect_worker_rebalance_metrics"
        generation = float(assignment.get("generation", 0))
        for attribute, doc, value in (
                ("epoch", "Generation of the committed assignment", generation),
                ("completed_rebalances_total", "Assignments committed (each rebalance commits one)", generation),
                ("rebalancing", "1 while a rebalance is in progress (assignments are committed at once: 0)", 0.0)):
            m = _gauge(g, attribute, doc, [])
            m.add_metric([], value)
            yield m

    @staticmethod
    def _workers(assignment: dict[str, Any]) -> Iterator[GaugeMetricFamily]:
        g = "connect_worker_metrics"
        connectors: dict[str, int] = {}
        tasks: dict[str, int] = {}
        for w in list((assignment.get("connectors") or {}).values()):
            connectors[w] = connectors.get(w, 0) + 1
        for w in list((assignment.get("tasks") or {}).values()):
            tasks[w] = tasks.get(w, 0) + 1
        cc = _gauge(g, "connector_count", "Connectors run by the worker", ["worker"])
        tc = _gauge(g, "task_count", "Tasks run by the worker", ["worker"])
        for w in sorted(set(connectors) | set(tasks)):
            cc.add_metric([w], connectors.get(w, 0))
            tc.add_metric([w], tasks.get(w, 0))
        yield cc
        yield tc

    def _statuses(self, node: Any) -> tuple[list[dict[str, Any]], dict[str, dict[str, Any]]]:
        """(ConnectorStateInfo of every connector, {name: {"type", "class"}}), cached briefly.

        One bulk read of the Herder (:meth:`~webapp.connect.herder.Herder.connectors_expanded`, as
        ``GET /connectors?expand=status&expand=info``): reading each connector's status and config
        on its own took the leader 6.6 s per scrape at 10,000 connectors (benchmarks/scale). The
        cache holds for :data:`STATUS_CACHE_SECONDS` while the node and its set of connector names
        stay the same (the names are read on every scrape): a connector created or deleted shows at
        the next scrape, only its task states may be up to that long behind.
        """
        herder = node.herder
        try:
            names = herder.connector_names()
        except Exception:  # noqa: BLE001 - store unreachable: no connector series this scrape
            names = []
        key = (id(node), tuple(sorted(names)))
        with self._lock:
            cached = self._cache
            if cached is not None and cached[3] == key and self._clock() - cached[0] < STATUS_CACHE_SECONDS:
                return cached[1], cached[2]
        statuses, infos = [], {}
        try:
            listed = herder.connectors_expanded(("status", "info")) if names else {}
        except Exception:  # noqa: BLE001 - store unreachable: no connector series this scrape
            listed = {}
        for name, entry in listed.items():
            status = entry["status"]
            statuses.append(status)
            infos[name] = {"type": status.get("type") or "unknown",
                           "class": entry["info"]["config"].get("connector.class", "")}
        with self._lock:
            self._cache = (self._clock(), statuses, infos, key)
        return statuses, infos

    @staticmethod
    def _connectors(statuses: list[dict[str, Any]], infos: dict[str, dict[str, Any]]) -> Iterator[GaugeMetricFamily]:
        g = "connect_worker_metrics"
        counts = {s: _gauge(g, f"connector_{s}_task_count", f"Tasks of the connector in state {s.upper()}",
                            ["connector"]) for s in (*_TASK_STATES, "destroyed")}
        total = _gauge(g, "connector_total_task_count", "Tasks of the connector", ["connector"])
        info = GaugeMetricFamily(f"{PREFIX}connector_metrics", "The connector's class, type and status (value 1)",
                                 labels=["connector", "connector_class", "connector_type", "status"])
        for st in statuses:
            name = st["name"]
            tasks = st.get("tasks") or []
            by_state: dict[str, int] = {}
            for t in tasks:
                by_state[t["state"].lower()] = by_state.get(t["state"].lower(), 0) + 1
            for s, m in counts.items():
                m.add_metric([name], by_state.get(s, 0))
            total.add_metric([name], len(tasks))
            i = infos.get(name) or {}
            info.add_metric([name, i.get("class", ""), i.get("type", "unknown"),
                             (st.get("connector") or {}).get("state", "UNASSIGNED").lower()], 1.0)
        yield from counts.values()
        yield total
        yield info

    @staticmethod
    def _tasks(reported: dict[str, dict[str, Any]]) -> Iterator[GaugeMetricFamily]:
        """The task groups of ``{worker id: {task key: entry}}`` (entries as :func:`own_agent_tasks` gives them)."""
        labels = ["connector", "task", "worker"]
        ct, src, snk, err = ("connector_task_metrics", "source_task_metrics", "sink_task_metrics",
                             "task_error_metrics")
        status = GaugeMetricFamily(f"{PREFIX}{ct}", "The task's status (value 1)", labels=[*labels, "status"])
        m = {
            "batch_size_avg": _gauge(ct, "batch_size_avg", "Records per batch since the task started", labels),
            "running_ratio": _gauge(ct, "running_ratio", "1 while the task runs, else 0", labels),
            "pause_ratio": _gauge(ct, "pause_ratio", "1 while the task is paused, else 0", labels),
            "offset_commit_avg_time_ms": _gauge(ct, "offset_commit_avg_time_ms",
                                                "Milliseconds per offset commit, on average", labels),
            "source_record_poll_total": _gauge(src, "source_record_poll_total", "Records read from the source",
                                               labels),
            "source_record_write_total": _gauge(src, "source_record_write_total", "Records written to Kafka",
                                                labels),
            "source_record_poll_rate": _gauge(src, "source_record_poll_rate", "Records read per second (30 s)",
                                              labels),
            "source_record_write_rate": _gauge(src, "source_record_write_rate", "Records written per second (30 s)",
                                               labels),
            "poll_batch_avg_time_ms": _gauge(src, "poll_batch_avg_time_ms", "Milliseconds per batch, on average",
                                             labels),
            "sink_record_read_total": _gauge(snk, "sink_record_read_total", "Records read from Kafka", labels),
            "sink_record_send_total": _gauge(snk, "sink_record_send_total", "Records written to the sink", labels),
            "sink_record_read_rate": _gauge(snk, "sink_record_read_rate", "Records read per second (30 s)", labels),
            "sink_record_send_rate": _gauge(snk, "sink_record_send_rate", "Records written per second (30 s)",
                                            labels),
            "put_batch_avg_time_ms": _gauge(snk, "put_batch_avg_time_ms", "Milliseconds per batch, on average",
                                            labels),
            "offset_commit_completion_total": _gauge(snk, "offset_commit_completion_total",
                                                     "Offset commits completed (one per batch)", labels),
        }
        errors = {a: _gauge(err, a, f"Connect's task-error-metrics {a.replace('_', '-')}", labels)
                  for a in ERROR_ATTRIBUTES}
        for worker, tasks in sorted(reported.items()):
            for key, t in sorted(tasks.items()):
                if not isinstance(t, dict):
                    continue
                name, _, task = key.rpartition("-")
                if not task.isdigit():
                    continue
                lv = [name, task, worker]
                state = str(t.get("state", "UNASSIGNED"))
                status.add_metric([*lv, state.lower()], 1.0)
                records = float(t.get("records", 0) or 0)
                batches = float(t.get("batches", 0) or 0)
                rate = float(t.get("records_per_second", 0.0) or 0.0)
                batch_ms = 1000.0 * float(t.get("batch_seconds_total", 0.0) or 0.0) / batches if batches else 0.0
                commit_s = float(((t.get("phases") or {}).get("commit")) or 0.0)
                m["batch_size_avg"].add_metric(lv, records / batches if batches else 0.0)
                m["running_ratio"].add_metric(lv, 1.0 if state == "RUNNING" else 0.0)
                m["pause_ratio"].add_metric(lv, 1.0 if state == "PAUSED" else 0.0)
                m["offset_commit_avg_time_ms"].add_metric(lv, 1000.0 * commit_s / batches if batches else 0.0)
                kind = t.get("type")
                if kind == "source":  # read = written + skipped by errors.tolerance=all, as for a sink
                    e = t.get("errors") or {}
                    m["source_record_poll_total"].add_metric(lv, records + float(e.get("total_records_skipped", 0)))
                    m["source_record_write_total"].add_metric(lv, records)
                    for a in ("source_record_poll_rate", "source_record_write_rate"):
                        m[a].add_metric(lv, rate)
                    m["poll_batch_avg_time_ms"].add_metric(lv, batch_ms)
                elif kind == "sink":
                    e = t.get("errors") or {}
                    m["sink_record_read_total"].add_metric(lv, records + float(e.get("total_records_skipped", 0)))
                    m["sink_record_send_total"].add_metric(lv, records)
                    for a in ("sink_record_read_rate", "sink_record_send_rate"):
                        m[a].add_metric(lv, rate)
                    m["put_batch_avg_time_ms"].add_metric(lv, batch_ms)
                    m["offset_commit_completion_total"].add_metric(lv, batches)
                e = t.get("errors") or {}
                for a, g in errors.items():
                    g.add_metric(lv, float(e.get(a, 0) or 0))
        yield status
        yield from m.values()
        yield from errors.values()


_installed = False
_install_lock = threading.Lock()


def install(node_provider: Callable[[], Any]) -> None:
    """Register a :class:`ConnectMetricsCollector` reading ``node_provider()`` in prometheus-client's
    default registry (idempotent: the first provider stays, as in :func:`webapp.metrics.install`)."""
    global _installed
    with _install_lock:
        if not _installed:
            REGISTRY.register(ConnectMetricsCollector(node_provider))
            _installed = True
