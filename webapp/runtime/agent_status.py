"""The agent's status file: how a node learns, without any network call, what its own agent is doing.

Owns the file ``<data dir>/agent-status.json`` — its format, its writer (the
agent's :class:`~webapp.runtime.worker.Worker`, after heartbeats) and its reader
(the node's ``GET /health``, :mod:`webapp.connect.health`). The node and its
agent share the data directory; a heartbeat goes to the Raft leader, possibly
through another node, so this file is the one place on the node's own machine
that records when the coordinator last acknowledged one and whether the agent's
SparkSession runs.

Format (JSON object; times are seconds of the host's monotonic clock, ``time.monotonic()``, floats,
so a jump of the wall clock changes no age the node computes from them)::

    {"pid": 4242, "worker_id": "node-1", "started_at": 86000.1, "written_at": 86042.9,
     "last_heartbeat_at": 86042.9 | null, "last_error": "..." | null,
     "session_timeout_s": 5.0, "generation": 7, "connectors": 1, "tasks": 3,
     "spark": {"state": "not_started" | "starting" | "ok" | "down", "error": "..."?}}

``last_heartbeat_at`` is the last heartbeat the coordinator acknowledged
(``null`` before the first); ``last_error`` is why the heartbeats since then
failed (``null`` after a success). The file is replaced atomically (write, then
rename), so a reader sees a whole version or the previous one. Writes are
throttled to one per ``min_interval`` seconds unless something other than the
times changed, so the file costs at most about one small write a second.

It also owns ``<data dir>/agent-tasks.json``, the agent's running tasks and their
metrics (:class:`AgentTasksWriter`, :func:`read_agent_tasks`): from it the node's
``/metrics`` exports the per-task series of the tasks its own agent runs, as each
Kafka Connect worker exports its own tasks' MBeans. Format::

    {"pid": 4242, "worker_id": "node-1", "written_at": 86042.9,
     "tasks": {"orders-0": {"state": "RUNNING", "connector": "orders", "task": 0, "type": "source",
                            "records": 120, "batches": 3, ...TaskMetrics.as_json()}}}

Must not import Django, Spark or Kafka: the node imports the readers.
"""
from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Callable

__all__ = ["STATUS_FILE", "TASKS_FILE", "TASKS_MAX_AGE_S", "AgentStatusWriter", "AgentTasksWriter",
           "read_agent_status", "read_agent_tasks", "status_path", "tasks_path"]

log = logging.getLogger(__name__)

#: file name under the node's data directory
STATUS_FILE = "agent-status.json"
#: file name of the agent's running tasks and their metrics, under the node's data directory
TASKS_FILE = "agent-tasks.json"
#: seconds after which the node ignores a tasks file not rewritten (the agent hung or exited)
TASKS_MAX_AGE_S = 15.0


def status_path(data_dir: str) -> str:
    """Path of the status file of the agent whose node uses ``data_dir``."""
    return os.path.join(data_dir, STATUS_FILE)


def read_agent_status(data_dir: str) -> dict[str, Any] | None:
    """The agent's last written status (see module docstring), or ``None`` when there is none yet.

    Never raises: a missing, unreadable or malformed file reads as ``None``.
    """
    try:
        with open(status_path(data_dir), encoding="utf-8") as fh:
            value = json.load(fh)
    except (OSError, ValueError):
        return None
    return value if isinstance(value, dict) else None


def tasks_path(data_dir: str) -> str:
    """Path of the tasks file of the agent whose node uses ``data_dir``."""
    return os.path.join(data_dir, TASKS_FILE)


def _replace_json(path: str, value: Any) -> bool:
    """Write ``value`` as JSON to ``path`` atomically (write a temporary file, then rename); whether it worked."""
    tmp = f"{path}.{os.getpid()}.tmp"
    try:
        os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(value, fh, separators=(",", ":"))
        os.replace(tmp, path)
    except (OSError, TypeError, ValueError):
        log.debug("could not write %s", path, exc_info=True)
        return False
    return True


_tasks_cache: dict[str, tuple[tuple[int, int], dict[str, Any]]] = {}


def read_agent_tasks(data_dir: str, *, pid: int | None = None, max_age: float = TASKS_MAX_AGE_S,
                     clock: Callable[[], float] = time.monotonic) -> tuple[str, dict[str, dict[str, Any]]] | None:
    """``(worker_id, {task key: entry})`` of the agent's tasks file (see module docstring), or ``None``.

    ``None`` when the file is missing, malformed, older than ``max_age`` seconds (by its
    ``written_at``, the host's monotonic clock) or, when ``pid`` is given, written by
    another process than that agent. A file unchanged since the last call (same
    modification time and size) is not parsed again: the node's two collectors read it
    at every scrape. Never raises. The caller must not modify the answer.
    """
    path = tasks_path(data_dir)
    try:
        st = os.stat(path)
        key = (st.st_mtime_ns, st.st_size)
        cached = _tasks_cache.get(path)
        if cached is not None and cached[0] == key:
            value = cached[1]
        else:
            with open(path, encoding="utf-8") as fh:
                value = json.load(fh)
            if not isinstance(value, dict) or not isinstance(value.get("tasks"), dict):
                return None
            _tasks_cache.clear()  # one node per process: keep one file's parse
            _tasks_cache[path] = (key, value)
    except (OSError, ValueError):
        return None
    if pid is not None and value.get("pid") != pid:
        return None
    try:
        if clock() - float(value.get("written_at")) > max_age:
            return None
    except (TypeError, ValueError):
        return None
    return str(value.get("worker_id") or ""), value["tasks"]


