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

The agent's tasks file, ``agent-tasks.json``, beside it is :mod:`webapp.agent_tasks`'s.

Must not import Django, Spark or Kafka: the node imports the reader.
"""
from __future__ import annotations

import json
import logging
import os
import time
from typing import Any, Callable

from webapp.agent_tasks import replace_json

__all__ = ["STATUS_FILE", "AgentStatusWriter", "read_agent_status", "status_path"]

log = logging.getLogger(__name__)

#: file name under the node's data directory
STATUS_FILE = "agent-status.json"


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
                                       "first_delivered_by": {"celery": 0, "heartbeat": 0},
                                       "view_deltas": {"applied": {"celery": 0, "heartbeat": 0},
                                                       "dropped": {"celery": 0, "heartbeat": 0}}}
        self._written_at: float | None = None
        self._written_shape: Any = None

    def started(self) -> None:
        """Record that the agent runs and has not heartbeated yet (written at once)."""
        self._write(force=True)

    def heartbeat(self, *, ok: bool, error: str | None = None, session_timeout_s: float | None = None,
                  generation: int | None = None, connectors: int | None = None, tasks: int | None = None,
                  spark: dict[str, Any] | None = None, first_delivered_by: dict[str, int] | None = None,
                  view_deltas: dict[str, dict[str, int]] | None = None) -> None:
        """Record one heartbeat attempt: ``ok`` (acknowledged by the coordinator) or failed with ``error``.

        The other arguments refresh what the file shows (``None`` keeps the last value);
        ``session_timeout_s`` in seconds; ``first_delivered_by``: how many assignment
        generations reached this agent first by a Celery message, and how many by a
        heartbeat reply; ``view_deltas``: ``{"applied" | "dropped": {"celery": n, "heartbeat": n}}``,
        the view deltas this agent made whole, and those it dropped (from a view it neither
        held nor named lately; the next heartbeat brings the view).
        """
        st = self._state
        if ok:
            st["last_heartbeat_at"] = self._clock()
            st["last_error"] = None
        else:
            st["last_error"] = (error or "heartbeat failed")[:500]
        for name, value in (("session_timeout_s", session_timeout_s), ("generation", generation),
                            ("connectors", connectors), ("tasks", tasks), ("spark", spark),
                            ("first_delivered_by", first_delivered_by), ("view_deltas", view_deltas)):
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
        if replace_json(self.path, st):
            self._written_at, self._written_shape = now, shape
