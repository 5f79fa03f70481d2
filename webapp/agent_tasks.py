"""The agent's tasks file: how a node's ``/metrics`` learns, without any network call, what its own
agent's tasks are doing.

Owns ``<data dir>/agent-tasks.json``, the agent's running tasks and their metrics: its format, its
writer (:class:`AgentTasksWriter`, the agent's :class:`~webapp.runtime.worker.Worker` after
heartbeats) and its reader (:func:`read_agent_tasks`, the node's collectors through
:func:`webapp.metrics.own_agent_tasks`). From it each node exports the per-task series of the tasks
its own agent runs, as each Kafka Connect worker exports its own tasks' MBeans. Format (times are
seconds of the host's monotonic clock, as in :mod:`webapp.runtime.agent_status`)::

    {"pid": 4242, "worker_id": "node-1", "written_at": 86042.9,
     "tasks": {"orders-0": {"state": "RUNNING", "connector": "orders", "task": 0, "type": "source",
                            "records": 120, "batches": 3, ...TaskMetrics.as_json()}}}

A leaf: imports nothing of ``webapp``, Django, Spark or Kafka (``webapp.metrics``, which the stores
import, reads it).
"""
from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Callable

__all__ = ["TASKS_FILE", "TASKS_MAX_AGE_S", "AgentTasksWriter", "read_agent_tasks", "replace_json", "tasks_path"]

log = logging.getLogger(__name__)

#: file name of the agent's running tasks and their metrics, under the node's data directory
TASKS_FILE = "agent-tasks.json"
#: seconds after which the node ignores a tasks file not rewritten (the agent hung or exited)
TASKS_MAX_AGE_S = 15.0


def tasks_path(data_dir: str) -> str:
    """Path of the tasks file of the agent whose node uses ``data_dir``."""
    return os.path.join(data_dir, TASKS_FILE)


def replace_json(path: str, value: Any) -> bool:
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
        clock: seconds of ``time.monotonic`` (see :class:`~webapp.runtime.agent_status.AgentStatusWriter`).

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
        if replace_json(self.path, {"pid": os.getpid(), "worker_id": self.worker_id, "written_at": now,
                                     "tasks": tasks}):
            self._written_at = now
