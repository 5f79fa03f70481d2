"""JsonConverter format: schema mappings, pure-Python codec, and the JVM (Spark) codec.

The Spark expressions and the pure-Python functions must agree on the wire format,
so values encoded by one are decoded by the other.
"""
from __future__ import annotations

import datetime as dt
import decimal
import json

import pyarrow as pa
import pytest

from webapp.runtime import converters as C

TS = C.TIMESTAMP_LOGICAL
DATE = C.DATE_LOGICAL


def sample_table() -> pa.Table:
    return pa.table({
        "i64": pa.array([1, None, -3], pa.int64()),
        "i32": pa.array([7, 8, None], pa.int32()),
        "i8": pa.array([1, -2, 3], pa.int8()),
        "f64": pa.array([1.5, None, 1e-5]),
        "f32": pa.array([0.25, 2.0, None], pa.float32()),
        "s": pa.array(["a", None, 'q"uote\n\u00e9']),
        "b": pa.array([b"\x00\x01", None, b"z"]),
        "bo": pa.array([True, False, None]),
        "ts": pa.array([dt.datetime(2020, 1, 1, 1, 2, 3, 456000), None, None], pa.timestamp("ms", tz="UTC")),
        "d": pa.array([dt.date(2020, 1, 2), None, dt.date(1969, 12, 31)]),
        "dec": pa.array([decimal.Decimal("1.25"), None, decimal.Decimal("-3.10")], pa.decimal128(10, 2)),
        "arr": pa.array([[1, 2], None, []], pa.list_(pa.int64())),
        "st": pa.array([{"x": 1, "y": "a"}, None, {"x": None, "y": "b"}],
                       pa.struct([("x", pa.int64()), ("y", pa.string())])),
        "m": pa.array([[("k", 1.0)], None, []], pa.map_(pa.string(), pa.float64())),
    })


# --------------------------------------------------------------------------------------
# schema mappings
# --------------------------------------------------------------------------------------
def test_arrow_to_connect_schema_types():
    s = C.arrow_to_connect_schema(sample_table().schema, name="rec")
    assert s["type"] == "struct" and s["name"] == "rec" and s["optional"] is False
    by = {f["field"]: f for f in s["fields"]}
    assert [f["field"] for f in s["fields"]] == sample_table().column_names
    assert by["i64"] == {"field": "i64", "type": "int64", "optional": True}
    assert by["i8"]["type"] == "int8" and by["f32"]["type"] == "float" and by["f64"]["type"] == "double"
    assert by["b"]["type"] == "bytes" and by["bo"]["type"] == "boolean" and by["s"]["type"] == "string"
    assert by["ts"]["type"] == "int64" and by["ts"]["name"] == TS
    assert by["d"]["type"] == "int32" and by["d"]["name"] == DATE
    assert by["dec"]["name"] == C.DECIMAL_LOGICAL and by["dec"]["parameters"]["scale"] == "2"
    assert by["arr"]["items"]["type"] == "int64"
    assert [f["field"] for f in by["st"]["fields"]] == ["x", "y"]
    assert by["m"]["keys"]["type"] == "string" and by["m"]["values"]["type"] == "double"


def test_connect_arrow_round_trip_and_unsupported():
    schema = sample_table().schema
    back = C.connect_to_arrow_schema(C.arrow_to_connect_schema(schema))
    assert back.names == schema.names
    for name in ("i64", "i32", "i8", "f64", "f32", "s", "b", "bo", "d", "dec", "arr", "st"):
        assert back.field(name).type == schema.field(name).type, name
    assert back.field("ts").type == pa.timestamp("ms", tz="UTC")
    with pytest.raises(C.SchemaConversionError, match="uint64"):
        C.arrow_to_connect_schema(pa.schema([("u", pa.uint64())]))
    with pytest.raises(C.SchemaConversionError, match="struct"):
        C.connect_to_arrow_schema({"type": "int64"})
    with pytest.raises(C.SchemaConversionError, match="unknown Connect schema type"):
        C.connect_to_arrow_schema({"type": "struct", "fields": [{"field": "x", "type": "uuid"}]})


