"""Kafka clients shared by every task of a worker agent.

Owns what a worker keeps once instead of once per task: the end offsets of the
partitions its sink tasks read (:class:`EndOffsetWatcher`, one admin client and
one request for all partitions per refresh) and cached partition counts
(:func:`partition_count_cached`). Producers are shared through the producer
cache of :mod:`webapp.kafka.spark_io`, which works the same in-process and in
Spark's Python workers. Must not import Django or Spark.
"""
from __future__ import annotations

import logging
import threading
import time
from typing import Any, Callable, Iterable, Mapping

from .topics import partition_count, shared_admin_client

__all__ = ["EndOffsetWatcher", "partition_count_cached", "ensure_topic_cached"]

log = logging.getLogger(__name__)

_counts: dict[tuple[str, str], tuple[float, int | None]] = {}
_counts_lock = threading.Lock()


def partition_count_cached(kafka_config: Mapping[str, Any], topic: str, *, max_age: float = 10.0,
                           missing_max_age: float = 1.0) -> int | None:
    """:func:`~webapp.kafka.topics.partition_count` through a process-wide cache.

    A known topic's count is reused for ``max_age`` seconds (Kafka clients refresh
    metadata every few minutes; new partitions are picked up within this time), a
    missing topic is asked again after ``missing_max_age`` seconds.

    Raises:
        TopicError: as :func:`partition_count`.
    """
    servers = str(kafka_config.get("bootstrap.servers"))
    key = (servers, topic)
    now = time.monotonic()
    with _counts_lock:
        hit = _counts.get(key)
    if hit is not None and now - hit[0] < (max_age if hit[1] else missing_max_age):
        return hit[1]
    # one metadata request answers for every topic: remember them all (a thousand tasks starting
    # together then cost one request, not one each)
    from confluent_kafka import KafkaException

    from .topics import TopicError

    try:
        md = shared_admin_client(kafka_config).list_topics(timeout=10)
    except KafkaException as e:
        raise TopicError(f"cannot describe topic {topic!r}: {e}") from e
    with _counts_lock:
        if len(_counts) > 100_000:
            _counts.clear()
        for name, tmd in md.topics.items():
            if tmd.error is None and tmd.partitions:
                _counts[(servers, name)] = (now, len(tmd.partitions))
        if (servers, topic) not in _counts or _counts[(servers, topic)][0] != now:
            n = partition_count(kafka_config, topic, admin=shared_admin_client(kafka_config))
            _counts[key] = (now, n)
        return _counts[key][1]


def ensure_topic_cached(kafka_config: Mapping[str, Any], topic: str, partitions: int,
                        replication_factor: int = -1) -> int:
    """:func:`~webapp.kafka.topics.ensure_topic`, asked only when the cache does not know ``topic``.

    The count the topic ends up with goes into the cache at once, so a task of
    this process that looked for ``topic`` before it existed (and was told "missing"
    for ``missing_max_age``) sees its partitions right after it is created.

    Returns:
        The topic's partition count.

    Raises:
        TopicError: as :func:`~webapp.kafka.topics.ensure_topic`.
    """
    from .topics import ensure_topic

    n = partition_count_cached(kafka_config, topic)
    if n:
        return n
    n = ensure_topic(kafka_config, topic, partitions, replication_factor)
    with _counts_lock:
        _counts[(str(kafka_config.get("bootstrap.servers")), topic)] = (time.monotonic(), n)
    return n


