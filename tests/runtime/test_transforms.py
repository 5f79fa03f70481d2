"""Single message transforms and predicates on Arrow record batches, one behaviour per test.

Expected values follow Kafka Connect's transforms (apache/kafka connect/transforms).
"""
from __future__ import annotations

import datetime as dt

import pytest

from webapp.runtime.converters import DATE_LOGICAL, TIME_LOGICAL, TIMESTAMP_LOGICAL
from webapp.runtime.transforms import (
    ConfigException,
    ConnectRecord,
    RecordBatch,
    TransformError,
    TransformationChain,
    resolve_predicate,
    resolve_transformation,
    transform_plugins,
    validate_transforms,
)

P = "org.apache.kafka.connect.transforms."
SCHEMA = {"type": "struct", "optional": False, "name": "person", "fields": [
    {"field": "id", "type": "int64", "optional": False},
    {"field": "name", "type": "string", "optional": True},
    {"field": "age", "type": "int32", "optional": True}]}
UTC = dt.timezone.utc


def rec(value, schema=SCHEMA, **kw):
    kw.setdefault("topic", "people")
    return ConnectRecord(value=value, value_schema=schema, **kw)


def batch(*records, sink=True):
    return RecordBatch.from_records(list(records), sink=sink)


def run(config: dict, *records, sink=True) -> RecordBatch:
    return TransformationChain.from_config(config).apply(batch(*records, sink=sink))


def one(type_: str, **cfg) -> dict:
    return {"transforms": "t", "transforms.t.type": type_, **{f"transforms.t.{k.replace('_', '.')}": v
                                                             for k, v in cfg.items()}}


def values(b: RecordBatch):
    return [r.value for r in b.to_records()]


ALICE = {"id": 1, "name": "alice", "age": 30}


# ---------------------------------------------------------------------------------- InsertField
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


# --------------------------------------------------------------------------------- ReplaceField
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


# ------------------------------------------------------------------------------------ MaskField
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


# ----------------------------------------------------------------------------------- ValueToKey
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


# --------------------------------------------------------------------------- Extract / Hoist
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


# ----------------------------------------------------------------------------------------- Cast
def test_cast_fields_with_java_conversions():
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "big", "type": "int64", "optional": False}, {"field": "f", "type": "double", "optional": False},
        {"field": "s", "type": "string", "optional": False}, {"field": "b", "type": "string", "optional": False},
        {"field": "n", "type": "int32", "optional": True}]}
    out = run(one("Cast$Value", spec="big:int8,f:string,s:int32,b:boolean,n:boolean"),
              rec({"big": 300, "f": 1.0, "s": "42", "b": "TRUE", "n": 0}, schema=schema))
    assert values(out) == [{"big": 44, "f": "1.0", "s": 42, "b": True, "n": False}]
    types = {f["field"]: (f["type"], f["optional"]) for f in out.value_schema["fields"]}
    assert types == {"big": ("int8", False), "f": ("string", False), "s": ("int32", False),
                     "b": ("boolean", False), "n": ("boolean", True)}


def test_cast_whole_value_and_timestamp_to_string_and_failure():
    out = run(one("Cast$Value", spec="string"), rec(12, schema={"type": "int64", "optional": True}))
    assert values(out) == ["12"] and out.value_schema == {"type": "string", "optional": True}
    ts_schema = {"type": "struct", "optional": False, "fields": [
        {"field": "at", "type": "int64", "name": TIMESTAMP_LOGICAL, "version": 1, "optional": False}]}
    out = run(one("Cast$Value", spec="at:string"),
              rec({"at": dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)}, schema=ts_schema))
    assert values(out) == [{"at": "2024-05-06T07:08:09.123Z"}]
    with pytest.raises(TransformError, match="x"):
        run(one("Cast$Value", spec="name:int32"), rec({**ALICE, "name": "x"}))
    out = run(one("Cast$Value", spec="a:float64"), rec({"a": "2.5"}, schema=None))
    assert values(out) == [{"a": 2.5}]


