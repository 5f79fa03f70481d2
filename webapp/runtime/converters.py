"""Kafka Connect ``JsonConverter`` record format, in Spark (JVM) and in pure Python.

Wire format of one record value (UTF-8 JSON):

* ``schemas.enable=true``: ``{"schema": <Connect schema>, "payload": <value>}``
* ``schemas.enable=false``: ``<value>``

A Connect schema (JSON form, as JsonConverter writes it) is a dict such as::

    {"type": "struct", "optional": false, "name": "flights",
     "fields": [{"field": "year", "type": "int64", "optional": true}, ...]}

Primitive types: ``int8 int16 int32 int64 float double boolean string bytes``;
complex: ``array`` (``items``), ``map`` (``keys``, ``values``), ``struct``
(``fields``). Logical types (by ``name``): ``org.apache.kafka.connect.data.Timestamp``
(int64 ms since epoch), ``...Date`` (int32 days since epoch), ``...Decimal``
(``bytes`` with ``parameters.scale``). ``bytes`` are base64 strings. Decimals: the
Spark encoder writes JSON numbers (Connect's ``decimal.format=NUMERIC``, which
JsonConverter also reads since KIP-481) and the Spark decoder reads numbers only;
the pure-Python encoder writes Connect's default BASE64 form and its decoder reads both.

This module maps Connect schemas to/from Arrow and Spark schemas, builds Spark
Column expressions that encode a DataFrame's rows into value strings in the JVM
(``to_json``) and decode value strings into columns (``from_json``), and has a
pure-Python encoder/decoder for tests and small uses. Spark and pyarrow are
imported lazily so the module itself is cheap to import.
"""
from __future__ import annotations

import base64
import datetime as _dt
import decimal as _decimal
import json
from typing import Any, Iterable, Mapping, Sequence

__all__ = [
    "JSON_CONVERTER_CLASS",
    "STRING_CONVERTER_CLASS",
    "TIMESTAMP_LOGICAL",
    "DATE_LOGICAL",
    "DECIMAL_LOGICAL",
    "TIME_LOGICAL",
    "SchemaConversionError",
    "struct_schema",
    "schema_json",
    "arrow_to_connect_schema",
    "connect_to_arrow_schema",
    "connect_to_arrow_type",
    "arrow_type_to_connect",
    "spark_to_connect_schema",
    "connect_to_spark_schema",
    "merge_connect_schemas",
    "infer_connect_schema",
    "encode_value_column",
    "envelope_prefix",
    "decode_value_columns",
    "encode_value",
    "decode_value",
]

JSON_CONVERTER_CLASS = "org.apache.kafka.connect.json.JsonConverter"
STRING_CONVERTER_CLASS = "org.apache.kafka.connect.storage.StringConverter"

TIMESTAMP_LOGICAL = "org.apache.kafka.connect.data.Timestamp"
DATE_LOGICAL = "org.apache.kafka.connect.data.Date"
TIME_LOGICAL = "org.apache.kafka.connect.data.Time"
DECIMAL_LOGICAL = "org.apache.kafka.connect.data.Decimal"
_DECIMAL_SCALE = "scale"
_DECIMAL_PRECISION = "connect.decimal.precision"

_INT_TYPES = ("int8", "int16", "int32", "int64")
_PRIMITIVES = frozenset(_INT_TYPES + ("float", "double", "boolean", "string", "bytes"))
_EPOCH_DATE = _dt.date(1970, 1, 1)
_EPOCH = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)


class SchemaConversionError(ValueError):
    """A type has no mapping between Connect and Arrow/Spark, or two schemas conflict."""


# --------------------------------------------------------------------------------------
# Connect schema helpers
# --------------------------------------------------------------------------------------
def struct_schema(fields: Sequence[Mapping[str, Any]], name: str | None = None, optional: bool = False) -> dict:
    """A Connect struct schema dict from field schemas (each with a ``field`` key)."""
    out: dict[str, Any] = {"type": "struct", "fields": [dict(f) for f in fields], "optional": bool(optional)}
    if name:
        out["name"] = name
    return out


def schema_json(schema: Mapping[str, Any]) -> str:
    """Compact JSON of a Connect schema, as embedded in the envelope (no spaces)."""
    return json.dumps(schema, separators=(",", ":"), ensure_ascii=False)


