"""Worker: the agent side of the runtime (Kafka Connect's ``Worker``).

Owns, inside one agent process: reconciling what runs with the assignment view
the coordinator sends (Celery message or heartbeat reply), connector instances
that produce task configs, heartbeats, and stopping everything when the
coordinator cannot be reached for longer than the session timeout (no zombie
keeps writing). Each running task is a :class:`~webapp.runtime.worker_task.WorkerTask`
(:mod:`.worker_task`) with its :class:`~webapp.runtime.task_metrics.TaskMetrics`.

Does not decide assignment and never writes metadata directly.
"""
from __future__ import annotations

import logging
import threading
import time
import traceback
import uuid
from typing import Any, Callable

from webapp import environment
from webapp.coordinator.viewdelta import DELTA_FROM, apply_view_delta
from webapp.kafka.clients import EndOffsetWatcher
from webapp.plugin import ConnectorTaskId
from webapp.runtime import registry
from webapp.states import State, TargetState, reported_state

from . import config_providers, converter_defaults
from webapp.agent_tasks import AgentTasksWriter

from .agent_status import AgentStatusWriter
from .client import ControlPlaneClient, ControlPlaneUnavailable, Fenced
from .engine import BatchEngine, LazySpark
from .file_watcher import FileChangeWatcher
from .lag import SinkLagMonitor
from .restart import AutoRestartPolicy, RestartTracker
from .task_metrics import TaskMetrics
from .worker_task import TaskExecutor, WorkerTask

__all__ = ["Worker"]

log = logging.getLogger(__name__)


