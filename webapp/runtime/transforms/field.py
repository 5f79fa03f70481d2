"""Field operations on the key or value struct: InsertField, ReplaceField, MaskField, ValueToKey, ExtractField,
HoistField (Kafka's ``org.apache.kafka.connect.transforms`` classes of those names, with their ``$Key`` /
``$Value`` variants).

Owns how each of these rewrites one struct column and its Connect schema, column-wise
(pyarrow compute); tombstones and null structs pass as Kafka's do. (Kafka's Flatten
is not implemented.)

Must not touch: the record's topic, timestamp or headers beyond reading them
(routers and header ops own those), the chain, Kafka, Spark or Django.
"""
from __future__ import annotations

from dataclasses import replace

from webapp.plugin import ConfigDef, ConfigException, ConfigKey, DataException
from webapp.runtime.converters import TIMESTAMP_LOGICAL, arrow_type_to_connect

from .base import (
    _PKG,
    Transformation,
    _constant,
    _field_schema,
    _java_type,
    _list_cfg,
    _rebuild,
    _require_no_nulls,
    _require_struct,
    _struct_or_empty,
    _variant_classes,
    _with_field,
)
from .record import _make_struct, _null_mask

def _insertion_spec(spec: str | None) -> tuple[str, bool] | None:
    if not spec:
        return None
    if spec.endswith("?"):
        return spec[:-1], True
    if spec.endswith("!"):
        return spec[:-1], False
    return spec, True


class InsertField(Transformation):
    """Insert the topic, partition, offset (sink only), timestamp and/or a static string as fields.

    Keys: ``topic.field``, ``partition.field``, ``offset.field``, ``timestamp.field``,
    ``static.field``, ``static.value`` (a field name suffixed ``!`` is required,
    ``?`` or nothing optional). Tombstones pass unchanged. With a schema the
    timestamp is a Connect Timestamp; schemaless it is epoch ms (int64).
    """

    doc = "Insert field(s) using attributes from the record metadata or a configured static value."
    config_def = ConfigDef(tuple(ConfigKey(k, "STRING", None, importance="MEDIUM") for k in (
        "topic.field", "partition.field", "offset.field", "timestamp.field", "static.field", "static.value")))
    _PURPOSE = "field insertion"

    def configure(self, config):
        self.specs = {k: _insertion_spec(config.get(f"{k}.field")) for k in
                      ("topic", "partition", "offset", "timestamp", "static")}
        self.static_value = config.get("static.value")
        if not any(self.specs.values()):
            raise ConfigException("No field insertion configured", {"topic.field": ["No field insertion configured"]})
        if self.specs["static"] and self.static_value is None:
            msg = f"No value specified for static field: {config.get('static.field')}"
            raise ConfigException(msg, {"static.value": [msg]})

    def apply(self, batch):
        import pyarrow as pa

        arr, schema = self._get(batch)
        _require_struct(arr, schema, self._PURPOSE)
        if self.specs["offset"] and not batch.sink:
            raise DataException(f"Only SinkRecord supported for [{self._PURPOSE}], found: "
                                "org.apache.kafka.connect.source.SourceRecord")
        n = len(arr)
        children = dict(_struct_or_empty(arr))
        new_schema = dict(schema) if schema is not None else None
        if new_schema is not None:
            new_schema["fields"] = [dict(f) for f in schema.get("fields", [])]
        ts = batch.column("timestamp")
        additions = [
            ("topic", batch.column("topic"), {"type": "string"}),
            ("partition", batch.column("partition"), {"type": "int32"}),
            ("offset", batch.column("offset"), {"type": "int64"}),
            ("timestamp", ts.cast(pa.timestamp("ms", tz="UTC")) if schema is not None else ts,
             {"type": "int64", "name": TIMESTAMP_LOGICAL, "version": 1}),
            ("static", _constant(self.static_value, pa.string(), n), {"type": "string"}),
        ]
        for kind, values, fschema in additions:
            spec = self.specs[kind]
            if spec is None:
                continue
            name, optional = spec
            if new_schema is not None:
                if any(f["field"] == name for f in new_schema["fields"]):
                    raise DataException(f"Cannot create field because of field name duplication {name}")
                new_schema["fields"].append({"field": name, **fschema, "optional": optional})
            children[name] = values
        if n == 0 and not children:
            return batch
        out = _make_struct(list(children.items()), _null_mask(arr), n)
        return self._put(batch, out, new_schema)