def _field(name: str, schema: Mapping[str, Any]) -> dict:
    out = {"field": name}
    out.update(schema)
    return out


def _check_schema(schema: Mapping[str, Any]) -> str:
    t = schema.get("type")
    if t in _PRIMITIVES or t in ("array", "map", "struct"):
        return t
    raise SchemaConversionError(f"unknown Connect schema type {t!r} in {schema!r}")


# --------------------------------------------------------------------------------------
# Arrow <-> Connect
# --------------------------------------------------------------------------------------
def _arrow_type_to_connect(t, nullable: bool) -> dict:
    import pyarrow.types as pt

    opt = {"optional": bool(nullable)}
    if pt.is_dictionary(t):
        return _arrow_type_to_connect(t.value_type, nullable)
    if pt.is_boolean(t):
        return {"type": "boolean", **opt}
    if pt.is_int8(t):
        return {"type": "int8", **opt}
    if pt.is_int16(t) or pt.is_uint8(t):
        return {"type": "int16", **opt}
    if pt.is_int32(t) or pt.is_uint16(t):
        return {"type": "int32", **opt}
    if pt.is_int64(t) or pt.is_uint32(t):
        return {"type": "int64", **opt}
    if pt.is_uint64(t):
        raise SchemaConversionError("uint64 has no Connect type (values may not fit int64); cast it first")
    if pt.is_float16(t) or pt.is_float32(t):
        return {"type": "float", **opt}
    if pt.is_float64(t):
        return {"type": "double", **opt}
    if pt.is_string(t) or pt.is_large_string(t) or getattr(pt, "is_string_view", lambda _t: False)(t):
        return {"type": "string", **opt}
    if pt.is_null(t):
        return {"type": "string", "optional": True}
    if pt.is_binary(t) or pt.is_large_binary(t) or pt.is_fixed_size_binary(t):
        return {"type": "bytes", **opt}
    if pt.is_timestamp(t):
        return {"type": "int64", **opt, "name": TIMESTAMP_LOGICAL, "version": 1}
    if pt.is_date(t):
        return {"type": "int32", **opt, "name": DATE_LOGICAL, "version": 1}
    if pt.is_decimal(t):
        return {"type": "bytes", **opt, "name": DECIMAL_LOGICAL, "version": 1,
                "parameters": {_DECIMAL_SCALE: str(t.scale), _DECIMAL_PRECISION: str(t.precision)}}
    if pt.is_list(t) or pt.is_large_list(t) or pt.is_fixed_size_list(t):
        return {"type": "array", "items": _arrow_type_to_connect(t.value_type, t.value_field.nullable), **opt}
    if pt.is_map(t):
        return {"type": "map", "keys": _arrow_type_to_connect(t.key_type, False),
                "values": _arrow_type_to_connect(t.item_type, t.item_field.nullable), **opt}
    if pt.is_struct(t):
        fields = [_field(t.field(i).name, _arrow_type_to_connect(t.field(i).type, t.field(i).nullable))
                  for i in range(t.num_fields)]
        return {"type": "struct", "fields": fields, **opt}
    raise SchemaConversionError(f"Arrow type {t} has no Connect mapping; cast it (e.g. to string) first")


def arrow_to_connect_schema(schema, name: str | None = None) -> dict:
    """Connect struct schema for an Arrow schema (``pyarrow.Schema``), one field per column.

    Arrow nullability becomes ``optional``. Timestamps map to Connect Timestamp
    (ms; finer units are truncated), dates to Date, decimals to Decimal, unsigned
    ints to the next wider signed int, null-typed columns to optional string.

    Raises:
        SchemaConversionError: a column type has no Connect equivalent (e.g. uint64, time).
    """
    fields = [_field(f.name, _arrow_type_to_connect(f.type, f.nullable)) for f in schema]
    return struct_schema(fields, name=name)


