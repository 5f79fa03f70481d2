"""Consumer lag of sink tasks, measured by the agent that runs them.

Owns one background thread per agent that, every ``interval`` seconds, asks
Kafka for the end offset (high watermark) of each partition a sink task has
committed a position for, and sets the task's
:attr:`~webapp.runtime.worker.TaskMetrics.lag` to
``sum(max(0, end_offset - committed_position))`` over its partitions. The figure
reaches the leader in the agent's heartbeats and ``/metrics`` exports it
(``raftconnect_task_lag_records``).

Uses one confluent-kafka ``Consumer`` without joining a group (watermark queries
only); never commits anything and never touches the tasks' own consumers. A
broker that reports stale high watermarks gives a stale lag (the embedded Tansu
broker reports the base offset of the last record batch + 1, so its lag is
low by up to one batch); a failed query
leaves the task's lag unknown (``None``) until the next round.
"""
from __future__ import annotations

import logging
import threading
from typing import Callable, Iterable, Mapping

from confluent_kafka import Consumer, KafkaException, TopicPartition

__all__ = ["SinkLagMonitor", "consumer_lag"]

log = logging.getLogger(__name__)

# Connection and security settings carried over from the tasks' librdkafka config.
_CONNECTION_PREFIXES = ("bootstrap.servers", "security.", "sasl.", "ssl.", "client.", "socket.", "broker.")


def consumer_lag(consumer: Consumer, positions: Mapping[tuple[str, int], int], timeout: float = 2.0) -> int:
    """``sum(max(0, high watermark - position))`` over ``{(topic, partition): position}``.

    Raises:
        KafkaException: when a watermark query fails or times out.
    """
    lag = 0
    for (topic, partition), position in positions.items():
        _low, high = consumer.get_watermark_offsets(TopicPartition(topic, partition), timeout=timeout, cached=False)
        lag += max(0, high - position)
    return lag


class SinkLagMonitor:
    """Refreshes the lag of every running sink task every ``interval`` seconds.

    Args:
        kafka_config: the tasks' librdkafka settings (only connection and security keys are used).
        metrics: callable returning the :class:`~webapp.runtime.worker.TaskMetrics` of the running tasks.
        interval: seconds between rounds.
        timeout: seconds per watermark query.
    """

    def __init__(self, kafka_config: Mapping[str, str], metrics: Callable[[], Iterable], *, interval: float = 5.0,
                 timeout: float = 2.0):
        self.config = {k: v for k, v in kafka_config.items() if k.startswith(_CONNECTION_PREFIXES)}
        self.config.update({"group.id": "raftconnect-lag-probe", "enable.auto.commit": False})
        self.metrics = metrics
        self.interval = interval
        self.timeout = timeout
        self._consumer: Consumer | None = None
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def refresh(self) -> None:
        """One round: set ``lag`` on every task metrics object that has sink positions. Never raises."""
        for m in list(self.metrics()):
            if self._stop.is_set():
                return
            positions = dict(m.sink_positions)
            if not positions:
                continue
            try:
                if self._consumer is None:
                    self._consumer = Consumer(self.config)
                m.lag = consumer_lag(self._consumer, positions, self.timeout)
            except (KafkaException, RuntimeError) as exc:
                m.lag = None
                log.debug("sink lag unknown: %s", exc)

    def start(self) -> None:
        """Start the background thread (daemon)."""
        self._thread = threading.Thread(target=self._loop, name="sink-lag", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Stop the thread and close the consumer (bounded by one query timeout)."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(self.timeout * 2 + 1)
            if self._thread.is_alive():
                return  # still inside a query: leave the consumer to the daemon thread
        if self._consumer is not None:
            try:
                self._consumer.close()
            except RuntimeError:
                pass
            self._consumer = None

    def _loop(self) -> None:
        while not self._stop.wait(self.interval):
            self.refresh()