class ReplaceField(Transformation):
    """Keep (``include``), drop (``exclude``) and rename (``renames=old:new,...``) fields.

    Kafka's former names ``whitelist`` / ``blacklist`` are accepted. Tombstones pass.
    """

    doc = "Filter or rename fields."
    config_def = ConfigDef((ConfigKey("exclude", "LIST", "", importance="MEDIUM"),
                            ConfigKey("include", "LIST", "", importance="MEDIUM"),
                            ConfigKey("renames", "LIST", "", importance="MEDIUM"),
                            ConfigKey("blacklist", "LIST", None, importance="LOW"),
                            ConfigKey("whitelist", "LIST", None, importance="LOW")))
    _PURPOSE = "field replacement"

    def configure(self, config):
        self.exclude = set(_list_cfg(config.get("exclude")) or _list_cfg(config.get("blacklist")))
        self.include = set(_list_cfg(config.get("include")) or _list_cfg(config.get("whitelist")))
        self.renames: dict[str, str] = {}
        for pair in _list_cfg(config.get("renames")):
            parts = pair.split(":")
            if len(parts) != 2 or not parts[0] or not parts[1]:
                msg = f"Invalid rename mapping: {pair}"
                raise ConfigException(msg, {"renames": [f"Invalid value {config.get('renames')} for configuration "
                                                        f"renames: {msg}"]})
            self.renames[parts[0]] = parts[1]

    def _keep(self, name: str) -> bool:
        return name not in self.exclude and (not self.include or name in self.include)

    def apply(self, batch):
        arr, schema = self._get(batch)
        _require_struct(arr, schema, self._PURPOSE)
        children = _struct_or_empty(arr)
        out = [(self.renames.get(n, n), a) for n, a in children.items() if self._keep(n)]
        new_schema = None
        if schema is not None:
            new_schema = dict(schema)
            new_schema["fields"] = [_with_field(self.renames.get(f["field"], f["field"]), f)
                                    for f in schema.get("fields", []) if self._keep(f["field"])]
        if not children:
            return self._put(batch, arr, new_schema)
        return self._put(batch, _rebuild(arr, out), new_schema)


_MASK_NUMERIC = {"int8", "int16", "int32", "int64", "float", "double"}


class MaskField(Transformation):
    """Replace ``fields`` with their type's empty value (0, "", false, epoch, [] , {}) or ``replacement``.

    A replacement must parse as the field's type (numbers) or applies to strings;
    other types cannot take a custom replacement. Null fields and tombstones stay null.
    """

    doc = "Mask specified fields with a valid null value for the field type (i.e. 0, false, empty string, and so on)."
    config_def = ConfigDef((ConfigKey("fields", "LIST", None, required=True, importance="HIGH"),
                            ConfigKey("replacement", "STRING", None, importance="LOW")))
    _PURPOSE = "mask fields"

    def configure(self, config):
        self.fields = _list_cfg(config.get("fields"))
        if not self.fields:
            raise ConfigException("fields must not be empty", {"fields": [
                f"Invalid value {config.get('fields')} for configuration fields: Empty list"]})
        self.replacement = config.get("replacement")
        if self.replacement == "":
            raise ConfigException("replacement must not be empty", {"replacement": [
                "Invalid value  for configuration replacement: String may not be empty"]})

    def _masked(self, child, fschema):
        import pyarrow as pa
        import pyarrow.compute as pc
        import pyarrow.types as pt

        t = child.type
        n = len(child)
        ctype = (fschema or arrow_type_to_connect(t, True)).get("type")
        name = (fschema or {}).get("name")
        if self.replacement is not None:
            if pt.is_string(t):
                value = self.replacement
            elif ctype in _MASK_NUMERIC and not pt.is_timestamp(t) and name is None:
                try:
                    value = float(self.replacement) if ctype in ("float", "double") else int(self.replacement)
                except ValueError:
                    raise DataException(f"Unable to convert {self.replacement} to {ctype}") from None
            elif pt.is_decimal(t):
                import decimal

                value = decimal.Decimal(self.replacement)
            else:
                raise DataException(f"Cannot mask value of type {_java_type(fschema, t)} with custom replacement.")
        elif pt.is_string(t):
            value = ""
        elif pt.is_boolean(t):
            value = False
        elif pt.is_timestamp(t):
            value = 0
        elif pt.is_date(t):
            value = 0
        elif pt.is_decimal(t):
            import decimal

            value = decimal.Decimal(0)
        elif pt.is_integer(t) or pt.is_floating(t):
            value = 0
        elif pt.is_list(t):
            value = []
        elif pt.is_map(t):
            value = []
        elif pt.is_binary(t):
            value = b""
        else:
            raise DataException(f"Cannot mask value of type {_java_type(fschema, t)}")
        masked = pa.array([value] * n, t) if not (pt.is_timestamp(t) or pt.is_date(t)) else \
            pa.array([value] * n, pa.int64() if pt.is_timestamp(t) else pa.int32()).cast(t)
        return pc.if_else(pc.is_null(child), pa.nulls(n, t), masked)

    def apply(self, batch):
        arr, schema = self._get(batch)
        _require_struct(arr, schema, self._PURPOSE)
        children = _struct_or_empty(arr)
        if not children:
            return batch
        out = []
        for name, child in children.items():
            if name in self.fields:
                child = self._masked(child, _field_schema(schema, name) if schema is not None else None)
            out.append((name, child))
        return self._put(batch, _rebuild(arr, out), schema)


