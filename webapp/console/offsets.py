"""A connector's offsets as an operator reads them: per-partition position, end and lag, or a file's progress.

Reads Connect's ConnectorOffsets (the Herder) and Kafka (the node's shared admin
client); writes nothing (resets go through Connect's ``PATCH /connectors/{name}/offsets``
from the console). Two shapes, by what the partition key says:

* a sink's Kafka partitions (``{"kafka_topic", "kafka_partition"}``, plus every
  partition of its ``topics`` that has no committed offset yet): committed offset,
  the partition's start and end offsets (read_committed) and lag = end − committed
  (end − start when nothing is committed, as a sink starts at the beginning);
* a file source's files (``{"filename"[, "range.start", "range.end"]}``): the
  committed byte ``position`` (or ``row`` for Parquet) and the file's size when the
  node can see it under the allowed roots (``webapp.runtime.file_access``).

Anything else is passed through as ``{"partition", "offset"}``. With a
``timestamp`` (ms), a sink's rows also carry ``offset_for_timestamp``: the first
offset at or after it (the end offset when none), what "reset to a timestamp" writes.
"""
from __future__ import annotations

import os
from typing import Any, Mapping

__all__ = ["connector_offsets_view", "kafka_positions"]


def kafka_positions(config: Mapping[str, Any], tps: list[tuple[str, int]], *, timestamp: int | None = None,
                    timeout: float = 5.0) -> dict[tuple[str, int], dict[str, int | None]]:
    """``{(topic, partition): {"start", "end"[, "at"]}}`` from ListOffsets (earliest, latest, for a timestamp).

    A partition Kafka did not answer for has ``None`` values. Raises nothing: an
    unreachable Kafka gives ``None`` everywhere.
    """
    from confluent_kafka import IsolationLevel, TopicPartition
    from confluent_kafka.admin import OffsetSpec

    from webapp.kafka.topics import shared_admin_client

    out: dict[tuple[str, int], dict[str, int | None]] = {tp: {"start": None, "end": None} for tp in tps}
    if timestamp is not None:
        for v in out.values():
            v["at"] = None
    specs = [("start", OffsetSpec.earliest()), ("end", OffsetSpec.latest())]
    if timestamp is not None:
        specs.append(("at", OffsetSpec.for_timestamp(int(timestamp))))
    try:
        admin = shared_admin_client(config)
    except Exception:  # noqa: BLE001 - no bootstrap.servers: nothing known
        return out
    for key, spec in specs:
        if not tps:
            break
        try:
            futures = admin.list_offsets({TopicPartition(t, p): spec for t, p in tps},
                                         isolation_level=IsolationLevel.READ_COMMITTED, request_timeout=timeout)
        except Exception:  # noqa: BLE001
            continue
        for tp, fut in futures.items():
            try:
                off = fut.result(timeout=timeout).offset
            except Exception:  # noqa: BLE001 - this partition did not answer
                continue
            out[(tp.topic, tp.partition)][key] = off if off >= 0 else None
    if timestamp is not None:  # no record at or after the timestamp: the end, as Kafka's reset tool does
        for v in out.values():
            if v.get("at") is None:
                v["at"] = v["end"]
    return out


def _file_size(filename: str) -> int | None:
    from webapp.runtime import file_access

    try:
        file_access.check(filename)
        return os.path.getsize(filename)
    except Exception:  # noqa: BLE001 - not allowed here, gone, or on another host
        return None


def connector_offsets_view(*, offsets: list[dict[str, Any]], config: Mapping[str, str], connector_type: str,
                           kafka_config: Mapping[str, Any], partitions_of: Any = None,
                           timestamp: int | None = None) -> dict[str, Any]:
    """``{"kind": "sink"|"source"|"other", "partitions": [...]}`` (see the module docstring).

    Args:
        offsets: Connect's ``offsets`` list (``[{"partition", "offset"}]``).
        config: the connector's config (a sink's ``topics``).
        connector_type: ``source`` or ``sink``.
        kafka_config: librdkafka settings with ``bootstrap.servers``.
        partitions_of: ``topic -> partition count | None`` (defaults to Kafka's metadata).
        timestamp: epoch ms for ``offset_for_timestamp`` (sinks).
    """
    if connector_type == "sink":
        committed: dict[tuple[str, int], int] = {}
        for o in offsets:
            p, off = o.get("partition") or {}, o.get("offset") or {}
            if "kafka_topic" in p and "kafka_partition" in p:
                committed[(str(p["kafka_topic"]), int(p["kafka_partition"]))] = \
                    int(off["kafka_offset"]) if off.get("kafka_offset") is not None else None
        if partitions_of is None:
            from webapp.kafka.topics import partition_count

            def partitions_of(topic: str) -> int | None:
                try:
                    return partition_count(kafka_config, topic, timeout=3.0)
                except Exception:  # noqa: BLE001
                    return None
        tps = set(committed)
        for topic in [t.strip() for t in (config.get("topics") or "").split(",") if t.strip()]:
            n = partitions_of(topic)
            tps.update((topic, i) for i in range(n or 0))
        ordered = sorted(tps)
        pos = kafka_positions(kafka_config, ordered, timestamp=timestamp)
        rows = []
        for tp in ordered:
            c = committed.get(tp)
            k = pos.get(tp) or {}
            end, start = k.get("end"), k.get("start")
            base = c if c is not None else start
            row = {"topic": tp[0], "partition": tp[1], "committed": c, "start_offset": start, "end_offset": end,
                   "lag": max(0, end - base) if end is not None and base is not None else None}
            if timestamp is not None:
                row["offset_for_timestamp"] = k.get("at")
            rows.append(row)
        return {"kind": "sink", "partitions": rows}
    if connector_type == "source" and offsets and all("filename" in (o.get("partition") or {}) for o in offsets):
        rows = []
        for o in offsets:
            p, off = o["partition"], o.get("offset") or {}
            size = _file_size(str(p["filename"])) if "position" in off else None
            rows.append({"partition": p, "offset": off, "position": off.get("position", off.get("row")),
                         "unit": "bytes" if "position" in off else "rows", "size": size})
        return {"kind": "source", "partitions": rows}
    return {"kind": "other", "partitions": [{"partition": o.get("partition"), "offset": o.get("offset")}
                                            for o in offsets]}
