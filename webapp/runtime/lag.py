"""Consumer lag of sink tasks, measured by the agent that runs them.

Owns one background thread per agent that, every ``interval`` seconds, asks
Kafka for the end offset (the last stable offset) of each partition a sink task has
committed a position for, and sets the task's
:attr:`~webapp.runtime.task_metrics.TaskMetrics.lag` to
``sum(max(0, end_offset - committed_position))`` over its partitions. The figure
reaches the leader in the agent's heartbeats and ``/metrics`` exports it
(``raftconnect_task_lag_records``).

All partitions of all sink tasks are asked for in one ``ListOffsets`` round
(``read_committed``, the offsets the sinks read up to), through the agent's
:class:`~webapp.kafka.clients.EndOffsetWatcher` when it has one: partitions it
refreshed within the last ``interval`` cost no request at all. Never commits
anything and never touches the tasks' own consumers. A broker that reports
stale end offsets gives a stale lag (the embedded Tansu broker reports the base
offset of the last record batch + 1, so its lag is low by up to one batch); a
partition whose end offset could not be read leaves its task's lag unknown
(``None``) until the next round.
"""
from __future__ import annotations

import logging
import threading
from typing import Any, Callable, Iterable, Mapping

__all__ = ["SinkLagMonitor", "consumer_lag"]

log = logging.getLogger(__name__)


def consumer_lag(end_offsets: Mapping[tuple[str, int], int], positions: Mapping[tuple[str, int], int]) -> int | None:
    """``sum(max(0, end offset - position))`` over ``{(topic, partition): position}``; None if an end is unknown."""
    lag = 0
    for tp, position in positions.items():
        end = end_offsets.get(tp)
        if end is None:
            return None
        lag += max(0, end - position)
    return lag


class SinkLagMonitor:
    """Refreshes the lag of every running sink task every ``interval`` seconds.

    Args:
        kafka_config: the tasks' librdkafka settings (only connection and security keys are used).
        metrics: callable returning the :class:`~webapp.runtime.task_metrics.TaskMetrics` of the running tasks.
        interval: seconds between rounds.
        timeout: seconds for one round's request.
        end_offsets: the agent's :class:`~webapp.kafka.clients.EndOffsetWatcher` (its recent figures
            are reused); None asks Kafka for every partition.
    """

    def __init__(self, kafka_config: Mapping[str, str], metrics: Callable[[], Iterable], *, interval: float = 5.0,
                 timeout: float = 2.0, end_offsets: Any = None):
        self.config = dict(kafka_config)
        self.metrics = metrics
        self.interval = interval
        self.timeout = timeout
        self.end_offsets = end_offsets
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        """One round: set ``lag`` on every task metrics object that has sink positions. Never raises."""
        from webapp.kafka.clients import list_end_offsets

        tasks = [(m, dict(m.sink_positions)) for m in list(self.metrics())]
        tasks = [(m, positions) for m, positions in tasks if positions]
        if not tasks or self._stop.is_set():
            return
        tps = set().union(*[positions for _, positions in tasks])
        try:
            if self.end_offsets is not None:
                ends = self.end_offsets.end_offsets(tps, max_age=self.interval)
            else:
                ends = list_end_offsets(self.config, tps, timeout=self.timeout)
        except Exception as exc:  # broker unreachable, client closing: unknown this round
            log.debug("sink lag unknown: %s", exc)
            ends = {}
        for m, positions in tasks:
            m.lag = consumer_lag(ends, positions)

    def start(self) -> None:
        """Start the background thread (daemon)."""
        self._thread = threading.Thread(target=self._loop, name="sink-lag", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread (bounded by one round's timeout)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout * 2 + 1)

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()