def _connect_to_arrow_type(s: Mapping[str, Any]):
    import pyarrow as pa

    t = _check_schema(s)
    name = s.get("name")
    if name == TIMESTAMP_LOGICAL:
        return pa.timestamp("ms", tz="UTC")
    if name == DATE_LOGICAL:
        return pa.date32()
    if name == DECIMAL_LOGICAL:
        params = s.get("parameters") or {}
        return pa.decimal128(int(params.get(_DECIMAL_PRECISION, 38)), int(params.get(_DECIMAL_SCALE, 0)))
    simple = {"int8": pa.int8(), "int16": pa.int16(), "int32": pa.int32(), "int64": pa.int64(),
              "float": pa.float32(), "double": pa.float64(), "boolean": pa.bool_(), "string": pa.string(),
              "bytes": pa.binary()}
    if t in simple:
        return simple[t]
    if t == "array":
        items = s["items"]
        return pa.list_(pa.field("element", _connect_to_arrow_type(items), nullable=bool(items.get("optional"))))
    if t == "map":
        values = s["values"]
        return pa.map_(_connect_to_arrow_type(s["keys"]),
                       pa.field("value", _connect_to_arrow_type(values), nullable=bool(values.get("optional"))))
    return pa.struct([pa.field(f["field"], _connect_to_arrow_type(f), nullable=bool(f.get("optional")))
                      for f in s.get("fields", [])])


def connect_to_arrow_schema(schema: Mapping[str, Any]):
    """``pyarrow.Schema`` for a Connect struct schema (``optional`` → nullable).

    Raises:
        SchemaConversionError: not a struct schema, or an unknown type.
    """
    import pyarrow as pa

    if schema.get("type") != "struct":
        raise SchemaConversionError(f"top-level Connect schema must be a struct, got {schema.get('type')!r}")
    return pa.schema([pa.field(f["field"], _connect_to_arrow_type(f), nullable=bool(f.get("optional")))
                      for f in schema.get("fields", [])])


# --------------------------------------------------------------------------------------
# Spark <-> Connect
# --------------------------------------------------------------------------------------
def _spark_type_to_connect(dt, nullable: bool) -> dict:
    from pyspark.sql import types as T

    opt = {"optional": bool(nullable)}
    simple = [(T.ByteType, "int8"), (T.ShortType, "int16"), (T.IntegerType, "int32"), (T.LongType, "int64"),
              (T.FloatType, "float"), (T.DoubleType, "double"), (T.BooleanType, "boolean"),
              (T.StringType, "string"), (T.BinaryType, "bytes")]
    for cls, name in simple:
        if isinstance(dt, cls):
            return {"type": name, **opt}
    if isinstance(dt, (T.TimestampType, T.TimestampNTZType)):
        return {"type": "int64", **opt, "name": TIMESTAMP_LOGICAL, "version": 1}
    if isinstance(dt, T.DateType):
        return {"type": "int32", **opt, "name": DATE_LOGICAL, "version": 1}
    if isinstance(dt, T.DecimalType):
        return {"type": "bytes", **opt, "name": DECIMAL_LOGICAL, "version": 1,
                "parameters": {_DECIMAL_SCALE: str(dt.scale), _DECIMAL_PRECISION: str(dt.precision)}}
    if isinstance(dt, T.NullType):
        return {"type": "string", "optional": True}
    if isinstance(dt, T.ArrayType):
        return {"type": "array", "items": _spark_type_to_connect(dt.elementType, dt.containsNull), **opt}
    if isinstance(dt, T.MapType):
        if not isinstance(dt.keyType, T.StringType):
            raise SchemaConversionError(f"map keys must be strings for JSON objects, got {dt.keyType.simpleString()}")
        return {"type": "map", "keys": {"type": "string", "optional": False},
                "values": _spark_type_to_connect(dt.valueType, dt.valueContainsNull), **opt}
    if isinstance(dt, T.StructType):
        return {"type": "struct", "fields": [_field(f.name, _spark_type_to_connect(f.dataType, f.nullable))
                                             for f in dt.fields], **opt}
    raise SchemaConversionError(f"Spark type {dt.simpleString()} has no Connect mapping; cast it first")


def spark_to_connect_schema(schema, name: str | None = None) -> dict:
    """Connect struct schema for a Spark ``StructType`` (nullable → optional).

    Raises:
        SchemaConversionError: a column type has no Connect equivalent.
    """
    fields = [_field(f.name, _spark_type_to_connect(f.dataType, f.nullable)) for f in schema.fields]
    return struct_schema(fields, name=name)