def test_cast_spec_validation():
    assert "Invalid type found in casting spec: int128" in str(validate_transforms(one("Cast$Value",
                                                                                       spec="a:int128")))
    assert "may only specify a single cast" in str(validate_transforms(one("Cast$Value", spec="int8,a:int8")))


# ---------------------------------------------------------------------------- TimestampConverter
def test_timestamp_converter_string_to_timestamp_and_back():
    schema = {"type": "struct", "optional": False, "fields": [{"field": "at", "type": "string", "optional": True}]}
    out = run(one("TimestampConverter$Value", field="at", target_type="Timestamp",
                  format="yyyy-MM-dd HH:mm:ss.SSS"),
              rec({"at": "2024-01-02 03:04:05.678"}, schema=schema), rec({"at": None}, schema=schema))
    assert values(out) == [{"at": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)}, {"at": None}]
    assert out.value_schema["fields"][0]["name"] == TIMESTAMP_LOGICAL
    back = TransformationChain.from_config(one("TimestampConverter$Value", field="at", target_type="string",
                                               format="dd/MM/yyyy'T'HH")).apply(out)
    assert values(back) == [{"at": "02/01/2024T03"}, {"at": None}]


def test_timestamp_converter_unix_precision_date_time_and_whole_value():
    out = run(one("TimestampConverter$Value", target_type="unix", unix_precision="seconds"),
              rec(dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                  schema={"type": "int64", "name": TIMESTAMP_LOGICAL, "version": 1, "optional": False}))
    assert values(out) == [1704164645] and out.value_schema == {"type": "int64", "optional": False}
    ms = 1704164645123
    out = run(one("TimestampConverter$Value", target_type="Date"), rec(ms, schema={"type": "int64"}))
    assert values(out) == [dt.date(2024, 1, 2)] and out.value_schema["name"] == DATE_LOGICAL
    out = run(one("TimestampConverter$Value", target_type="Time"), rec(ms, schema={"type": "int64"}))
    assert values(out) == [(3 * 3600 + 4 * 60 + 5) * 1000 + 123] and out.value_schema["name"] == TIME_LOGICAL
    out = run(one("TimestampConverter$Value", field="t", target_type="Timestamp", unix_precision="microseconds"),
              rec({"t": 1_500_000}, schema=None))
    assert values(out) == [{"t": dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)}]


def test_timestamp_converter_iso_zones():
    fmt = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
    out = run(one("TimestampConverter$Value", target_type="unix", format=fmt),
              rec("2024-01-02T03:04:05.123+01:00", schema={"type": "string"}))
    assert values(out) == [1704161045123]
    back = run(one("TimestampConverter$Value", target_type="string", format=fmt),
               rec(1704161045123, schema={"type": "int64"}))
    assert values(back) == ["2024-01-02T02:04:05.123Z"]


def test_timestamp_converter_bad_string_and_config():
    with pytest.raises(TransformError, match="does not match pattern"):
        run(one("TimestampConverter$Value", target_type="Timestamp", format="yyyy-MM-dd"),
            rec("yesterday", schema={"type": "string"}))
    assert "requires format" in str(validate_transforms(one("TimestampConverter$Value", target_type="string")))
    assert "String must be one of" in str(validate_transforms(one("TimestampConverter$Value",
                                                                  target_type="Instant")))


# ------------------------------------------------------------------------------------ routers
def test_regex_router_whole_match_and_java_groups():
    out = run(one(P + "RegexRouter", regex="(.*)-raw", replacement="$1-clean"), rec(ALICE, topic="orders-raw"),
              rec(ALICE, topic="orders-raw-x"))
    assert [r.topic for r in out.to_records()] == ["orders-clean", "orders-raw-x"]
    out = run(one("RegexRouter", regex="(?P<t>o.*)", replacement="x.${t}"), rec(ALICE, topic="orders"))
    assert out.to_records()[0].topic == "x.orders"