def _warm_imports() -> None:
    """Import the data libraries of the in-process path now, so a first batch does not wait for them (~1 s)."""
    import importlib

    for name in ("pyarrow.csv", "pyarrow.json", "pyarrow.parquet", "pyarrow.compute", "polars", "confluent_kafka",
                 "webapp.runtime.engine", "webapp.kafka.spark_io"):
        try:
            importlib.import_module(name)
        except Exception:  # a missing optional library shows where it is used
            log.debug("could not import %s ahead of time", name, exc_info=True)



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
        on_broken: called once (with what failed) when every heartbeat failed inside this process, not
            for want of an answer, for :data:`BROKEN_AFTER_SESSIONS` session timeouts in a row: a new
            process may do what this one cannot (the agent restarts itself: ``agent.build_worker_from_env``).
    """

    #: session timeouts of heartbeats failing inside the process before ``on_broken`` is called
    BROKEN_AFTER_SESSIONS = 3

    #: views named in the last heartbeats (``view_digest``), kept as the bases of deltas the Celery path
    #: brings: the coordinator sends those from the view the newest report it received named, and a
    #: report may still be on its way when the next one is sent
    NAMED_VIEWS_KEPT = 3

    def __init__(self, *, worker_id: str, client: ControlPlaneClient, member: dict[str, Any],
                 kafka_config: dict[str, str], data_dir: str, spark_factory: Callable[[], Any],
                 heartbeat_interval: float = 1.0, on_broken: Callable[[str], None] | None = None):
        self.worker_id = worker_id
        self.on_broken = on_broken
        #: monotonic time of the first of the heartbeats failing inside this process in a row (None: the
        #: last one did not)
        self._broken_since: float | None = None
        self.client = client
        #: this process's incarnation rides on every heartbeat: a new one makes the coordinator grant
        #: everything this worker owns anew, fencing what an earlier process of it left in flight
        self.incarnation = uuid.uuid4().hex
        self.member = {**member, "incarnation": self.incarnation}
        #: whether a heartbeat of this process was answered since it started or was fenced: views sent
        #: before (a Celery message queued for an earlier process) are not applied
        self._joined = False
        self.kafka_config = kafka_config
        self.data_dir = data_dir
        self.heartbeat_interval = heartbeat_interval
        self.session_timeout = 5.0
        #: seconds a stopped task may take to finish its batch before it is cancelled (Connect's
        #: task.shutdown.graceful.timeout.ms, default 5 s)
        self.graceful_stop_timeout = environment.task_shutdown_graceful_timeout_s()
        #: seconds between a task's offset commits (Connect's offset.flush.interval.ms; 0: every batch)
        self.offset_flush_interval = environment.offset_flush_interval_s()
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
        #: connector -> (time.monotonic() of its next task-config recheck, seconds between them), for the
        #: connectors run here whose plugin asks for it (Connector.task_configs_recheck_s)
        self._rechecks: dict[str, tuple[float, float]] = {}
        self._rechecking: set[str] = set()  # rechecks running now, on _recheck_pool
        self._recheck_pool = None  # created on first need: a recheck may wait on an unreachable database
        self._last_view: dict[str, Any] | None = None  # the newest full view (its digest rides on heartbeats)
        #: digest -> view of the views the last heartbeats named, newest last (replaced, never changed in place)
        self._named_views: dict[str, dict[str, Any]] = {}
        self._acked_tasks: dict[str, Any] | None = None  # the task entries of the last acknowledged heartbeat
        self._reconciled: dict[str, Any] | None = None  # the view the last full reconcile applied
        self.lag_monitor = SinkLagMonitor(kafka_config, self._task_metrics, end_offsets=self.end_offsets)
        self.restart_tracker = RestartTracker()
        #: what the node's GET /health reads about this agent (see webapp.runtime.agent_status)
        self.status_file = AgentStatusWriter(data_dir, worker_id)
        #: what the node's /metrics exports per task of this agent (see webapp.agent_tasks)
        self.tasks_file = AgentTasksWriter(data_dir, worker_id)
        #: assignment generations that reached this agent first by each path (``celery``, ``heartbeat``)
        self.first_delivered_by: dict[str, int] = {"celery": 0, "heartbeat": 0}
        #: view deltas (webapp.coordinator.viewdelta) made whole (``applied``) or ``dropped`` (from a view
        #: neither held nor named lately), by path; in the status file as ``view_deltas``
        self.view_deltas: dict[str, dict[str, int]] = {"applied": {"celery": 0, "heartbeat": 0},
                                                       "dropped": {"celery": 0, "heartbeat": 0}}
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
        for pool in (self._connector_pool, self._recheck_pool):
            if pool is not None:
                pool.shutdown(wait=False, cancel_futures=True)
        self.engine.shutdown()
        self.tasks_file.write({}, force=True)  # the node drops this agent's task series at once
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
        self._named_views = {}
        self._joined = False  # from a heartbeat's answer: a view queued meanwhile may be older than the fence

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

    def _note_broken(self, error: str) -> None:
        """One more heartbeat failed inside this process; past :data:`BROKEN_AFTER_SESSIONS` session timeouts
        of them in a row, ``on_broken(error)`` (once: a process that goes on is not asked again)."""
        now = time.monotonic()
        if self._broken_since is None:
            self._broken_since = now
        elif self.on_broken is not None and now - self._broken_since > self.BROKEN_AFTER_SESSIONS * self.session_timeout:
            on_broken, self.on_broken = self.on_broken, None
            log.error("every heartbeat for %.0f s failed inside this process (last: %s)", now - self._broken_since,
                      error)
            on_broken(error)

    def _fence_if_silent(self) -> None:
        """Stop every task and connector (:meth:`fence_all`) once no heartbeat was answered for longer than the
        session timeout: the coordinator has removed this worker by then and given its work to others."""
        silent = time.monotonic() - self._last_contact
        if silent > self.session_timeout and (self.tasks or self.connectors):
            log.warning("no contact with the coordinator for %.1f s (> session timeout): stopping all tasks", silent)
            self.fence_all()

    def _after_failed_heartbeat(self, error: str) -> None:
        """Stop the work if the session ran out (:meth:`_fence_if_silent`) and note the failure; never raises.

        Whatever failed the heartbeat may fail here too (a process broken anywhere): the loop must go
        on, to stop the work at the next try and to reach the restart (:meth:`_note_broken`)."""
        try:
            self._fence_if_silent()
            self._record_heartbeat(None, ok=False, error=error)
        except Exception:
            log.exception("heartbeat loop error: stopping the work or recording the failure failed too")

    def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            ok = False
            try:
                t0 = time.monotonic()
                running = self.running()
                named = self._last_view
                if named is not None:
                    running["view_digest"] = named.get("digest")
                    self._name_view(named)
                running["view_deltas"] = True  # answer with what changed since the view named (viewdelta)
                if self.tasks_file.due():
                    self._record_tasks(running)
                report = self._report(running)
                self._acked_tasks = None  # until acknowledged: after a lost answer the next report is full
                view = self.client.heartbeat(self.member, report)
                self._acked_tasks = None if view.get("report_full") else running["tasks"]
                took = time.monotonic() - t0
                if took > 1.0:
                    log.warning("heartbeat took %.2f s (session timeout %.1f s)", took, self.session_timeout)
                ok = True
                self._broken_since = None
                self._last_contact = time.monotonic()
                self.session_timeout = view.get("session_timeout_ms", 5000) / 1000.0
                self._record_heartbeat(running, ok=True)
                self._joined = True
                if view.get("unchanged") and self._last_view is not None \
                        and view.get("digest") == self._last_view.get("digest"):
                    view = self._last_view  # re-applied: failed tasks' automatic restarts are decided there
                self.apply_assignment(view, via="heartbeat")
            except (ControlPlaneUnavailable, Fenced, RuntimeError) as exc:
                self._broken_since = None
                log.debug("heartbeat failed: %s", exc)
                self._after_failed_heartbeat(f"{type(exc).__name__}: {exc}")
            except Exception as exc:
                # Not the control plane's answer but this process's own failure (a bug, or state broken:
                # seen once in CI, an agent whose every request failed inside requests with a TypeError).
                # The coordinator hears nothing all the same and gives the work to others after the
                # session timeout, so the work stops here too.
                log.exception("heartbeat loop error")
                error = f"{type(exc).__name__}: {exc}"
                self._after_failed_heartbeat(error)
                self._note_broken(error)
            # after a failure try again soon: the session is running out
            self._stop.wait(self.heartbeat_interval if ok else min(0.2, self.heartbeat_interval))

    def _name_view(self, view: dict[str, Any]) -> None:
        """Keep ``view`` (named by the heartbeat being sent) as a base for deltas; the newest
        :attr:`NAMED_VIEWS_KEPT` are kept."""
        named = {d: v for d, v in self._named_views.items() if d != view.get("digest")}
        named[view.get("digest")] = view
        self._named_views = dict(list(named.items())[-self.NAMED_VIEWS_KEPT:])

    def _record_tasks(self, running: dict[str, Any]) -> None:
        """Write ``running``'s task entries, each with its connector's ``type``, to the tasks file; never raises."""
        try:
            with self._snapshot_lock:
                kinds = {k: t.kind for k, t in self.tasks.items()}
            self.tasks_file.write({k: {**v, "type": kinds.get(k, "unknown")} for k, v in running["tasks"].items()})
        except Exception:  # the heartbeat matters more than the metrics file
            log.debug("could not record the tasks", exc_info=True)

    def _record_heartbeat(self, running: dict[str, Any] | None, *, ok: bool, error: str | None = None) -> None:
        """Note a heartbeat attempt in the status file the node's ``/health`` reads; never raises."""
        try:
            counts = {} if running is None else {"generation": running["generation"],
                                                 "connectors": len(running["connectors"]),
                                                 "tasks": len(running["tasks"])}
            self.status_file.heartbeat(ok=ok, error=error, session_timeout_s=self.session_timeout,
                                       spark=self.lazy_spark.health(), first_delivered_by=dict(self.first_delivered_by),
                                       view_deltas={k: dict(v) for k, v in self.view_deltas.items()}, **counts)
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
        generation is counted in :attr:`first_delivered_by`. Until a heartbeat of
        this process is answered (at start and after :meth:`fence_all`), views by
        any other path are dropped: they may have been sent before the coordinator
        granted this process's instances anew. ``view`` may be a delta
        (:mod:`webapp.coordinator.viewdelta`): it is made whole from the view it is from, the one held or
        one a recent heartbeat named (:attr:`NAMED_VIEWS_KEPT`), or dropped when it is from neither (the
        next heartbeat names the view held and is answered from it).
        """
        if self._stop.is_set() or view.get("unchanged"):
            return
        if view.get(DELTA_FROM) is not None:  # what changed since a view this worker was given (viewdelta)
            held = self._last_view
            if held is not None and (held.get("digest") == view.get("digest")
                                     or view.get("generation", 0) < held.get("generation", 0)):
                return  # that view, or a newer one, is held already (the other path brought it first)
            since = view[DELTA_FROM]
            base = held if held is not None and held.get("digest") == since else self._named_views.get(since)
            whole = apply_view_delta(base, view)
            if whole is None:  # from a view not held nor named lately (lost or overtaken on the way): the next
                # heartbeat names the view held, and its answer starts from that one
                log.info("view delta of generation %s by %s is not from the view held: dropped",
                         view.get("generation"), via)
                self._count_delta("dropped", via)
                return
            self._count_delta("applied", via)
            view = whole
        if via != "heartbeat" and not self._joined:
            # sent before this process joined: to an earlier process of this worker (its queue outlives
            # it) or before this one was fenced; its generations may predate the grant that fences them
            log.debug("view of generation %s by %s ignored: not joined yet", view.get("generation"), via)
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

    def _count_delta(self, outcome: str, via: str) -> None:
        counts = self.view_deltas[outcome]
        counts[via] = counts.get(via, 0) + 1

    def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            with self._pending_cv:
                if self._pending is None:  # at least once a second: the task-config rechecks are due here
                    self._pending_cv.wait(1.0)
                view, self._pending = self._pending, None
            if self._stop.is_set():
                continue
            if view is not None:
                try:
                    self.reconcile(view)
                except Exception:
                    log.exception("reconcile failed")
            if self._rechecks:
                self._recheck_task_configs()

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
                self._rechecks.pop(name, None)
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
            if c["target_state"] == TargetState.STOPPED:
                self._rechecks.pop(name, None)
            elif fresh or have["target_state"] == TargetState.STOPPED:
                configs, recheck = self._split(c["config"])
                if recheck:
                    self._rechecks[name] = (time.monotonic() + recheck, recheck)
                else:
                    self._rechecks.pop(name, None)
                if configs != c["tasks"]:
                    self.client.put_task_configs(name, c["generation"], configs)
            state = reported_state(c["target_state"]).value
            self.client.report_status(name, None, c["generation"], state)
        except Fenced as exc:
            log.warning("connector %s fenced: %s", name, exc)
            with self._snapshot_lock:
                self.connectors.pop(name, None)
        except ControlPlaneUnavailable as exc:
            # not the connector's failure (as Connect retries its status and config writes): forgotten here,
            # so the next application of the view (each heartbeat's, once the leader answers) starts it again
            log.warning("connector %s: the control plane did not answer (%s); started again with the next view",
                        name, exc)
            with self._snapshot_lock:
                self.connectors.pop(name, None)
        except Exception:
            trace = traceback.format_exc()
            log.error("connector %s failed:\n%s", name, trace)
            try:
                self.client.report_status(name, None, c["generation"], State.FAILED.value, trace)
            except Exception:
                log.exception("could not report connector failure")

    @staticmethod
    def _split(config: dict[str, str]) -> tuple[list[dict[str, str]], float | None]:
        """``(task configs, recheck seconds or None)`` of a connector: an instance of its plugin started with
        ``config`` (``${provider:...}`` references resolved only here, and put back in the task configs),
        asked for its task configs and stopped. Errors: the plugin's."""
        plugin = registry.resolve(config.get("connector.class", ""))
        connector = plugin.cls()
        # the worker's converters where the connector names none of its own (converter_defaults)
        defaulted = converter_defaults.with_worker_defaults(config)
        resolved = config_providers.transform(defaulted)
        connector.start(resolved)
        try:
            configs = connector.task_configs(int(resolved.get("tasks.max", "1")))
            recheck = connector.task_configs_recheck_s() if hasattr(connector, "task_configs_recheck_s") else None
        finally:
            connector.stop()
        return config_providers.reverse_transform(defaulted, resolved, configs), recheck

    def _recheck_task_configs(self) -> None:
        """Start the task-config recheck of each connector run here whose recheck is due (:meth:`_recheck`),
        each on a pool of 2 threads, one at a time per connector. Called by the reconcile thread, between
        reconciles: a recheck may wait long on a database, which must not hold up views."""
        now = time.monotonic()
        for name, (due, every) in list(self._rechecks.items()):
            if now < due or name in self._rechecking:
                continue
            c = self.connectors.get(name)
            if c is None or c["target_state"] == TargetState.STOPPED:
                self._rechecks.pop(name, None)
                continue
            self._rechecks[name] = (now + every, every)
            if self._recheck_pool is None:
                from concurrent.futures import ThreadPoolExecutor

                self._recheck_pool = ThreadPoolExecutor(max_workers=2, thread_name_prefix="recheck")
            self._rechecking.add(name)
            try:
                self._recheck_pool.submit(self._recheck, name, c)
            except RuntimeError:  # shut down meanwhile
                self._rechecking.discard(name)

    def _recheck(self, name: str, c: dict[str, Any]) -> None:
        """Re-run connector ``name``'s task split (its entry ``c`` of :attr:`connectors`) and store its task
        configs when they changed (new work found, such as a table created since; Connect's connectors
        request a task reconfiguration for it). A failed recheck is logged and tried again at the next one:
        the connector keeps running its current tasks."""
        try:
            configs, _ = self._split(c["config"])
            now = self.connectors.get(name)
            if now is None or now["config"] != c["config"] or now["generation"] != c["generation"]:
                return  # changed meanwhile: the reconcile that changed it split the new config itself
            if configs != c["tasks"]:
                log.info("connector %s: its work changed: %d task config(s) now, %d before", name, len(configs),
                         len(c["tasks"]))
                self.client.put_task_configs(name, c["generation"], configs)
        except Fenced as exc:
            log.info("connector %s: task configs of generation %s refused (%s): it moved", name,
                     c["generation"], exc)
            self._rechecks.pop(name, None)
        except Exception:  # the next recheck tries again; the running tasks are unaffected
            log.warning("connector %s: could not recheck its task configs", name, exc_info=True)
        finally:
            self._rechecking.discard(name)

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
                           restart_seq=w.get("restart", 0), file_changes=self.file_changes,
                           offset_flush_interval=self.offset_flush_interval)
            with self._snapshot_lock:
                self.tasks[key] = t
            t.start()
