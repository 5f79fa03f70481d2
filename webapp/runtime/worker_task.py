"""WorkerTask and TaskExecutor: one task's lifecycle as steps on a bounded pool (Connect's ``WorkerTask``).

Owns :class:`WorkerTask` (start, one batch per step, committing its offsets through
the leader with its generation, pausing, parking while idle, stopping and cancelling
a batch in flight) and :class:`TaskExecutor` (the pool of step threads and the timer
heap that parks idle tasks without a thread).

Must not touch: what runs where (the :class:`~webapp.runtime.worker.Worker` reconciles
that); metadata except through the control-plane client; a connector's code beyond
the plugin API (``webapp.plugin``).
"""
from __future__ import annotations

import logging
import os
import threading
import time
import traceback
import uuid
from typing import Any

from webapp import environment
from webapp.plugin import BatchResult, ConnectorTaskId, SourceOffset, TaskContext, partition_key
from webapp.runtime import registry
from webapp.states import State, TargetState

from . import config_providers, converter_defaults
from .client import ControlPlaneClient, ControlPlaneUnavailable, Fenced
from .engine import LazySpark, use_phases
from .task_metrics import TaskMetrics, batch_topics

__all__ = ["WorkerTask", "TaskExecutor"]

log = logging.getLogger(__name__)


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
    is durable): after every batch by default, or at most every
    ``offset_flush_interval`` seconds (Connect's ``offset.flush.interval.ms``), the
    newest offset of each partition since the last commit, and when the task
    pauses, stops or fails (as Connect's ``WorkerSourceTask`` commits after a
    failure: the batches before it are durable). A crash replays what was not
    committed: one batch, or up to one interval. A control plane that does not answer (no leader, the
    metadata store down: :class:`ControlPlaneUnavailable`) fails no task, as Connect retries its offset
    flushes and status writes: a commit that cannot get through within ``offset.flush.timeout.ms`` (the
    client's ``commit_timeout``), a task start that cannot read its offsets, or a state report the leader
    did not take *holds* the task: it keeps its offsets, runs no new batch (so a crash still replays no
    more than before) and tries again every :attr:`COMMIT_RETRY_S` seconds until the control plane
    answers, the task is fenced, or it stops.
    A fenced commit (409) means the task moved to another worker:
    this one stops at once without reporting, and a cancelled one commits nothing more. The thread-like surface
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
        offset_flush_interval: seconds between offset commits (0: after every batch; None: the
            environment's, :func:`webapp.environment.offset_flush_interval_s`).
    """

    MIN_IDLE = 0.05
    #: seconds between a held task's tries to reach the control plane (class docstring)
    COMMIT_RETRY_S = 1.0

    def __init__(self, *, task_id: ConnectorTaskId, config: dict[str, str], generation: int, target_state: str,
                 client: ControlPlaneClient, spark: Any, kafka_config: dict[str, str],
                 work_dir: str, executor: TaskExecutor | None = None, engine: Any = None,
                 end_offsets: Any = None, idle_backoff: float | None = None, restart_seq: int = 0,
                 file_changes: Any = None, offset_flush_interval: float | None = None):
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
        self.offset_flush_interval = environment.offset_flush_interval_s() if offset_flush_interval is None \
            else max(0.0, offset_flush_interval)
        #: offsets of finished batches not committed yet: {partition key: newest offset}, and their topics
        self._unflushed: dict[str, SourceOffset] = {}
        self._unflushed_topics: set[str] = set()
        self._flush_due: float | None = None  # time.monotonic() by which they are committed
        self._commit_failed = False
        #: while the task is held (class docstring): time.monotonic() of the first failed call, and of the next try
        self._held_since: float | None = None
        self._retry_at: float | None = None
        self._unreported = False  # the last state report did not reach the leader
        self.metrics = TaskMetrics()
        self._kind: str | None = None
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

    @property
    def kind(self) -> str:
        """``"source"``, ``"sink"`` or ``"unknown"`` (connector class not installed): the type of the task's connector."""
        kind = self._kind
        if kind is None:
            try:
                kind = registry.resolve(self.config.get("connector.class", "")).type
            except Exception:  # noqa: BLE001 - a missing plugin fails the task elsewhere, with its reason
                kind = "unknown"
            self._kind = kind
        return kind

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
    def _report(self, state: str, trace: str | None = None) -> bool:
        """Report ``state`` unless it was reported last; ``False`` when the leader could not be reached (the
        task is then held, and the state reported at its next try). Errors: the other errors of
        :meth:`ControlPlaneClient.report_status`."""
        if state == self.state and trace is None and not self._unreported:
            return True
        self.state = state
        try:
            self.client.report_status(self.task_id.connector, self.task_id.task, self.generation, state, trace)
        except ControlPlaneUnavailable as exc:
            self._unreported = True
            self._control_plane_down(f"report its state {state}", exc)
            return False
        self._unreported = False
        self._control_plane_back()
        return True

    def _control_plane_down(self, what: str, exc: Exception) -> None:
        """Hold the task: ``what`` could not reach the control plane. Warns once per outage; the next try is
        :attr:`COMMIT_RETRY_S` seconds away."""
        now = time.monotonic()
        if self._held_since is None:
            self._held_since = now
            log.warning("task %s: could not %s (%s); it runs no new batch until the control plane answers, "
                        "trying again every %.0f s", self.task_id, what, exc, self.COMMIT_RETRY_S)
        self._retry_at = now + self.COMMIT_RETRY_S

    def _control_plane_back(self) -> None:
        """End a hold (a call just got through)."""
        if self._held_since is not None:
            log.warning("task %s: the control plane answered after %.1f s; running again", self.task_id,
                        time.monotonic() - self._held_since)
            self._held_since = self._retry_at = None

    def _spark_session(self):
        spark = self.spark
        if isinstance(spark, LazySpark):
            return spark
        if callable(spark) and not hasattr(spark, "sparkContext"):
            spark = spark()  # a factory, as older callers pass
            self.spark = spark
        return spark

    def _begin(self) -> bool:
        """Start the task from its committed offsets; ``False`` when the leader could not be reached (held)."""
        plugin = registry.resolve(self.config.get("connector.class", ""))
        # recorded through Raft first: a late commit of an earlier instance of this task is refused from now on
        try:
            offsets = self.client.start_task(self.task_id, self.generation)
        except ControlPlaneUnavailable as exc:
            self._control_plane_down("start (read its committed offsets)", exc)
            return False
        self._control_plane_back()
        # what a task started from, so that an offset that went back can be traced to the instance that
        # moved it (benchmarks/chaos): its generation and the first committed offsets it read
        log.info("task %s starting at generation %s from %d committed offset(s)%s", self.task_id, self.generation,
                 len(offsets), "".join(f"; {dict(o.partition)} at {dict(o.offset)}" for o in offsets[:4])
                 + ("; ..." if len(offsets) > 4 else ""))
        work_dir = os.path.join(self.work_dir, "tasks", str(self.task_id))
        os.makedirs(work_dir, exist_ok=True)
        context = TaskContext(task_id=self.task_id, spark=self._spark_session(), kafka_config=dict(self.kafka_config),
                              work_dir=work_dir, offsets={partition_key(o.partition): o for o in offsets},
                              engine=self.engine, end_offsets=self.end_offsets, wake=self.wake,
                              file_changes=self.file_changes, metrics=self.metrics)
        # secrets are resolved here, in the worker, just before the task starts (config_providers)
        # the worker's converters where the connector names none (converter_defaults), as it was validated
        config = converter_defaults.with_worker_defaults(self.config)
        task = plugin.cls.task_class(context, config_providers.transform(config))
        self._task = task
        task.start()
        return True

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
            wait = 0.0 if self._retry_at is None else self._retry_at - time.monotonic()
            if wait > 0:  # held (class docstring): not yet time to try again
                self._park(wait)
                return
            if self._task is None and not self._begin():
                self._park(self.COMMIT_RETRY_S)
                return
            if self._held_since is not None and self._unflushed and not self._flush_offsets():
                self._park(self.COMMIT_RETRY_S)
                return
            if self.target_state == TargetState.PAUSED:
                if self._unflushed and not self._flush_offsets() or not self._report(State.PAUSED.value):
                    self._park(self.COMMIT_RETRY_S)
                    return
                self._park(None)
                return
            if not self._report(State.RUNNING.value):
                self._park(self.COMMIT_RETRY_S)
                return
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
                if self._flush_due is not None:  # commit what earlier batches did once it is due
                    left = self._flush_due - time.monotonic()
                    if left <= 0:
                        if not self._flush_offsets():
                            delay = self.COMMIT_RETRY_S
                    else:
                        delay = left if delay is None else min(delay, left)
                self._park(max(0.0, delay) or self.MIN_IDLE)
                return
            self._idle = self.MIN_IDLE
            if self._cancelled:  # fenced or past its graceful stop: its work belongs to another worker
                raise _Cancelled()
            if result.offsets:
                self._unflushed.update((partition_key(o.partition), o) for o in result.offsets)
                self._unflushed_topics.update(batch_topics(self.config, result))
                if self._flush_due is None:
                    self._flush_due = time.monotonic() + self.offset_flush_interval
            if self._flush_due is not None and time.monotonic() >= self._flush_due:
                self._flush_offsets()
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
            self._finish(commit=False)
        except _Cancelled:
            log.warning("task %s stopped: its batch in flight was cancelled", self.task_id)
            self._finish(commit=False)
        except Exception:
            if self._cancelled:  # the batch in flight was cancelled on purpose: not a failure
                log.warning("task %s stopped: its batch in flight was cancelled", self.task_id)
                self._finish(commit=False)
                return
            trace = traceback.format_exc()
            log.error("task %s failed:\n%s", self.task_id, trace)
            self.state = State.FAILED.value
            try:  # once: the task ends here, there is no next try
                self.client.report_status(self.task_id.connector, self.task_id.task, self.generation, self.state,
                                          trace)
            except Exception:
                log.exception("could not report failure of %s", self.task_id)
            self._finish()
        except BaseException:
            self._finish(commit=False)
            raise

    def _flush_offsets(self) -> bool:
        """Commit the offsets of the batches since the last commit (fenced with this task's generation).

        Returns ``True`` once committed; ``False`` when the control plane could not be reached within the
        client's ``commit_timeout``: the offsets stay, and the task is held (class docstring).
        Errors: the other errors of :meth:`ControlPlaneClient.commit_offsets` (:class:`Fenced`, ...); the
        offsets stay uncommitted then, and the task commits nothing more."""
        offsets, topics = list(self._unflushed.values()), sorted(self._unflushed_topics)
        c0 = time.perf_counter()
        try:
            self.client.commit_offsets(self.task_id, self.generation, offsets, topics=topics)
        except ControlPlaneUnavailable as exc:
            self.metrics.commit_done(ok=False)
            self._control_plane_down("commit its offsets", exc)
            return False
        except BaseException:
            self._commit_failed = True
            raise
        self.metrics.commit_done(ok=True)
        self.metrics.phases.add("commit", time.perf_counter() - c0)
        self._unflushed, self._unflushed_topics, self._flush_due = {}, set(), None
        self._control_plane_back()
        return True

    def _finish(self, commit: bool = True) -> None:
        """End the task: commit what it did since its last commit (unless ``commit`` is false, it was
        cancelled or a commit just failed), then stop it."""
        if commit and self._unflushed and not self._cancelled and not self._commit_failed:
            try:
                if not self._flush_offsets():
                    log.warning("task %s: could not commit its last offsets; that work is redone after a restart",
                                self.task_id)
            except Fenced as exc:
                log.warning("task %s: its last offsets were refused (fenced: %s); the new owner redoes that work",
                            self.task_id, exc)
            except Exception:  # the task ends anyway; what it did is redone after a restart
                log.warning("task %s: could not commit its last offsets; that work is redone after a restart",
                            self.task_id, exc_info=True)
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