class EndOffsetWatcher:
    """End offsets of the partitions that idle sink tasks wait on, refreshed together.

    A sink task with nothing to read registers its partitions (:meth:`watch`) and
    parks; every ``interval`` seconds one ``ListOffsets`` request per broker covers
    every watched partition, and the tasks watching a partition whose end offset
    moved are woken through their callback. So an idle sink costs no thread, no
    consumer and no request of its own, and still starts its next batch within
    about ``interval`` of a record arriving (``5 × interval`` for the first record
    after 5 s without any on the worker). The thread runs only while something is
    watched. Tasks compare snapshots (:meth:`snapshot`), not end offsets with
    their positions.

    End offsets are read with ``read_committed`` isolation (the last stable
    offset), as the sinks consume.

    Args:
        kafka_config: librdkafka settings (admin-relevant keys are used).
        interval: seconds between refreshes (``RAFTCONNECT_SINK_WAKE_INTERVAL_MS``, default 100).
    """

    def __init__(self, kafka_config: Mapping[str, Any], interval: float | None = None):
        import os

        self.kafka_config = dict(kafka_config)
        self.interval = interval if interval is not None else \
            int(os.environ.get("RAFTCONNECT_SINK_WAKE_INTERVAL_MS", "100")) / 1000.0
        self._lock = threading.Lock()
        self._watches: dict[str, tuple[frozenset, Callable[[], None]]] = {}
        self._ends: dict[tuple[str, int], int] = {}
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._changed = threading.Event()

    # -- what tasks call ---------------------------------------------------------------
    def has_records(self, positions: Mapping[tuple[str, int], int | None]) -> bool:
        """Whether any partition may hold records at or past its position (``None`` = from the start).

        True for a partition whose end offset is not known yet (never seen): the
        caller then looks for itself.
        """
        with self._lock:
            ends = {tp: self._ends.get(tp) for tp in positions}
        for tp, pos in positions.items():
            end = ends[tp]
            if end is None or end > (pos or 0):
                return True
        return False

    def snapshot(self, partitions: Iterable[tuple[str, int]]) -> dict[tuple[str, int], int | None]:
        """The last end offsets seen for ``partitions`` (None: not known yet).

        Compare two snapshots rather than an end offset with a consumer position:
        brokers differ in what ``ListOffsets`` reports (the embedded Tansu counts
        record batches), but any new record changes it.
        """
        with self._lock:
            return {tp: self._ends.get(tp) for tp in partitions}

    def watch(self, key: str, partitions: Iterable[tuple[str, int]], wake: Callable[[], None]) -> None:
        """Call ``wake()`` when the end offset of one of ``partitions`` moves; replaces ``key``'s earlier watch."""
        tps = frozenset(partitions)
        with self._lock:
            self._watches[key] = (tps, wake)
            start = self._thread is None or not self._thread.is_alive()
            if start:
                self._stop.clear()
                self._thread = threading.Thread(target=self._loop, name="end-offsets", daemon=True)
        if start:
            self._thread.start()
        self._changed.set()

    def unwatch(self, key: str) -> None:
        """Forget ``key``'s watch (a stopped task)."""
        with self._lock:
            self._watches.pop(key, None)

    def stop(self) -> None:
        """Stop refreshing (the agent shuts down)."""
        self._stop.set()
        self._changed.set()

    # -- refreshing --------------------------------------------------------------------
    def _loop(self) -> None:
        last_move = time.monotonic()
        while not self._stop.is_set():
            with self._lock:
                watched = set().union(*[tps for tps, _ in self._watches.values()]) if self._watches else set()
            if not watched:
                with self._lock:  # nothing left to watch: end; the next watch() starts a thread again
                    if not self._watches:
                        self._thread = None
                        return
                continue
            try:
                ends = self._list_offsets(watched)
            except Exception as e:  # broker unreachable: keep the old figures, tasks poll by themselves
                log.debug("end offsets not refreshed: %s", e)
                ends = {}
            moved: set[tuple[str, int]] = set()
            with self._lock:
                for tp, end in ends.items():
                    if self._ends.get(tp) != end:
                        moved.add(tp)
                        self._ends[tp] = end
                for tp in list(self._ends):
                    if tp not in watched:
                        del self._ends[tp]
                wakes = [wake for tps, wake in self._watches.values() if tps & moved]
            for wake in wakes:
                try:
                    wake()
                except Exception:
                    log.exception("waking a sink task failed")
            self._changed.clear()
            now = time.monotonic()
            if moved:
                last_move = now
            # every interval while records flow; after 5 s without any, every 5 intervals (an idle
            # worker with thousands of sink partitions then asks twice a second, not ten times)
            self._stop.wait(self.interval if now - last_move < 5.0 else 5 * self.interval)

    def _list_offsets(self, tps: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
        from confluent_kafka.admin import OffsetSpec

        admin = shared_admin_client(self.kafka_config)
        request = {TopicPartition(t, p): OffsetSpec.latest() for t, p in tps}
        futures = admin.list_offsets(request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=5)
        out: dict[tuple[str, int], int] = {}
        for tp, fut in futures.items():
            try:
                out[(tp.topic, tp.partition)] = fut.result(timeout=5).offset
            except KafkaException:  # e.g. a topic deleted meanwhile: its tasks find out by themselves
                continue
        return out