class ValueToKey(Transformation):
    """Replace the key with a struct (map if schemaless) of the value's ``fields``.

    Errors: a tombstone or a non-struct value, or a field missing from the value schema.
    """

    type_name = f"{_PKG}.ValueToKey"
    doc = "Replace the record key with a new key formed from a subset of fields in the record value."
    config_def = ConfigDef((ConfigKey("fields", "LIST", None, required=True, importance="HIGH"),))
    _PURPOSE = "copying fields from value to key"

    def configure(self, config):
        self.fields = _list_cfg(config.get("fields"))
        if not self.fields:
            raise ConfigException("fields must not be empty", {"fields": [
                f"Invalid value {config.get('fields')} for configuration fields: Empty list"]})

    def apply(self, batch):
        import pyarrow as pa

        arr, schema = batch.column("value"), batch.value_schema
        _require_struct(arr, schema, self._PURPOSE)
        _require_no_nulls(arr, self._PURPOSE, schema)
        children = _struct_or_empty(arr)
        n = len(arr)
        key_schema = None
        if schema is not None:
            fields = []
            for name in self.fields:
                fs = _field_schema(schema, name)
                if fs is None:
                    raise DataException(f"Field does not exist: {name}")
                fields.append(_with_field(name, fs))
            key_schema = {"type": "struct", "optional": False, "fields": fields}
        out = [(name, children[name] if name in children else pa.nulls(n)) for name in self.fields]
        key = _make_struct(out, None, n)
        out_batch = batch.with_columns(key=key)
        return replace(out_batch, key_schema=key_schema)


class ExtractField(Transformation):
    """Replace the key/value with its ``field`` (null stays null). Unknown field with a schema → error."""

    doc = "Extract the specified field from a Struct when schema present, or a Map in the case of schemaless data."
    config_def = ConfigDef((ConfigKey("field", "STRING", None, required=True, importance="MEDIUM"),))
    _PURPOSE = "field extraction"

    def configure(self, config):
        self.field = config["field"]

    def apply(self, batch):
        import pyarrow as pa

        arr, schema = self._get(batch)
        _require_struct(arr, schema, self._PURPOSE)
        children = _struct_or_empty(arr)
        if schema is not None:
            fs = _field_schema(schema, self.field)
            if fs is None:
                raise DataException(f"Unknown field: {self.field}")
            return self._put(batch, children[self.field], fs)
        return self._put(batch, children.get(self.field, pa.nulls(len(arr))), None)


class HoistField(Transformation):
    """Wrap the key/value in a struct (map if schemaless) with one field, ``field``."""

    doc = "Wrap data using the specified field name in a Struct when schema present, or a Map in the case of " \
          "schemaless data."
    config_def = ConfigDef((ConfigKey("field", "STRING", None, required=True, importance="MEDIUM"),))

    def configure(self, config):
        self.field = config["field"]

    def apply(self, batch):
        arr, schema = self._get(batch)
        new_schema = None
        if schema is not None:
            new_schema = {"type": "struct", "optional": False, "fields": [_with_field(self.field, schema)]}
        return self._put(batch, _make_struct([(self.field, arr)], None, len(arr)), new_schema)


# Key / Value variants ----------------------------------------------------------------------
InsertFieldKey, InsertFieldValue = _variant_classes(InsertField, "InsertField")
ReplaceFieldKey, ReplaceFieldValue = _variant_classes(ReplaceField, "ReplaceField")
MaskFieldKey, MaskFieldValue = _variant_classes(MaskField, "MaskField")
ExtractFieldKey, ExtractFieldValue = _variant_classes(ExtractField, "ExtractField")
HoistFieldKey, HoistFieldValue = _variant_classes(HoistField, "HoistField")
