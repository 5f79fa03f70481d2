"""Topic helpers on confluent-kafka's AdminClient: create-if-missing and partition count.

All functions take a librdkafka config mapping (at least ``bootstrap.servers``);
only admin-relevant keys are passed on (consumer/producer-only keys would make
librdkafka warn).
"""
from __future__ import annotations

import re
import threading
import time
from typing import Mapping

__all__ = ["ensure_topic", "partition_count", "admin_client", "shared_admin_client", "TopicError",
           "is_valid_topic_name"]

#: what a topic a connector names or creates may be called: Kafka's legal characters, at most 249 of them
_TOPIC_NAME_RE = re.compile(r"^[a-zA-Z0-9._-]{1,249}$")


def is_valid_topic_name(name: str) -> bool:
    """Whether ``name`` is a legal Kafka topic name (1 to 249 of ``[a-zA-Z0-9._-]``)."""
    return bool(_TOPIC_NAME_RE.match(name))

# Keys that mean something to an AdminClient; everything else (producer/consumer
# tuning) is dropped so that one shared kafka_config can be passed everywhere.
_ADMIN_KEY_PREFIXES = (
    "bootstrap.servers",
    "security.",
    "sasl.",
    "ssl.",
    "client.id",
    "socket.",
    "broker.",
    "metadata.",
    "reconnect.",
    "api.version",
    "client.dns.lookup",
    "log_level",
    "debug",
)


class TopicError(RuntimeError):
    """A topic could not be created or described (message says which and why)."""


def _admin_config(kafka_config: Mapping[str, object]) -> dict[str, object]:
    conf = {k: v for k, v in kafka_config.items() if k.startswith(_ADMIN_KEY_PREFIXES)}
    # the worker's admin-only settings (Connect's admin.* worker keys), applied last
    conf.update({k[len("admin."):]: v for k, v in kafka_config.items() if k.startswith("admin.")})
    if "bootstrap.servers" not in conf:
        raise TopicError("kafka config has no bootstrap.servers")
    return conf


_admins: dict[str, object] = {}
_admins_lock = threading.Lock()
_MAX_ADMINS = 8


def admin_client(kafka_config: Mapping[str, object]):
    """A new ``confluent_kafka.admin.AdminClient`` built from the admin-relevant keys of ``kafka_config``."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(_admin_config(kafka_config))


def shared_admin_client(kafka_config: Mapping[str, object]):
    """The process's shared AdminClient for the admin-relevant keys of ``kafka_config``.

    For long-lived users that ask often (a worker's end-offset watcher and
    partition counts): one client per distinct config (AdminClient is
    thread-safe; each costs a few librdkafka threads and a connection), at most
    eight configs, the oldest dropped beyond that. It stays connected: code that
    creates a client for one call should use :func:`admin_client`.
    """
    from confluent_kafka.admin import AdminClient

    conf = _admin_config(kafka_config)
    key = repr(sorted((k, str(v)) for k, v in conf.items()))
    with _admins_lock:
        admin = _admins.get(key)
        if admin is None:
            while len(_admins) >= _MAX_ADMINS:
                _admins.pop(next(iter(_admins)))
            admin = _admins[key] = AdminClient(conf)
        return admin


def partition_count(kafka_config: Mapping[str, object], topic: str, timeout: float = 10.0, *, admin=None) -> int | None:
    """Number of partitions of ``topic``, or ``None`` if the topic does not exist.

    Args:
        kafka_config: librdkafka settings (``bootstrap.servers`` required).
        topic: topic name.
        timeout: seconds for the metadata request.
        admin: an existing AdminClient to reuse (optional).

    Raises:
        TopicError: the broker did not answer within ``timeout`` or reported an error
            other than "unknown topic".
    """
    from confluent_kafka import KafkaError, KafkaException

    admin = admin or admin_client(kafka_config)
    try:
        # All topics, not list_topics(topic=...): a metadata request naming a topic
        # lets brokers with auto.create.topics.enable create it.
        md = admin.list_topics(timeout=timeout)
    except KafkaException as e:
        raise TopicError(f"cannot describe topic {topic!r}: {e}") from e
    tmd = md.topics.get(topic)
    if tmd is None:
        return None
    if tmd.error is not None:
        if tmd.error.code() in (KafkaError.UNKNOWN_TOPIC_OR_PART, KafkaError._UNKNOWN_TOPIC):
            return None
        raise TopicError(f"cannot describe topic {topic!r}: {tmd.error}")
    return len(tmd.partitions) or None


def ensure_topic(
    kafka_config: Mapping[str, object],
    topic: str,
    partitions: int,
    replication_factor: int = -1,
    *,
    config: Mapping[str, str] | None = None,
    timeout: float = 30.0,
) -> int:
    """Create ``topic`` with ``partitions`` partitions unless it exists; return its partition count.

    An existing topic is left as it is (its partition count may differ from
    ``partitions``; the actual count is returned). Concurrent creation by another
    task is fine. Waits until the topic's metadata lists its partitions.

    Args:
        kafka_config: librdkafka settings (``bootstrap.servers`` required).
        topic: topic name.
        partitions: partitions for a new topic, >= 1.
        replication_factor: replicas for a new topic; -1 uses the broker default.
        config: topic configs for a new topic (e.g. ``{"retention.ms": "-1"}``).
        timeout: overall seconds to wait.

    Raises:
        TopicError: invalid arguments, creation refused by the broker, or the topic
            did not appear within ``timeout``.
    """
    from confluent_kafka import KafkaError, KafkaException
    from confluent_kafka.admin import NewTopic

    if partitions < 1:
        raise TopicError(f"partitions must be >= 1 for topic {topic!r}, got {partitions}")
    admin = admin_client(kafka_config)
    deadline = time.monotonic() + timeout
    n = partition_count(kafka_config, topic, timeout=timeout, admin=admin)
    if n is not None:
        return n
    new = NewTopic(topic, num_partitions=int(partitions), replication_factor=int(replication_factor),
                   config=dict(config or {}))
    fut = admin.create_topics([new], operation_timeout=timeout, request_timeout=timeout)[topic]
    try:
        fut.result(timeout=timeout)
    except KafkaException as e:
        err = e.args[0] if e.args else None
        if not (isinstance(err, KafkaError) and err.code() == KafkaError.TOPIC_ALREADY_EXISTS):
            raise TopicError(f"cannot create topic {topic!r} with {partitions} partitions: {e}") from e
    except Exception as e:  # concurrent.futures.TimeoutError and friends
        raise TopicError(f"cannot create topic {topic!r}: {e!r}") from e
    # Metadata can lag creation: wait until the partitions are visible.
    delay = 0.01
    while True:
        n = partition_count(kafka_config, topic, timeout=max(0.5, deadline - time.monotonic()), admin=admin)
        if n is not None:
            return n
        if time.monotonic() >= deadline:
            raise TopicError(f"topic {topic!r} was created but is not visible after {timeout:.0f}s")
        time.sleep(delay)  # polling metadata: there is no event to await
        delay = min(delay * 2, 0.5)
