"""TimestampConverter: a timestamp field, or the whole key or value, between string, unix, Date, Time and
Timestamp (``TimestampConverter$Key`` / ``$Value``).

Owns the input-kind detection (from the Connect schema or the Arrow type), the
conversion through epoch milliseconds, ``unix.precision`` and ``format``
(``SimpleDateFormat``, UTC, via :mod:`.java_compat`).

Must not touch: the record's topic (routers.py formats record times into topic
names), other fields, the chain, Kafka, Spark or Django.
"""
from __future__ import annotations

from webapp.plugin import ConfigDef, ConfigException, ConfigKey, DataException
from webapp.runtime.converters import DATE_LOGICAL, TIME_LOGICAL, TIMESTAMP_LOGICAL

from .base import (
    Transformation,
    _field_schema,
    _rebuild,
    _require_struct,
    _struct_or_empty,
    _variant_classes,
    _with_field,
)
from .java_compat import _format_ms_column, _parse_ms, _sdf_tokens


_TS_TYPES = ("string", "unix", "Date", "Time", "Timestamp")
_PRECISIONS = {"seconds": 1000, "milliseconds": 1, "microseconds": 1000, "nanoseconds": 1_000_000}


class TimestampConverter(Transformation):
    """Convert a timestamp ``field`` (or the whole value when ``field`` is empty) to ``target.type``.

    ``target.type``: string, unix, Date, Time or Timestamp. ``format`` (a Java
    ``SimpleDateFormat`` pattern, UTC) is required to or from strings.
    ``unix.precision`` (seconds, milliseconds (default), microseconds,
    nanoseconds) applies to unix numbers both ways. The input type comes from
    the schema (Timestamp/Date/Time logical, string, int64 = unix) or, schemaless,
    from the Arrow type. Null stays null.
    """

    doc = "Convert timestamps between different formats such as Unix epoch, strings, and Connect Date/Timestamp " \
          "types."
    config_def = ConfigDef((ConfigKey("field", "STRING", "", importance="HIGH"),
                            ConfigKey("target.type", "STRING", None, required=True, importance="HIGH",
                                      allowed=_TS_TYPES),
                            ConfigKey("format", "STRING", "", importance="MEDIUM"),
                            ConfigKey("unix.precision", "STRING", "milliseconds", importance="LOW",
                                      allowed=tuple(_PRECISIONS))))
    _PURPOSE = "converting timestamp formats"

    def configure(self, config):
        self.field = config.get("field") or ""
        self.target = config["target.type"]
        self.format = config.get("format") or ""
        self.precision = config.get("unix.precision") or "milliseconds"
        if self.target == "string" and not self.format:
            msg = "TimestampConverter requires format option to be specified when using string timestamps"
            raise ConfigException(msg, {"format": [msg]})
        if self.format:
            try:
                _sdf_tokens(self.format)
            except ValueError as e:
                msg = f"TimestampConverter requires a SimpleDateFormat-compatible pattern for string timestamps: {e}"
                raise ConfigException(msg, {"format": [msg]}) from None

    def _input_kind(self, arr, schema) -> str:
        import pyarrow.types as pt

        if schema is not None:
            name, t = schema.get("name"), schema.get("type")
            if name == TIMESTAMP_LOGICAL:
                return "Timestamp"
            if name == DATE_LOGICAL:
                return "Date"
            if name == TIME_LOGICAL:
                return "Time"
            if t == "string":
                return "string"
            if t == "int64":
                return "unix"
            raise DataException(f"Schema {schema} does not correspond to a known timestamp type format")
        t = arr.type
        if pt.is_timestamp(t):
            return "Timestamp"
        if pt.is_date(t):
            return "Date"
        if pt.is_string(t):
            return "string"
        if pt.is_integer(t):
            return "unix"
        if pt.is_null(t):
            return "null"
        raise DataException(f"TimestampConverter does not support {t} objects as timestamps")

    def _to_ms(self, arr, kind: str):
        import pyarrow as pa
        import pyarrow.compute as pc

        if kind == "Timestamp":
            return pc.cast(arr.cast(pa.timestamp("ms", tz="UTC")), pa.int64())
        if kind == "Date":
            return pc.cast(pc.cast(arr, pa.timestamp("ms")), pa.int64())
        if kind == "Time":
            return pc.cast(arr, pa.int64())
        if kind == "unix":
            a = pc.cast(arr, pa.int64())
            if self.precision == "seconds":
                return pc.multiply(a, 1000)
            if self.precision == "milliseconds":
                return a
            return pc.divide(a, _PRECISIONS[self.precision])  # integer division toward zero, as TimeUnit does
        if kind == "null":
            return pa.nulls(len(arr), pa.int64())
        if not self.format:
            raise DataException("TimestampConverter requires format option to be specified when using string "
                                "timestamps")
        out = []
        for v in arr.to_pylist():
            if v is None:
                out.append(None)
                continue
            try:
                out.append(_parse_ms(v, self.format))
            except ValueError:
                raise DataException(f"Could not parse timestamp: value ({v}) does not match pattern "
                                    f"({self.format})") from None
        return pa.array(out, pa.int64())

    def _from_ms(self, ms, optional: bool):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        opt = {"optional": optional}
        if self.target == "Timestamp":
            return ms.cast(pa.timestamp("ms", tz="UTC")), {"type": "int64", "name": TIMESTAMP_LOGICAL,
                                                           "version": 1, **opt}
        if self.target == "unix":
            if self.precision == "seconds":
                out = pc.divide(ms, 1000)
            elif self.precision == "milliseconds":
                out = ms
            else:
                out = pc.multiply(ms, _PRECISIONS[self.precision])
            return out, {"type": "int64", **opt}
        if self.target in ("Date", "Time"):
            values = ms.to_numpy(zero_copy_only=False)
            valid = ~np.asarray(ms.is_null().to_numpy(zero_copy_only=False), dtype=bool)
            filled = np.where(valid, np.nan_to_num(values.astype("float64")), 0).astype("int64")
            if self.target == "Date":
                days = np.floor_divide(filled, 86_400_000).astype("int32")
                return pa.array(days, pa.int32(), mask=~valid).cast(pa.date32()), \
                    {"type": "int32", "name": DATE_LOGICAL, "version": 1, **opt}
            tod = np.mod(filled, 86_400_000).astype("int32")
            return pa.array(tod, pa.int32(), mask=~valid), {"type": "int32", "name": TIME_LOGICAL, "version": 1,
                                                            **opt}
        return _format_ms_column(ms, self.format), {"type": "string", **opt}

    def _convert(self, arr, schema):
        kind = self._input_kind(arr, schema)
        optional = bool((schema or {}).get("optional", True))
        out, out_schema = self._from_ms(self._to_ms(arr, kind), optional)
        return out, (out_schema if schema is not None else None)

    def apply(self, batch):
        arr, schema = self._get(batch)
        if not self.field:
            out, out_schema = self._convert(arr, schema)
            return self._put(batch, out, out_schema)
        _require_struct(arr, schema, self._PURPOSE)
        children = _struct_or_empty(arr)
        if not children:
            return batch
        new_fields = None
        out = []
        for name, child in children.items():
            if name == self.field:
                fs = _field_schema(schema, name) if schema is not None else None
                child, fs_out = self._convert(child, fs)
                if schema is not None:
                    new_fields = [_with_field(name, fs_out) if f["field"] == name else dict(f)
                                  for f in schema.get("fields", [])]
            out.append((name, child))
        if schema is not None and new_fields is None:
            raise DataException(f"Unknown field: {self.field}")
        new_schema = None if schema is None else {**schema, "fields": new_fields}
        return self._put(batch, _rebuild(arr, out), new_schema)


TimestampConverterKey, TimestampConverterValue = _variant_classes(TimestampConverter, "TimestampConverter")
