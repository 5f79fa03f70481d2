"""Reading a whole topic in tests, the one way that works against the embedded broker.

Tansu's high watermark (ListOffsets) can lag, so a topic is read from offset 0
of every partition until the fetch reports the end of each partition (EOF).
"""
from __future__ import annotations

import time

from confluent_kafka import Consumer, KafkaError, TopicPartition

__all__ = ["read_topic"]


def read_topic(bootstrap: str, topic: str, timeout: float = 120.0) -> list[bytes]:
    """Every value in ``topic`` (all partitions, offset 0 to EOF), partition by partition in fetch order.

    Errors: :class:`TimeoutError` when some partition shows no end within
    ``timeout`` seconds; :class:`RuntimeError` for a consumer error.
    """
    consumer = Consumer({"bootstrap.servers": bootstrap, "group.id": "tests-read-topic",
                         "enable.partition.eof": True, "enable.auto.commit": False})
    try:
        parts = consumer.list_topics(topic, timeout=10).topics[topic].partitions
        consumer.assign([TopicPartition(topic, p, 0) for p in parts])
        out: list[bytes] = []
        eof: set[int] = set()
        deadline = time.monotonic() + timeout
        while len(eof) < len(parts):
            if time.monotonic() > deadline:
                raise TimeoutError(f"no end of partition seen for {topic} within {timeout:.0f} s")
            for m in consumer.consume(10000, timeout=1.0):
                if m.error() is None:
                    out.append(m.value())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    eof.add(m.partition())
                else:
                    raise RuntimeError(m.error())
        return out
    finally:
        consumer.close()
