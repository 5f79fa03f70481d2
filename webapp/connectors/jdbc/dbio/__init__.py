"""Database I/O of the JDBC connectors, run on the driver and inside Spark's Python workers.

Owns: connecting to PostgreSQL (psycopg) and MySQL/MariaDB (PyMySQL) from a plain
parameter dict, the column *kinds* that tie a database type to its Connect schema
and its Arrow wire form, :func:`read_rows` (one query → Arrow record batches already
in JsonConverter wire form) and :func:`write_partition` (one Kafka partition's
decoded records → rows in one database transaction together with the sink's
offset). It must not import Django, Spark or anything else of this project: the
connectors register this package with cloudpickle *by value*, so Spark's workers
receive its functions without importing the project (an import contract in
``pyproject.toml`` keeps it so).

Column kinds (strings): ``int8 int16 int32 int64 float32 float64 boolean string
bytes date time timestamp`` and ``decimal:<precision>:<scale>``. Wire forms (what
JsonConverter's payload holds, and what the Arrow batches carry): integers and
floats as such, booleans, strings, ``bytes`` as binary (Spark's ``to_json`` writes
base64), Decimal as binary holding the big-endian two's-complement unscaled value,
Date as int32 days, Time as int32 milliseconds of the day, Timestamp as int64
milliseconds since the epoch (UTC).

================ ==============================================================
module           owns
================ ==============================================================
``connection``   the allowed-hosts check, connections, identifier quoting
``wire``         kinds ⇄ Arrow wire form ⇄ logical Arrow types
``read``         :func:`read_rows` (source)
``decode``       :func:`decode_batch`: envelopes → wire columns (sink)
``write``        the offsets table, :func:`write_partition`,
                 :func:`write_routed_partition` (sink)
================ ==============================================================

Imports point one way: ``write``, ``read`` → ``wire``, ``connection``; ``decode``
stands alone. This ``__init__`` is the package's public face.
"""
from __future__ import annotations

from .connection import ALLOWED_HOSTS_SETTING, HostNotAllowed, connect, host_violation, quote
from .decode import decodable, decode_batch
from .read import read_rows
from .wire import arrow_wire_type, from_wire_array, logical_to_wire, to_wire_array, wire_to_logical
from .write import OFFSETS_TABLE, StaleOffsetError, TargetTypeError, write_partition, write_routed_partition

__all__ = [
    "OFFSETS_TABLE",
    "connect",
    "quote",
    "arrow_wire_type",
    "to_wire_array",
    "from_wire_array",
    "read_rows",
    "write_partition",
    "write_routed_partition",
    "wire_to_logical",
    "logical_to_wire",
    "decodable",
    "decode_batch",
    "StaleOffsetError",
    "TargetTypeError",
    "HostNotAllowed",
    "host_violation",
    "ALLOWED_HOSTS_SETTING",
]
