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

from webapp import environment

from .topics import partition_count, shared_admin_client

__all__ = ["EndOffsetWatcher", "SinkParking", "partition_count_cached", "ensure_topic_cached", "list_end_offsets"]

log = logging.getLogger(__name__)

_counts: dict[tuple[str, str], tuple[float, int | None]] = {}
_counts_lock = threading.Lock()
_refresh_lock = threading.Lock()  # one metadata request at a time: the others wait for its answer


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

    def fresh() -> tuple[bool, int | None]:
        with _counts_lock:
            hit = _counts.get(key)
        ok = hit is not None and time.monotonic() - hit[0] < (max_age if hit[1] else missing_max_age)
        return ok, hit[1] if hit is not None else None

    ok, n = fresh()
    if ok:
        return n
    # one metadata request answers for every topic: remember them all (a thousand tasks starting
    # together, or finding the cache expired together, then cost one request, not one each)
    from confluent_kafka import KafkaException

    from .topics import TopicError

    with _refresh_lock:
        ok, n = fresh()  # another thread refreshed while this one waited
        if ok:
            return n
        now = time.monotonic()
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
            known = _counts.get(key)
        if known is None or known[0] != now:
            n = partition_count(kafka_config, topic, admin=shared_admin_client(kafka_config))
            with _counts_lock:
                _counts[key] = (now, n)
            return n
        return known[1]


def ensure_topic_cached(kafka_config: Mapping[str, Any], topic: str, partitions: int,
                        replication_factor: int = -1, config: Mapping[str, str] | None = None) -> int:
    """:func:`~webapp.kafka.topics.ensure_topic`, asked only when the cache does not know ``topic``.

    ``config``: topic configs for a topic this call creates (an existing topic keeps its own).

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
    n = ensure_topic(kafka_config, topic, partitions, replication_factor, config=config)
    with _counts_lock:
        _counts[(str(kafka_config.get("bootstrap.servers")), topic)] = (time.monotonic(), n)
    return n


def list_end_offsets(kafka_config: Mapping[str, Any], tps: Iterable[tuple[str, int]],
                     timeout: float = 5.0) -> dict[tuple[str, int], int]:
    """End offsets (``read_committed``: the last stable offset) of ``tps`` in one ``ListOffsets`` round.

    One request per broker for all partitions, through the process's shared
    admin client. Partitions the broker could not answer for (a deleted topic, a
    timeout) are left out of the result.

    Args:
        kafka_config: librdkafka settings (admin-relevant keys are used).
        tps: ``(topic, partition)`` pairs.
        timeout: seconds for the whole request.

    Returns:
        ``{(topic, partition): end offset}``.
    """
    from confluent_kafka import IsolationLevel, KafkaException, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    latest = OffsetSpec.latest()
    request = {TopicPartition(t, p): latest for t, p in tps}
    if not request:
        return {}
    futures = shared_admin_client(kafka_config).list_offsets(
        request, isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
    out: dict[tuple[str, int], int] = {}
    for tp, fut in futures.items():
        try:
            out[(tp.topic, tp.partition)] = fut.result(timeout=timeout).offset
        except KafkaException:
            continue
    return out


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

    A refresh costs about 15 µs of CPU per partition here (confluent-kafka builds
    a result object per partition), so with thousands of watched partitions the
    cadence is also held to a CPU share: the thread sleeps at least its last
    refresh's CPU time divided by :attr:`CPU_SHARE_FLOWING` (while records flow)
    or :attr:`CPU_SHARE_IDLE` (after 5 s without any). 2,000 idle partitions are
    then refreshed about every 1.5 s instead of burning a tenth of a core.

    End offsets are read with ``read_committed`` isolation (the last stable
    offset), as the sinks consume.

    Args:
        kafka_config: librdkafka settings (admin-relevant keys are used).
        interval: seconds between refreshes (``RAFTCONNECT_SINK_WAKE_INTERVAL_MS``, default 100).
    """

    #: largest share of one core the refresh thread may use while records flow / once idle
    CPU_SHARE_FLOWING = 0.10
    CPU_SHARE_IDLE = 0.02

    def __init__(self, kafka_config: Mapping[str, Any], interval: float | None = None):
        self.kafka_config = dict(kafka_config)
        self.interval = interval if interval is not None else environment.sink_wake_interval_s()
        self._lock = threading.Lock()
        self._watches: dict[str, tuple[frozenset, Callable[[], None]]] = {}
        self._ends: dict[tuple[str, int], int] = {}
        self._refreshed = 0.0  # monotonic time of the last refresh that answered
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

    def end_offsets(self, tps: Iterable[tuple[str, int]], max_age: float) -> dict[tuple[str, int], int]:
        """End offsets of ``tps``: watched ones from the last refresh if it is under ``max_age`` seconds old,
        the others asked for in one request (see :func:`list_end_offsets`; unanswered partitions are left out)."""
        tps = set(tps)
        with self._lock:
            fresh = time.monotonic() - self._refreshed < max_age
            out = {tp: self._ends[tp] for tp in tps if fresh and tp in self._ends}
        missing = tps.difference(out)
        if missing:
            out.update(list_end_offsets(self.kafka_config, missing))
        return out

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
            cpu0 = time.thread_time()
            try:
                ends = self._list_offsets(watched)
            except Exception as e:  # broker unreachable: keep the old figures, tasks poll by themselves
                log.debug("end offsets not refreshed: %s", e)
                ends = {}
            cost = time.thread_time() - cpu0
            moved: set[tuple[str, int]] = set()
            with self._lock:
                if ends:
                    self._refreshed = time.monotonic()
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
            # worker with thousands of sink partitions then asks twice a second, not ten times);
            # never more often than the CPU share allows
            flowing = now - last_move < 5.0
            wait = self.interval if flowing else 5 * self.interval
            wait = max(wait, cost / (self.CPU_SHARE_FLOWING if flowing else self.CPU_SHARE_IDLE))
            self._stop.wait(wait)

    def _list_offsets(self, tps: set[tuple[str, int]]) -> dict[tuple[str, int], int]:
        # a topic deleted meanwhile is left out: its tasks find out by themselves
        return list_end_offsets(self.kafka_config, tps)