class AgentTasksWriter:
    """Writes the agent's tasks file (the agent side of :func:`read_agent_tasks`).

    Args:
        data_dir: the node's data directory (created if missing).
        worker_id: this agent's worker id (the ``worker`` label of the series).
        min_interval: seconds between two writes; a node scraped every 15 s or more misses nothing.
        clock: seconds of ``time.monotonic`` (see :class:`AgentStatusWriter`).

    Thread-safety: call from one thread (the heartbeat loop). Errors: none raised; a
    failed write is logged at DEBUG and tried again next time. Cost: one JSON dump of
    the entries per ``min_interval`` (about 2 ms for 1,000 tasks).
    """

    def __init__(self, data_dir: str, worker_id: str, *, min_interval: float = 2.0,
                 clock: Callable[[], float] = time.monotonic):
        self.path = tasks_path(data_dir)
        self.worker_id = worker_id
        self.min_interval = min_interval
        self._clock = clock
        self._written_at: float | None = None

    def due(self) -> bool:
        """Whether :meth:`write` would write now (lets the caller skip assembling the entries)."""
        return self._written_at is None or self._clock() - self._written_at >= self.min_interval

    def write(self, tasks: dict[str, dict[str, Any]], *, force: bool = False) -> None:
        """Replace the file with ``tasks`` (``{key: {"state", "connector", "task", "type", metrics...}}``)
        unless the last write is younger than ``min_interval`` and ``force`` is false."""
        if not force and not self.due():
            return
        now = self._clock()
        if _replace_json(self.path, {"pid": os.getpid(), "worker_id": self.worker_id, "written_at": now,
                                     "tasks": tasks}):
            self._written_at = now


class AgentStatusWriter:
    """Writes the agent's status file (the agent side of this module).

    Args:
        data_dir: the node's data directory (created if missing).
        worker_id: this agent's worker id.
        min_interval: seconds between two writes that change only times.
        clock: seconds of ``time.monotonic`` (CLOCK_MONOTONIC: one clock for every process of the host, so
            the node compares it with its own, and a jump of the wall clock changes no age; tests pass their own).

    Thread-safety: call from one thread (the heartbeat loop); :meth:`started` before it runs.
    Errors: none raised; a failed write is logged at DEBUG and tried again next time.
    """

    def __init__(self, data_dir: str, worker_id: str, *, min_interval: float = 1.0,
                 clock: Callable[[], float] = time.monotonic):
        self.path = status_path(data_dir)
        self.worker_id = worker_id
        self.min_interval = min_interval
        self._clock = clock
        self._state: dict[str, Any] = {"pid": os.getpid(), "worker_id": worker_id, "started_at": clock(),
                                       "last_heartbeat_at": None, "last_error": None, "session_timeout_s": None,
                                       "generation": -1, "connectors": 0, "tasks": 0,
                                       "spark": {"state": "not_started"},
                                       "first_delivered_by": {"celery": 0, "heartbeat": 0}}
        self._written_at: float | None = None
        self._written_shape: Any = None

    def started(self) -> None:
        """Record that the agent runs and has not heartbeated yet (written at once)."""
        self._write(force=True)

    def heartbeat(self, *, ok: bool, error: str | None = None, session_timeout_s: float | None = None,
                  generation: int | None = None, connectors: int | None = None, tasks: int | None = None,
                  spark: dict[str, Any] | None = None, first_delivered_by: dict[str, int] | None = None) -> None:
        """Record one heartbeat attempt: ``ok`` (acknowledged by the coordinator) or failed with ``error``.

        The other arguments refresh what the file shows (``None`` keeps the last value);
        ``session_timeout_s`` in seconds; ``first_delivered_by``: how many assignment
        generations reached this agent first by a Celery message, and how many by a
        heartbeat reply.
        """
        st = self._state
        if ok:
            st["last_heartbeat_at"] = self._clock()
            st["last_error"] = None
        else:
            st["last_error"] = (error or "heartbeat failed")[:500]
        for name, value in (("session_timeout_s", session_timeout_s), ("generation", generation),
                            ("connectors", connectors), ("tasks", tasks), ("spark", spark),
                            ("first_delivered_by", first_delivered_by)):
            if value is not None:
                st[name] = value
        self._write()

    def _write(self, force: bool = False) -> None:
        st = self._state
        now = self._clock()
        shape = json.dumps({k: v for k, v in st.items() if k not in ("last_heartbeat_at", "written_at")},
                           sort_keys=True)
        if not force and shape == self._written_shape and self._written_at is not None \
                and now - self._written_at < self.min_interval:
            return
        st["written_at"] = now
        if _replace_json(self.path, st):
            self._written_at, self._written_shape = now, shape