def _connect_to_spark_type(s: Mapping[str, Any], wire: bool = False):
    """Spark type of a Connect schema; ``wire=True`` gives the JSON wire type of logical types."""
    from pyspark.sql import types as T

    t = _check_schema(s)
    name = s.get("name")
    if name == TIMESTAMP_LOGICAL:
        return T.LongType() if wire else T.TimestampType()
    if name == DATE_LOGICAL:
        return T.IntegerType() if wire else T.DateType()
    if name == DECIMAL_LOGICAL:
        params = s.get("parameters") or {}
        return T.DecimalType(int(params.get(_DECIMAL_PRECISION, 38)), int(params.get(_DECIMAL_SCALE, 0)))
    simple = {"int8": T.ByteType(), "int16": T.ShortType(), "int32": T.IntegerType(), "int64": T.LongType(),
              "float": T.FloatType(), "double": T.DoubleType(), "boolean": T.BooleanType(),
              "string": T.StringType(), "bytes": T.BinaryType()}
    if t in simple:
        return simple[t]
    if t == "array":
        return T.ArrayType(_connect_to_spark_type(s["items"], wire), True)
    if t == "map":
        if s["keys"].get("type") != "string":
            raise SchemaConversionError("only maps with string keys are supported (JSON object form)")
        return T.MapType(T.StringType(), _connect_to_spark_type(s["values"], wire), True)
    return T.StructType([T.StructField(f["field"], _connect_to_spark_type(f, wire), True)
                         for f in s.get("fields", [])])


def connect_to_spark_schema(schema: Mapping[str, Any], wire: bool = False):
    """Spark ``StructType`` for a Connect struct schema.

    Every field is nullable in Spark (a missing JSON field decodes to null, as in
    Connect for optional fields). With ``wire=True`` logical types keep their JSON
    wire type (Timestamp → long ms, Date → int days), as used for ``from_json``.

    Raises:
        SchemaConversionError: not a struct, unknown type, or a map with non-string keys.
    """
    if schema.get("type") != "struct":
        raise SchemaConversionError(f"top-level Connect schema must be a struct, got {schema.get('type')!r}")
    return _connect_to_spark_type(schema, wire)


# --------------------------------------------------------------------------------------
# Schema merging and inference (schemaless records)
# --------------------------------------------------------------------------------------
_NUMERIC_RANK = {"int8": 0, "int16": 1, "int32": 2, "int64": 3, "float": 4, "double": 5}


def _merge_types(a: Mapping[str, Any], b: Mapping[str, Any], path: str) -> dict:
    ta, tb = a.get("type"), b.get("type")
    optional = bool(a.get("optional", True)) or bool(b.get("optional", True))
    if a.get("name") != b.get("name"):
        if ta == tb:
            out = dict(a)
            out.pop("name", None), out.pop("version", None), out.pop("parameters", None)
            return {**out, "optional": optional}
        raise SchemaConversionError(f"conflicting types for {path}: {schema_json(a)} vs {schema_json(b)}")
    if ta == tb:
        if ta == "struct":
            return {**_merge_structs(a, b, path), "optional": optional}
        if ta == "array":
            return {**a, "items": _merge_types(a["items"], b["items"], path + "[]"), "optional": optional}
        if ta == "map":
            return {**a, "values": _merge_types(a["values"], b["values"], path + "{}"), "optional": optional}
        return {**a, "optional": optional}
    if ta in _NUMERIC_RANK and tb in _NUMERIC_RANK and not a.get("name"):
        wider = ta if _NUMERIC_RANK[ta] >= _NUMERIC_RANK[tb] else tb
        if {ta, tb} & {"float", "double"}:
            wider = "double"
        return {**a, "type": wider, "optional": optional}
    raise SchemaConversionError(f"conflicting types for {path}: {ta} vs {tb}")


def _merge_structs(a: Mapping[str, Any], b: Mapping[str, Any], path: str) -> dict:
    fields: dict[str, dict] = {f["field"]: dict(f) for f in a.get("fields", [])}
    for f in b.get("fields", []):
        name = f["field"]
        if name in fields:
            fields[name] = _field(name, {k: v for k, v in _merge_types(fields[name], f, f"{path}.{name}").items()
                                         if k != "field"})
        else:
            fields[name] = {**f, "optional": True}
    names_a = {f["field"] for f in a.get("fields", [])}
    for name in names_a - {f["field"] for f in b.get("fields", [])}:
        fields[name]["optional"] = True
    out = dict(a)
    out["fields"] = list(fields.values())
    return out


