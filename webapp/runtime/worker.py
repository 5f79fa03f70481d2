"""Worker and WorkerTask: the agent side of the runtime (Kafka Connect's ``Worker``).

Owns, inside one agent process: reconciling what runs with the assignment view
the coordinator sends (Celery message or heartbeat reply), one thread per
running task (``WorkerTask``) that loops over micro-batches and commits each
batch's offsets through the leader, connector instances that produce task
configs, heartbeats, and stopping everything when the coordinator cannot be
reached for longer than the session timeout (no zombie keeps writing).

Does not decide assignment and never writes metadata directly.
"""
from __future__ import annotations

import logging
import os
import threading
import time
import traceback
import uuid
from collections import deque
from typing import Any, Callable

from webapp.connectors import registry
from webapp.connectors.api import BatchResult, ConnectorTaskId, SourceOffset, TaskContext, partition_key

from . import config_providers
from .client import ControlPlaneClient, ControlPlaneUnavailable, Fenced
from .lag import SinkLagMonitor
from .restart import AutoRestartPolicy, RestartTracker

__all__ = ["Worker", "WorkerTask", "TaskMetrics", "batch_topics"]

log = logging.getLogger(__name__)


def batch_topics(config: dict[str, str], result: BatchResult) -> list[str]:
    """Kafka topics one batch used (Connect's active topics): a sink's come from the
    ``kafka_topic`` of its committed partitions, a source's from its ``topic`` config
    when the batch produced records."""
    topics = {str(o.partition["kafka_topic"]) for o in result.offsets if "kafka_topic" in o.partition}
    if not topics and result.records and config.get("topic"):
        topics.add(config["topic"])
    return sorted(topics)


class TaskMetrics:
    """Counters of one task, read by the heartbeat thread while the task thread updates them.

    ``records`` and ``batches`` count since the task started here; the rate is over
    the last :attr:`RATE_WINDOW` seconds (0 when idle that long); ``lag`` is the
    consumer lag of a sink task in records (Kafka's end offset minus the committed
    position, summed over its partitions; set by
    :class:`~webapp.runtime.lag.SinkLagMonitor`), ``None`` while unknown.
    ``sink_positions`` is ``{(topic, partition): next offset to read}`` as committed.
    """

    RATE_WINDOW = 30.0

    def __init__(self, clock: Callable[[], float] = time.monotonic) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.records = 0
        self.batches = 0
        self.last_batch_seconds = 0.0
        self.started = clock()
        self.sink_positions: dict[tuple[str, int], int] = {}
        self.lag: int | None = None
        self._samples: deque[tuple[float, int]] = deque([(self.started, 0)])

    def batch_done(self, records: int, seconds: float, offsets: tuple[SourceOffset, ...] = ()) -> None:
        """Count one committed batch of ``records`` that took ``seconds``; remember committed sink positions."""
        now = self._clock()
        with self._lock:
            self.records += records
            self.batches += 1
            self.last_batch_seconds = seconds
            self._samples.append((now, self.records))
            while len(self._samples) > 2 and self._samples[1][0] <= now - self.RATE_WINDOW:
                self._samples.popleft()
            for o in offsets:
                p = o.partition
                if "kafka_topic" in p and "kafka_offset" in o.offset:
                    self.sink_positions[(p["kafka_topic"], int(p["kafka_partition"]))] = int(o.offset["kafka_offset"])

    def records_per_second(self) -> float:
        """Records per second over about the last :attr:`RATE_WINDOW` seconds."""
        now = self._clock()
        with self._lock:
            base_t, base_n = self._samples[0]
            for t, n in self._samples:  # the newest sample at or before the window start
                if t > now - self.RATE_WINDOW:
                    break
                base_t, base_n = t, n
            return (self.records - base_n) / max(now - base_t, 1e-9)

    def as_json(self) -> dict[str, Any]:
        """``{"records", "batches", "last_batch_seconds", "records_per_second"[, "lag"]}``."""
        out = {"records": self.records, "batches": self.batches,
               "last_batch_seconds": round(self.last_batch_seconds, 3),
               "records_per_second": round(self.records_per_second(), 1)}
        if self.lag is not None:
            out["lag"] = self.lag
        return out


