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

from webapp import environment
from webapp.runtime import registry
from webapp.plugin import BatchResult, ConnectorTaskId, SourceOffset, TaskContext, partition_key
from webapp.states import State, TargetState, reported_state

from . import config_providers
from webapp.kafka.clients import EndOffsetWatcher

from .agent_status import AgentStatusWriter
from .client import ControlPlaneClient, ControlPlaneUnavailable, Fenced
from .engine import BatchEngine, LazySpark, PhaseTimes, use_phases
from .file_watcher import FileChangeWatcher
from .lag import SinkLagMonitor
from .restart import AutoRestartPolicy, RestartTracker

__all__ = ["Worker", "WorkerTask", "TaskExecutor", "TaskMetrics", "batch_topics"]

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
        #: seconds per phase (read, encode, produce, consume, decode, write, commit) since start
        self.phases = PhaseTimes()
        self._samples: deque[tuple[float, int]] = deque([(self.started, 0)])
        #: Connect's task-error-metrics since start (``total_records_skipped``, ...; see :meth:`record_errors`)
        self.errors: dict[str, int] = {}
        #: seconds of all batches since start (Connect's batch averages)
        self.batch_seconds_total = 0.0
        self._version = 0  # bumped by every batch
        self._json: tuple[tuple, dict[str, Any]] | None = None  # as_json of an idle task, reused

    def batch_done(self, records: int, seconds: float, offsets: tuple[SourceOffset, ...] = ()) -> None:
        """Count one committed batch of ``records`` that took ``seconds``; remember committed sink positions."""
        now = self._clock()
        with self._lock:
            self.records += records
            self.batches += 1
            self.last_batch_seconds = seconds
            self.batch_seconds_total += seconds
            self._version += 1
            self._samples.append((now, self.records))
            while len(self._samples) > 2 and self._samples[1][0] <= now - self.RATE_WINDOW:
                self._samples.popleft()
            for o in offsets:
                p = o.partition
                if "kafka_topic" in p and "kafka_offset" in o.offset:
                    self.sink_positions[(p["kafka_topic"], int(p["kafka_partition"]))] = int(o.offset["kafka_offset"])

    def record_errors(self, *, failed: int = 0, skipped: int = 0, logged: int = 0, dlq_sent: int = 0,
                      dlq_failed: int = 0) -> None:
        """Count records that failed in a batch: ``failed`` records hit an error, ``skipped`` of them were
        dropped (``errors.tolerance=all``), ``logged`` errors were logged, ``dlq_sent`` produced to the dead
        letter queue and ``dlq_failed`` could not be. Names follow Connect's task-error-metrics."""
        with self._lock:
            e = self.errors
            for key, n in (("total_record_errors", failed), ("total_record_failures", failed),
                           ("total_records_skipped", skipped), ("total_errors_logged", logged),
                           ("deadletterqueue_produce_requests", dlq_sent + dlq_failed),
                           ("deadletterqueue_produce_failures", dlq_failed)):
                if n:
                    e[key] = e.get(key, 0) + int(n)
            if failed:
                e["last_error_timestamp"] = int(time.time() * 1000)
            self._version += 1

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
        """``{"records", "batches", "last_batch_seconds", "batch_seconds_total", "records_per_second"[, "lag"]
        [, "phases"][, "errors"]}``.

        A task without a batch for longer than :attr:`RATE_WINDOW` gets the same
        dict back until something changes (a heartbeat carries a thousand of these
        a second; the caller must not modify it).
        """
        key = (self._version, self.lag, self.phases.version)
        idle = self._clock() - self._samples[-1][0] > self.RATE_WINDOW
        cached = self._json
        if idle and cached is not None and cached[0] == key:
            return cached[1]
        out = {"records": self.records, "batches": self.batches,
               "last_batch_seconds": round(self.last_batch_seconds, 3),
               "records_per_second": round(self.records_per_second(), 1),
               "batch_seconds_total": round(self.batch_seconds_total, 3)}
        if self.errors:
            out["errors"] = dict(self.errors)
        if self.lag is not None:
            out["lag"] = self.lag
        phases = self.phases.as_json()
        if phases:
            out["phases"] = phases
        self._json = (key, out) if idle else None
        return out