def merge_connect_schemas(schemas: Iterable[Mapping[str, Any]]) -> dict:
    """Union of Connect struct schemas: fields in first-seen order, numeric types widened.

    A field missing from some schemas becomes optional. Integer types widen to the
    widest, int with float/double to double.

    Raises:
        SchemaConversionError: no schema given, or a field has incompatible types.
    """
    merged: dict | None = None
    for s in schemas:
        merged = dict(s) if merged is None else _merge_structs(merged, s, "$")
    if merged is None:
        raise SchemaConversionError("no schema to merge")
    return merged


def _infer_type(value: Any, path: str) -> dict | None:
    if value is None:
        return None
    if isinstance(value, bool):
        return {"type": "boolean", "optional": True}
    if isinstance(value, int):
        return {"type": "int64", "optional": True}
    if isinstance(value, float):
        return {"type": "double", "optional": True}
    if isinstance(value, str):
        return {"type": "string", "optional": True}
    if isinstance(value, Mapping):
        return {**_infer_struct([value], path), "optional": True}
    if isinstance(value, (list, tuple)):
        items: dict | None = None
        for v in value:
            t = _infer_type(v, path + "[]")
            if t is not None:
                items = t if items is None else _merge_types(items, t, path + "[]")
        return {"type": "array", "items": items or {"type": "string", "optional": True}, "optional": True}
    raise SchemaConversionError(f"cannot infer a Connect type for {path} = {value!r}")


def _infer_struct(values: Iterable[Mapping[str, Any]], path: str) -> dict:
    fields: dict[str, dict | None] = {}
    for obj in values:
        for k, v in obj.items():
            t = _infer_type(v, f"{path}.{k}")
            prev = fields.get(k)
            if t is None:
                fields.setdefault(k, None)
            elif prev is None:
                fields[k] = t
            else:
                fields[k] = _merge_types(prev, t, f"{path}.{k}")
    return struct_schema([_field(k, t or {"type": "string", "optional": True}) for k, t in fields.items()])


def infer_connect_schema(payloads: Iterable[Mapping[str, Any]], name: str | None = None) -> dict:
    """Infer a Connect struct schema from sample JSON objects (schemaless records).

    Mirrors what JsonConverter gives schemaless JSON: integers → int64, other
    numbers → double, strings, booleans, objects → struct, lists → array. Fields
    are optional; a field that is null in every sample becomes an optional string.
    Non-object samples are ignored.

    Raises:
        SchemaConversionError: a field holds incompatible types across samples
            (e.g. string and number).
    """
    schema = _infer_struct([p for p in payloads if isinstance(p, Mapping)], "$")
    if name:
        schema["name"] = name
    return schema


# --------------------------------------------------------------------------------------
# Spark expressions
# --------------------------------------------------------------------------------------
def _needs_conversion(dt) -> bool:
    from pyspark.sql import types as T

    if isinstance(dt, (T.TimestampType, T.TimestampNTZType, T.DateType)):
        return True
    if isinstance(dt, T.ArrayType):
        return _needs_conversion(dt.elementType)
    if isinstance(dt, T.MapType):
        return _needs_conversion(dt.valueType)
    if isinstance(dt, T.StructType):
        return any(_needs_conversion(f.dataType) for f in dt.fields)
    return False


def _to_wire(col, dt):
    """Column expression converting a Spark value to its Connect JSON wire form."""
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if not _needs_conversion(dt):
        return col
    if isinstance(dt, (T.TimestampType, T.TimestampNTZType)):
        return F.unix_millis(col.cast(T.TimestampType()))
    if isinstance(dt, T.DateType):
        return F.unix_date(col)
    if isinstance(dt, T.ArrayType):
        return F.transform(col, lambda x: _to_wire(x, dt.elementType))
    if isinstance(dt, T.MapType):
        return F.transform_values(col, lambda k, v: _to_wire(v, dt.valueType))
    struct = F.struct(*[_to_wire(col.getField(f.name), f.dataType).alias(f.name) for f in dt.fields])
    return F.when(col.isNull(), F.lit(None)).otherwise(struct)


