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

import orjson

__all__ = ["SourceOffset", "partition_key"]

_INT64_MIN, _INT64_MAX = -(2 ** 63), 2 ** 63 - 1


def partition_key(partition: Mapping[str, Any]) -> str:
    """Canonical JSON for a source partition map, used as the offset store key.

    Two equal maps always give the same string (sorted keys, no spaces): exactly
    ``json.dumps(partition, sort_keys=True, separators=(",", ":"))``, the form every stored key
    has. Maps of string keys and string or integer values whose text needs no escape (nearly
    every partition: topics, files, tables, numbers) are encoded by orjson, which gives the same
    bytes; any other map by ``json.dumps`` (orjson writes floats, non-ASCII text and some escapes
    differently). Computed for every offset of every commit on the leader, where ``json.dumps``
    was a fourteenth of an offset commit's Python time (benchmarks/stores).
    """
    d = dict(partition)
    for k, v in d.items():
        if type(k) is not str or not (type(v) is str or (type(v) is int and _INT64_MIN <= v <= _INT64_MAX)):
            break
    else:
        out = orjson.dumps(d, option=orjson.OPT_SORT_KEYS)
        # an escape of either encoder has a backslash; json.dumps also escapes DEL, orjson does not
        if out.isascii() and b"\\" not in out and b"\x7f" not in out:
            return out.decode()
    return json.dumps(d, sort_keys=True, separators=(",", ":"))


@dataclass(frozen=True)
class SourceOffset:
    """One offset entry as Kafka Connect models it: a partition map and an offset map.

    For sink tasks the partition is ``{"kafka_topic": t, "kafka_partition": p}`` and
    the offset ``{"kafka_offset": next_offset_to_read}``, exactly as Connect's
    ``GET /connectors/{name}/offsets`` shows sink offsets.
    """

    partition: Mapping[str, Any]
    offset: Mapping[str, Any]
