"""The JDBC sink's in-worker decoding of JsonConverter envelopes (``dbio.decode_batch``), no Spark or database."""
from __future__ import annotations

import base64
import json

import pyarrow as pa
import pytest

from webapp.connectors.jdbc import dbio

SCHEMA = {"type": "struct", "optional": False, "fields": [
    {"field": "id", "type": "int64", "optional": False}, {"field": "name", "type": "string", "optional": True},
    {"field": "blob", "type": "bytes", "optional": True},
    {"field": "price", "type": "bytes", "optional": True, "name": "org.apache.kafka.connect.data.Decimal",
     "parameters": {"scale": "2"}},
    {"field": "ok", "type": "boolean", "optional": True}]}
FIELDS = [("v0", "id", "int64"), ("v1", "name", "string"), ("v2", "blob", "bytes"), ("v3", "price", "decimal:10:2"),
          ("v4", "ok", "boolean")]


def envelope(payload, schema=SCHEMA, compact=True) -> bytes:
    seps = (",", ":") if compact else (", ", ": ")
    return json.dumps({"schema": schema, "payload": payload}, separators=seps, ensure_ascii=False).encode()


def prefix_of(value: bytes) -> str:
    text = value.decode()
    return text[:text.index(',"payload":')]


def batch(values, keys=None):
    n = len(values)
    return pa.RecordBatch.from_arrays([pa.array(range(100, 100 + n), pa.int64()),
                                       pa.array(keys or [None] * n, pa.binary()), pa.array(values, pa.binary())],
                                      names=["kafka_offset", "key", "value"])


def test_envelopes_decode_to_wire_columns_with_tombstones_and_nulls():
    cents = (12345).to_bytes(2, "big", signed=True)
    rows = [envelope({"id": 1, "name": "zoë ☃", "blob": base64.b64encode(b"\x00\xff").decode(),
                      "price": base64.b64encode(cents).decode(), "ok": True}),
            None,  # tombstone
            envelope({"id": 3, "name": None, "blob": None, "price": None, "ok": None}),
            envelope({"id": 4})]  # missing optional fields decode to null
    plan = {"value_prefixes": [prefix_of(rows[0])], "value_fields": FIELDS}
    out = dbio.decode_batch(batch(rows), plan)
    assert out.schema.names == ["__offset", "__tombstone", "__planned", "v0", "v1", "v2", "v3", "v4"]
    assert out.column("__offset").to_pylist() == [100, 101, 102, 103]
    assert out.column("__tombstone").to_pylist() == [False, True, False, False]
    assert out.column("__planned").to_pylist() == [True] * 4
    assert out.column("v0").to_pylist() == [1, None, 3, 4]
    assert out.column("v1").to_pylist() == ["zoë ☃", None, None, None]
    assert out.column("v2").to_pylist() == [b"\x00\xff", None, None, None]
    assert out.column("v3").to_pylist() == [cents, None, None, None]  # Decimal wire form: unscaled big-endian
    assert out.column("v4").to_pylist() == [True, None, None, None]
    assert out.column("v0").type == pa.int64() and out.column("v4").type == pa.bool_()


def test_envelopes_without_a_known_prefix_are_parsed_whole():
    rows = [envelope({"id": 7, "name": "x"}, compact=False), envelope({"id": 8, "name": "y"}, compact=False)]
    out = dbio.decode_batch(batch(rows), {"value_prefixes": None, "value_fields": FIELDS[:2]})
    assert out.column("v0").to_pylist() == [7, 8] and out.column("v1").to_pylist() == ["x", "y"]


def test_a_record_with_another_schema_is_not_planned_and_not_decoded():
    other = dict(SCHEMA, fields=SCHEMA["fields"][:1])
    rows = [envelope({"id": 1, "name": "a"}), envelope({"id": "not a number"}, schema=other)]
    out = dbio.decode_batch(batch(rows), {"value_prefixes": [prefix_of(rows[0])], "value_fields": FIELDS[:2]})
    assert out.column("__planned").to_pylist() == [True, False]  # write_partition stops before it and replans
    assert out.column("v0").to_pylist() == [1, None]


