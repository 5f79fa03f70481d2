"""The sink side of a connector task (Connect's ``WorkerSinkTask`` role), written once for every sink.

Owns :class:`SinkTask`, the base the sink connectors' tasks extend: their assignment (the
partitions ``p`` of their topics with ``p % task.count == task.index``), the next offset to read
per partition (from the offsets the worker hands the task, ``_next``), the batch loop that reads
each topic's partitions by explicit offset range and returns the offsets that moved
(:meth:`SinkTask.run_batch`), parking on the worker's end-offset watcher between batches, the
task's error handling (``errors.*``, transforms) and its dead letter queue topic, and the
connector's client override keys (``consumer.override.*``, ``producer.override.*``,
``admin.override.*``), and reading a few records ahead on the driver (:meth:`SinkTask.peek`, the
consumer loop a sink plans its schema from). What a sink does with a topic's ranges — decode, transform, write, commit —
is its own :meth:`SinkTask.put_topic`.

A declared helper for connectors (contract ``connectors-use-declared-helpers``): it imports the
plugin API, :mod:`webapp.kafka` and the runtime's :mod:`~webapp.runtime.pipeline` only. Must not
touch the worker, the agent, the control-plane client or the metadata store: offsets go back in
:class:`~webapp.plugin.BatchResult`, and the worker commits them.
"""
from __future__ import annotations

import math
import time
from typing import Any, NamedTuple, Sequence

from webapp.kafka.client_overrides import client_overrides, with_admin_overrides
from webapp.plugin import BatchResult, ConnectException, SourceOffset, Task

__all__ = ["SinkTask", "PartitionDone", "PeekedRecord", "TASK_INDEX", "TASK_COUNT"]

#: task config keys a sink connector writes into each task's config (its index among ``task.count``)
TASK_INDEX = "task.index"
TASK_COUNT = "task.count"


class PartitionDone(NamedTuple):
    """What one partition of a batch came to: the records it consumed and the offset to read next.

    ``next_offset`` None: nothing to commit for the partition (it had nothing at its offset).
    """

    partition: int
    records: int
    next_offset: int | None


class PeekedRecord(NamedTuple):
    """One record :meth:`SinkTask.peek` read ahead on the driver.

    ``timestamp``: ms since the epoch, None when the record has none; ``headers``: ``[{"key", "value"}]``.
    """

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    timestamp: int | None
    headers: list[dict[str, Any]]


