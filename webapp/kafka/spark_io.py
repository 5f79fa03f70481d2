"""Kafka I/O inside Spark partitions (``mapInArrow``) with confluent-kafka.

* :func:`produce_dataframe` — produce a DataFrame's value (and optional key)
  column to a topic from the Spark tasks; returns only after every record's
  delivery report succeeded, raises otherwise.
* :func:`read_partitions` — read explicit offset ranges of topic-partitions, one
  Spark partition per topic-partition, from a start offset until partition EOF
  (``enable.partition.eof``) or a maximum count. No consumer group is joined and
  nothing is committed to Kafka; high watermarks are never consulted (some
  brokers report stale ones).

The functions shipped to Spark's Python workers are closures that import only
``pyarrow`` and ``confluent_kafka``, so workers never import this project.
Per-row Python is limited to the ``produce()`` / ``consume()`` calls themselves.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Callable, Mapping, Sequence

from webapp.kafka import client_overrides

__all__ = [
    "PRODUCER_POOL",
    "drop_pooled_producers",
    "consumer_config",
    "producer_config",
    "produce_function",
    "record_produce_function",
    "KafkaIOError",
    "PRODUCER_DEFAULTS",
    "CONSUMER_DEFAULTS",
    "produce_dataframe",
    "TopicPartitionRange",
    "PartitionRead",
    "read_partitions",
    "partition_reader",
    "READ_SCHEMA",
    "READ_SCHEMA_WITH_METADATA",
    "summarize_read",
]

#: librdkafka producer settings used unless overridden: idempotent, big batches.
PRODUCER_DEFAULTS: dict[str, Any] = {
    "enable.idempotence": True,
    "acks": "all",
    "linger.ms": 20,
    "batch.size": 1_000_000,
    "batch.num.messages": 100_000,
    "queue.buffering.max.messages": 500_000,
    "queue.buffering.max.kbytes": 262_144,
    "compression.type": "lz4",
    "message.timeout.ms": 120_000,
}

#: librdkafka consumer settings used unless overridden (no group membership, no commits).
CONSUMER_DEFAULTS: dict[str, Any] = {
    "group.id": "raftconnect-assign-only",
    "enable.auto.commit": False,
    "enable.auto.offset.store": False,
    "enable.partition.eof": True,
    "auto.offset.reset": "earliest",
    "fetch.wait.max.ms": 10,  # reads go to the end of a partition: an empty fetch at the tail should come back fast
    "max.partition.fetch.bytes": 16 * 1024 * 1024,
    "fetch.max.bytes": 64 * 1024 * 1024,
    "queued.max.messages.kbytes": 131_072,
    "isolation.level": "read_committed",
}

#: Spark DDL schema of :func:`read_partitions` rows.
READ_SCHEMA = "kafka_topic string, kafka_partition int, kafka_offset long, key binary, value binary"
#: :data:`READ_SCHEMA` plus record timestamp (epoch ms, null if none) and headers (``with_metadata=True``).
READ_SCHEMA_WITH_METADATA = READ_SCHEMA + ", timestamp long, headers array<struct<key: string, value: binary>>"

# Keys that belong to one client type only; dropped for the other to keep librdkafka quiet.
_CONSUMER_ONLY_PREFIXES = ("group.", "enable.auto.", "auto.offset.reset", "enable.partition.eof", "fetch.",
                           "max.partition.fetch.bytes", "queued.", "isolation.level", "session.timeout.ms",
                           "heartbeat.interval.ms", "max.poll.interval.ms", "partition.assignment.strategy",
                           "check.crcs", "consume.")
_PRODUCER_ONLY_PREFIXES = ("enable.idempotence", "acks", "request.required.acks", "linger.ms", "queue.buffering.",
                           "batch.", "compression.", "message.timeout.ms", "delivery.timeout.ms", "retries",
                           "message.send.max.retries", "retry.backoff.", "transactional.", "partitioner",
                           "sticky.partitioning.", "max.in.flight", "enable.gapless.guarantee", "delivery.report.",
                           "on_delivery", "max.request.size")



class KafkaIOError(RuntimeError):
    """Producing or consuming failed (delivery error, broker error, timeout)."""


# Worker-level settings for one client type, as in Connect's worker config (``producer.linger.ms``); no
# librdkafka property starts with these, so they never reach a client unstripped.
_CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")


def _client_config(base: Mapping[str, Any], defaults: Mapping[str, Any], drop: tuple[str, ...],
                   overrides: Mapping[str, Any] | None) -> dict[str, Any]:
    """One client's librdkafka config: ``defaults``, then ``base`` (the worker's shared settings without
    the other client type's keys), then ``base``'s ``producer.`` or ``consumer.`` keys (the client
    type is the one whose keys are not in ``drop``), then ``overrides`` (a connector's
    ``producer.override.`` / ``consumer.override.``). Raises :class:`KafkaIOError` without bootstrap servers."""
    prefix = "producer." if drop is _CONSUMER_ONLY_PREFIXES else "consumer."
    conf = dict(defaults)
    conf.update({k: v for k, v in base.items() if not k.startswith(drop) and not k.startswith(_CLIENT_PREFIXES)})
    conf.update({k[len(prefix):]: v for k, v in base.items() if k.startswith(prefix)})
    conf.update(overrides or {})
    # Java client names left in the merged config (Connect's max.request.size) become librdkafka's
    client_overrides.librdkafka_names(conf, prefix[:-1])
    if "bootstrap.servers" not in conf:
        raise KafkaIOError("kafka config has no bootstrap.servers")
    return conf


def consumer_config(kafka_config: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The librdkafka config of a task's consumer (a runtime helper for connectors).

    ``CONSUMER_DEFAULTS`` (assign-only: no group commits), then the worker's shared settings
    ``kafka_config`` without producer-only keys, then its ``consumer.*`` keys, then ``overrides``
    (the connector's ``consumer.override.*``, as ``client_overrides(config, "consumer")`` gives them);
    Java client names become librdkafka's. Raises :class:`KafkaIOError` without ``bootstrap.servers``.
    """
    return _client_config(kafka_config, CONSUMER_DEFAULTS, _PRODUCER_ONLY_PREFIXES, overrides)