def test_timestamp_router_formats_record_time_and_requires_it():
    day = int(dt.datetime(2024, 3, 4, tzinfo=UTC).timestamp() * 1000)
    out = run(one("TimestampRouter"), rec(ALICE, timestamp=day), rec(ALICE, timestamp=day + 86_400_000))
    assert [r.topic for r in out.to_records()] == ["people-20240304", "people-20240305"]
    out = run(one("TimestampRouter", topic_format="${timestamp}_${topic}", timestamp_format="yyyy.MM"),
              rec(ALICE, timestamp=day))
    assert out.to_records()[0].topic == "2024.03_people"
    out = run(one("TimestampRouter", topic_format="t", timestamp_format="yyyy"), rec(ALICE, timestamp=day))
    assert out.to_records()[0].topic == "t"
    out = run(one("TimestampRouter", topic_format="${topic}@${timestamp}", timestamp_format="HH:mm:ss.SSS"),
              rec(ALICE, timestamp=day + 3_723_045))
    assert out.to_records()[0].topic == "people@01:02:03.045"
    with pytest.raises(TransformError, match="Timestamp missing"):
        run(one("TimestampRouter"), rec(ALICE))


# ------------------------------------------------------------------------------------- headers
def test_insert_header_and_drop_headers():
    out = run(one("InsertHeader", header="source", value_literal="file"),
              rec(ALICE, headers=[("a", b"1")]), rec(ALICE))
    assert [r.headers for r in out.to_records()] == [[("a", b"1"), ("source", b"file")], [("source", b"file")]]
    out = run(one("DropHeaders", headers="a,c"), rec(ALICE, headers=[("a", b"1"), ("b", b"2"), ("c", None)]),
              rec(ALICE), rec(ALICE, headers=[("a", b"x")]))
    assert [r.headers for r in out.to_records()] == [[("b", b"2")], [], []]


# ------------------------------------------------------------------------------ Filter/predicates
def test_filter_with_topic_predicate_and_negate():
    cfg = {**one("Filter"), "transforms.t.predicate": "p", "predicates": "p",
           "predicates.p.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
           "predicates.p.pattern": "tmp-.*"}
    out = run(cfg, rec(ALICE, topic="tmp-1"), rec({**ALICE, "id": 2}, topic="keep"), rec(ALICE, topic="tmp-2"))
    assert [r.topic for r in out.to_records()] == ["keep"]
    out = run({**cfg, "transforms.t.negate": "true"}, rec(ALICE, topic="tmp-1"), rec(ALICE, topic="keep"))
    assert [r.topic for r in out.to_records()] == ["tmp-1"]


def test_has_header_key_predicate():
    cfg = {**one("Filter"), "transforms.t.predicate": "h", "predicates": "h",
           "predicates.h.type": "HasHeaderKey", "predicates.h.name": "skip"}
    out = run(cfg, rec(ALICE, headers=[("x", b"")]), rec({**ALICE, "id": 2}, headers=[("skip", b"1")]),
              rec({**ALICE, "id": 3}))
    assert [v["id"] for v in values(out)] == [1, 3]


def test_tombstone_predicate_negated_guards_a_transform_and_keeps_order():
    cfg = {**one("ValueToKey", fields="id"), "transforms.t.predicate": "tomb", "transforms.t.negate": "true",
           "predicates": "tomb", "predicates.tomb.type": "RecordIsTombstone"}
    out = run(cfg, rec(ALICE, offset=1), rec(None, offset=2), rec({**ALICE, "id": 3}, offset=3))
    assert [(r.offset, r.key) for r in out.to_records()] == [(1, {"id": 1}), (2, None), (3, {"id": 3})]