class SinkTask(Task):
    """A sink task's batch loop over its share of its topics' partitions (Connect's ``WorkerSinkTask``).

    A subclass's ``start`` calls :meth:`start_sink` once its own checks passed, and implements
    :meth:`put_topic`. After ``start_sink`` it has ``topics``, ``index`` / ``count``,
    ``batch_rows``, ``consumer_overrides`` / ``producer_overrides`` (librdkafka settings),
    ``_transforming`` (run the SMT / tolerance pipeline?), ``_operator`` (the
    ``RetryWithToleranceOperator``) and ``_next`` (``(topic, partition) -> next offset``; a sink
    keeping offsets in its target, as the JDBC sink, may raise them before its first batch).

    ``run_batch`` gives None when no partition had new records, or no topic exists yet.
    """

    def start_sink(self, topics: Sequence[str], batch_rows: int) -> None:
        """Take the assignment, offsets, overrides, error handling and dead letter queue from the config.

        Raises:
            ConnectException: ``task.index`` outside ``[0, task.count)``, invalid ``transforms`` /
                ``errors.*`` keys, or a dead letter queue topic that cannot be created.
        """
        from webapp.kafka.clients import SinkParking
        from webapp.runtime.pipeline import error_handling

        cfg = self.config
        self.topics = list(topics)
        self.batch_rows = max(1, batch_rows)
        self.index = int(cfg.get(TASK_INDEX, self.context.task_id.task))
        self.count = int(cfg.get(TASK_COUNT, 1))
        if not (0 <= self.index < self.count):
            raise ConnectException(f"{TASK_INDEX}={self.index} must be in [0, {TASK_COUNT}={self.count})")
        self.consumer_overrides = client_overrides(cfg, "consumer")
        self.producer_overrides = client_overrides(cfg, "producer")  # the dead letter queue's producer
        self._transforming, self._operator = error_handling(cfg, sink=True)
        self._start_dead_letter_queue()
        self._next: dict[tuple[str, int], int] = {}
        for entry in self.context.offsets.values():
            part, off = entry.partition, entry.offset
            if part.get("kafka_topic") in self.topics and "kafka_offset" in off:
                self._next[(part["kafka_topic"], int(part["kafka_partition"]))] = int(off["kafka_offset"])
        self._parking = SinkParking(self.context.end_offsets, str(self.context.task_id), self.context.wake)

    def _start_dead_letter_queue(self) -> None:
        """Create the DLQ topic if missing: one partition, the configured replication factor (as Kafka's
        DeadLetterQueueReporter), with the connector's ``admin.override.*`` keys."""
        dlq = self._operator.config.dlq_topic
        if not dlq:
            return
        from webapp.kafka.topics import TopicError, ensure_topic

        try:
            ensure_topic(with_admin_overrides(self.context.kafka_config, self.config), dlq, 1,
                         self._operator.config.dlq_replication_factor)
        except TopicError as e:
            raise ConnectException(f"Could not initialize dead letter queue with topic={dlq}: {e}") from e

    def stop(self) -> None:
        """Stop watching the task's partitions (a subclass that overrides it calls it)."""
        if getattr(self, "_parking", None) is not None:
            self._parking.stop()

    def idle_delay(self) -> float | None:
        """How long to park after a batch that read nothing: the worker's EndOffsetWatcher wakes the task
        when a partition gets records; the long wait is only a safety net (a missed wake-up, a new partition)."""
        return self._parking.idle_delay()

    def assigned(self) -> list[tuple[str, int]]:
        """This task's ``(topic, partition)`` pairs: ``p % task.count == task.index`` of each topic's partitions
        (a missing topic has none). Raises ConnectException when Kafka cannot say."""
        from webapp.kafka.clients import partition_count_cached
        from webapp.kafka.topics import TopicError

        out = []
        for topic in self.topics:
            try:
                n = partition_count_cached(self.context.kafka_config, topic)
            except TopicError as e:
                raise ConnectException(str(e)) from e
            out.extend((topic, p) for p in range(n or 0) if p % self.count == self.index)
        return out

    def consumer_config(self) -> dict[str, Any]:
        """This task's consumer config: the worker's settings and the connector's ``consumer.override.*``
        (:func:`webapp.kafka.spark_io.consumer_config`)."""
        from webapp.kafka.spark_io import consumer_config

        return consumer_config(self.context.kafka_config, self.consumer_overrides)

    def peek(self, ranges: Sequence[Any], limit: int, *, timeout: float,
             skip_nulls: bool = False) -> tuple[list[PeekedRecord], bool]:
        """Up to ``limit`` records from the start offsets of ``ranges`` (``TopicPartitionRange``s of one
        topic), read on the driver with one assign-only consumer: what a sink plans a batch's schema from.

        Stops at the end of every partition, at ``limit`` records or after ``timeout`` seconds. With
        ``skip_nulls`` records without a value (tombstones) are neither returned nor counted.
        Returns ``(records, saw_any)``: ``saw_any`` is whether any record was read, tombstones included.

        Raises:
            ConnectException: a partition could not be read.
        """
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        consumer = Consumer(self.consumer_config())
        out: list[PeekedRecord] = []
        saw = False
        try:
            consumer.assign([TopicPartition(r.topic, r.partition, 0 if r.start is None else r.start) for r in ranges])
            eof: set[int] = set()
            deadline = time.monotonic() + timeout
            while len(out) < limit and len(eof) < len(ranges):
                left = deadline - time.monotonic()
                if left <= 0:
                    break
                for m in consumer.consume(limit - len(out), 0) or [consumer.poll(min(left, 0.5))]:
                    if m is None:
                        continue
                    err = m.error()
                    if err is not None:
                        if err.code() == KafkaError._PARTITION_EOF:
                            eof.add(m.partition())
                            continue
                        raise ConnectException(f"Reading {m.topic()}[{m.partition()}] failed: {err}")
                    saw = True
                    if skip_nulls and m.value() is None:
                        continue
                    ts_type, ts = m.timestamp()
                    out.append(PeekedRecord(m.partition(), m.offset(), m.key(), m.value(), ts if ts_type else None,
                                            [{"key": k, "value": v} for k, v in (m.headers() or [])]))
        finally:
            consumer.close()
        return out, saw

    def before_batch(self) -> None:
        """Called once a batch will read, before any topic is read (the file sink checks its path again)."""

    def put_topic(self, topic: str, ranges: list) -> list[PartitionDone]:  # pragma: no cover - abstract
        """Read, process and durably write one topic's ``ranges`` (``TopicPartitionRange``s from ``_next``).

        Returns what each partition that was read came to. Runs under the task's
        ``RetryWithToleranceOperator`` (stage TASK_PUT): an exception is retried as ``errors.retry.*`` says,
        then fails the task.
        """
        raise NotImplementedError

    def run_batch(self) -> BatchResult | None:
        """One batch: up to ``batch.max.rows`` records split over the assigned partitions, topic by topic
        (:meth:`put_topic`); returns the records consumed and the partitions' next offsets, or None."""
        from webapp.kafka.spark_io import TopicPartitionRange

        assigned = self.assigned()
        if not assigned or self._parking.nothing_new(assigned):
            return None
        self.before_batch()
        per = max(1, math.ceil(self.batch_rows / len(assigned)))
        records = 0
        moved: list[tuple[str, int, int]] = []
        for topic in self.topics:
            ranges = [TopicPartitionRange(t, p, self._next.get((t, p)), per) for t, p in assigned if t == topic]
            if not ranges:
                continue
            done = self._operator.execute(lambda t=topic, r=ranges: self.put_topic(t, r), "TASK_PUT",
                                          type(self).__name__)
            for d in done:
                records += d.records
                if d.next_offset is not None:
                    moved.append((topic, d.partition, d.next_offset))
        if not moved:
            self._parking.found_nothing()
            return None
        self._parking.moved()
        offsets = []
        for topic, partition, nxt in moved:  # only now: every topic of the batch is written
            self._next[(topic, partition)] = nxt
            offsets.append(SourceOffset({"kafka_topic": topic, "kafka_partition": partition}, {"kafka_offset": nxt}))
        return BatchResult(records, tuple(offsets))