def _warm_imports() -> None:
    """Import the data libraries of the in-process path now, so a first batch does not wait for them (~1 s)."""
    import importlib

    for name in ("pyarrow.csv", "pyarrow.json", "pyarrow.parquet", "pyarrow.compute", "polars", "confluent_kafka",
                 "webapp.runtime.engine", "webapp.kafka.spark_io"):
        try:
            importlib.import_module(name)
        except Exception:  # a missing optional library shows where it is used
            log.debug("could not import %s ahead of time", name, exc_info=True)


class TaskExecutor:
    """The bounded pool that runs every task of a worker, one step at a time.

    Kafka Connect gives each task its own thread; here a task is a state machine
    (:class:`WorkerTask`) and a step is one batch (or one idle check). ``threads``
    pool threads run the steps that are due; a task with nothing to do is parked
    in a timer heap (or until woken) and costs no thread, no wake-up and no CPU.
    One extra thread serves the timers. A task never runs two steps at once.

    Args:
        threads: pool size (``RAFTCONNECT_TASK_THREADS``; default ``max(16, 4 × cores)``):
            the number of batches that can be in flight at once on this worker.
    """

    def __init__(self, threads: int | None = None):
        from concurrent.futures import ThreadPoolExecutor

        self.threads = threads or environment.task_threads() \
            or max(16, 4 * (os.cpu_count() or 2))
        self._pool = ThreadPoolExecutor(max_workers=self.threads, thread_name_prefix="task")
        self._heap: list[tuple[float, int, "WorkerTask", int]] = []
        self._seq = 0
        self._cv = threading.Condition()
        self._closed = False
        self._timer = threading.Thread(target=self._timer_loop, name="task-timers", daemon=True)
        self._timer.start()

    def submit(self, task: "WorkerTask") -> None:
        """Run ``task``'s next step as soon as a pool thread is free."""
        if self._closed:
            return
        try:
            self._pool.submit(task._step)
        except RuntimeError:  # shut down meanwhile
            pass

    def schedule(self, task: "WorkerTask", delay: float, token: int) -> None:
        """Run ``task``'s next step after ``delay`` seconds unless its ``token`` changed (it was woken)."""
        import heapq

        with self._cv:
            self._seq += 1
            heapq.heappush(self._heap, (time.monotonic() + delay, self._seq, task, token))
            self._cv.notify()

    def _timer_loop(self) -> None:
        import heapq

        while True:
            with self._cv:
                while not self._closed and (not self._heap or self._heap[0][0] > time.monotonic()):
                    self._cv.wait(None if not self._heap else max(0.0, self._heap[0][0] - time.monotonic()))
                if self._closed:
                    return
                _, _, task, token = heapq.heappop(self._heap)
            task._timer_fired(token)

    def shutdown(self) -> None:
        """Stop the timer thread and the pool (steps in flight finish)."""
        with self._cv:
            self._closed = True
            self._heap.clear()
            self._cv.notify_all()
        self._pool.shutdown(wait=False, cancel_futures=True)


