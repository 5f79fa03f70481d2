"""InsertField, ReplaceField, MaskField, ValueToKey, ExtractField, HoistField
(:mod:`webapp.runtime.transforms.field`), one behaviour per test.

Expected values follow Kafka Connect's transforms (apache/kafka connect/transforms).
"""
from __future__ import annotations

import datetime as dt

import pytest

from webapp.runtime.converters import TIMESTAMP_LOGICAL
from webapp.runtime.transforms.chain import (
    TransformError,
    validate_transforms,
)
from webapp.runtime.transforms.record import ConnectRecord

from .support import ALICE, UTC, P, one, rec, run, values


def test_insert_field_with_schema_adds_metadata_fields_and_schema():
    out = run(one(P + "InsertField$Value", topic_field="t", partition_field="p!", offset_field="o",
                  timestamp_field="ts", static_field="s", static_value="v"),
              rec(ALICE, partition=2, offset=7, timestamp=1_000))
    assert values(out) == [{**ALICE, "t": "people", "p": 2, "o": 7,
                            "ts": dt.datetime(1970, 1, 1, 0, 0, 1, tzinfo=UTC), "s": "v"}]
    added = {f["field"]: f for f in out.value_schema["fields"][3:]}
    assert added["p"] == {"field": "p", "type": "int32", "optional": False}
    assert added["ts"]["name"] == TIMESTAMP_LOGICAL and added["t"]["optional"] is True
    assert out.value_schema["name"] == "person"


def test_insert_field_schemaless_timestamp_is_epoch_millis_and_tombstones_pass():
    out = run(one("InsertField$Value", timestamp_field="ts"), rec({"a": 1}, schema=None, timestamp=5),
              rec(None, schema=None, timestamp=6))
    assert values(out) == [{"a": 1, "ts": 5}, None]
    assert out.value_schema is None


def test_insert_field_key_variant_and_offset_needs_sink_record():
    key_schema = {"type": "struct", "optional": False, "fields": [{"field": "k", "type": "string", "optional": False}]}
    out = run(one("InsertField$Key", topic_field="topic"),
              ConnectRecord("x", value=None, key={"k": "a"}, key_schema=key_schema))
    assert out.to_records()[0].key == {"k": "a", "topic": "x"}
    with pytest.raises(TransformError, match="Only SinkRecord"):
        run(one("InsertField$Value", offset_field="o"), rec(ALICE), sink=False)


def test_insert_field_rejects_non_struct_and_config_without_fields():
    with pytest.raises(TransformError, match=r"Only Struct objects supported for \[field insertion\], found: "
                                             "java.lang.String"):
        run(one("InsertField$Value", topic_field="t"), rec("text", schema={"type": "string"}))
    assert "No field insertion configured" in str(validate_transforms(one("InsertField$Value")))
    assert "No value specified for static field" in str(validate_transforms(one("InsertField$Value",
                                                                                static_field="s")))


def test_replace_field_include_exclude_renames_with_schema():
    out = run(one("ReplaceField$Value", exclude="age", renames="name:full_name,id:key"), rec(ALICE))
    assert values(out) == [{"key": 1, "full_name": "alice"}]
    assert [f["field"] for f in out.value_schema["fields"]] == ["key", "full_name"]
    out = run(one("ReplaceField$Value", include="name"), rec(ALICE), rec(None))
    assert values(out) == [{"name": "alice"}, None]


def test_replace_field_schemaless_and_bad_renames():
    out = run(one("ReplaceField$Value", blacklist="b"), rec({"a": 1, "b": 2}, schema=None))
    assert values(out) == [{"a": 1}]
    errors = validate_transforms(one("ReplaceField$Value", renames="a-b"))
    assert "Invalid rename mapping: a-b" in str(errors["transforms.t.renames"])


def test_mask_field_uses_type_empty_values_and_replacement():
    out = run(one("MaskField$Value", fields="name,age"), rec(ALICE), rec({"id": 2, "name": None, "age": 4}))
    assert values(out) == [{"id": 1, "name": "", "age": 0}, {"id": 2, "name": None, "age": 0}]
    out = run(one("MaskField$Value", fields="name", replacement="***"), rec(ALICE))
    assert values(out) == [{**ALICE, "name": "***"}]
    out = run(one("MaskField$Value", fields="age", replacement="99"), rec(ALICE))
    assert values(out) == [{**ALICE, "age": 99}]
    with pytest.raises(TransformError, match="Unable to convert x"):
        run(one("MaskField$Value", fields="age", replacement="x"), rec(ALICE))


def test_mask_field_schemaless_and_required_fields_key():
    out = run(one("MaskField$Value", fields="flag,ts"), rec({"flag": True, "ts": 5}, schema=None))
    assert values(out) == [{"flag": False, "ts": 0}]
    assert "Missing required configuration" in str(validate_transforms(one("MaskField$Value")))


def test_value_to_key_with_schema_and_schemaless():
    out = run(one(P + "ValueToKey", fields="id,name"), rec(ALICE))
    r = out.to_records()[0]
    assert r.key == {"id": 1, "name": "alice"}
    assert out.key_schema["fields"] == [{"field": "id", "type": "int64", "optional": False},
                                        {"field": "name", "type": "string", "optional": True}]
    out = run(one("ValueToKey", fields="a"), rec({"a": 1, "b": 2}, schema=None))
    assert out.to_records()[0].key == {"a": 1} and out.key_schema is None


def test_value_to_key_fails_on_tombstone_and_unknown_field():
    with pytest.raises(TransformError, match="found: null"):
        run(one("ValueToKey", fields="id"), rec(None))
    with pytest.raises(TransformError, match="Field does not exist: nope"):
        run(one("ValueToKey", fields="nope"), rec(ALICE))


def test_extract_field_schema_schemaless_and_tombstone():
    out = run(one("ExtractField$Value", field="name"), rec(ALICE), rec(None))
    assert values(out) == ["alice", None]
    assert out.value_schema == {"type": "string", "optional": True}
    out = run(one("ExtractField$Value", field="missing"), rec({"a": 1}, schema=None))
    assert values(out) == [None]
    with pytest.raises(TransformError, match="Unknown field: missing"):
        run(one("ExtractField$Value", field="missing"), rec(ALICE))


def test_hoist_field_wraps_value_and_schema():
    out = run(one("HoistField$Value", field="line"), rec("hello", schema={"type": "string", "optional": False}))
    assert values(out) == [{"line": "hello"}]
    assert out.value_schema == {"type": "struct", "optional": False,
                                "fields": [{"field": "line", "type": "string", "optional": False}]}
    out = run(one("HoistField$Value", field="v"), rec(5, schema=None))
    assert values(out) == [{"v": 5}] and out.value_schema is None
