"""Source and sink offsets as a plugin sees them: :class:`SourceOffset` and :func:`partition_key`.

Owns the shape of one offset entry (Connect's partition map + offset map) and the canonical
string key of a partition map that every offset store uses. The runtime commits these through the
leader; a task only returns them (``BatchResult.offsets``) and reads them (``TaskContext.offsets``).

Must not import anything of ``webapp``: it is the bottom of the plugin API.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Any, Mapping

__all__ = ["SourceOffset", "partition_key"]


def partition_key(partition: Mapping[str, Any]) -> str:
    """Canonical JSON for a source partition map, used as the offset store key.

    Two equal maps always give the same string (sorted keys, no spaces).
    """
    return json.dumps(dict(partition), sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class SourceOffset:
    """One offset entry as Kafka Connect models it: a partition map and an offset map.

    For sink tasks the partition is ``{"kafka_topic": t, "kafka_partition": p}`` and
    the offset ``{"kafka_offset": next_offset_to_read}``, exactly as Connect's
    ``GET /connectors/{name}/offsets`` shows sink offsets.
    """

    partition: Mapping[str, Any]
    offset: Mapping[str, Any]
