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
  store), on the leader only; see :class:`ConnectorSeries` for how they are kept between scrapes;
* rebalance figures: the committed assignment (every Raft member has it).

The per-connector families (nine series per connector: 80,000 samples at 10,000 connectors) are
not yielded by :meth:`ConnectMetricsCollector.collect` but written as text by
:meth:`ConnectMetricsCollector.connector_exposition`, which keeps each connector's lines, as
prometheus-client encoded them, until the connector's listing revision changes. :func:`exposition`
is ``/metrics``' body: the default registry, then those families. Why: building and encoding them
cost the leader ~1.3 s of CPU per scrape at 10,000 connectors, which its heartbeats' threads
stretched to 4-9 s (benchmarks/scale), close to Prometheus' default 10 s scrape timeout.

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

from prometheus_client import generate_latest
from prometheus_client.core import REGISTRY, GaugeMetricFamily
from prometheus_client.registry import Collector

from webapp.metrics import own_agent_tasks

__all__ = ["ConnectMetricsCollector", "ConnectorSeries", "install", "exposition", "STATUS_CACHE_SECONDS", "PREFIX",
           "ERROR_ATTRIBUTES"]

#: every name starts with this (the JMX exporter's ``kafka.connect`` domain)
PREFIX = "kafka_connect_"
#: seconds a store that keeps no listing revisions (relational, plugins) has its connectors' lines reused
STATUS_CACHE_SECONDS = 5.0
#: task-error-metrics attributes, in Connect's order
ERROR_ATTRIBUTES = ("total_record_errors", "total_record_failures", "total_records_skipped", "total_errors_logged",
                    "total_retries", "deadletterqueue_produce_requests", "deadletterqueue_produce_failures",
                    "last_error_timestamp")
_TASK_STATES = ("running", "paused", "failed", "unassigned", "restarting")
#: the task states each connector's tasks are counted in, in the order the families are written
_COUNTED = (*_TASK_STATES, "destroyed")


def _gauge(group: str, attribute: str, doc: str, labels: list[str]) -> GaugeMetricFamily:
    return GaugeMetricFamily(f"{PREFIX}{group}_{attribute}", doc, labels=labels)


class _Families(Collector):
    """A collector of the families it was given: what :func:`generate_latest` encodes."""

    def __init__(self, families: list[GaugeMetricFamily]) -> None:
        self._families = families

    def collect(self) -> Iterator[GaugeMetricFamily]:
        return iter(self._families)


def _connector_families() -> list[GaugeMetricFamily]:
    """The per-connector families, empty, in the order they are written: a task count per state
    (:data:`_COUNTED`), the total, then ``kafka_connect_connector_metrics``."""
    g = "connect_worker_metrics"
    families = [_gauge(g, f"connector_{s}_task_count", f"Tasks of the connector in state {s.upper()}", ["connector"])
                for s in _COUNTED]
    families.append(_gauge(g, "connector_total_task_count", "Tasks of the connector", ["connector"]))
    families.append(GaugeMetricFamily(f"{PREFIX}connector_metrics", "The connector's class, type and status (value 1)",
                                      labels=["connector", "connector_class", "connector_type", "status"]))
    return families


def _encode(families: list[GaugeMetricFamily]) -> tuple[list[bytes], list[list[bytes]]]:
    """prometheus-client's text encoding of ``families``, split: ``(headers, lines)``, where
    ``headers[i]`` is family i's ``# HELP`` and ``# TYPE`` lines and ``lines[i]`` its sample lines
    in the order they were added, each ending in a newline (a label value never holds a raw one).

    Errors: ``RuntimeError`` when the encoding does not give one line per sample (a family type
    whose samples prometheus-client moves or adds to, which these gauges are not)."""
    headers: list[bytes] = []
    lines: list[list[bytes]] = []
    for line in generate_latest(_Families(families)).split(b"\n"):
        if line.startswith(b"# HELP "):
            headers.append(line + b"\n")
            lines.append([])
        elif line.startswith(b"#"):
            headers[-1] += line + b"\n"
        elif line:
            lines[-1].append(line + b"\n")
    if len(lines) != len(families) or any(len(x) != len(f.samples) for x, f in zip(lines, families)):
        raise RuntimeError("prometheus-client did not encode one line per sample")
    return headers, lines


