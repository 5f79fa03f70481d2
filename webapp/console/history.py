"""Bounded per-task history of throughput, lag and error rate, kept on the node that coordinates.

The agents' heartbeats carry each task's cumulative counters to the active group
coordinator (``GroupCoordinator.reported``). :class:`TaskHistory` samples them
every :data:`SAMPLE_SECONDS` into one ring per task (at most :data:`KEEP_SECONDS`
of samples, and :data:`MAX_SAMPLES` in all, so memory is bounded whatever the number of tasks), and turns successive
samples into records/s, lag and errors/s for the console's charts, so a reload
shows the last 15 minutes instead of an empty chart. :class:`HistorySampler` is the
thread that samples; it runs on every Raft member and records only while its
node is the active coordinator (after a failover the new leader's history starts
then). Reads nothing but the coordinator's memory; writes nothing.
"""
from __future__ import annotations

import math
import threading
import time
from array import array
from typing import Any, Callable, Mapping

_WALL0, _MONO0 = time.time(), time.monotonic()


def steady_time() -> float:
    """Epoch seconds for the history: the wall clock at process start advanced by ``time.monotonic()``, so a
    step of the wall clock (±1 h) neither reorders samples nor empties the ring (rates and the cutoff are
    intervals); the points still read as dates."""
    return _WALL0 + (time.monotonic() - _MONO0)


__all__ = ["SAMPLE_SECONDS", "KEEP_SECONDS", "MAX_SAMPLES", "TaskHistory", "HistorySampler", "history_for", "forget", "steady_time"]

#: seconds between samples (the shortest: see :data:`MAX_SAMPLES`)
SAMPLE_SECONDS = 5.0
#: seconds of samples kept per task
KEEP_SECONDS = 15 * 60
#: samples (one task at one moment) kept in all. A cluster whose tasks would need more to cover
#: :data:`KEEP_SECONDS` every :data:`SAMPLE_SECONDS` is sampled less often instead: at 100,000 tasks
#: every 45 s, ~80 MB. Every 5 s, as before, a ring of tuples per task grew the leader by ~10,000
#: objects a second towards 1.8 GB (benchmarks/scale, issue 16).
MAX_SAMPLES = 2_000_000

#: values per sample in a task's array: t, records, lag (NaN: none), errors, skipped
_FIELDS = 5
_NAN = float("nan")


def _error_total(m: Mapping[str, Any]) -> int:
    errors = m.get("errors") or {}
    return int(errors.get("total_record_errors", 0) or 0)


def _number(value: float) -> int | float:
    return int(value) if value.is_integer() else value


class TaskHistory:
    """One ring of ``(t, records, lag, errors, skipped)`` samples per task key (``"name-i"``), bounded.

    A task's samples are one flat ``array('d')`` (40 bytes a sample, against ~150 for a tuple of
    boxed numbers); counters are exact up to 2**53. The whole history holds at most
    ``max_samples`` samples: when ``keep_seconds`` of samples every ``interval`` seconds for every
    task would exceed it, samples are taken less often (:attr:`interval` says how often), so the
    charts still cover ``keep_seconds`` with fewer points.

    Args:
        keep_seconds: how far back samples are kept.
        interval: the shortest seconds between samples (sizes the rings).
        max_samples: the samples kept in all.
    """

    def __init__(self, keep_seconds: float = KEEP_SECONDS, interval: float = SAMPLE_SECONDS,
                 max_samples: int = MAX_SAMPLES):
        self.keep_seconds = keep_seconds
        self.base_interval = interval
        self.max_samples = max_samples
        #: the seconds between the samples being taken now (``base_interval`` or more)
        self.interval = interval
        self._rings: dict[str, array] = {}
        self._workers: dict[str, str] = {}
        self._last: float | None = None
        self._lock = threading.Lock()

    def sample(self, now: float, reported: Mapping[str, Mapping[str, Any]]) -> None:
        """Append one sample per task in ``reported`` (``{worker_id: {"tasks": {key: metrics}}}``) at ``now`` (epoch s),
        unless the last sample is more recent than :attr:`interval` allows.

        Tasks no worker reports any more keep their ring until it ages out.
        """
        with self._lock:
            workers = [(worker_id, (running or {}).get("tasks") or {}) for worker_id, running in list(reported.items())]
            count = sum(len(tasks) for _, tasks in workers)
            self.interval = max(self.base_interval, self.keep_seconds * max(count, len(self._rings)) / self.max_samples)
            # the sampler ticks every base interval: take the tick nearest to a stretched interval
            if self._last is not None and now - self._last < self.interval - self.base_interval / 2:
                return
            self._last = now
            keep = (int(self.keep_seconds / self.interval) + 2) * _FIELDS
            for worker_id, key, m in ((w, k, m) for w, tasks in workers for k, m in list(tasks.items())):
                if not isinstance(m, Mapping):
                    continue
                ring = self._rings.get(key)
                if ring is None:
                    ring = self._rings[key] = array("d")
                errors = m.get("errors") or {}
                lag = m.get("lag")
                lag = lag if isinstance(lag, (int, float)) and not isinstance(lag, bool) else _NAN
                ring.extend((now, int(m.get("records", 0) or 0), lag, _error_total(m),
                             int(errors.get("total_records_skipped", 0) or 0)))
                if len(ring) > keep + keep // 4:  # trimmed a quarter at a time: one move per many samples
                    del ring[:len(ring) - keep]
                self._workers[key] = worker_id
            cutoff = now - self.keep_seconds
            for key in [k for k, r in self._rings.items() if not r or r[-_FIELDS] < cutoff]:
                del self._rings[key]
                self._workers.pop(key, None)

    def series(self, connector: str | None = None, *, now: float | None = None) -> dict[str, Any]:
        """The history as points: ``{"interval", "keep_seconds", "tasks": [{"connector", "task", "worker",
        "points": [[t, records_per_second, lag, errors_per_second, skipped_total]]}]}``.

        ``t`` is epoch seconds; a rate is ``None`` for a task's first sample and
        after a restart (its counter went down). ``connector`` keeps one connector's tasks.
        ``interval`` is the seconds between the samples being taken now.
        """
        now = steady_time() if now is None else now
        cutoff = now - self.keep_seconds
        out = []
        with self._lock:
            items = [(k, r.tolist(), self._workers.get(k)) for k, r in self._rings.items()
                     if connector is None or k.rpartition("-")[0] == connector]
            interval = self.interval
        for key, ring, worker in sorted(items):
            name, _, task = key.rpartition("-")
            if not task.isdigit():
                continue
            points = []
            prev = None
            for i in range(0, len(ring), _FIELDS):
                t, records, lag, errors, skipped = ring[i:i + _FIELDS]
                if t < cutoff:
                    prev = (t, records, errors)
                    continue
                rate = err_rate = None
                if prev is not None and t > prev[0] and records >= prev[1] and errors >= prev[2]:
                    rate = round((records - prev[1]) / (t - prev[0]), 3)
                    err_rate = round((errors - prev[2]) / (t - prev[0]), 3)
                points.append([round(t, 3), rate, None if math.isnan(lag) else _number(lag), err_rate, int(skipped)])
                prev = (t, records, errors)
            out.append({"connector": name, "task": int(task), "worker": worker, "points": points})
        return {"interval": interval, "keep_seconds": self.keep_seconds, "tasks": out}


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