class WorkerTask(threading.Thread):
    """One task's loop: start, then micro-batches until stopped; pause honoured between batches.

    Offsets are committed through the leader only after ``run_batch`` returned
    (the batch's output is durable). A fenced commit (409) means the task moved
    to another worker: this one stops at once without reporting.

    Args:
        task_id: the task.
        config: effective task config (connector config overlaid with the task config).
        generation: generation at which this worker got the task (fencing token).
        target_state: STARTED or PAUSED.
        client: control-plane client.
        spark: callable returning the agent's SparkSession (created lazily).
        kafka_config: librdkafka settings.
        work_dir: scratch directory root of the agent.
        idle_backoff: seconds to wait after a batch that had nothing to do.
        restart_seq: the task's restart counter in the view it was started from (see
            ``GroupCoordinator.worker_view``); a different counter in a later view restarts it.
    """

    def __init__(self, *, task_id: ConnectorTaskId, config: dict[str, str], generation: int, target_state: str,
                 client: ControlPlaneClient, spark: Callable[[], Any], kafka_config: dict[str, str],
                 work_dir: str, idle_backoff: float = 0.5, restart_seq: int = 0):
        super().__init__(name=f"task-{task_id}", daemon=True)
        self.task_id = task_id
        self.config = config
        self.generation = generation
        self.target_state = target_state
        self.client = client
        self.spark = spark
        self.kafka_config = kafka_config
        self.work_dir = work_dir
        self.idle_backoff = idle_backoff
        self.restart_seq = restart_seq
        self.metrics = TaskMetrics()
        self.state = "UNASSIGNED"
        self._stop_event = threading.Event()
        self._wake = threading.Event()
        # Spark jobs of this task run in their own job group, so a task that must stop at once
        # (fenced, or past its graceful stop) can have its in-flight batch cancelled
        self.job_group = f"raftconnect:{task_id}:g{generation}:{uuid.uuid4().hex[:8]}"
        self._spark_context = None
        self._cancelled = False

    def set_target_state(self, target_state: str) -> None:
        """Pause (PAUSED) or resume (STARTED) between batches."""
        self.target_state = target_state
        self._wake.set()

    def stop(self) -> None:
        """Ask the loop to end after the current batch."""
        self._stop_event.set()
        self._wake.set()

    def cancel(self) -> None:
        """Stop now: also cancel the Spark jobs of the batch in flight (their output is not committed).

        For a task whose work already belongs to another worker (fenced, or still
        busy after the graceful stop timeout): finishing the batch would only write
        what the new owner writes again. Every connector's batch is crash-safe (a
        cancelled batch is like a killed one: its offsets are not committed), so
        the new owner redoes it. Safe from any thread; no effect once the loop ended.
        """
        self._cancelled = True
        self.stop()
        sc = self._spark_context
        if sc is not None and self.is_alive():
            try:
                sc.cancelJobGroup(self.job_group)
            except Exception:  # the session may be stopping too
                log.debug("could not cancel the Spark jobs of %s", self.task_id, exc_info=True)

    @property
    def stopping(self) -> bool:
        return self._stop_event.is_set()

    def _report(self, state: str, trace: str | None = None) -> None:
        if state == self.state and trace is None:
            return
        self.state = state
        self.client.report_status(self.task_id.connector, self.task_id.task, self.generation, state, trace)

    def run(self) -> None:  # noqa: C901 - the loop reads best in one place
        task = None
        try:
            plugin = registry.resolve(self.config.get("connector.class", ""))
            offsets = self.client.get_offsets(self.task_id.connector)
            work_dir = os.path.join(self.work_dir, "tasks", str(self.task_id))
            os.makedirs(work_dir, exist_ok=True)
            spark = self.spark()
            context = TaskContext(task_id=self.task_id, spark=spark, kafka_config=dict(self.kafka_config),
                                  work_dir=work_dir, offsets={partition_key(o.partition): o for o in offsets})
            sc = getattr(spark, "sparkContext", None)
            if sc is not None:  # job groups are per thread (PySpark's pinned thread mode)
                sc.setJobGroup(self.job_group, f"task {self.task_id}", interruptOnCancel=True)
                self._spark_context = sc
            # secrets are resolved here, in the worker, just before the task starts (config_providers)
            task = plugin.cls.task_class(context, config_providers.transform(self.config))
            task.start()
            while not self.stopping:
                if self.target_state == "PAUSED":
                    self._report("PAUSED")
                    self._wake.wait(1.0)
                    self._wake.clear()
                    continue
                self._report("RUNNING")
                t0 = time.monotonic()
                result: BatchResult | None = task.run_batch()
                if result is None:
                    self._wake.wait(self.idle_backoff)
                    self._wake.clear()
                    continue
                if result.offsets:
                    self.client.commit_offsets(self.task_id, self.generation, list(result.offsets),
                                               topics=batch_topics(self.config, result))
                self.metrics.batch_done(result.records, time.monotonic() - t0, tuple(result.offsets))
        except Fenced as exc:
            log.warning("task %s fenced, stopping: %s", self.task_id, exc)
            self.state = "FENCED"
        except Exception:
            if self._cancelled:  # the batch in flight was cancelled on purpose: not a failure
                log.warning("task %s stopped: its batch in flight was cancelled", self.task_id)
                return
            trace = traceback.format_exc()
            log.error("task %s failed:\n%s", self.task_id, trace)
            try:
                self._report("FAILED", trace)
            except Exception:
                log.exception("could not report failure of %s", self.task_id)
        finally:
            if task is not None:
                try:
                    task.stop()
                except Exception:
                    log.exception("task %s stop failed", self.task_id)