def _connector_lines(states: Iterator[tuple[Any, dict[str, Any]]]) -> list[tuple[str, tuple[bytes, ...]]]:
    """``[(name, lines)]`` for ``(summary, ConnectorStateInfo)`` pairs (:meth:`Herder.connector_states`),
    ``lines`` holding the connector's one sample line of each of :func:`_connector_families`, in order."""
    families = _connector_families()
    counts, total, info = families[:-2], families[-2], families[-1]
    names: list[str] = []
    for summary, status in states:
        name = status["name"]
        tasks = status.get("tasks") or []
        by_state: dict[str, int] = {}
        for t in tasks:
            s = t["state"].lower()
            by_state[s] = by_state.get(s, 0) + 1
        for s, m in zip(_COUNTED, counts):
            m.add_metric([name], by_state.get(s, 0))
        total.add_metric([name], len(tasks))
        info.add_metric([name, summary.config.get("connector.class", ""), status.get("type") or "unknown",
                         (status.get("connector") or {}).get("state", "UNASSIGNED").lower()], 1.0)
        names.append(name)
    if not names:
        return []
    _, lines = _encode(families)
    return [(name, tuple(x[i] for x in lines)) for i, name in enumerate(names)]


class ConnectorSeries:
    """The per-connector families of a leader's ``/metrics``, as text, each connector's lines kept
    between scrapes while nothing they show changed.

    With a store that keeps listing revisions (``raft``; see
    :class:`~webapp.storage.base.ListingRevisions`) a connector's lines are rebuilt when its revision
    moved (its config, target state, task count, statuses or owners changed), so a scrape reads and
    encodes only the connectors that changed since the last one and always shows the store as of
    its start. With any other store every connector's lines are rebuilt from one bulk read once
    :data:`STATUS_CACHE_SECONDS` passed since the last build, or when the set of names changed.

    Memory: ~1 KiB per connector (nine lines). Thread-safe: concurrent scrapes each build what they
    miss; the last one to finish keeps its lines, none older than its revisions.
    """

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self._headers, _ = _encode(_connector_families())
        self._scope: Any = None  # the ListingRevisions scope _lines were built in, or None
        self._timed: tuple[tuple, float] | None = None  # or (key, built at) of _lines built without revisions
        self._lines: dict[str, tuple[int, tuple[bytes, ...]]] = {}  # {name: (revision, lines)}

    def exposition(self, herder: Any, key: Any = None) -> bytes:
        """The families' text for every connector of ``herder``'s store (``# HELP``/``# TYPE`` and no
        samples when the store cannot be read). ``key`` names the node: a timed cache is not
        reused across keys. Errors: none (an unreachable store gives the empty families)."""
        try:
            revisions = herder.store.listing_revisions()  # before any data, as the store's contract asks
            names = herder.connector_names()
            lines = self._revised(herder, revisions, names) if revisions is not None else \
                self._timed_lines(herder, (key, tuple(names)))
        except Exception:  # noqa: BLE001 - store unreachable: no connector series this scrape
            return b"".join(self._headers)
        rows = [entry[1] for entry in map(lines.get, names) if entry is not None]
        parts: list[bytes] = []
        for i, header in enumerate(self._headers):
            parts.append(header)
            parts.extend(row[i] for row in rows)
        return b"".join(parts)

    def _revised(self, herder: Any, revisions: Any, names: list[str]) -> dict[str, tuple[int, tuple[bytes, ...]]]:
        with self._lock:
            kept = self._lines if self._scope == revisions.scope else {}
        lines: dict[str, tuple[int, tuple[bytes, ...]]] = {}
        stale: list[str] = []
        for name in names:
            entry = kept.get(name)
            if entry is not None and entry[0] == revisions.of(name):
                lines[name] = entry
            else:
                stale.append(name)
        for name, built in _connector_lines(herder.connector_states(stale)):
            lines[name] = (revisions.of(name), built)
        with self._lock:
            self._scope, self._timed, self._lines = revisions.scope, None, lines
        return lines

    def _timed_lines(self, herder: Any, key: tuple) -> dict[str, tuple[int, tuple[bytes, ...]]]:
        with self._lock:
            timed = self._timed
            if timed is not None and timed[0] == key and self._clock() - timed[1] < STATUS_CACHE_SECONDS:
                return self._lines
        lines = {name: (0, built) for name, built in _connector_lines(herder.connector_states())}
        with self._lock:
            self._scope, self._timed, self._lines = None, (key, self._clock()), lines
        return lines


