"""The Kafka cluster as the console shows it: bootstrap servers, reachable brokers, topics, end offsets.

One metadata request and one ``ListOffsets`` round through the node's shared
admin client (the one ``/health`` uses), with the node's own client settings
(SASL/SSL keys included). Every failure names the address it tried to reach.
Reads Kafka only; creates nothing.
"""
from __future__ import annotations

from typing import Any, Mapping

__all__ = ["kafka_cluster", "KAFKA_TIMEOUT_S", "MAX_TOPICS"]

#: seconds for the metadata request and for the offsets round
KAFKA_TIMEOUT_S = 3.0
#: topics listed at most (sorted by name; the answer says how many there are)
MAX_TOPICS = 200


def _reason(exc: BaseException) -> str:
    err = exc.args[0] if getattr(exc, "args", None) else exc
    return err.str() if hasattr(err, "str") else f"{type(exc).__name__}: {exc}"


def kafka_cluster(bootstrap_servers: str, client_config: Mapping[str, Any] | None = None, *,
                  timeout: float = KAFKA_TIMEOUT_S, internal: bool = False) -> dict[str, Any]:
    """``{"state": "ok"|"unreachable", "bootstrap_servers", "cluster_id"?, "controller_id"?,
    "brokers": [{"id", "host", "port"}], "topics": [{"name", "partitions": [{"partition", "leader",
    "end_offset"}], "error"?}], "topic_count", "error"?}``.

    ``internal`` keeps topics whose name starts with ``__``. End offsets are
    ``read_committed`` (``None`` for a partition that did not answer). Never
    raises: an unreachable cluster is ``state: unreachable`` with an ``error``
    naming ``bootstrap_servers``.
    """
    from webapp.kafka.clients import list_end_offsets
    from webapp.kafka.topics import shared_admin_client

    config = {**dict(client_config or {}), "bootstrap.servers": bootstrap_servers}
    base: dict[str, Any] = {"bootstrap_servers": bootstrap_servers, "brokers": [], "topics": [], "topic_count": 0}
    try:
        md = shared_admin_client(config).list_topics(timeout=timeout)
    except Exception as exc:  # noqa: BLE001 - KafkaException, a bad config: all mean "cannot see Kafka"
        return {**base, "state": "unreachable",
                "error": f"Kafka at {bootstrap_servers} did not answer a metadata request within {timeout:g} s: "
                         f"{_reason(exc)}"}
    brokers = sorted(({"id": b.id, "host": b.host, "port": b.port} for b in md.brokers.values()),
                     key=lambda b: b["id"])
    names = sorted(n for n in md.topics if internal or not n.startswith("__"))
    shown = names[:MAX_TOPICS]
    tps = [(n, p) for n in shown for p in md.topics[n].partitions]
    out = {**base, "state": "ok", "cluster_id": md.cluster_id, "controller_id": md.controller_id,
           "brokers": brokers, "topic_count": len(names)}
    try:
        ends = list_end_offsets(config, tps, timeout=timeout)
    except Exception as exc:  # noqa: BLE001
        ends = {}
        out["error"] = f"Kafka at {bootstrap_servers} did not answer ListOffsets: {_reason(exc)}"
    topics = []
    for n in shown:
        t = md.topics[n]
        entry: dict[str, Any] = {"name": n, "partitions": [
            {"partition": p, "leader": t.partitions[p].leader, "end_offset": ends.get((n, p))}
            for p in sorted(t.partitions)]}
        if t.error is not None:
            entry["error"] = _reason(Exception(t.error))
        topics.append(entry)
    out["topics"] = topics
    return out