class Worker:
    """The agent's worker: reconciles running connectors and tasks with the coordinator's view.

    Args:
        worker_id: this worker's id (= node id).
        client: control-plane client.
        member: what the worker tells the coordinator about itself
            (``{"rest_address", "weight", "roles", "raft_address"}``).
        kafka_config: librdkafka settings for tasks.
        data_dir: the node's data directory (task scratch space goes under it).
        spark_factory: callable creating the SparkSession (called once, lazily).
        heartbeat_interval: seconds between heartbeats.
    """

    def __init__(self, *, worker_id: str, client: ControlPlaneClient, member: dict[str, Any],
                 kafka_config: dict[str, str], data_dir: str, spark_factory: Callable[[], Any],
                 heartbeat_interval: float = 1.0):
        self.worker_id = worker_id
        self.client = client
        self.member = member
        self.kafka_config = kafka_config
        self.data_dir = data_dir
        self.heartbeat_interval = heartbeat_interval
        self.session_timeout = 5.0
        #: seconds a stopped task may take to finish its batch before it is cancelled (Connect's
        #: task.shutdown.graceful.timeout.ms, default 5 s)
        self.graceful_stop_timeout = float(os.environ.get("RAFTCONNECT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS", "5000")) / 1000
        self._spark_factory = spark_factory
        self._spark = None
        self._spark_lock = threading.Lock()
        self._lock = threading.RLock()  # held by the reconcile thread while it changes what runs
        self._snapshot_lock = threading.Lock()  # short: guards the dicts for readers (heartbeat)
        self.tasks: dict[str, WorkerTask] = {}
        self.connectors: dict[str, dict[str, Any]] = {}
        self.generation = -1
        self._stop = threading.Event()
        self._last_contact = time.monotonic()
        self._hb_thread: threading.Thread | None = None
        self._reconcile_thread: threading.Thread | None = None
        self._pending: dict[str, Any] | None = None  # newest view not yet applied
        self._pending_cv = threading.Condition()
        self.lag_monitor = SinkLagMonitor(kafka_config, self._task_metrics)
        self.restart_tracker = RestartTracker()

    def spark(self):
        """The agent's SparkSession, created on first use."""
        with self._spark_lock:
            if self._spark is None:
                self._spark = self._spark_factory()
            return self._spark

    # -------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start heartbeating (the first heartbeat joins the group) and the reconcile thread."""
        self._reconcile_thread = threading.Thread(target=self._reconcile_loop, name="reconcile", daemon=True)
        self._reconcile_thread.start()
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._hb_thread.start()
        self.lag_monitor.start()

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop every task (bounded by ``timeout`` seconds) and leave the group."""
        self._stop.set()
        with self._pending_cv:
            self._pending_cv.notify_all()
        self.stop_all(timeout)
        self.lag_monitor.stop()
        try:
            self.client.leave()
        except Exception:
            pass

    def stop_all(self, timeout: float = 30.0) -> None:
        """Stop all tasks and connectors; wait up to ``timeout`` seconds for task threads."""
        with self._lock, self._snapshot_lock:
            tasks = list(self.tasks.values())
            self.tasks.clear()
            self.connectors.clear()
        for t in tasks:
            t.stop()
        deadline = time.monotonic() + timeout
        for t in tasks:
            t.join(max(0.0, deadline - time.monotonic()))
        for t in tasks:
            if t.is_alive():
                t.cancel()

    def fence_all(self) -> None:
        """Stop every task now, cancelling its batch in flight, without waiting (safe from the heartbeat thread).

        Used when the coordinator has been unreachable for longer than the session
        timeout: the tasks have been given to others, so none may keep writing
        (see :meth:`WorkerTask.cancel`).
        The reconcile thread removes the stopped threads when the next view arrives.
        """
        with self._snapshot_lock:
            tasks = list(self.tasks.values())
            self.connectors.clear()
        for t in tasks:
            t.cancel()
        self.generation = -1  # accept whatever view comes next

    def _task_metrics(self) -> list[TaskMetrics]:
        with self._snapshot_lock:
            return [t.metrics for t in self.tasks.values() if t.is_alive()]

    def running(self) -> dict[str, Any]:
        """What runs here: ``{"generation", "connectors": [...], "tasks": {key: {"state", metrics...}}}``."""
        with self._snapshot_lock:
            tasks = list(self.tasks.items())
            connectors = sorted(self.connectors)
        return {"generation": self.generation, "connectors": connectors,
                "tasks": {k: {"state": t.state, "connector": t.task_id.connector, "task": t.task_id.task,
                              **t.metrics.as_json()} for k, t in tasks if t.is_alive()}}

    def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            ok = False
            try:
                t0 = time.monotonic()
                view = self.client.heartbeat(self.member, self.running())
                took = time.monotonic() - t0
                if took > 1.0:
                    log.warning("heartbeat took %.2f s (session timeout %.1f s)", took, self.session_timeout)
                ok = True
                self._last_contact = time.monotonic()
                self.session_timeout = view.get("session_timeout_ms", 5000) / 1000.0
                self.apply_assignment(view)
            except (ControlPlaneUnavailable, Fenced, RuntimeError) as exc:
                silent = time.monotonic() - self._last_contact
                if silent > self.session_timeout and (self.tasks or self.connectors):
                    log.warning("no contact with the coordinator for %.1f s (> session timeout): stopping all tasks",
                                silent)
                    self.fence_all()
                log.debug("heartbeat failed: %s", exc)
            except Exception:
                log.exception("heartbeat loop error")
            # after a failure try again soon: the session is running out
            self._stop.wait(self.heartbeat_interval if ok else min(0.2, self.heartbeat_interval))

    # -------------------------------------------------------------- reconcile
    def apply_assignment(self, view: dict[str, Any]) -> None:
        """Queue ``view`` (see GroupCoordinator.worker_view) to be applied; returns at once.

        Only the newest view is kept; views older than the newest applied are
        ignored. Applying happens on the reconcile thread, so a heartbeat never
        waits for a connector or a stopping task (which could take a whole batch)
        and the session cannot expire because of it.
        """
        if self._stop.is_set():
            return
        with self._pending_cv:
            if self._pending is None or view.get("generation", 0) >= self._pending.get("generation", 0):
                self._pending = view
            self._pending_cv.notify()

    def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            with self._pending_cv:
                while self._pending is None and not self._stop.is_set():
                    self._pending_cv.wait(1.0)
                view, self._pending = self._pending, None
            if view is None or self._stop.is_set():
                continue
            try:
                self.reconcile(view)
            except Exception:
                log.exception("reconcile failed")

    def reconcile(self, view: dict[str, Any]) -> None:
        """Make what runs here match ``view`` now; idempotent (called by the reconcile thread)."""
        with self._lock:
            if view.get("generation", 0) < self.generation:
                return
            self.generation = view.get("generation", 0)
            self._reconcile_connectors(view.get("connectors", {}))
            self._reconcile_tasks(view.get("tasks", {}))

    def _reconcile_connectors(self, wanted: dict[str, Any]) -> None:
        for name in list(self.connectors):
            if name not in wanted:
                with self._snapshot_lock:
                    self.connectors.pop(name)
        for name, c in wanted.items():
            have = self.connectors.get(name)
            fresh = have is None or have["config"] != c["config"] or have["generation"] != c["generation"] \
                or have.get("restart", 0) != c.get("restart", 0)
            if not fresh and have["target_state"] == c["target_state"] and have["tasks"] == c["tasks"]:
                continue
            with self._snapshot_lock:
                self.connectors[name] = {"config": c["config"], "generation": c["generation"],
                                         "target_state": c["target_state"], "tasks": c["tasks"],
                                         "restart": c.get("restart", 0)}
            try:
                if have is not None and have.get("restart", 0) != c.get("restart", 0) and c["target_state"] != "STOPPED":
                    self.client.report_status(name, None, c["generation"], "RESTARTING")
                if c["target_state"] != "STOPPED" and (fresh or have["target_state"] == "STOPPED"):
                    plugin = registry.resolve(c["config"].get("connector.class", ""))
                    connector = plugin.cls()
                    resolved = config_providers.transform(c["config"])  # ${provider:...} resolved only here
                    connector.start(resolved)
                    configs = connector.task_configs(int(resolved.get("tasks.max", "1")))
                    connector.stop()
                    configs = config_providers.reverse_transform(c["config"], resolved, configs)
                    if configs != c["tasks"]:
                        self.client.put_task_configs(name, c["generation"], configs)
                state = {"STARTED": "RUNNING", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}[c["target_state"]]
                self.client.report_status(name, None, c["generation"], state)
            except Fenced as exc:
                log.warning("connector %s fenced: %s", name, exc)
                with self._snapshot_lock:
                    self.connectors.pop(name, None)
            except Exception:
                trace = traceback.format_exc()
                log.error("connector %s failed:\n%s", name, trace)
                try:
                    self.client.report_status(name, None, c["generation"], "FAILED", trace)
                except Exception:
                    log.exception("could not report connector failure")

    def _reconcile_tasks(self, wanted: dict[str, Any]) -> None:
        for key in list(self.tasks):
            t = self.tasks[key]
            w = wanted.get(key)
            if w is None:
                self.restart_tracker.forget(key)
            restart = w is not None and w.get("restart", 0) != t.restart_seq  # an operator's restart request
            if w is None or w["generation"] != t.generation or w["config"] != t.config or not t.is_alive() or restart:
                if w is not None and not restart and not t.is_alive() and t.state == "FAILED" \
                        and w["generation"] == t.generation and w["config"] == t.config:
                    # failed tasks are not restarted silently, unless the connector opted in
                    policy = AutoRestartPolicy.from_config(t.config)
                    if not policy.enabled or not self.restart_tracker.failed(key, t, policy, t.metrics.started):
                        continue
                    log.warning("task %s: automatic restart after %d failure(s)", key,
                                self.restart_tracker.failures(key))
                    restart = True
                elif restart:
                    self.restart_tracker.forget(key)
                t.stop()
                t.join(self.graceful_stop_timeout)
                if t.is_alive():  # its work may already run elsewhere: do not finish the batch
                    log.warning("task %s still busy %.0f s after stop: cancelling its batch in flight", key,
                                self.graceful_stop_timeout)
                    t.cancel()
                    t.join(60)
                with self._snapshot_lock:
                    del self.tasks[key]
                if restart and w["target_state"] != "STOPPED":
                    try:
                        self.client.report_status(w["connector"], w["task"], w["generation"], "RESTARTING")
                    except Exception:
                        log.exception("could not report RESTARTING for %s", key)
        for key, w in wanted.items():
            t = self.tasks.get(key)
            if t is not None:
                if t.target_state != w["target_state"]:
                    t.set_target_state(w["target_state"])
                continue
            t = WorkerTask(task_id=ConnectorTaskId(w["connector"], w["task"]), config=w["config"],
                           generation=w["generation"], target_state=w["target_state"], client=self.client,
                           spark=self.spark, kafka_config=self.kafka_config, work_dir=self.data_dir,
                           restart_seq=w.get("restart", 0))
            with self._snapshot_lock:
                self.tasks[key] = t
            t.start()