class SinkParking:
    """How a sink task parks on its worker's :class:`EndOffsetWatcher` between batches.

    A sink calls :meth:`nothing_new` before reading: True means no end offset of
    its partitions changed since a read found nothing, so it returns without
    reading and stays parked (:meth:`idle_delay`) until the watcher wakes it.
    After a read that found nothing it calls :meth:`found_nothing`; after one
    that moved records, :meth:`moved`. Unknown end offsets always mean "read".
    The end offsets compared are those taken *before* the read, so a record
    arriving during the read changes them and is not slept through.

    Args:
        watcher: the worker's EndOffsetWatcher, or None (outside a worker: never parks).
        key: the task's id (one watch per task).
        wake: the task's wake-up callback, or None (never parks).
    """

    #: seconds a parked sink waits before looking anyway (a missed wake-up, a new partition)
    SAFETY_NET_SECONDS = 5.0

    def __init__(self, watcher: "EndOffsetWatcher | None", key: str, wake: Callable[[], None] | None):
        self.watcher = watcher
        self.key = key
        self.wake = wake
        self.watching = False
        self._idle_ends: dict | None = None
        self._ends_before: dict | None = None

    def nothing_new(self, assigned: list[tuple[str, int]]) -> bool:
        """Whether the task may skip this read: nothing moved on ``assigned`` since a read found nothing."""
        if self.watcher is None or self.wake is None:
            return False
        self.watcher.watch(self.key, assigned, self.wake)  # the watcher learns only watched partitions
        ends = self.watcher.snapshot(assigned)
        self.watching = self._idle_ends is not None and ends == self._idle_ends and None not in ends.values()
        self._ends_before = ends
        return self.watching

    def found_nothing(self) -> None:
        """The read found nothing: park until an end offset differs from those seen before it."""
        self._idle_ends = self._ends_before

    def moved(self) -> None:
        """The read moved records: read again without parking."""
        self._idle_ends = None

    def idle_delay(self) -> float | None:
        """For ``Task.idle_delay``: the safety-net wait while parked, else None (the worker's backoff)."""
        return self.SAFETY_NET_SECONDS if self.watching else None

    def stop(self) -> None:
        """Forget the task's watch (it stopped)."""
        if self.watcher is not None:
            self.watcher.unwatch(self.key)