def test_a_planned_record_that_does_not_match_its_schema_fails_the_batch():
    rows = [envelope({"id": 1}), envelope({"id": "one"})]
    with pytest.raises(ValueError, match="does not match the planned schema"):
        dbio.decode_batch(batch(rows), {"value_prefixes": [prefix_of(rows[0])], "value_fields": FIELDS[:1]})
    with pytest.raises(ValueError, match="bad base64"):
        dbio.decode_batch(batch([envelope({"id": 1, "blob": "***"})]),
                             {"value_prefixes": None, "value_fields": [("v2", "blob", "bytes")]})


def test_keys_decode_as_structs_primitives_or_strings():
    key_schema = {"type": "struct", "optional": False, "fields": [{"field": "k", "type": "int32", "optional": False}]}
    keys = [envelope({"k": 5}, schema=key_schema), envelope({"k": 6}, schema=key_schema)]
    values = [envelope({"id": 1}), None]
    out = dbio.decode_batch(batch(values, keys), {"value_prefixes": None, "value_fields": FIELDS[:1],
                                                     "key_prefixes": [prefix_of(keys[0])],
                                                     "key_fields": [("k0", "k", "int32")]})
    assert out.column("k0").to_pylist() == [5, 6]  # a tombstone's key is decoded too (deletes need it)
    prim = [envelope(9, schema={"type": "int64", "optional": False})]
    out = dbio.decode_batch(batch([None], prim), {"value_prefixes": None, "key_prefixes": None,
                                                     "key_fields": [("k0", None, "int64")], "key_primitive": True})
    assert out.column("k0").to_pylist() == [9]
    out = dbio.decode_batch(batch([envelope({"id": 1})], [b"plain-key"]),
                               {"value_prefixes": None, "value_fields": FIELDS[:1], "key_string": "k0"})
    assert out.column("k0").to_pylist() == ["plain-key"]


def test_every_column_kind_is_decodable_in_the_worker():
    assert dbio.decodable(["int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes",
                              "decimal:10:2", "date", "time", "timestamp"])
    assert not dbio.decodable(["json-text"])  # anything else goes through the JVM's from_json


def test_wire_and_logical_forms_round_trip_for_the_transforms():
    """The sink/source transforming paths hand the SMTs logical types and write wire forms back, exactly."""
    import datetime as dt
    import decimal

    cases = {
        "timestamp": pa.array([-1, -62135596800000, 253402300799999, 1700000000123, None], pa.int64()),
        "date": pa.array([-719162, 0, 2932896, None], pa.int32()),
        "time": pa.array([0, 86399999, None], pa.int32()),
        "decimal:38:10": dbio.to_wire_array([decimal.Decimal("-9999999999999999999999999999.9999999999"),
                                                 decimal.Decimal("0.0000000001"), None], "decimal:38:10"),
        "int16": pa.array([-32768, 32767, None], pa.int16()),
        "float32": pa.array([3.4028234663852886e38, 1e-45, None], pa.float32()),
    }
    for kind, wire in cases.items():
        logical = dbio.wire_to_logical(wire, kind)
        back = dbio.logical_to_wire(logical, kind)
        assert back.to_pylist() == wire.cast(back.type).to_pylist(), kind
    ts = dbio.wire_to_logical(cases["timestamp"], "timestamp")
    assert ts.type == pa.timestamp("ms", tz="UTC")
    assert ts[0].as_py() == dt.datetime(1969, 12, 31, 23, 59, 59, 999000, tzinfo=dt.timezone.utc)
    assert dbio.wire_to_logical(cases["date"], "date")[0].as_py() == dt.date(1, 1, 1)
    assert dbio.wire_to_logical(cases["decimal:38:10"], "decimal:38:10")[1].as_py() == decimal.Decimal("1E-10")
    # a transformation giving microseconds (Spark's unit) is floored to Connect's milliseconds
    us = pa.array([-1, 1_500], pa.timestamp("us", tz="UTC"))
    assert dbio.logical_to_wire(us, "timestamp").to_pylist() == [-1, 1]
    with pytest.raises(ValueError, match="precision"):
        dbio.wire_to_logical(pa.array([b"\x01"], pa.binary()), "decimal:60:0")