def test_predicate_subset_gives_union_schema():
    cfg = {**one("InsertField$Value", static_field="tag", static_value="x"), "transforms.t.predicate": "p",
           "predicates": "p", "predicates.p.type": "TopicNameMatches", "predicates.p.pattern": "a"}
    out = run(cfg, rec(ALICE, topic="a"), rec(ALICE, topic="b"))
    assert values(out) == [{**ALICE, "tag": "x"}, {**ALICE, "tag": None}]
    assert out.value_schema["fields"][-1] == {"field": "tag", "type": "string", "optional": True}


def test_chain_applies_in_order():
    cfg = {"transforms": "hoist,ins", "transforms.hoist.type": "HoistField$Value", "transforms.hoist.field": "line",
           "transforms.ins.type": "InsertField$Value", "transforms.ins.topic.field": "topic"}
    out = run(cfg, rec("l1", schema={"type": "string", "optional": False}))
    assert values(out) == [{"line": "l1", "topic": "people"}]


def test_apply_tolerant_isolates_bad_records():
    chain = TransformationChain.from_config(one("Cast$Value", spec="name:int32"))
    good, errors = chain.apply_tolerant(batch(rec({**ALICE, "name": "1"}), rec(ALICE), rec({**ALICE, "name": "3"})))
    assert [v["name"] for v in values(good)] == [1, 3]
    assert [i for i, _ in errors] == [1]
    assert errors[0][1].executing_class == P + "Cast$Value"


def test_output_empty_predicts_output_schema():
    chain = TransformationChain.from_config(one("HoistField$Value", field="v"))
    out = chain.output_empty(batch(rec(ALICE)))
    assert out.num_rows == 0 and out.value_schema["fields"][0]["field"] == "v"


# --------------------------------------------------------------------------- config / registry
def test_validation_reports_unknown_types_missing_keys_and_predicates():
    errors = validate_transforms({"transforms": "a,b,c", "transforms.a.type": "com.example.Nope",
                                  "transforms.b.type": "ExtractField$Value",
                                  "transforms.c.type": "Filter", "transforms.c.predicate": "missing"})
    assert "Class com.example.Nope could not be found" in errors["transforms.a.type"][0]
    assert errors["transforms.b.field"] == ['Missing required configuration "transforms.b.field" which has no '
                                            'default value.']
    assert "There is no predicate 'missing'" in errors["transforms.c.predicate"][0]
    assert validate_transforms({"transforms": "x"})["transforms.x.type"]
    assert validate_transforms({}) == {}
    with pytest.raises(ConfigException):
        TransformationChain.from_config({"transforms": "x"})


def test_registry_names_and_plugin_listing():
    assert resolve_transformation("InsertField$Value").type_name == P + "InsertField$Value"
    assert resolve_transformation(P + "Cast$Key").side == "key"
    assert resolve_predicate("RecordIsTombstone").type_name == P + "predicates.RecordIsTombstone"
    plugins = transform_plugins()
    names = {p["class"]: p["type"] for p in plugins}
    for base in ("InsertField", "ReplaceField", "MaskField", "ExtractField", "HoistField", "Cast",
                 "TimestampConverter"):
        assert names[P + base + "$Key"] == names[P + base + "$Value"] == "transformation"
    for t in ("ValueToKey", "RegexRouter", "TimestampRouter", "Filter", "InsertHeader", "DropHeaders"):
        assert names[P + t] == "transformation"
    for p in ("TopicNameMatches", "HasHeaderKey", "RecordIsTombstone"):
        assert names[P + "predicates." + p] == "predicate"
    assert [p["class"] for p in plugins] == sorted(names)


def test_chain_is_picklable_for_spark_workers():
    import pickle

    chain = TransformationChain.from_config(one("RegexRouter", regex="a", replacement="b"))
    again = pickle.loads(pickle.dumps(chain))
    assert again.apply(batch(rec(ALICE, topic="a"))).to_records()[0].topic == "b"
