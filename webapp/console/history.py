"""Bounded per-task history of throughput, lag and error rate, kept on the node that coordinates.

The agents' heartbeats carry each task's cumulative counters to the active group
coordinator (``GroupCoordinator.reported``). :class:`TaskHistory` samples them
every :data:`SAMPLE_SECONDS` into one ring per task (at most :data:`KEEP_SECONDS`
of samples, so memory is bounded by the number of tasks), and turns successive
samples into records/s, lag and errors/s for the console's charts, so a reload
shows the last 15 minutes instead of an empty chart. :class:`HistorySampler` is the
thread that samples; it runs on every Raft member and records only while its
node is the active coordinator (after a failover the new leader's history starts
then). Reads nothing but the coordinator's memory; writes nothing.
"""
from __future__ import annotations

import threading
import time

_WALL0, _MONO0 = time.time(), time.monotonic()


def steady_time() -> float:
    """Epoch seconds for the history: the wall clock at process start advanced by ``time.monotonic()``, so a
    step of the wall clock (±1 h) neither reorders samples nor empties the ring (rates and the cutoff are
    intervals); the points still read as dates."""
    return _WALL0 + (time.monotonic() - _MONO0)
from collections import deque
from typing import Any, Callable, Mapping

__all__ = ["SAMPLE_SECONDS", "KEEP_SECONDS", "TaskHistory", "HistorySampler", "history_for", "forget", "steady_time"]

#: seconds between samples
SAMPLE_SECONDS = 5.0
#: seconds of samples kept per task
KEEP_SECONDS = 15 * 60


def _error_total(m: Mapping[str, Any]) -> int:
    errors = m.get("errors") or {}
    return int(errors.get("total_record_errors", 0) or 0)


class TaskHistory:
    """One ring of ``(t, records, lag, errors, skipped)`` per task key (``"name-i"``), bounded.

    Args:
        keep_seconds: how far back samples are kept.
        interval: the expected seconds between samples (sizes the rings).
    """

    def __init__(self, keep_seconds: float = KEEP_SECONDS, interval: float = SAMPLE_SECONDS):
        self.keep_seconds = keep_seconds
        self.interval = interval
        self._maxlen = int(keep_seconds / interval) + 2
        self._rings: dict[str, deque[tuple[float, int, int | None, int, int]]] = {}
        self._workers: dict[str, str] = {}
        self._lock = threading.Lock()

    def sample(self, now: float, reported: Mapping[str, Mapping[str, Any]]) -> None:
        """Append one sample per task in ``reported`` (``{worker_id: {"tasks": {key: metrics}}}``) at ``now`` (epoch s).

        Tasks no worker reports any more keep their ring until it ages out.
        """
        with self._lock:
            for worker_id, running in list(reported.items()):
                for key, m in list(((running or {}).get("tasks") or {}).items()):
                    if not isinstance(m, Mapping):
                        continue
                    ring = self._rings.get(key)
                    if ring is None:
                        ring = self._rings[key] = deque(maxlen=self._maxlen)
                    errors = m.get("errors") or {}
                    ring.append((now, int(m.get("records", 0) or 0), m.get("lag"), _error_total(m),
                                 int(errors.get("total_records_skipped", 0) or 0)))
                    self._workers[key] = worker_id
            cutoff = now - self.keep_seconds
            for key in [k for k, r in self._rings.items() if not r or r[-1][0] < cutoff]:
                del self._rings[key]
                self._workers.pop(key, None)

    def series(self, connector: str | None = None, *, now: float | None = None) -> dict[str, Any]:
        """The history as points: ``{"interval", "keep_seconds", "tasks": [{"connector", "task", "worker",
        "points": [[t, records_per_second, lag, errors_per_second, skipped_total]]}]}``.

        ``t`` is epoch seconds; a rate is ``None`` for a task's first sample and
        after a restart (its counter went down). ``connector`` keeps one connector's tasks.
        """
        now = steady_time() if now is None else now
        cutoff = now - self.keep_seconds
        out = []
        with self._lock:
            items = [(k, list(r), self._workers.get(k)) for k, r in self._rings.items()]
        for key, ring, worker in sorted(items):
            name, _, task = key.rpartition("-")
            if not task.isdigit() or (connector is not None and name != connector):
                continue
            points = []
            prev = None
            for t, records, lag, errors, skipped in ring:
                if t < cutoff:
                    prev = (t, records, errors)
                    continue
                rate = err_rate = None
                if prev is not None and t > prev[0] and records >= prev[1] and errors >= prev[2]:
                    rate = round((records - prev[1]) / (t - prev[0]), 3)
                    err_rate = round((errors - prev[2]) / (t - prev[0]), 3)
                points.append([round(t, 3), rate, lag, err_rate, skipped])
                prev = (t, records, errors)
            out.append({"connector": name, "task": int(task), "worker": worker, "points": points})
        return {"interval": self.interval, "keep_seconds": self.keep_seconds, "tasks": out}


class HistorySampler:
    """A daemon thread sampling ``coordinator.reported`` into a :class:`TaskHistory` while the coordinator is active.

    Args:
        coordinator: a ``GroupCoordinator`` (``active``, ``reported``).
        history: where samples go.
        interval: seconds between samples.
        clock: epoch seconds (injectable; default :func:`steady_time`).
    """

    def __init__(self, coordinator: Any, history: TaskHistory, *, interval: float = SAMPLE_SECONDS,
                 clock: Callable[[], float] = steady_time):
        self.coordinator = coordinator
        self.history = history
        self.interval = interval
        self.clock = clock
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="console-history", daemon=True)

    def start(self) -> "HistorySampler":
        """Start sampling; returns self."""
        self._thread.start()
        return self

    def stop(self) -> None:
        """Stop the thread (returns within about one interval)."""
        self._stop.set()
        if self._thread.is_alive() and self._thread is not threading.current_thread():
            self._thread.join(self.interval + 1)

    def sample_once(self) -> None:
        """Take one sample now if the coordinator is active."""
        c = self.coordinator
        if c is not None and c.active:
            self.history.sample(self.clock(), dict(c.reported))

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self.sample_once()
            except Exception:  # noqa: BLE001 - a bad report must not end the history
                pass
            self._stop.wait(self.interval)


_histories: dict[int, tuple[TaskHistory, HistorySampler]] = {}
_lock = threading.Lock()


def history_for(node: Any) -> TaskHistory:
    """The :class:`TaskHistory` of ``node`` (a ``ConnectNode``), its sampler started on first use.

    ``ConnectNode`` calls this when its coordinator starts, so sampling begins
    with the node; the console's history endpoint calls it to read.
    """
    with _lock:
        entry = _histories.get(id(node))
        if entry is None or entry[1].coordinator is not node.coordinator:
            if entry is not None:
                entry[1].stop()
            history = TaskHistory()
            entry = (history, HistorySampler(node.coordinator, history).start())
            _histories[id(node)] = entry
        return entry[0]


def forget(node: Any) -> None:
    """Stop ``node``'s sampler and drop its history (the node stops)."""
    with _lock:
        entry = _histories.pop(id(node), None)
    if entry is not None:
        entry[1].stop()
