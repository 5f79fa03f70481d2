"""The JDBC sink's in-worker decoding of JsonConverter envelopes (``jdbc_io.decode_batch``), no Spark or database."""
from __future__ import annotations

import base64
import json

import pyarrow as pa
import pytest

from webapp.connectors import jdbc_io

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
    out = jdbc_io.decode_batch(batch(rows), plan)
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
    out = jdbc_io.decode_batch(batch(rows), {"value_prefixes": None, "value_fields": FIELDS[:2]})
    assert out.column("v0").to_pylist() == [7, 8] and out.column("v1").to_pylist() == ["x", "y"]


def test_a_record_with_another_schema_is_not_planned_and_not_decoded():
    other = dict(SCHEMA, fields=SCHEMA["fields"][:1])
    rows = [envelope({"id": 1, "name": "a"}), envelope({"id": "not a number"}, schema=other)]
    out = jdbc_io.decode_batch(batch(rows), {"value_prefixes": [prefix_of(rows[0])], "value_fields": FIELDS[:2]})
    assert out.column("__planned").to_pylist() == [True, False]  # write_partition stops before it and replans
    assert out.column("v0").to_pylist() == [1, None]


def test_a_planned_record_that_does_not_match_its_schema_fails_the_batch():
    rows = [envelope({"id": 1}), envelope({"id": "one"})]
    with pytest.raises(ValueError, match="does not match the planned schema"):
        jdbc_io.decode_batch(batch(rows), {"value_prefixes": [prefix_of(rows[0])], "value_fields": FIELDS[:1]})
    with pytest.raises(ValueError, match="bad base64"):
        jdbc_io.decode_batch(batch([envelope({"id": 1, "blob": "***"})]),
                             {"value_prefixes": None, "value_fields": [("v2", "blob", "bytes")]})


def test_keys_decode_as_structs_primitives_or_strings():
    key_schema = {"type": "struct", "optional": False, "fields": [{"field": "k", "type": "int32", "optional": False}]}
    keys = [envelope({"k": 5}, schema=key_schema), envelope({"k": 6}, schema=key_schema)]
    values = [envelope({"id": 1}), None]
    out = jdbc_io.decode_batch(batch(values, keys), {"value_prefixes": None, "value_fields": FIELDS[:1],
                                                     "key_prefixes": [prefix_of(keys[0])],
                                                     "key_fields": [("k0", "k", "int32")]})
    assert out.column("k0").to_pylist() == [5, 6]  # a tombstone's key is decoded too (deletes need it)
    prim = [envelope(9, schema={"type": "int64", "optional": False})]
    out = jdbc_io.decode_batch(batch([None], prim), {"value_prefixes": None, "key_prefixes": None,
                                                     "key_fields": [("k0", None, "int64")], "key_primitive": True})
    assert out.column("k0").to_pylist() == [9]
    out = jdbc_io.decode_batch(batch([envelope({"id": 1})], [b"plain-key"]),
                               {"value_prefixes": None, "value_fields": FIELDS[:1], "key_string": "k0"})
    assert out.column("k0").to_pylist() == ["plain-key"]


def test_every_column_kind_is_decodable_in_the_worker():
    assert jdbc_io.decodable(["int8", "int16", "int32", "int64", "float32", "float64", "boolean", "string", "bytes",
                              "decimal:10:2", "date", "time", "timestamp"])
    assert not jdbc_io.decodable(["json-text"])  # anything else goes through the JVM's from_json