def _from_wire(col, s: Mapping[str, Any]):
    """Column expression converting a decoded wire value to its Spark logical type."""
    from pyspark.sql import functions as F

    name = s.get("name")
    if name == TIMESTAMP_LOGICAL:
        return F.timestamp_millis(col)
    if name == DATE_LOGICAL:
        return F.date_from_unix_date(col)
    t = s.get("type")
    if t == "array" and _connect_has_logical(s["items"]):
        return F.transform(col, lambda x: _from_wire(x, s["items"]))
    if t == "map" and _connect_has_logical(s["values"]):
        return F.transform_values(col, lambda k, v: _from_wire(v, s["values"]))
    if t == "struct" and _connect_has_logical(s):
        struct = F.struct(*[_from_wire(col.getField(f["field"]), f).alias(f["field"]) for f in s["fields"]])
        return F.when(col.isNull(), F.lit(None)).otherwise(struct)
    return col


def _connect_has_logical(s: Mapping[str, Any]) -> bool:
    if s.get("name") in (TIMESTAMP_LOGICAL, DATE_LOGICAL):
        return True
    t = s.get("type")
    if t == "array":
        return _connect_has_logical(s["items"])
    if t == "map":
        return _connect_has_logical(s["values"])
    if t == "struct":
        return any(_connect_has_logical(f) for f in s.get("fields", []))
    return False


def envelope_prefix(connect_schema: Mapping[str, Any]) -> str:
    """``{"schema":<schema>,"payload":`` — the constant start of every enveloped value."""
    return '{"schema":' + schema_json(connect_schema) + ',"payload":'