def test_merge_and_infer_schemas():
    a = C.struct_schema([{"field": "x", "type": "int32", "optional": False},
                         {"field": "y", "type": "string", "optional": True}])
    b = C.struct_schema([{"field": "x", "type": "int64", "optional": False},
                         {"field": "z", "type": "boolean", "optional": False}])
    m = C.merge_connect_schemas([a, b])
    by = {f["field"]: f for f in m["fields"]}
    assert [f["field"] for f in m["fields"]] == ["x", "y", "z"]
    assert by["x"]["type"] == "int64" and by["x"]["optional"] is False
    assert by["y"]["optional"] is True and by["z"]["optional"] is True
    with pytest.raises(C.SchemaConversionError, match="conflicting"):
        C.merge_connect_schemas([a, C.struct_schema([{"field": "y", "type": "int64", "optional": True}])])

    inferred = C.infer_connect_schema([{"a": 1, "b": None, "c": "x", "n": {"k": True}},
                                       {"a": 2.5, "b": None, "d": [1, 2]}])
    by = {f["field"]: f for f in inferred["fields"]}
    assert by["a"]["type"] == "double"
    assert by["b"]["type"] == "string"  # only nulls seen
    assert by["n"]["fields"][0] == {"field": "k", "type": "boolean", "optional": True}
    assert by["d"]["items"]["type"] == "int64"


# --------------------------------------------------------------------------------------
# pure Python codec
# --------------------------------------------------------------------------------------
def test_python_encode_matches_jsonconverter_layout():
    schema = C.struct_schema([{"field": "id", "type": "int64", "optional": False},
                              {"field": "name", "type": "string", "optional": True}], name="p")
    raw = C.encode_value({"id": 1, "name": None}, schema, schemas_enable=True)
    obj = json.loads(raw)
    assert list(obj) == ["schema", "payload"]
    assert obj["schema"] == schema and obj["payload"] == {"id": 1, "name": None}
    assert raw.startswith(C.envelope_prefix(schema).encode())
    assert json.loads(C.encode_value({"id": 1}, schema, schemas_enable=False)) == {"id": 1, "name": None}
    assert C.encode_value(None, schema) is None  # tombstone


def test_python_round_trip_logical_types_and_nulls():
    schema = C.arrow_to_connect_schema(sample_table().schema)
    for row in sample_table().to_pylist():
        got_schema, got = C.decode_value(C.encode_value(row, schema), schemas_enable=True)
        assert got_schema == schema
        row["m"] = None if row["m"] is None else dict(row["m"])  # Arrow maps are lists of pairs
        assert got == row
    int_keys = C.struct_schema([{"field": "m", "type": "map", "optional": True,
                                 "keys": {"type": "int32", "optional": False},
                                 "values": {"type": "string", "optional": True}}])
    raw = C.encode_value({"m": {1: "a", 2: None}}, int_keys)
    assert json.loads(raw)["payload"] == {"m": [[1, "a"], [2, None]]}
    assert C.decode_value(raw)[1] == {"m": {1: "a", 2: None}}


def test_python_decode_errors_and_missing_fields():
    schema = C.struct_schema([{"field": "a", "type": "int64", "optional": True},
                              {"field": "b", "type": "string", "optional": False},
                              {"field": "c", "type": "int32", "optional": False, "default": 5}])
    env = lambda payload: json.dumps({"schema": schema, "payload": payload})  # noqa: E731
    assert C.decode_value(env({"b": "x"}))[1] == {"a": None, "b": "x", "c": 5}
    with pytest.raises(ValueError, match="non-optional"):
        C.decode_value(env({"a": 1}))
    with pytest.raises(ValueError, match="expected int64"):
        C.decode_value(env({"a": "1", "b": "x"}))
    with pytest.raises(ValueError, match="schemas.enable=false"):
        C.decode_value(b'{"a": 1}', schemas_enable=True)
    with pytest.raises(ValueError):
        C.decode_value(b"not json", schemas_enable=False)
    assert C.decode_value(b'{"a": 1}', schemas_enable=False) == (None, {"a": 1})
    assert C.decode_value(None) == (None, None)


