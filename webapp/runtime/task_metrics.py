"""A task's metrics as its worker keeps them (Connect's task and sink-task metrics groups).

Owns :class:`TaskMetrics` (records, batches, rate over a window, lag, phase times,
error counters, the committed sink positions: what heartbeats carry to the leader's
``/metrics`` and the console) and :func:`batch_topics` (the topics one batch used,
Connect's active topics).

Must not touch: running tasks or committing offsets (:mod:`.worker_task`); Prometheus
(``webapp.metrics`` reads these numbers from heartbeats).
"""
from __future__ import annotations

import threading
import time
from collections import deque
from typing import Any, Callable

from webapp.plugin import BatchResult, SourceOffset

from .engine import PhaseTimes

__all__ = ["TaskMetrics", "batch_topics"]


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
    consumer lag of a sink task in records (Kafka's end offset minus the task's
    position, summed over its partitions; set by
    :class:`~webapp.runtime.lag.SinkLagMonitor`), ``None`` while unknown.
    ``sink_positions`` is ``{(topic, partition): next offset to read}`` after the last
    durable batch (committed with it, or within ``offset.flush.interval.ms`` when that is set).
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
        #: offset commit attempts since start that committed, and that could not reach the control plane
        self.commits = 0
        self.commit_failures = 0
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

    def commit_done(self, ok: bool) -> None:
        """Count one offset commit attempt: ``ok`` when it committed, else it could not reach the control plane."""
        with self._lock:
            if ok:
                self.commits += 1
            else:
                self.commit_failures += 1
            self._version += 1

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
        [, "phases"][, "errors"][, "commits", "commit_failures"]}`` (the last two once an offset commit could
        not reach the control plane: attempts that committed and that did not, since start).

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
        if self.commit_failures:
            out["commits"], out["commit_failures"] = self.commits, self.commit_failures
        if self.lag is not None:
            out["lag"] = self.lag
        phases = self.phases.as_json()
        if phases:
            out["phases"] = phases
        self._json = (key, out) if idle else None
        return out