def encode_value_column(
    spark_schema,
    schemas_enable: bool = True,
    connect_schema: Mapping[str, Any] | None = None,
    columns: Sequence[str] | None = None,
    name: str | None = None,
):
    """Spark Column (string) holding each row's JsonConverter value, computed in the JVM.

    Args:
        spark_schema: the DataFrame's ``StructType`` (``df.schema``).
        schemas_enable: wrap in ``{"schema":..., "payload":...}`` when true.
        connect_schema: the Connect schema to embed; default derived from
            ``spark_schema`` (restricted to ``columns``).
        columns: which columns form the value (default: all, in order).
        name: Connect schema name when derived.

    Returns:
        ``pyspark.sql.Column``: ``to_json(struct(...))`` with nulls kept
        (``ignoreNullFields=false``), prefixed/suffixed by the envelope when
        ``schemas_enable``. Timestamps are written as epoch ms, dates as epoch days.

    Raises:
        SchemaConversionError: a column type has no Connect mapping.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    fields = [f for f in spark_schema.fields if columns is None or f.name in set(columns)]
    if columns is not None:
        by_name = {f.name: f for f in fields}
        fields = [by_name[c] for c in columns]
    sub = T.StructType(fields)
    payload = F.to_json(
        F.struct(*[_to_wire(F.col(f"`{f.name}`"), f.dataType).alias(f.name) for f in fields]),
        {"ignoreNullFields": "false"},
    )
    if not schemas_enable:
        return payload
    schema = connect_schema if connect_schema is not None else spark_to_connect_schema(sub, name=name)
    return F.concat(F.lit(envelope_prefix(schema)), payload, F.lit("}"))


def decode_value_columns(value_col, connect_schema: Mapping[str, Any], schemas_enable: bool = True,
                         mode: str = "FAILFAST") -> list:
    """Spark Columns decoding JsonConverter value strings into the schema's fields.

    Args:
        value_col: a string ``Column`` (or column name) of record values.
        connect_schema: Connect struct schema of the payload (from the records'
            own ``schema`` when schemas are enabled, or inferred from samples).
        schemas_enable: values are ``{"schema","payload"}`` envelopes when true.
        mode: ``from_json`` mode; ``FAILFAST`` (default) makes malformed records fail
            the Spark job, like Connect's ``errors.tolerance=none``.

    Returns:
        One Column per field, aliased to the field name, in schema order; Timestamp
        and Date logical fields are converted to Spark timestamp/date. Missing
        fields and JSON nulls decode to null.

    Raises:
        SchemaConversionError: the schema has no Spark mapping.
    """
    from pyspark.sql import functions as F
    from pyspark.sql import types as T

    if isinstance(value_col, str):
        value_col = F.col(value_col)
    wire = connect_to_spark_schema(connect_schema, wire=True)
    if schemas_enable:
        parsed = F.from_json(value_col, T.StructType([T.StructField("payload", wire, True)]),
                             {"mode": mode}).getField("payload")
    else:
        parsed = F.from_json(value_col, wire, {"mode": mode})
    return [_from_wire(parsed.getField(f["field"]), f).alias(f["field"]) for f in connect_schema.get("fields", [])]


# --------------------------------------------------------------------------------------
# Pure Python
# --------------------------------------------------------------------------------------
def _py_to_wire(value: Any, s: Mapping[str, Any] | None) -> Any:
    if value is None:
        return None
    if s is None:
        if isinstance(value, (bytes, bytearray)):
            return base64.b64encode(value).decode("ascii")
        if isinstance(value, Mapping):
            return {k: _py_to_wire(v, None) for k, v in value.items()}
        if isinstance(value, (list, tuple)):
            return [_py_to_wire(v, None) for v in value]
        if isinstance(value, _decimal.Decimal):
            return float(value)
        if isinstance(value, (_dt.date, _dt.datetime)):
            return value.isoformat()
        return value
    name, t = s.get("name"), s.get("type")
    if name == TIMESTAMP_LOGICAL and isinstance(value, _dt.datetime):
        if value.tzinfo is None:
            value = value.replace(tzinfo=_dt.timezone.utc)
        delta = value - _EPOCH
        return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000
    if name == DATE_LOGICAL and isinstance(value, _dt.date):
        return (value - _EPOCH_DATE).days
    if name == DECIMAL_LOGICAL:  # Connect's default decimal.format=BASE64: unscaled big-endian two's complement
        scale = int((s.get("parameters") or {}).get(_DECIMAL_SCALE, 0))
        unscaled = int(_decimal.Decimal(value).scaleb(scale).to_integral_value())
        raw = unscaled.to_bytes(max(1, (unscaled.bit_length() + 8) // 8), "big", signed=True)
        return base64.b64encode(raw).decode("ascii")
    if t == "bytes":
        return base64.b64encode(bytes(value)).decode("ascii")
    if t == "struct":
        return {f["field"]: _py_to_wire(value.get(f["field"]) if isinstance(value, Mapping) else None, f)
                for f in s.get("fields", [])}
    if t == "array":
        return [_py_to_wire(v, s["items"]) for v in value]
    if t == "map":
        pairs = value.items() if isinstance(value, Mapping) else value  # Arrow gives [(k, v), ...]
        if s.get("keys", {}).get("type") != "string":  # JsonConverter: non-string keys as [[k, v], ...]
            return [[_py_to_wire(k, s["keys"]), _py_to_wire(v, s["values"])] for k, v in pairs]
        return {str(k): _py_to_wire(v, s["values"]) for k, v in pairs}
    if t in _INT_TYPES:
        return int(value)
    if t in ("float", "double"):
        return float(value)
    return value


def encode_value(payload: Mapping[str, Any] | None, connect_schema: Mapping[str, Any] | None = None,
                 schemas_enable: bool = True) -> bytes | None:
    """Encode one record value as JsonConverter does (UTF-8 bytes; ``None`` → ``None``, a tombstone).

    Args:
        payload: the value, e.g. a dict for a struct. Bytes → base64; datetimes /
            dates → epoch ms / days when the schema says Timestamp / Date.
        connect_schema: its Connect schema; required when ``schemas_enable`` unless
            it can be inferred (dicts of JSON-able values).
        schemas_enable: write the ``{"schema","payload"}`` envelope.
    """
    if payload is None:
        return None
    if schemas_enable and connect_schema is None:
        connect_schema = infer_connect_schema([payload])
    wire = _py_to_wire(payload, connect_schema)
    body = json.dumps(wire, separators=(",", ":"), ensure_ascii=False, allow_nan=True)
    if schemas_enable:
        body = envelope_prefix(connect_schema) + body + "}"
    return body.encode("utf-8")


def _py_from_wire(value: Any, s: Mapping[str, Any] | None, path: str) -> Any:
    if s is None:
        return value
    if value is None:
        if "default" in s:
            return _py_from_wire(s["default"], {k: v for k, v in s.items() if k != "default"}, path)
        if not s.get("optional", False):
            raise ValueError(f"{path}: null value for a non-optional {s.get('type')} field")
        return None
    name, t = s.get("name"), s.get("type")
    if name == TIMESTAMP_LOGICAL:
        return _EPOCH + _dt.timedelta(milliseconds=int(value))
    if name == DATE_LOGICAL:
        return _EPOCH_DATE + _dt.timedelta(days=int(value))
    if name == DECIMAL_LOGICAL:
        if isinstance(value, str):  # BASE64 form: unscaled two's-complement big-endian bytes
            raw = base64.b64decode(value)
            scale = int((s.get("parameters") or {}).get(_DECIMAL_SCALE, 0))
            return _decimal.Decimal(int.from_bytes(raw, "big", signed=True)).scaleb(-scale)
        return _decimal.Decimal(str(value))
    if t == "bytes":
        return base64.b64decode(value)
    if t == "struct":
        if not isinstance(value, Mapping):
            raise ValueError(f"{path}: expected an object for a struct, got {type(value).__name__}")
        return {f["field"]: _py_from_wire(value.get(f["field"]), f, f"{path}.{f['field']}")
                for f in s.get("fields", [])}
    if t == "array":
        return [_py_from_wire(v, s["items"], path + "[]") for v in value]
    if t == "map":
        if isinstance(value, list):  # non-string keys: array of [key, value] pairs
            return {_py_from_wire(k, s["keys"], path): _py_from_wire(v, s["values"], path) for k, v in value}
        return {k: _py_from_wire(v, s["values"], path + "{}") for k, v in value.items()}
    if t in _INT_TYPES:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"{path}: expected {t}, got {value!r}")
        return value
    if t in ("float", "double"):
        return float(value)
    if t == "boolean" and not isinstance(value, bool):
        raise ValueError(f"{path}: expected boolean, got {value!r}")
    if t == "string" and not isinstance(value, str):
        raise ValueError(f"{path}: expected string, got {value!r}")
    return value


def decode_value(data: bytes | str | None, schemas_enable: bool = True) -> tuple[dict | None, Any]:
    """Decode one JsonConverter value into ``(connect_schema_or_None, payload)``.

    With ``schemas_enable`` the value must be a ``{"schema", "payload"}`` envelope;
    the payload is converted by its schema (bytes from base64, Timestamp → aware
    datetime UTC, Date → date, Decimal → ``decimal.Decimal``; a missing optional
    field → None). ``None`` data (tombstone) gives ``(None, None)``.

    Raises:
        ValueError: malformed JSON, a missing envelope, or a value that does not
            match its schema (including null for a non-optional field).
    """
    if data is None:
        return None, None
    if isinstance(data, (bytes, bytearray, memoryview)):
        data = bytes(data).decode("utf-8")
    obj = json.loads(data)
    if not schemas_enable:
        return None, obj
    if not isinstance(obj, dict) or set(obj) != {"schema", "payload"}:
        raise ValueError('JsonConverter with schemas.enable requires "schema" and "payload" fields and may not '
                         'contain additional fields. If you are trying to deserialize plain JSON data, set '
                         'schemas.enable=false in your converter configuration.')
    schema = obj["schema"]
    if schema is None:
        return None, obj["payload"]
    return schema, _py_from_wire(obj["payload"], schema, "$")


def connect_to_arrow_type(schema: Mapping[str, Any]):
    """Arrow type of one Connect schema (any type, not only structs); see :func:`connect_to_arrow_schema`.

    Raises:
        SchemaConversionError: an unknown type.
    """
    return _connect_to_arrow_type(schema)


def arrow_type_to_connect(arrow_type, nullable: bool = True) -> dict:
    """Connect schema of one Arrow type (``optional`` = ``nullable``); see :func:`arrow_to_connect_schema`.

    Raises:
        SchemaConversionError: the type has no Connect equivalent.
    """
    return _arrow_type_to_connect(arrow_type, nullable)