# --------------------------------------------------------------------------------------
# Spark codec
# --------------------------------------------------------------------------------------
@pytest.mark.parametrize("schemas_enable", [True, False])
def test_spark_encode_equals_python_encode(spark, schemas_enable):
    table = sample_table()
    schema = C.arrow_to_connect_schema(table.schema, name="rec")
    df = spark.createDataFrame(table)
    col = C.encode_value_column(df.schema, schemas_enable, connect_schema=schema)
    values = [r.v for r in df.select(col.alias("v")).collect()]
    expected = [C.encode_value(row, schema, schemas_enable) for row in table.to_pylist()]
    for got, want in zip(values, expected):
        g, w = json.loads(got), json.loads(want)
        if schemas_enable:
            assert g["schema"] == w["schema"]
            g, w = g["payload"], w["payload"]
        # The JVM writes decimals as numbers (decimal.format=NUMERIC), Python as BASE64.
        dec = g.pop("dec"), w.pop("dec")
        assert g == w
        _, payload = C.decode_value(got, schemas_enable)
        if schemas_enable:
            assert payload["dec"] == (None if dec[0] is None else decimal.Decimal(str(dec[0])))


@pytest.mark.parametrize("schemas_enable", [True, False])
def test_spark_decode_round_trip(spark, schemas_enable):
    table = sample_table()
    schema = C.arrow_to_connect_schema(table.schema)
    df = spark.createDataFrame(table)
    encoded = df.select(C.encode_value_column(df.schema, schemas_enable, connect_schema=schema).alias("value"))
    decoded = encoded.select(*C.decode_value_columns("value", schema, schemas_enable))
    assert decoded.columns == table.column_names
    got = decoded.toArrow()
    assert got.num_rows == 3
    for name in table.column_names:
        if name == "ts":
            assert got.column(name).cast(pa.timestamp("ms", tz="UTC")).to_pylist() == table.column(name).to_pylist()
        elif name == "m":
            assert [None if v is None else dict(v) for v in got.column(name).to_pylist()] == \
                   [None if v is None else dict(v) for v in table.column(name).to_pylist()]
        else:
            assert got.column(name).to_pylist() == table.column(name).to_pylist(), name


def test_spark_decodes_python_values_and_missing_fields(spark):
    schema = C.struct_schema([{"field": "a", "type": "int64", "optional": True},
                              {"field": "t", "type": "int64", "optional": True, "name": TS},
                              {"field": "s", "type": "string", "optional": True}])
    values = [C.encode_value({"a": 1, "t": dt.datetime(2021, 5, 6, 7, 8, 9, tzinfo=dt.timezone.utc), "s": "x"},
                             schema).decode(),
              json.dumps({"schema": schema, "payload": {"a": 2}})]  # "t" and "s" missing → null
    df = spark.createDataFrame([(v,) for v in values], "value string")
    rows = df.select(*C.decode_value_columns("value", schema, True)).collect()
    assert rows[0].a == 1 and rows[0].s == "x" and rows[0].t == dt.datetime(2021, 5, 6, 7, 8, 9)
    assert rows[1].a == 2 and rows[1].t is None and rows[1].s is None


def test_spark_decode_failfast_on_malformed(spark):
    schema = C.struct_schema([{"field": "a", "type": "int64", "optional": True}])
    df = spark.createDataFrame([('{"a": 1}',), ("{not json",)], "value string")
    with pytest.raises(Exception, match="(?i)malformed"):
        df.select(*C.decode_value_columns("value", schema, False)).collect()


def test_spark_schema_mapping(spark):
    from pyspark.sql import types as T

    schema = C.arrow_to_connect_schema(sample_table().schema)
    st = C.connect_to_spark_schema(schema)
    assert isinstance(st["ts"].dataType, T.TimestampType) and isinstance(st["d"].dataType, T.DateType)
    assert isinstance(C.connect_to_spark_schema(schema, wire=True)["ts"].dataType, T.LongType)
    assert isinstance(st["i8"].dataType, T.ByteType) and isinstance(st["dec"].dataType, T.DecimalType)
    back = C.spark_to_connect_schema(spark.createDataFrame(sample_table()).schema)
    assert [f["type"] for f in back["fields"]] == [f["type"] for f in schema["fields"]]
