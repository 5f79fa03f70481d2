"""Cast: fields, or the whole key or value, to another primitive type with Java's conversions (``Cast$Key`` /
``Cast$Value``).

Owns the cast table (int8 … float64, boolean, string) and how each Arrow type
converts to each target as Kafka's ``Cast`` does (narrowing wraps, strings parse,
Timestamp/Date become epoch ms or ISO-8601, bytes base64).

Must not touch: field names or structure (field.py), timestamps' formats as a
conversion of their own (timestamp_converter.py), the chain, Kafka, Spark or Django.
"""
from __future__ import annotations

import base64
import datetime as _dt
from typing import Any, Mapping

from webapp.plugin import ConfigDef, ConfigException, ConfigKey, DataException
from webapp.runtime.converters import TIME_LOGICAL, connect_to_arrow_type

from .base import (
    Transformation,
    _field_schema,
    _list_cfg,
    _rebuild,
    _require_struct,
    _struct_or_empty,
    _variant_classes,
)
from .java_compat import _format_ms, _java_double_str


_CAST_TARGETS = {"int8": "int8", "int16": "int16", "int32": "int32", "int64": "int64", "float32": "float",
                 "float64": "double", "boolean": "boolean", "string": "string"}


def _iso_ms(ms: int, date_only: bool = False) -> str:
    d = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    if date_only:
        return d.strftime("%Y-%m-%d")
    return d.strftime("%Y-%m-%dT%H:%M:%S.") + f"{d.microsecond // 1000:03d}Z"


def _cast_array(arr, src_schema: Mapping[str, Any] | None, target: str):
    """Cast one column to a Cast target type with Java's conversions (see :class:`Cast`)."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.types as pt

    t = arr.type
    ctype = _CAST_TARGETS[target]
    to = connect_to_arrow_type({"type": ctype})
    if pt.is_struct(t) or pt.is_list(t) or pt.is_map(t):
        kind = "STRUCT" if pt.is_struct(t) else ("ARRAY" if pt.is_list(t) else "MAP")
        raise DataException(f"Cast transformation does not support casting to/from {kind}")
    name = (src_schema or {}).get("name")
    if pt.is_timestamp(t) or pt.is_date(t):  # Connect Timestamp / Date: java.util.Date
        ms = pc.cast(pc.cast(arr, pa.timestamp("ms")) if pt.is_date(t) else arr.cast(pa.timestamp("ms", tz="UTC")),
                     pa.int64())
        if ctype == "string":
            return pa.array([None if v is None else _iso_ms(v, pt.is_date(t)) for v in ms.to_pylist()], pa.string())
        if ctype == "boolean":
            return pc.not_equal(ms, 0)
        return pc.cast(ms, to, safe=False)
    if pt.is_binary(t):
        if ctype != "string":
            raise DataException(f"Unexpected type in Cast transformation: BYTES to {target}")
        return pa.array([None if v is None else base64.b64encode(v).decode("ascii") for v in arr.to_pylist()],
                        pa.string())
    if name in (TIME_LOGICAL,) and ctype == "string":
        return pa.array([None if v is None else _format_ms(v, "HH:mm:ss.SSS") for v in arr.to_pylist()], pa.string())
    if pt.is_string(t):
        if ctype == "string":
            return arr
        if ctype == "boolean":
            return pc.equal(pc.utf8_lower(arr), "true")
        try:
            return pc.cast(arr, to)
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as e:
            raise DataException(f"Cast failed: {e}") from None
    if pt.is_boolean(t):
        if ctype == "string":
            return pc.cast(arr, pa.string())
        return pc.cast(pc.cast(arr, pa.int8()), to)
    if pt.is_integer(t) or pt.is_floating(t) or pt.is_decimal(t):
        if ctype == "boolean":
            return pc.not_equal(arr, pc.cast(pa.scalar(0), t) if not pt.is_decimal(t) else pa.scalar(0, t))
        if ctype == "string":
            if pt.is_floating(t):
                return pa.array([None if v is None else _java_double_str(v) for v in arr.to_pylist()], pa.string())
            return pc.cast(arr, pa.string())
        return pc.cast(arr, to, safe=False)
    if pt.is_null(t):
        return pa.nulls(len(arr), to)
    raise DataException(f"Unexpected type in Cast transformation: {t}")


class Cast(Transformation):
    """Cast fields (``spec=a:int32,b:string``) or the whole value (``spec=int64``).

    Targets: int8, int16, int32, int64, float32, float64, boolean, string. Number
    → number narrows as Java does (truncation, wrap-around); string → number
    parses (a bad string is an error); string → boolean is ``"true"``
    (case-insensitive); number → boolean is ``!= 0``; Timestamp/Date → number is
    epoch ms, → string ISO-8601; bytes → string base64; struct/array/map cannot be cast.
    """

    doc = "Cast fields or the entire key or value to a specific type, e.g. to force an integer field to a " \
          "smaller width."
    config_def = ConfigDef((ConfigKey("spec", "LIST", None, required=True, importance="HIGH"),))
    _PURPOSE = "cast types"

    def configure(self, config):
        self.whole: str | None = None
        self.casts: dict[str, str] = {}
        specs = _list_cfg(config.get("spec"))
        if not specs:
            raise ConfigException("Must specify at least one field to cast.", {"spec": [
                "Invalid value for configuration spec: Must specify at least one field to cast."]})
        for spec in specs:
            parts = spec.split(":")
            bad = None
            if len(parts) == 1:
                if len(specs) > 1:
                    bad = "Cast transformations that specify a type to cast the entire value to may only " \
                          "specify a single cast in their spec"
                elif parts[0].strip() not in _CAST_TARGETS:
                    bad = f"Invalid type found in casting spec: {parts[0].strip()}"
                else:
                    self.whole = parts[0].strip()
            elif len(parts) == 2 and parts[0].strip():
                if parts[1].strip() not in _CAST_TARGETS:
                    bad = f"Invalid type found in casting spec: {parts[1].strip()}"
                else:
                    self.casts[parts[0].strip()] = parts[1].strip()
            else:
                bad = f"Invalid cast spec: {spec}"
            if bad:
                raise ConfigException(bad, {"spec": [f"Invalid value {config.get('spec')} for configuration spec: "
                                                     f"{bad}"]})

    def apply(self, batch):
        arr, schema = self._get(batch)
        if self.whole is not None:
            out = _cast_array(arr, schema, self.whole)
            new_schema = None
            if schema is not None:
                new_schema = {"type": _CAST_TARGETS[self.whole], "optional": bool(schema.get("optional", False))}
            return self._put(batch, out, new_schema)
        _require_struct(arr, schema, self._PURPOSE)
        children = _struct_or_empty(arr)
        out = []
        for name, child in children.items():
            if name in self.casts:
                fs = _field_schema(schema, name) if schema is not None else None
                child = _cast_array(child, fs, self.casts[name])
            out.append((name, child))
        new_schema = None
        if schema is not None:
            new_schema = dict(schema)
            new_schema["fields"] = [
                {"field": f["field"], "type": _CAST_TARGETS[self.casts[f["field"]]],
                 "optional": bool(f.get("optional", False))} if f["field"] in self.casts else dict(f)
                for f in schema.get("fields", [])]
        if not children:
            return self._put(batch, arr, new_schema)
        return self._put(batch, _rebuild(arr, out), new_schema)


CastKey, CastValue = _variant_classes(Cast, "Cast")
