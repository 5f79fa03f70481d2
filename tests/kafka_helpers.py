"""Reading a whole topic in tests, the one way that works against the embedded broker (the one copy: use it).

Tansu's high watermark (ListOffsets) can lag, so a topic is read from offset 0
of every partition until the fetch reports the end of each partition (EOF).
"""
from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

__all__ = ["read_messages", "read_topic"]


def read_messages(bootstrap: str, topic: str, timeout: float = 120.0) -> list:
    """Every message in ``topic`` (all partitions, offset 0 to EOF), partition by partition in fetch order.

    Returns confluent-kafka ``Message`` objects (``key()``, ``value()``, ``headers()``, ``partition()``,
    ``offset()``). Errors: :class:`TimeoutError` when some partition shows no end within ``timeout``
    seconds; :class:`RuntimeError` for a consumer error.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-read-topic",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no end of partition seen for {topic} within {timeout:.0f} s")
            for m in consumer.consume(10000, timeout=1.0):
                if m.error() is None:
                    out.append(m)
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                else:
                    raise RuntimeError(m.error())
        return out
    finally:
        consumer.close()


def read_topic(bootstrap: str, topic: str, timeout: float = 120.0) -> list[bytes]:
    """Every value in ``topic``, as :func:`read_messages` reads them (same order, same errors)."""
    return [m.value() for m in read_messages(bootstrap, topic, timeout)]