class ConnectMetricsCollector(Collector):
    """Reads the node in this process at scrape time and yields Connect's metric groups (see module
    docstring), all but the per-connector families, which :meth:`connector_exposition` writes."""

    def __init__(self, node_provider: Callable[[], Any] | None = None, clock=time.monotonic) -> None:
        """``node_provider()``: the node of this process or None (the web layer passes
        ``webapp.connect.node.current_or_none``; this module never imports the node)."""
        self._node_provider = node_provider or (lambda: None)
        self.series = ConnectorSeries(clock)

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
        if self._leader(node):  # the workers' counts once per cluster: on the leader
            yield from self._workers(assignment)

    def connector_exposition(self) -> bytes:
        """The per-connector families of ``connect-worker-metrics`` and ``connector-metrics`` in
        Prometheus' text format, on the leader (once per cluster, as the connectors' states are the
        cluster's); ``b""`` on any other node. See :class:`ConnectorSeries`."""
        node = self._node_provider()
        if node is None or node.raft is None or not self._leader(node):
            return b""
        return self.series.exposition(node.herder, key=id(node))

    @staticmethod
    def _leader(node: Any) -> bool:
        coordinator = node.coordinator
        return coordinator is not None and coordinator.active

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
            "offset_commit_failure_percentage": _gauge(ct, "offset_commit_failure_percentage",
                                                       "Percent of offset commit attempts that could not reach "
                                                       "the control plane", labels),
            "offset_commit_success_percentage": _gauge(ct, "offset_commit_success_percentage",
                                                       "Percent of offset commit attempts that committed", labels),
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
                failed = float(t.get("commit_failures", 0) or 0)  # present once an attempt failed
                attempts = failed + float(t.get("commits", 0) or 0)
                failure_pct = 100.0 * failed / attempts if attempts else 0.0
                m["offset_commit_failure_percentage"].add_metric(lv, failure_pct)
                m["offset_commit_success_percentage"].add_metric(lv, 100.0 - failure_pct if attempts or batches
                                                                 else 0.0)
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


_installed: ConnectMetricsCollector | None = None
_install_lock = threading.Lock()


def install(node_provider: Callable[[], Any]) -> None:
    """Register a :class:`ConnectMetricsCollector` reading ``node_provider()`` in prometheus-client's
    default registry (idempotent: the first provider stays, as in :func:`webapp.metrics.install`)."""
    global _installed
    with _install_lock:
        if _installed is None:
            collector = ConnectMetricsCollector(node_provider)
            REGISTRY.register(collector)
            _installed = collector


def exposition() -> bytes:
    """``GET /metrics``' body in Prometheus' text format (0.0.4): prometheus-client's default
    registry, then the installed collector's per-connector families (nothing before :func:`install`)."""
    body = generate_latest(REGISTRY)
    collector = _installed
    return body if collector is None else body + collector.connector_exposition()