def producer_config(kafka_config: Mapping[str, Any], overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The librdkafka config of a task's producer (a runtime helper for connectors).

    ``PRODUCER_DEFAULTS`` (idempotent, ``acks=all``), then ``kafka_config`` without consumer-only
    keys, then its ``producer.*`` keys, then ``overrides`` (the connector's ``producer.override.*``).
    Raises :class:`KafkaIOError` without ``bootstrap.servers``.
    """
    return _client_config(kafka_config, PRODUCER_DEFAULTS, _CONSUMER_ONLY_PREFIXES, overrides)


def _unwrap_spark_error(e: BaseException) -> str:
    """The most useful line of a Spark job failure (the Python worker's exception)."""
    text = str(e)
    for marker in ("[kafka] ", "[source] ", "[sink] ", "KafkaException: ", "KafkaError"):
        idx = text.rfind(marker)
        if idx >= 0:
            return text[idx:].splitlines()[0]
    return text.splitlines()[0] if text else repr(e)


# --------------------------------------------------------------------------------------
# Producing
# --------------------------------------------------------------------------------------
#: distinct topics after which a pooled producer is retired (its per-topic metadata is not kept forever)
MAX_TOPICS_PER_PRODUCER = 200
#: the ``sys.__dict__`` key of this process's idle producers, ``{config key: [entry, ...]}``: kept in ``sys``
#: because Spark's Python workers unpickle the produce function's module afresh
PRODUCER_POOL = "_raftconnect_kafka_producers"


def drop_pooled_producers(bootstrap_servers: str | None = None) -> int:
    """Close this process's idle pooled producers: all of them, or those whose ``bootstrap.servers`` is
    ``bootstrap_servers``. Returns how many were closed.

    For a broker that is gone for good (a stopped embedded broker): its producers would otherwise
    keep reconnecting, and librdkafka logging each failure, until the pool's bound evicts them.
    Records still queued in them are purged (an idle producer has none unless its task failed).
    """
    import sys

    cache = sys.__dict__.get(PRODUCER_POOL)
    if not cache:
        return 0
    closed = 0
    for key in list(cache):
        keep = []
        for entry in cache[key]:
            if bootstrap_servers is not None and entry.get("servers") != bootstrap_servers:
                keep.append(entry)
            else:
                entry["producer"].purge()
                entry["producer"].flush(0)
                closed += 1
        if keep:
            cache[key] = keep  # in place: the pool's order is its least-recently-used order
        else:
            del cache[key]
    return closed


def _make_produce_fn(topic: str, conf: dict[str, Any], value_col: str, key_col: str | None,
                     partition_col: str | None, flush_timeout: float, topic_col: str | None = None,
                     headers_col: str | None = None, timestamp_col: str | None = None,
                     create_topics: Mapping[str, Any] | None = None) -> Callable:
    cache_key = repr(sorted((k, str(v)) for k, v in conf.items()))
    per_record = bool(topic_col or headers_col or timestamp_col)
    admin_conf = {k: v for k, v in conf.items()
                  if k.startswith(("bootstrap.servers", "security.", "sasl.", "ssl.", "client.id", "socket."))}

    def produce_batches(batches):
        import sys

        import pyarrow as pa
        from confluent_kafka import KafkaError, KafkaException, Producer

        # Producers are kept per Python worker process (Spark reuses workers), so an
        # idempotent producer's id and connections survive across tasks and batches:
        # a new idempotent producer spends ~0.5 s before its first delivery.
        # Idle producers are pooled per config: concurrent pieces (threads of one agent) each
        # take one, and give it back when their records are acknowledged.
        cache = sys.__dict__.setdefault(PRODUCER_POOL, {})
        idle = cache.setdefault(cache_key, [])
        try:
            entry = idle.pop()
        except IndexError:
            entry = None
        if entry is not None and (entry["state"]["fatal"] is not None or len(entry["producer"]) > 0):
            entry = None  # unusable: fatal error, or leftovers of a failed task
        if entry is None:
            state = {"failed": 0, "error": None, "fatal": None}

            # delivery.report.only.error: a Python callback only for failed records (a callback per
            # record cost ~40 % of producing); flush() returning 0 means every record was either
            # acknowledged or reported failed here
            def on_delivery(err, msg, state=state):
                if err is not None:
                    state["failed"] += 1
                    if state["error"] is None:  # check() raises with it
                        state["error"] = err
                        if err.code() == KafkaError.MSG_SIZE_TOO_LARGE:  # the broker's limit (the producer's: below)
                            state["error"] = (f"{err.str()} (raise the topic's max.message.bytes: "
                                              "topic.creation.default.max.message.bytes for a topic the connector "
                                              "creates, else the topic's config on the broker)")

            def on_error(err, state=state):
                if err.fatal() and state["fatal"] is None:
                    state["fatal"] = err

            entry = {"producer": Producer({**conf, "delivery.report.only.error": True, "on_delivery": on_delivery,
                                           "error_cb": on_error}),
                     "state": state, "servers": conf.get("bootstrap.servers")}
        state, producer = entry["state"], entry["producer"]
        state["failed"], state["error"] = 0, None
        servers = conf.get("bootstrap.servers", "?")
        sent = 0

        def check():
            if state["fatal"] is not None:
                raise RuntimeError(f"[kafka] fatal producer error for topic {topic!r} at {servers}: {state['fatal']}")
            if state["error"] is not None:  # librdkafka's "Local: ..." errors name no address: say which
                raise RuntimeError(f"[kafka] delivery to topic {topic!r} at {servers} failed: {state['error']}")

        produce = producer.produce
        poll = producer.poll
        known_topics: set = set()
        routed: set = set()  # topics records were routed to (per-record topics)

        def ensure(name):
            """Create a topic a transformation routed records to (as Connect's topic.creation does)."""
            import time as _time

            from confluent_kafka import KafkaError, KafkaException
            from confluent_kafka.admin import AdminClient, NewTopic

            admin = AdminClient(admin_conf)
            md = admin.list_topics(timeout=10)  # all topics: naming one may auto-create it
            if name in md.topics and md.topics[name].error is None and md.topics[name].partitions:
                return
            new = NewTopic(name, num_partitions=int(create_topics.get("partitions", 1)),
                           replication_factor=int(create_topics.get("replication_factor", -1)))
            try:
                admin.create_topics([new], operation_timeout=30)[name].result(30)
            except KafkaException as e:
                err = e.args[0] if e.args else None
                if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
                    raise RuntimeError(f"[kafka] cannot create topic {name!r}: {e}") from None
            deadline = _time.monotonic() + 30
            while _time.monotonic() < deadline:  # metadata lags creation; there is no event to await
                md = admin.list_topics(timeout=5)
                if name in md.topics and md.topics[name].error is None and md.topics[name].partitions:
                    return
                _time.sleep(0.1)
            raise RuntimeError(f"[kafka] topic {name!r} created but not visible")
        try:
            for batch in batches:
                values = batch.column(value_col).to_pylist()
                if per_record:
                    n = batch.num_rows
                    topics = batch.column(topic_col).to_pylist() if topic_col else [topic] * n
                    routed.update(topics)
                    if create_topics is not None:
                        for t in set(topics) - known_topics:
                            ensure(t)
                            known_topics.add(t)
                    keys = batch.column(key_col).to_pylist() if key_col else [None] * n
                    parts = batch.column(partition_col).to_pylist() if partition_col else [None] * n
                    hdrs = batch.column(headers_col).to_pylist() if headers_col else [None] * n
                    stamps = batch.column(timestamp_col).to_pylist() if timestamp_col else [None] * n
                    for t, v, k, p, h, ts in zip(topics, values, keys, parts, hdrs, stamps):
                        kwargs: dict = {"key": k}
                        if p is not None:
                            kwargs["partition"] = p
                        if h:
                            kwargs["headers"] = [(x["key"], x["value"]) for x in h]
                        if ts is not None:
                            kwargs["timestamp"] = ts
                        while True:
                            try:
                                produce(t, v, **kwargs)
                                break
                            except BufferError:
                                poll(0.05)
                                check()
                elif key_col is None and partition_col is None:
                    for v in values:
                        try:
                            produce(topic, v)
                        except BufferError:  # local queue full: serve delivery reports, retry
                            while True:
                                poll(0.05)
                                check()
                                try:
                                    produce(topic, v)
                                    break
                                except BufferError:
                                    pass
                else:
                    keys = batch.column(key_col).to_pylist() if key_col else [None] * len(values)
                    parts = batch.column(partition_col).to_pylist() if partition_col else [None] * len(values)
                    for v, k, p in zip(values, keys, parts):
                        kwargs = {"key": k} if p is None else {"key": k, "partition": p}
                        while True:
                            try:
                                produce(topic, v, **kwargs)
                                break
                            except BufferError:
                                poll(0.05)
                                check()
                sent += len(values)
                poll(0)
                check()
            remaining = producer.flush(flush_timeout)
            check()
            if remaining:
                raise RuntimeError(f"[kafka] {remaining} records to topic {topic!r} at {servers} not delivered "
                                   f"within {flush_timeout}s")
            if state["failed"]:
                raise RuntimeError(f"[kafka] topic {topic!r}: {state['failed']} of {sent} records not acknowledged")
        except BaseException as e:
            try:
                producer.purge()
            except Exception:
                pass
            if not isinstance(e, KafkaException):
                raise
            # refused locally, e.g. a record over message.max.bytes: say which keys raise the limit
            err = e.args[0] if e.args else None
            hint = ""
            if getattr(err, "code", lambda: None)() == KafkaError.MSG_SIZE_TOO_LARGE:
                hint = (f" (a record is larger than the producer allows: {conf.get('message.max.bytes', 1000000)} "
                        "bytes; raise producer.override.max.request.size and the topic's max.message.bytes)")
            raise RuntimeError(f"[kafka] cannot produce to topic {topic!r} at {servers}: "
                               f"{err.str() if hasattr(err, 'str') else e}{hint}") from None
        # this config is now the most recently used (dicts keep insertion order): the bound below
        # evicts the least recently used configs, never the one a concurrent piece just returned to
        idle = cache.pop(cache_key, [])
        cache[cache_key] = idle
        while len(cache) > 4:  # bound: a few distinct configs per worker, a few idle producers each
            for old in cache.pop(next(iter(cache))):
                old["producer"].flush(1)
        # librdkafka keeps the metadata of every topic a producer has written to (~10 KB each) and
        # refreshes it: a producer that has seen many topics (connectors come and go with their
        # topics) is retired, so a long-lived worker's memory stays bounded
        seen = entry.setdefault("topics", set())
        seen.add(topic)
        seen.update(routed)
        if len(idle) < 8 and len(seen) <= MAX_TOPICS_PER_PRODUCER:
            idle.append(entry)
        yield pa.RecordBatch.from_pydict({"delivered": pa.array([sent], pa.int64())})

    return produce_batches


def produce_function(topic: str, kafka_config: Mapping[str, Any], *, producer_config: Mapping[str, Any] | None = None,
                     value_col: str = "value", flush_timeout: float = 120.0) -> Callable:
    """The producing function of :func:`produce_dataframe`, to run in-process on Arrow batches.

    ``fn(batches)`` produces the ``value_col`` column of every batch to ``topic``
    (the producer's partitioner places them), waits for every delivery and yields
    one batch ``delivered long``. Producers are shared per config inside the
    process (see :func:`produce_dataframe`): a worker's in-process batches and
    Spark's Python workers reuse theirs the same way.

    Raises (when run):
        RuntimeError: ``[kafka] ...`` on a delivery error, a fatal producer error or a flush timeout.
    """
    conf = _client_config(kafka_config, PRODUCER_DEFAULTS, _CONSUMER_ONLY_PREFIXES, producer_config)
    return _make_produce_fn(topic, conf, value_col, None, None, flush_timeout)


def record_produce_function(topic: str, conf: Mapping[str, Any], *, value_col: str = "value",
                            key_col: str | None = None, headers_col: str | None = None,
                            timestamp_col: str | None = None, flush_timeout: float = 120.0) -> Callable:
    """Like :func:`produce_function`, for whole records and a producer config already built.

    ``conf`` is what :func:`producer_config` returns. ``fn(batches)`` produces each row's
    ``value_col`` with its ``key_col`` (bytes or null), ``headers_col`` (``[{"key", "value"}]``)
    and ``timestamp_col`` (ms since the epoch, or null) to ``topic``, waits for every delivery and
    yields one batch ``delivered long`` (a dead letter queue's records keep their key, headers and
    timestamp this way).

    Raises (when run):
        RuntimeError: ``[kafka] ...`` on a delivery error, a fatal producer error or a flush timeout.
    """
    return _make_produce_fn(topic, dict(conf), value_col, key_col, None, flush_timeout, None, headers_col,
                            timestamp_col)


def produce_dataframe(
    df,
    topic: str,
    kafka_config: Mapping[str, Any],
    *,
    value_col: str = "value",
    key_col: str | None = None,
    partition_col: str | None = None,
    producer_config: Mapping[str, Any] | None = None,
    flush_timeout: float = 120.0,
    topic_col: str | None = None,
    headers_col: str | None = None,
    timestamp_col: str | None = None,
    create_topics: Mapping[str, Any] | None = None,
) -> int:
    """Produce every row of ``df`` to ``topic`` from the Spark tasks; return the count delivered.

    Args:
        df: DataFrame with a string/binary ``value_col`` (null → tombstone) and
            optionally ``key_col`` (string/binary) and ``partition_col`` (int; null
            → the producer's partitioner).
        topic: target topic (must exist unless the broker auto-creates).
        kafka_config: librdkafka settings (``bootstrap.servers`` required);
            consumer-only keys are ignored.
        producer_config: overrides applied last (e.g. ``{"linger.ms": 5}``).
        flush_timeout: seconds each Spark task waits for its outstanding deliveries.
        topic_col: a string column naming each record's topic (e.g. after a
            RegexRouter); ``topic`` is then only the default for nulls.
        headers_col: an ``array<struct<key: string, value: binary>>`` column of
            record headers.
        timestamp_col: a long column of record timestamps (epoch ms; null → now).
        create_topics: ``{"partitions", "replication_factor"}`` to create topics
            named by ``topic_col`` that do not exist yet (None: never create).

    Returns:
        Number of records acknowledged by the broker (== ``df.count()``).

    Raises:
        KafkaIOError: any produce or delivery error, or a flush timeout. The Spark
            job fails as a whole; some records may have been written (at least once).
    """
    from pyspark.sql import functions as F

    conf = _client_config(kafka_config, PRODUCER_DEFAULTS, _CONSUMER_ONLY_PREFIXES, producer_config)
    cols = [F.col(value_col).cast("binary").alias(value_col)]
    if key_col:
        cols.append(F.col(key_col).cast("binary").alias(key_col))
    if partition_col:
        cols.append(F.col(partition_col).cast("int").alias(partition_col))
    if topic_col:
        cols.append(F.coalesce(F.col(topic_col).cast("string"), F.lit(topic)).alias(topic_col))
    if headers_col:
        cols.append(F.col(headers_col).alias(headers_col))
    if timestamp_col:
        cols.append(F.col(timestamp_col).cast("long").alias(timestamp_col))
    fn = _make_produce_fn(topic, conf, value_col, key_col, partition_col, flush_timeout, topic_col, headers_col,
                          timestamp_col, create_topics)
    try:
        rows = df.select(*cols).mapInArrow(fn, "delivered long").collect()
    except Exception as e:  # Py4JJavaError / PythonException from the workers
        raise KafkaIOError(f"producing to topic {topic!r} failed: {_unwrap_spark_error(e)}") from e
    return int(sum(r.delivered for r in rows))


# --------------------------------------------------------------------------------------
# Consuming
# --------------------------------------------------------------------------------------
@dataclass(frozen=True)
class TopicPartitionRange:
    """What to read from one topic-partition.

    Attributes:
        topic: topic name.
        partition: partition number.
        start: first offset to read; ``None`` means the earliest available.
        max_records: stop after this many records (>= 1).
    """

    topic: str
    partition: int
    start: int | None
    max_records: int


@dataclass(frozen=True)
class PartitionRead:
    """What :func:`read_partitions` read from one topic-partition.

    Attributes:
        topic, partition: the topic-partition.
        start: the requested start offset (``None`` = earliest).
        first_offset: offset of the first record read (None if none).
        last_offset: offset of the last record read (None if none).
        count: records read (tombstones included).
        value_count: records with a non-null value (count minus tombstones).
        next_offset: offset to resume from (``last_offset + 1``), None if nothing read.
    """

    topic: str
    partition: int
    start: int | None
    first_offset: int | None
    last_offset: int | None
    count: int
    value_count: int = 0

    @property
    def next_offset(self) -> int | None:
        return None if self.last_offset is None else self.last_offset + 1


def _make_consume_fn(ranges: Sequence[TopicPartitionRange], conf: dict[str, Any], timeout: float,
                     poll_batch: int, with_metadata: bool = False) -> Callable:
    specs = [(r.topic, r.partition, r.start, r.max_records) for r in ranges]

    def consume_batches(batches):
        import time

        import numpy as np
        import pyarrow as pa
        from confluent_kafka import Consumer, KafkaError, TopicPartition

        schema = pa.schema([("kafka_topic", pa.string()), ("kafka_partition", pa.int32()),
                            ("kafka_offset", pa.int64()), ("key", pa.binary()), ("value", pa.binary())]
                           + ([("timestamp", pa.int64()),
                               ("headers", pa.list_(pa.struct([("key", pa.string()), ("value", pa.binary())])))]
                              if with_metadata else []))
        indices = [i for b in batches for i in b.column(0).to_pylist()]
        for idx in indices:
            topic, partition, start, max_records = specs[idx]
            consumer = Consumer(conf)
            try:
                # "Earliest" starts at 0: the usual first offset, and out-of-range resets to
                # the earliest (auto.offset.reset) -- OFFSET_BEGINNING costs a ListOffsets round.
                consumer.assign([TopicPartition(topic, partition, 0 if start is None else start)])
                deadline = time.monotonic() + timeout
                remaining = max_records
                eof = False
                while remaining > 0 and not eof:
                    left = deadline - time.monotonic()
                    if left <= 0:
                        break  # bounded batch: return what we have
                    # consume(n, t) waits for n messages or t seconds; so drain what is
                    # queued without waiting, and block in poll() only when nothing is.
                    msgs = consumer.consume(min(poll_batch, remaining), 0)
                    if not msgs:
                        m = consumer.poll(min(left, 1.0))
                        msgs = [m] if m is not None else []
                    # Per message only the C accessors, in comprehensions: this loop is the sink's
                    # consume phase, ~5 calls per record when written as one Python loop.
                    bad = [i for i, m in enumerate(msgs) if m.error() is not None]
                    if bad:
                        for i in bad:
                            err = msgs[i].error()
                            if err.code() != KafkaError._PARTITION_EOF:
                                raise RuntimeError(f"[kafka] consuming {topic}[{partition}] failed: {err}")
                        eof = True
                        skip = set(bad)
                        msgs = [m for i, m in enumerate(msgs) if i not in skip]
                    msgs = msgs[:remaining]  # cannot be longer with consume(n); stay exact
                    n = len(msgs)
                    if not n:
                        continue
                    remaining -= n
                    first, last = msgs[0].offset(), msgs[-1].offset()
                    if last - first == n - 1:  # offsets rise strictly: contiguous (no compaction gaps)
                        offsets = pa.array(np.arange(first, last + 1, dtype=np.int64))
                    else:
                        offsets = pa.array([m.offset() for m in msgs], pa.int64())
                    arrays = [pa.repeat(pa.scalar(topic, pa.string()), n),
                              pa.repeat(pa.scalar(partition, pa.int32()), n), offsets,
                              pa.array([m.key() for m in msgs], pa.binary()),
                              pa.array([m.value() for m in msgs], pa.binary())]
                    if with_metadata:
                        stamps = []
                        for m in msgs:
                            ts_type, ts = m.timestamp()
                            stamps.append(ts if ts_type != 0 else None)  # 0: TIMESTAMP_NOT_AVAILABLE
                        arrays += [pa.array(stamps, pa.int64()),
                                   pa.array([[{"key": k, "value": v} for k, v in (m.headers() or [])] for m in msgs],
                                            schema.field("headers").type)]
                    yield pa.RecordBatch.from_arrays(arrays, schema=schema)
            finally:
                consumer.close()

    return consume_batches


def partition_reader(
    ranges: Sequence[TopicPartitionRange],
    kafka_config: Mapping[str, Any],
    *,
    consumer_config: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    poll_batch: int = 10_000,
    with_metadata: bool = False,
) -> Callable:
    """The reading function of :func:`read_partitions`, for a job that consumes inside its own ``mapInArrow``.

    ``reader(batches)`` takes Arrow batches whose first column holds range
    indices (as ``spark.range`` gives) and yields, per index ``i``, the records of
    ``ranges[i]`` as Arrow batches of :data:`READ_SCHEMA` (or
    :data:`READ_SCHEMA_WITH_METADATA`), with the same bounds as
    :func:`read_partitions`. A job that both reads and writes in one Python
    stage (the JDBC sink) saves moving every record to the JVM and back.

    Raises:
        ValueError: ``ranges`` is empty.
    """
    if not ranges:
        raise ValueError("partition_reader needs at least one range")
    conf = _client_config(kafka_config, CONSUMER_DEFAULTS, _PRODUCER_ONLY_PREFIXES, consumer_config)
    return _make_consume_fn(list(ranges), conf, timeout, poll_batch, with_metadata)


def read_partitions(
    spark,
    ranges: Sequence[TopicPartitionRange],
    kafka_config: Mapping[str, Any],
    *,
    consumer_config: Mapping[str, Any] | None = None,
    timeout: float = 60.0,
    poll_batch: int = 10_000,
    with_metadata: bool = False,
):
    """A DataFrame reading each range in its own Spark partition (lazy: nothing runs yet).

    Partition ``i`` of the result holds exactly the records of ``ranges[i]``, in
    offset order, so per-partition outputs (e.g. files written by Spark) can be
    mapped back to their topic-partition. Each range is read from ``start`` until
    the partition's EOF, ``max_records``, or ``timeout`` seconds — whichever
    comes first (a timeout is not an error: fewer records are returned).

    Args:
        spark: the SparkSession.
        ranges: what to read; at most one entry per topic-partition.
        kafka_config: librdkafka settings; producer-only keys are ignored.
        consumer_config: overrides applied last.
        timeout: per-partition read budget in seconds.
        poll_batch: messages per ``consume()`` call.
        with_metadata: also read each record's timestamp and headers
            (:data:`READ_SCHEMA_WITH_METADATA`), as transforms and dead letter queues need.

    Returns:
        DataFrame with :data:`READ_SCHEMA` (or :data:`READ_SCHEMA_WITH_METADATA`) columns. Evaluate it once (cache or
        persist it before several actions): re-evaluation reads Kafka again and
        may see more records.

    Raises:
        KafkaIOError: (when evaluated) a consumer error other than partition EOF.
    """
    if not ranges:
        raise ValueError("read_partitions needs at least one range")
    fn = partition_reader(ranges, kafka_config, consumer_config=consumer_config, timeout=timeout,
                          poll_batch=poll_batch, with_metadata=with_metadata)
    n = len(ranges)
    return spark.range(0, n, 1, n).mapInArrow(fn, READ_SCHEMA_WITH_METADATA if with_metadata else READ_SCHEMA)


def summarize_read(df) -> list[PartitionRead]:
    """Per topic-partition counts and offsets of a (cached) :func:`read_partitions` DataFrame."""
    from pyspark.sql import functions as F

    rows = (df.groupBy("kafka_topic", "kafka_partition")
            .agg(F.min("kafka_offset").alias("first"), F.max("kafka_offset").alias("last"),
                 F.count(F.lit(1)).alias("n"), F.count("value").alias("v"))
            .collect())
    return [PartitionRead(r.kafka_topic, r.kafka_partition, None, r["first"], r["last"], r.n, r.v) for r in rows]