class WorkerTask:
    """One task's lifecycle, run as steps on the worker's :class:`TaskExecutor` (Connect's ``WorkerTask``).

    A step starts the task (first step), runs one batch and commits its offsets
    through the leader, or reports PAUSED and parks until woken. After a batch
    that moved records the next step is queued at once; after an idle one the
    task waits for what the task itself asks (``Task.idle_delay()``: e.g. a JDBC
    source's next poll, or long for a sink that is woken when its partitions get
    records), else for an idle backoff that doubles from 50 ms up to
    ``RAFTCONNECT_TASK_IDLE_MAX_MS`` (1000).

    Offsets are committed only after ``run_batch`` returned (the batch's output
    is durable). A fenced commit (409) means the task moved to another worker:
    this one stops at once without reporting. The thread-like surface
    (``start``, ``is_alive``, ``join``, ``stop``, ``cancel``) is what the
    worker's reconcile uses.

    Args:
        task_id: the task.
        config: effective task config (connector config overlaid with the task config).
        generation: generation at which this worker got the task (fencing token).
        target_state: STARTED or PAUSED.
        client: control-plane client.
        spark: the agent's SparkSession, or a :class:`~webapp.runtime.engine.LazySpark`
            (or a callable returning one, as before).
        kafka_config: librdkafka settings.
        work_dir: scratch directory root of the agent.
        executor: the pool that runs the steps (a private one of 2 threads if None).
        engine: the agent's :class:`~webapp.runtime.engine.BatchEngine`.
        end_offsets: the agent's :class:`~webapp.kafka.clients.EndOffsetWatcher` (sinks sleep on it).
        file_changes: the agent's :class:`~webapp.runtime.file_watcher.FileChangeWatcher` (file sources
            sleep on it).
        idle_backoff: longest wait after a batch that had nothing to do, in seconds.
        restart_seq: the task's restart counter in the view it was started from (see
            ``GroupCoordinator.worker_view``); a different counter in a later view restarts it.
    """

    MIN_IDLE = 0.05

    def __init__(self, *, task_id: ConnectorTaskId, config: dict[str, str], generation: int, target_state: str,
                 client: ControlPlaneClient, spark: Any, kafka_config: dict[str, str],
                 work_dir: str, executor: TaskExecutor | None = None, engine: Any = None,
                 end_offsets: Any = None, idle_backoff: float | None = None, restart_seq: int = 0,
                 file_changes: Any = None):
        self.name = f"task-{task_id}"
        self.task_id = task_id
        self.config = config
        self.generation = generation
        self.target_state = target_state
        self.client = client
        self.spark = spark
        self.kafka_config = kafka_config
        self.work_dir = work_dir
        self.executor = executor
        self.engine = engine
        self.end_offsets = end_offsets
        self.file_changes = file_changes
        self.idle_backoff = idle_backoff if idle_backoff is not None else environment.task_idle_max_s()
        self.restart_seq = restart_seq
        self.metrics = TaskMetrics()
        self.state = State.UNASSIGNED.value
        self._lock = threading.Lock()
        self._stop_event = threading.Event()
        self._done = threading.Event()
        self._started = False
        self._queued = False  # a step is queued or running
        self._wake_pending = False
        self._token = 0
        self._idle = self.MIN_IDLE
        self._task = None
        # Spark jobs of this task run in their own job group, so a task that must stop at once
        # (fenced, or past its graceful stop) can have its in-flight batch cancelled
        self.job_group = f"raftconnect:{task_id}:g{generation}:{uuid.uuid4().hex[:8]}"
        self._spark_context = None
        self._cancelled = False
        self._own_executor = executor is None

    # -- the thread-like surface ------------------------------------------------------
    def start(self) -> None:
        """Queue the first step (which starts the task)."""
        if self.executor is None:
            self.executor = TaskExecutor(threads=2)
        self._started = True
        self.wake()

    def is_alive(self) -> bool:
        """Started and not yet ended (a parked task is alive)."""
        return self._started and not self._done.is_set()

    def join(self, timeout: float | None = None) -> None:
        """Wait up to ``timeout`` seconds for the task to end."""
        self._done.wait(timeout)

    def set_target_state(self, target_state: str) -> None:
        """Pause (PAUSED) or resume (STARTED) between batches."""
        self.target_state = target_state
        self.wake()

    def stop(self) -> None:
        """Ask the task to end after the current batch."""
        self._stop_event.set()
        self.wake()

    def cancel(self) -> None:
        """Stop now: also cancel the Spark jobs of the batch in flight (their output is not committed).

        For a task whose work already belongs to another worker (fenced, or still
        busy after the graceful stop timeout): finishing the batch would only write
        what the new owner writes again. Every connector's batch is crash-safe (a
        cancelled batch is like a killed one: its offsets are not committed), so
        the new owner redoes it. An in-process batch runs to its end, but its
        offsets are not committed either. Safe from any thread; no effect once ended.
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

    def wake(self) -> None:
        """Run the next step now (a parked task), or right after the current one (a running task)."""
        if not self._started or self._done.is_set():
            return
        with self._lock:
            if self._queued:
                self._wake_pending = True
                return
            self._queued = True
            self._token += 1
        self.executor.submit(self)

    def _timer_fired(self, token: int) -> None:
        with self._lock:
            if token != self._token or self._queued:
                return
            self._queued = True
        self.executor.submit(self)

    def _park(self, delay: float | None) -> None:
        """End a step: queue the next one now, after ``delay`` seconds, or (None) when woken."""
        with self._lock:
            if self._wake_pending or self.stopping:
                self._wake_pending = False
                delay = 0.0
            if delay == 0.0:
                self.executor.submit(self)  # stays queued
                return
            self._queued = False
            self._token += 1
            token = self._token
        if delay is not None:
            self.executor.schedule(self, delay, token)

    # -- steps -------------------------------------------------------------------------
    def _report(self, state: str, trace: str | None = None) -> None:
        if state == self.state and trace is None:
            return
        self.state = state
        self.client.report_status(self.task_id.connector, self.task_id.task, self.generation, state, trace)

    def _spark_session(self):
        spark = self.spark
        if isinstance(spark, LazySpark):
            return spark
        if callable(spark) and not hasattr(spark, "sparkContext"):
            spark = spark()  # a factory, as older callers pass
            self.spark = spark
        return spark

    def _begin(self) -> None:
        plugin = registry.resolve(self.config.get("connector.class", ""))
        offsets = self.client.get_offsets(self.task_id.connector)
        work_dir = os.path.join(self.work_dir, "tasks", str(self.task_id))
        os.makedirs(work_dir, exist_ok=True)
        context = TaskContext(task_id=self.task_id, spark=self._spark_session(), kafka_config=dict(self.kafka_config),
                              work_dir=work_dir, offsets={partition_key(o.partition): o for o in offsets},
                              engine=self.engine, end_offsets=self.end_offsets, wake=self.wake,
                              file_changes=self.file_changes, metrics=self.metrics)
        # secrets are resolved here, in the worker, just before the task starts (config_providers)
        task = plugin.cls.task_class(context, config_providers.transform(self.config))
        self._task = task
        task.start()

    def _bind_job_group(self) -> None:
        """Name this task's Spark job group for the step's pool thread (bound when the step touches Spark)."""
        def bound(sc) -> None:
            self._spark_context = sc

        LazySpark.use_job_group(self.job_group, f"task {self.task_id}", bound)
        spark = self.spark
        if isinstance(spark, LazySpark):
            if spark.started:
                spark.session()  # binds now
            return
        sc = getattr(spark, "sparkContext", None)  # a plain SparkSession (tools, tests)
        if sc is not None:
            sc.setJobGroup(self.job_group, f"task {self.task_id}", interruptOnCancel=True)
            self._spark_context = sc

    def _step(self) -> None:  # noqa: C901 - one step reads best in one place
        if self._done.is_set():
            return
        try:
            if self.stopping:
                self._finish()
                return
            if self._task is None:
                self._begin()
            if self.target_state == TargetState.PAUSED:
                self._report(State.PAUSED.value)
                self._park(None)
                return
            self._report(State.RUNNING.value)
            self._bind_job_group()
            t0 = time.monotonic()
            debug = log.isEnabledFor(logging.DEBUG)
            before = dict(self.metrics.phases.seconds) if debug else None
            use_phases(self.metrics.phases)
            try:
                result: BatchResult | None = self._task.run_batch()
            finally:
                use_phases(None)
            if result is None:
                hint = getattr(self._task, "idle_delay", None)
                delay = hint() if callable(hint) else None
                if delay is None:
                    delay, self._idle = self._idle, min(self.idle_backoff, self._idle * 2)
                self._park(max(0.0, delay) or self.MIN_IDLE)
                return
            self._idle = self.MIN_IDLE
            if self._cancelled:  # fenced or past its graceful stop: its work belongs to another worker
                raise _Cancelled()
            if result.offsets:
                c0 = time.perf_counter()
                self.client.commit_offsets(self.task_id, self.generation, list(result.offsets),
                                           topics=batch_topics(self.config, result))
                self.metrics.phases.add("commit", time.perf_counter() - c0)
            took = time.monotonic() - t0
            self.metrics.batch_done(result.records, took, tuple(result.offsets))
            if debug:
                spent = {k: round(v - before.get(k, 0.0), 3) for k, v in self.metrics.phases.seconds.items()
                         if v - before.get(k, 0.0) > 0.0005}
                log.debug("task %s: batch of %d records in %.3f s %s", self.task_id, result.records, took, spent)
            self._park(0.0)
        except Fenced as exc:
            log.warning("task %s fenced, stopping: %s", self.task_id, exc)
            self.state = "FENCED"
            self._finish()
        except _Cancelled:
            log.warning("task %s stopped: its batch in flight was cancelled", self.task_id)
            self._finish()
        except Exception:
            if self._cancelled:  # the batch in flight was cancelled on purpose: not a failure
                log.warning("task %s stopped: its batch in flight was cancelled", self.task_id)
                self._finish()
                return
            trace = traceback.format_exc()
            log.error("task %s failed:\n%s", self.task_id, trace)
            try:
                self._report(State.FAILED.value, trace)
            except Exception:
                log.exception("could not report failure of %s", self.task_id)
            self._finish()
        except BaseException:
            self._finish()
            raise

    def _finish(self) -> None:
        task, self._task = self._task, None
        if task is not None:
            try:
                task.stop()
            except Exception:
                log.exception("task %s stop failed", self.task_id)
        self._done.set()
        if self._own_executor and self.executor is not None:
            self.executor.shutdown()


class _Cancelled(Exception):
    """A batch finished after its task was cancelled: nothing of it is committed."""


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
        self.graceful_stop_timeout = environment.task_shutdown_graceful_timeout_s()
        self._spark_factory = spark_factory
        self._spark_lock = threading.Lock()
        #: the agent's SparkSession, started by the first batch that runs on Spark (or by :meth:`spark`)
        self.lazy_spark = LazySpark(spark_factory)
        #: runs every task's steps (no thread per task)
        self.executor = TaskExecutor()
        #: where batches run: in-process or as Spark jobs
        self.engine = BatchEngine(self.lazy_spark, kafka_config=kafka_config)
        #: end offsets of the partitions idle sink tasks wait on (one admin client per agent)
        self.end_offsets = EndOffsetWatcher(kafka_config)
        #: the files idle file-source tasks follow (one stat loop per agent instead of a step per task)
        self.file_changes = FileChangeWatcher()
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
        self._connector_pool = None  # starts connector instances of a view in parallel (created on first need)
        self._last_view: dict[str, Any] | None = None  # the newest full view (its digest rides on heartbeats)
        self._acked_tasks: dict[str, Any] | None = None  # the task entries of the last acknowledged heartbeat
        self._reconciled: dict[str, Any] | None = None  # the view the last full reconcile applied
        self.lag_monitor = SinkLagMonitor(kafka_config, self._task_metrics, end_offsets=self.end_offsets)
        self.restart_tracker = RestartTracker()
        #: what the node's GET /health reads about this agent (see webapp.runtime.agent_status)
        self.status_file = AgentStatusWriter(data_dir, worker_id)
        #: assignment generations that reached this agent first by each path (``celery``, ``heartbeat``)
        self.first_delivered_by: dict[str, int] = {"celery": 0, "heartbeat": 0}
        self._newest_generation = -1

    def spark(self):
        """The agent's SparkSession, created now if no batch has needed it yet."""
        return self.lazy_spark.session()

    # -------------------------------------------------------------- lifecycle
    def start(self) -> None:
        """Start heartbeating (the first heartbeat joins the group) and the reconcile thread."""
        self.status_file.started()
        self._reconcile_thread = threading.Thread(target=self._reconcile_loop, name="reconcile", daemon=True)
        self._reconcile_thread.start()
        self._hb_thread = threading.Thread(target=self._heartbeat_loop, name="heartbeat", daemon=True)
        self._hb_thread.start()
        threading.Thread(target=self._warm, name="warm-up", daemon=True).start()
        self.lag_monitor.start()

    def _warm(self) -> None:
        """Start the engine's worker processes and import the data libraries before the first batch needs them.

        The processes are spawned first, on their own thread: their start-up (~2 s of imports
        each here) then overlaps the agent's own, and a pipeline created right after the node
        starts finds them ready sooner.
        """
        t0 = time.monotonic()

        def processes() -> None:
            try:
                self.engine.warm()
                log.info("engine worker processes warm after %.1f s", time.monotonic() - t0)
            except Exception:
                log.warning("the engine's worker processes did not start; pieces run on threads", exc_info=True)

        spawner = threading.Thread(target=processes, name="warm-processes", daemon=True)
        spawner.start()
        _warm_imports()
        try:
            from .engine import warm_producer

            warm_producer(self.kafka_config)  # for pieces that run on the agent's threads
        except Exception:
            log.debug("no producer warmed", exc_info=True)
        log.info("agent libraries and producer warm after %.1f s", time.monotonic() - t0)

    def shutdown(self, timeout: float = 30.0) -> None:
        """Stop every task (bounded by ``timeout`` seconds) and leave the group."""
        self._stop.set()
        with self._pending_cv:
            self._pending_cv.notify_all()
        self.stop_all(timeout)
        self.lag_monitor.stop()
        self.end_offsets.stop()
        self.file_changes.stop()
        self.executor.shutdown()
        if self._connector_pool is not None:
            self._connector_pool.shutdown(wait=False, cancel_futures=True)
        self.engine.shutdown()
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
        self._last_view = None  # and ask for it whole

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

    def _report(self, running: dict[str, Any]) -> dict[str, Any]:
        """What a heartbeat carries of ``running``: everything, or (``tasks_delta``) only the task entries
        that changed since the report the coordinator last acknowledged, with every task's key.

        A thousand idle tasks then cost a list of keys per second, not a thousand metric entries
        each way. The full report goes after a failed heartbeat or when the coordinator asks for it.
        """
        tasks = running["tasks"]
        base = self._acked_tasks
        if base is None:
            return running
        return {**running, "tasks": {k: v for k, v in tasks.items() if base.get(k) != v},
                "task_keys": list(tasks), "tasks_delta": True}

    def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            ok = False
            try:
                t0 = time.monotonic()
                running = self.running()
                if self._last_view is not None:
                    running["view_digest"] = self._last_view.get("digest")
                report = self._report(running)
                self._acked_tasks = None  # until acknowledged: after a lost answer the next report is full
                view = self.client.heartbeat(self.member, report)
                self._acked_tasks = None if view.get("report_full") else running["tasks"]
                took = time.monotonic() - t0
                if took > 1.0:
                    log.warning("heartbeat took %.2f s (session timeout %.1f s)", took, self.session_timeout)
                ok = True
                self._last_contact = time.monotonic()
                self.session_timeout = view.get("session_timeout_ms", 5000) / 1000.0
                self._record_heartbeat(running, ok=True)
                if view.get("unchanged") and self._last_view is not None \
                        and view.get("digest") == self._last_view.get("digest"):
                    view = self._last_view  # re-applied: failed tasks' automatic restarts are decided there
                self.apply_assignment(view, via="heartbeat")
            except (ControlPlaneUnavailable, Fenced, RuntimeError) as exc:
                silent = time.monotonic() - self._last_contact
                if silent > self.session_timeout and (self.tasks or self.connectors):
                    log.warning("no contact with the coordinator for %.1f s (> session timeout): stopping all tasks",
                                silent)
                    self.fence_all()
                log.debug("heartbeat failed: %s", exc)
                self._record_heartbeat(None, ok=False, error=f"{type(exc).__name__}: {exc}")
            except Exception:
                log.exception("heartbeat loop error")
            # after a failure try again soon: the session is running out
            self._stop.wait(self.heartbeat_interval if ok else min(0.2, self.heartbeat_interval))

    def _record_heartbeat(self, running: dict[str, Any] | None, *, ok: bool, error: str | None = None) -> None:
        """Note a heartbeat attempt in the status file the node's ``/health`` reads; never raises."""
        try:
            counts = {} if running is None else {"generation": running["generation"],
                                                 "connectors": len(running["connectors"]),
                                                 "tasks": len(running["tasks"])}
            self.status_file.heartbeat(ok=ok, error=error, session_timeout_s=self.session_timeout,
                                       spark=self.lazy_spark.health(), first_delivered_by=dict(self.first_delivered_by),
                                       **counts)
        except Exception:  # the heartbeat matters more than its record
            log.debug("could not record the heartbeat", exc_info=True)

    # -------------------------------------------------------------- reconcile
    def apply_assignment(self, view: dict[str, Any], via: str = "celery") -> None:
        """Queue ``view`` (see GroupCoordinator.worker_view) to be applied; returns at once.

        Only the newest view is kept; views older than the newest applied are
        ignored. Applying happens on the reconcile thread, so a heartbeat never
        waits for a connector or a stopping task (which could take a whole batch)
        and the session cannot expire because of it. ``via`` (``"celery"`` or
        ``"heartbeat"``) names the path the view came by: the first to bring a new
        generation is counted in :attr:`first_delivered_by`.
        """
        if self._stop.is_set() or view.get("unchanged"):
            return
        generation = view.get("generation", 0)
        if generation > self._newest_generation:
            self._newest_generation = generation
            self.first_delivered_by[via] = self.first_delivered_by.get(via, 0) + 1
        if "tasks" in view:
            self._last_view = view
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
            if view is self._reconciled and len(self.connectors) == len(view.get("connectors", {})) \
                    and all(t.is_alive() for t in self.tasks.values()):
                return  # re-applied after an "unchanged" heartbeat, and nothing ended or failed since
            self._reconciled = view
            self.generation = view.get("generation", 0)
            # tasks first: those already configured start now, not after every connector of the view
            self._reconcile_tasks(view.get("tasks", {}))
            self._reconcile_connectors(view.get("connectors", {}))

    def _reconcile_connectors(self, wanted: dict[str, Any]) -> None:
        """Start, stop or update connector instances; the ones that changed are handled in parallel
        (each costs a few control-plane calls: task configs, status)."""
        for name in list(self.connectors):
            if name not in wanted:
                with self._snapshot_lock:
                    self.connectors.pop(name)
        changed = []
        for name, c in wanted.items():
            have = self.connectors.get(name)
            fresh = have is None or have["config"] != c["config"] or have["generation"] != c["generation"] \
                or have.get("restart", 0) != c.get("restart", 0)
            if not fresh and have["target_state"] == c["target_state"] and have["tasks"] == c["tasks"]:
                continue
            changed.append((name, c, have, fresh))
        if len(changed) <= 1:
            for args in changed:
                self._reconcile_connector(*args)
            return
        if self._connector_pool is None:
            from concurrent.futures import ThreadPoolExecutor

            self._connector_pool = ThreadPoolExecutor(max_workers=8, thread_name_prefix="connector")
        list(self._connector_pool.map(lambda args: self._reconcile_connector(*args), changed))

    def _reconcile_connector(self, name: str, c: dict[str, Any], have: dict[str, Any] | None, fresh: bool) -> None:
        """Bring one connector instance in line with its entry of the view (start it, report its state)."""
        with self._snapshot_lock:
            self.connectors[name] = {"config": c["config"], "generation": c["generation"],
                                     "target_state": c["target_state"], "tasks": c["tasks"],
                                     "restart": c.get("restart", 0)}
        try:
            if have is not None and have.get("restart", 0) != c.get("restart", 0) and c["target_state"] != TargetState.STOPPED:
                self.client.report_status(name, None, c["generation"], State.RESTARTING.value)
            if c["target_state"] != TargetState.STOPPED and (fresh or have["target_state"] == TargetState.STOPPED):
                plugin = registry.resolve(c["config"].get("connector.class", ""))
                connector = plugin.cls()
                resolved = config_providers.transform(c["config"])  # ${provider:...} resolved only here
                connector.start(resolved)
                configs = connector.task_configs(int(resolved.get("tasks.max", "1")))
                connector.stop()
                configs = config_providers.reverse_transform(c["config"], resolved, configs)
                if configs != c["tasks"]:
                    self.client.put_task_configs(name, c["generation"], configs)
            state = reported_state(c["target_state"]).value
            self.client.report_status(name, None, c["generation"], state)
        except Fenced as exc:
            log.warning("connector %s fenced: %s", name, exc)
            with self._snapshot_lock:
                self.connectors.pop(name, None)
        except Exception:
            trace = traceback.format_exc()
            log.error("connector %s failed:\n%s", name, trace)
            try:
                self.client.report_status(name, None, c["generation"], State.FAILED.value, trace)
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
                if w is not None and not restart and not t.is_alive() and t.state == State.FAILED \
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
                if restart and w["target_state"] != TargetState.STOPPED:
                    try:
                        self.client.report_status(w["connector"], w["task"], w["generation"], State.RESTARTING.value)
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
                           spark=self.lazy_spark, kafka_config=self.kafka_config, work_dir=self.data_dir,
                           executor=self.executor, engine=self.engine, end_offsets=self.end_offsets,
                           restart_seq=w.get("restart", 0), file_changes=self.file_changes)
            with self._snapshot_lock:
                self.tasks[key] = t
            t.start()
