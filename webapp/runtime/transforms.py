"""Single message transforms (SMTs) and predicates, applied to Arrow record batches.

Owns Kafka Connect's transformation chain as RaftConnect runs it: the record
model (:class:`RecordBatch`, one ``pyarrow.Table`` of records that share a key
and a value schema), the transformations and predicates of
``org.apache.kafka.connect.transforms`` with their class names and config keys,
parsing and validating ``transforms=…`` / ``predicates=…`` connector configs, and
the plugin list that ``GET /connector-plugins?connectorsOnly=false`` shows.

Where it runs: inside the Spark job of a task, in a ``mapInArrow`` function on
the Python workers (see ``docs/ARCHITECTURE.md``). Every transformation works on
whole columns (pyarrow compute): a batch of 10,000 records costs a few Arrow
kernel calls, not 10,000 Python calls. Only what is per record by nature runs
per value in Python: parsing or formatting date strings with a
``SimpleDateFormat`` pattern, Java-style float-to-string, and isolating the bad
records of a batch that failed (see :meth:`TransformationChain.apply_tolerant`).

Record model (the columns of :attr:`RecordBatch.table`):

========== ===================================== =====================================
column     Arrow type                            meaning
========== ===================================== =====================================
key        any (struct for struct keys)          record key (null → no key)
value      any (struct for struct values)        record value (null → tombstone)
topic      string                                topic (source: target; sink: origin)
partition  int32                                 Kafka partition (null if not chosen)
offset     int64                                 Kafka offset (sink records only)
timestamp  int64                                 epoch milliseconds (null if none)
headers    list<struct<key: string, value: binary>>  record headers, in order
========== ===================================== =====================================

``key_schema`` / ``value_schema`` are Connect schemas (JsonConverter's JSON
form, see :mod:`webapp.runtime.converters`) or ``None`` for schemaless data, in
which case maps are Arrow structs with inferred types. Logical types in Arrow:
Timestamp → ``timestamp[ms, UTC]``, Date → ``date32``, Time → ``int32`` (ms of
day), Decimal → ``decimal128``. Other columns of the table are carried along
untouched (tasks use them for raw bytes and bookkeeping).

Semantics follow Apache Kafka's ``connect/transforms`` sources (3.x). Where a
batch-wide model differs from record-at-a-time: records of one batch share one
schema, so a predicate that transforms only some records gives the batch the
union of both schemas (fields missing on one side become optional/null).

This module imports pyarrow lazily and nothing from Django or Spark; it must not
touch Kafka or the metadata store.
"""
from __future__ import annotations

import base64
import datetime as _dt
import functools
import re
from dataclasses import dataclass, replace
from typing import Any, ClassVar, Mapping, Sequence

from webapp.connectors.api import ConfigDef, ConfigKey, ConnectException

from .converters import (
    DATE_LOGICAL,
    TIME_LOGICAL,
    TIMESTAMP_LOGICAL,
    SchemaConversionError,
    arrow_type_to_connect,
    connect_to_arrow_type,
    merge_connect_schemas,
)

__all__ = [
    "DataException",
    "ConfigException",
    "ConnectRecord",
    "RecordBatch",
    "Transformation",
    "Predicate",
    "TransformationChain",
    "TransformError",
    "TRANSFORMATIONS",
    "PREDICATES",
    "transform_plugins",
    "resolve_transformation",
    "resolve_predicate",
    "validate_transforms",
    "RECORD_COLUMNS",
    "headers_type",
]

VERSION = "0.1.0"
_PKG = "org.apache.kafka.connect.transforms"
RECORD_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")
_ROW = "__smt_row"


class DataException(ConnectException):
    """A record does not fit a transformation (Connect's ``DataException``)."""

    java_class = "org.apache.kafka.connect.errors.DataException"


class ConfigException(ConnectException):
    """A transformation or predicate config is invalid; ``errors`` maps config keys to messages."""

    java_class = "org.apache.kafka.common.config.ConfigException"

    def __init__(self, message: str, errors: Mapping[str, list[str]] | None = None):
        super().__init__(message)
        self.errors = dict(errors or {})


def headers_type():
    """Arrow type of the ``headers`` column: ``list<struct<key: string, value: binary>>``."""
    import pyarrow as pa

    return pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


# --------------------------------------------------------------------------------------
# Record model
# --------------------------------------------------------------------------------------
@dataclass
class ConnectRecord:
    """One record, for building and reading batches in tests and small uses.

    ``value``/``key`` are Python values (dict for struct/map, datetime for
    Timestamp, ...); ``timestamp`` is epoch ms; ``headers`` a sequence of
    ``(key, bytes | None)``.
    """

    topic: str
    value: Any = None
    value_schema: Mapping[str, Any] | None = None
    key: Any = None
    key_schema: Mapping[str, Any] | None = None
    partition: int | None = None
    offset: int | None = None
    timestamp: int | None = None
    headers: Sequence[tuple[str, bytes | None]] = ()


def _relax(t):
    """The Arrow type with every nested field nullable (optionality lives in the Connect schema)."""
    import pyarrow as pa
    import pyarrow.types as pt

    if pt.is_struct(t):
        return pa.struct([pa.field(f.name, _relax(f.type)) for f in t])
    if pt.is_list(t):
        return pa.list_(_relax(t.value_type))
    if pt.is_map(t):
        return pa.map_(t.key_type, _relax(t.item_type))
    return t


def _arrow_type(schema: Mapping[str, Any] | None, values: Sequence[Any] = ()):
    import pyarrow as pa

    if schema is not None:
        return _relax(connect_to_arrow_type(schema))
    arr = pa.array(list(values)) if values else pa.array([], pa.null())
    return _relax(arr.type)


@dataclass
class RecordBatch:
    """Records sharing one key schema and one value schema, as one Arrow table (see module docstring).

    Attributes:
        table: ``pyarrow.Table`` with at least :data:`RECORD_COLUMNS`.
        key_schema, value_schema: Connect schemas, or None for schemaless.
        sink: True for records read from Kafka (sink side; ``offset`` is meaningful).
    """

    table: Any
    key_schema: Mapping[str, Any] | None = None
    value_schema: Mapping[str, Any] | None = None
    sink: bool = False

    @property
    def num_rows(self) -> int:
        return self.table.num_rows

    def column(self, name: str):
        """One column as a single ``pyarrow.Array``."""
        col = self.table.column(name)
        return col.combine_chunks() if col.num_chunks != 1 else col.chunk(0)

    def with_columns(self, **columns) -> "RecordBatch":
        """A copy with the given columns replaced (``key=array`` ...); schemas unchanged."""
        import pyarrow as pa

        table = self.table
        for name, arr in columns.items():
            i = table.schema.get_field_index(name)
            if i < 0:
                table = table.append_column(name, arr)
            else:
                table = table.set_column(i, pa.field(name, arr.type), arr)
        return replace(self, table=table)

    def filter(self, mask) -> "RecordBatch":
        """The records where ``mask`` (boolean array, nulls drop) is true."""
        return replace(self, table=self.table.filter(mask, null_selection_behavior="drop"))

    def slice(self, offset: int, length: int) -> "RecordBatch":
        return replace(self, table=self.table.slice(offset, length))

    @classmethod
    def empty(cls, key_type=None, value_type=None, key_schema=None, value_schema=None, sink=False,
              extra=None) -> "RecordBatch":
        """A batch with no rows and the given Arrow types (default: from the schemas, else null)."""
        import pyarrow as pa

        kt = key_type if key_type is not None else _arrow_type(key_schema)
        vt = value_type if value_type is not None else _arrow_type(value_schema)
        fields = [pa.field("key", kt), pa.field("value", vt), pa.field("topic", pa.string()),
                  pa.field("partition", pa.int32()), pa.field("offset", pa.int64()),
                  pa.field("timestamp", pa.int64()), pa.field("headers", headers_type())]
        fields += list(extra or [])
        return cls(pa.schema(fields).empty_table(), key_schema, value_schema, sink)

    @classmethod
    def from_records(cls, records: Sequence[ConnectRecord], sink: bool = False) -> "RecordBatch":
        """Build a batch; schemas are taken from the first record (all must share them)."""
        import pyarrow as pa

        first = records[0] if records else ConnectRecord("")
        ks, vs = first.key_schema, first.value_schema
        kt = _arrow_type(ks, [r.key for r in records])
        vt = _arrow_type(vs, [r.value for r in records])
        table = pa.table({
            "key": pa.array([r.key for r in records], kt),
            "value": pa.array([r.value for r in records], vt),
            "topic": pa.array([r.topic for r in records], pa.string()),
            "partition": pa.array([r.partition for r in records], pa.int32()),
            "offset": pa.array([r.offset for r in records], pa.int64()),
            "timestamp": pa.array([r.timestamp for r in records], pa.int64()),
            "headers": pa.array([[{"key": k, "value": v} for k, v in r.headers] for r in records],
                                headers_type()),
        })
        return cls(table, ks, vs, sink)

    def to_records(self) -> list[ConnectRecord]:
        """The records as :class:`ConnectRecord` (struct → dict, Timestamp → aware datetime)."""
        out = []
        for row in self.table.select(list(RECORD_COLUMNS)).to_pylist():
            out.append(ConnectRecord(row["topic"], row["value"], self.value_schema, row["key"], self.key_schema,
                                     row["partition"], row["offset"], row["timestamp"],
                                     [(h["key"], h["value"]) for h in row["headers"] or []]))
        return out


# --------------------------------------------------------------------------------------
# Small helpers
# --------------------------------------------------------------------------------------
_JAVA_TYPES = {"int8": "java.lang.Byte", "int16": "java.lang.Short", "int32": "java.lang.Integer",
               "int64": "java.lang.Long", "float": "java.lang.Float", "double": "java.lang.Double",
               "boolean": "java.lang.Boolean", "string": "java.lang.String", "bytes": "[B",
               "array": "java.util.ArrayList", "map": "java.util.HashMap",
               "struct": "org.apache.kafka.connect.data.Struct"}


def _java_type(schema: Mapping[str, Any] | None, arrow_type) -> str:
    if schema is not None:
        return _JAVA_TYPES.get(schema.get("type"), str(schema.get("type")))
    s = arrow_type_to_connect(arrow_type, True)
    return _JAVA_TYPES.get(s.get("type"), str(arrow_type)) if s.get("type") != "struct" else "java.util.HashMap"


def _is_struct_type(t) -> bool:
    import pyarrow.types as pt

    return pt.is_struct(t)


def _bool_cfg(raw: Any) -> bool:
    return str(raw).strip().lower() == "true"


def _list_cfg(raw: Any) -> list[str]:
    if raw is None:
        return []
    return [v.strip() for v in str(raw).split(",") if v.strip()]


def _struct_children(arr) -> dict[str, Any]:
    """Field name → child array of a StructArray (slice offsets and parent nulls applied)."""
    return {arr.type.field(i).name: child for i, child in enumerate(arr.flatten())}


def _make_struct(children: Sequence[tuple[str, Any]], null_mask, length: int):
    """A StructArray from (name, array) pairs; ``null_mask`` True where the struct is null."""
    import pyarrow as pa

    if not children:
        return pa.array([{}] * length, pa.struct([]))
    return pa.StructArray.from_arrays([a for _, a in children], fields=[pa.field(n, a.type) for n, a in children],
                                      mask=null_mask)


def _null_mask(arr):
    import pyarrow.compute as pc

    return pc.is_null(arr)


def _field_schema(schema: Mapping[str, Any], name: str) -> dict | None:
    for f in schema.get("fields", []):
        if f["field"] == name:
            return {k: v for k, v in f.items() if k != "field"}
    return None


def _with_field(name: str, schema: Mapping[str, Any]) -> dict:
    return {"field": name, **{k: v for k, v in schema.items() if k != "field"}}


def _constant(value, type_, length: int):
    import pyarrow as pa

    return pa.array([value] * length, type_) if length else pa.array([], type_)


# --------------------------------------------------------------------------------------
# Java compatibility: regex replacements and SimpleDateFormat patterns
# --------------------------------------------------------------------------------------
def _java_replacement(repl: str) -> str:
    """Java ``Matcher.replaceFirst`` replacement → Python ``re`` template (``$1``, ``${g}``, ``\\$``)."""
    out, i = [], 0
    while i < len(repl):
        c = repl[i]
        if c == "\\" and i + 1 < len(repl):
            out.append(repl[i + 1].replace("\\", "\\\\"))
            i += 2
        elif c == "$" and i + 1 < len(repl) and repl[i + 1] == "{":
            j = repl.index("}", i)
            out.append(f"\\g<{repl[i + 2:j]}>")
            i = j + 1
        elif c == "$":
            j = i + 1
            while j < len(repl) and repl[j].isdigit():
                j += 1
            if j == i + 1:
                raise ValueError(f"Illegal group reference in replacement {repl!r}")
            out.append(f"\\g<{repl[i + 1:j]}>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out)


def _sdf_letter(c: str, width: int) -> str | None:
    """strftime directive for a run of one SimpleDateFormat letter (None: unsupported)."""
    if c == "y":
        return "%y" if width == 2 else "%Y"
    if c == "M":
        return "%m" if width <= 2 else ("%b" if width == 3 else "%B")
    if c == "E":
        return "%a" if width <= 3 else "%A"
    return {"d": "%d", "H": "%H", "h": "%I", "m": "%M", "s": "%S", "a": "%p", "D": "%j", "Z": "%z",
            "z": "%Z"}.get(c)


@functools.lru_cache(maxsize=64)
def _sdf_tokens(pattern: str) -> tuple[tuple[str, str], ...]:
    """Split a ``SimpleDateFormat`` pattern into ("strf", text) and ("ms", width) tokens.

    Supports y, M, d, H, h, m, s, S (milliseconds), a, E, D, Z, X (ISO zone), z and
    quoted literals (``''`` is a quote). Raises ValueError for other pattern letters.
    """
    tokens: list[tuple[str, str]] = []
    i = 0
    while i < len(pattern):
        c = pattern[i]
        if c == "'":
            j = pattern.find("'", i + 1)
            if j < 0:
                raise ValueError(f"Unterminated quote in date format {pattern!r}")
            lit = "'" if j == i + 1 else pattern[i + 1:j]
            tokens.append(("strf", lit.replace("%", "%%")))
            i = j + 1
        elif c.isalpha():
            j = i
            while j < len(pattern) and pattern[j] == c:
                j += 1
            if c == "S":
                tokens.append(("ms", str(j - i)))
            elif c == "X":  # ISO zone: "Z" for UTC, which is what we format in
                tokens.append(("X", ""))
            else:
                directive = _sdf_letter(c, j - i)
                if directive is None:
                    raise ValueError(f"Unsupported pattern letter {c!r} in date format {pattern!r}")
                tokens.append(("strf", directive))
            i = j
        else:
            tokens.append(("strf", c.replace("%", "%%")))
            i += 1
    return tuple(tokens)


def _format_ms(ms: int, pattern: str) -> str:
    """Format epoch ms in UTC with a SimpleDateFormat pattern."""
    d = _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc) + _dt.timedelta(milliseconds=ms)
    out = []
    for kind, text in _sdf_tokens(pattern):
        if kind == "ms":
            width = int(text)
            out.append(str(d.microsecond // 1000).zfill(width) if width >= 3 else str(d.microsecond // 1000))
        elif kind == "X":
            out.append("Z")
        else:
            out.append(d.strftime(text))
    return "".join(out)


def _format_ms_column(ms, pattern: str):
    """Format an int64 array of epoch ms (UTC) with a SimpleDateFormat pattern → string array (nulls kept).

    Columnar (Arrow ``strftime``) unless the pattern shows milliseconds or a zone,
    which are formatted per value.
    """
    import pyarrow as pa
    import pyarrow.compute as pc

    tokens = _sdf_tokens(pattern)
    if any(kind != "strf" or text in ("%z", "%Z") for kind, text in tokens):
        return pa.array([None if v is None else _format_ms(v, pattern) for v in ms.to_pylist()], pa.string())
    seconds = pc.cast(pc.cast(ms, pa.timestamp("ms", tz="UTC")), pa.timestamp("s", tz="UTC"), safe=False)
    return pc.strftime(seconds, format="".join(text for _, text in tokens), locale="C")


def _parse_ms(text: str, pattern: str) -> int:
    """Parse a string with a SimpleDateFormat pattern (UTC unless the pattern has a zone) → epoch ms."""
    fmt = "".join("%f" if kind == "ms" else ("%z" if kind == "X" else t) for kind, t in _sdf_tokens(pattern))
    d = _dt.datetime.strptime(text, fmt)
    if d.tzinfo is None:
        d = d.replace(tzinfo=_dt.timezone.utc)
    delta = d - _dt.datetime(1970, 1, 1, tzinfo=_dt.timezone.utc)
    return delta.days * 86_400_000 + delta.seconds * 1000 + delta.microseconds // 1000


def _java_double_str(x: float) -> str:
    """``Double.toString``: shortest digits; scientific (``1.0E7``) outside [1e-3, 1e7)."""
    import decimal
    import math

    if math.isnan(x):
        return "NaN"
    if math.isinf(x):
        return "Infinity" if x > 0 else "-Infinity"
    if x == 0:
        return "-0.0" if math.copysign(1, x) < 0 else "0.0"
    if 1e-3 <= abs(x) < 1e7:
        r = repr(x)
        return r if "." in r else r + ".0"
    sign, digits, exp = decimal.Decimal(repr(x)).as_tuple()
    text = "".join(map(str, digits)).rstrip("0") or "0"
    exponent = len(digits) - 1 + exp
    return f"{'-' if sign else ''}{text[0]}.{text[1:] or '0'}E{exponent}"


# --------------------------------------------------------------------------------------
# Base classes
# --------------------------------------------------------------------------------------
class _Configurable:
    """Shared config handling: ``config_def`` checks, then :meth:`configure` for semantic checks."""

    type_name: ClassVar[str] = ""
    aliases: ClassVar[tuple[str, ...]] = ()
    config_def: ClassVar[ConfigDef] = ConfigDef()
    doc: ClassVar[str] = ""

    def __init__(self, config: Mapping[str, str] | None = None):
        config = {k: v for k, v in (config or {}).items() if v is not None}
        errors = {k: v for k, v in self.config_def.validate(config).items() if v}
        if errors:
            raise ConfigException("; ".join(m for msgs in errors.values() for m in msgs), errors)
        self.config = {k.name: config.get(k.name, k.default) for k in self.config_def.keys}
        self.config.update({k: v for k, v in config.items() if k not in self.config})
        self.configure(self.config)

    def configure(self, config: Mapping[str, Any]) -> None:
        """Check and keep the config. Raises :class:`ConfigException`."""

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.config!r})"


class Transformation(_Configurable):
    """One SMT. Subclasses set ``type_name`` (Kafka's class name), ``config_def`` and :meth:`apply`.

    ``apply`` takes and returns a :class:`RecordBatch`; it must keep columns it does
    not own and the row order; it may drop rows (Filter). Errors: raise
    :class:`DataException` (or any exception) for records that do not fit.
    """

    side: ClassVar[str] = "value"  # "key" or "value": the part a $Key / $Value variant operates on
    reads_key: ClassVar[bool] = False

    def apply(self, batch: RecordBatch) -> RecordBatch:  # pragma: no cover - abstract
        raise NotImplementedError

    # -- the operating part ($Key / $Value)
    def _get(self, batch: RecordBatch):
        return batch.column(self.side), (batch.key_schema if self.side == "key" else batch.value_schema)

    def _put(self, batch: RecordBatch, arr, schema) -> RecordBatch:
        out = batch.with_columns(**{self.side: arr})
        return replace(out, **{f"{self.side}_schema": schema})


class Predicate(_Configurable):
    """A predicate: :meth:`test` gives a boolean mask over the batch's records."""

    def test(self, batch: RecordBatch):  # pragma: no cover - abstract
        raise NotImplementedError


def _require_struct(arr, schema, purpose: str) -> None:
    """Connect's ``requireStruct`` / ``requireMap`` for a whole column (nulls are checked by callers)."""
    if schema is not None:
        if schema.get("type") != "struct":
            raise DataException(f"Only Struct objects supported for [{purpose}], found: "
                                f"{_java_type(schema, arr.type)}")
    elif not _is_struct_type(arr.type):
        import pyarrow.types as pt

        if pt.is_null(arr.type):
            return
        raise DataException(f"Only Map objects supported in absence of schema for [{purpose}], found: "
                            f"{_java_type(None, arr.type)}")


def _require_no_nulls(arr, purpose: str, schema) -> None:
    if arr.null_count:
        kind = "Struct" if schema is not None else "Map"
        raise DataException(f"Only {kind} objects supported for [{purpose}], found: null")


def _struct_or_empty(arr):
    """Children of a struct column; ``{}`` for an all-null (null-typed) schemaless column."""
    import pyarrow.types as pt

    return {} if pt.is_null(arr.type) else _struct_children(arr)


def _rebuild(arr, children: Sequence[tuple[str, Any]]):
    return _make_struct(children, _null_mask(arr), len(arr))


def _variants(base: str) -> tuple[str, str]:
    return f"{_PKG}.{base}$Key", f"{_PKG}.{base}$Value"


# --------------------------------------------------------------------------------------
# Transformations
# --------------------------------------------------------------------------------------
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


class RegexRouter(Transformation):
    """Rename the topic when the whole topic matches ``regex``: ``replacement`` may use ``$1``, ``${name}``."""

    type_name = f"{_PKG}.RegexRouter"
    doc = "Update the record topic using the configured regular expression and replacement string."
    config_def = ConfigDef((ConfigKey("regex", "STRING", None, required=True, importance="HIGH"),
                            ConfigKey("replacement", "STRING", None, required=True, importance="HIGH")))

    def configure(self, config):
        try:
            self.regex = re.compile(config["regex"])
        except re.error as e:
            raise ConfigException(f"Invalid regex {config['regex']}: {e}", {"regex": [
                f"Invalid value {config['regex']} for configuration regex: {e}"]}) from None
        try:
            self.template = _java_replacement(config["replacement"])
        except ValueError as e:
            raise ConfigException(str(e), {"replacement": [str(e)]}) from None

    def route(self, topic: str) -> str:
        """The new name of ``topic`` (unchanged unless the regex matches it entirely)."""
        m = self.regex.fullmatch(topic)
        return m.expand(self.template) if m else topic

    def apply(self, batch):
        import pyarrow as pa
        import pyarrow.compute as pc

        topics = batch.column("topic")
        uniq = pc.unique(topics)
        mapping = {t: self.route(t) for t in uniq.to_pylist() if t is not None}
        if all(k == v for k, v in mapping.items()):
            return batch
        keys = pa.array(list(mapping), pa.string())
        idx = pc.index_in(topics, value_set=keys)
        return batch.with_columns(topic=pc.take(pa.array(list(mapping.values()), pa.string()), idx))


class TimestampRouter(Transformation):
    """Topic = ``topic.format`` with ``${topic}`` and ``${timestamp}`` (record time in ``timestamp.format``, UTC).

    Defaults: ``${topic}-${timestamp}`` and ``yyyyMMdd``. A record without a timestamp is an error.
    """

    type_name = f"{_PKG}.TimestampRouter"
    doc = "Update the record's topic field as a function of the original topic value and the record timestamp."
    config_def = ConfigDef((ConfigKey("topic.format", "STRING", "${topic}-${timestamp}", importance="HIGH"),
                            ConfigKey("timestamp.format", "STRING", "yyyyMMdd", importance="HIGH")))

    def configure(self, config):
        self.topic_format = config["topic.format"]
        self.ts_format = config["timestamp.format"]
        try:
            _sdf_tokens(self.ts_format)
        except ValueError as e:
            raise ConfigException(str(e), {"timestamp.format": [str(e)]}) from None

    def apply(self, batch):
        import pyarrow as pa
        import pyarrow.compute as pc

        if batch.num_rows == 0:
            return batch
        ts = batch.column("timestamp")
        if ts.null_count:
            raise DataException("Timestamp missing on record")
        stamp = _format_ms_column(ts, self.ts_format)
        pieces = []
        parts = re.split(r"(\$\{topic\}|\$\{timestamp\})", self.topic_format)
        for part in parts:
            if part == "${topic}":
                pieces.append(batch.column("topic"))
            elif part == "${timestamp}":
                pieces.append(stamp)
            elif part:
                pieces.append(pa.scalar(part))
        if not pieces:
            return batch.with_columns(topic=pa.array([""] * batch.num_rows, pa.string()))
        topic = pc.binary_join_element_wise(*pieces, "") if len(pieces) > 1 else \
            (pieces[0] if not isinstance(pieces[0], pa.Scalar) else pa.array([pieces[0].as_py()] * batch.num_rows))
        return batch.with_columns(topic=topic.cast(pa.string()))


class Filter(Transformation):
    """Drop every record; used with a predicate (``transforms.x.predicate``) to drop some."""

    type_name = f"{_PKG}.Filter"
    doc = "Drops all records, filtering them from subsequent transformations in the chain. This is intended to " \
          "be used conditionally to filter out records matching (or not matching) a particular Predicate."

    def apply(self, batch):
        return batch.slice(0, 0)


class InsertHeader(Transformation):
    """Add header ``header`` with the UTF-8 bytes of ``value.literal`` to every record."""

    type_name = f"{_PKG}.InsertHeader"
    doc = "Add a header to each record."
    config_def = ConfigDef((ConfigKey("header", "STRING", None, required=True, importance="HIGH"),
                            ConfigKey("value.literal", "STRING", None, required=True, importance="HIGH")))

    def configure(self, config):
        self.header = config["header"]
        self.value = str(config["value.literal"]).encode("utf-8")

    def apply(self, batch):
        import numpy as np
        import pyarrow as pa

        n = batch.num_rows
        if n == 0:
            return batch
        headers = batch.column("headers")
        offsets = np.asarray(headers.offsets.to_numpy(zero_copy_only=False), dtype="int64")
        lengths = np.diff(offsets)
        lengths = np.where(np.asarray(headers.is_null().to_numpy(zero_copy_only=False)), 0, lengths)
        flat = headers.flatten()  # honours slice offsets and skips null lists
        new_offsets = np.concatenate([[0], np.cumsum(lengths + 1)])
        total = int(new_offsets[-1])
        idx = np.empty(total, dtype="int64")
        new_pos = new_offsets[1:] - 1
        is_new = np.zeros(total, dtype=bool)
        is_new[new_pos] = True
        idx[new_pos] = len(flat) + np.arange(n)
        idx[~is_new] = np.arange(len(flat))
        added = pa.array([{"key": self.header, "value": self.value}] * n, headers_type().value_type)
        values = pa.concat_arrays([flat.cast(headers_type().value_type), added]).take(pa.array(idx))
        out = pa.ListArray.from_arrays(pa.array(new_offsets, pa.int32()), values, type=headers_type())
        return batch.with_columns(headers=out)


class DropHeaders(Transformation):
    """Remove every header whose key is in ``headers``."""

    type_name = f"{_PKG}.DropHeaders"
    doc = "Removes one or more headers from each record."
    config_def = ConfigDef((ConfigKey("headers", "LIST", None, required=True, importance="HIGH"),))

    def configure(self, config):
        self.headers = _list_cfg(config.get("headers"))
        if not self.headers:
            raise ConfigException("headers must not be empty", {"headers": [
                f"Invalid value {config.get('headers')} for configuration headers: Empty list"]})

    def apply(self, batch):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        n = batch.num_rows
        if n == 0:
            return batch
        headers = batch.column("headers")
        flat = headers.flatten()
        parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
        keep = pc.invert(pc.is_in(flat.field("key"), value_set=pa.array(self.headers, pa.string())))
        keep = pc.fill_null(keep, True)
        kept_np = np.asarray(keep.to_numpy(zero_copy_only=False), dtype=bool)
        counts = np.bincount(parents[kept_np], minlength=n) if len(parents) else np.zeros(n, dtype="int64")
        offsets = np.concatenate([[0], np.cumsum(counts)])
        values = flat.filter(keep).cast(headers_type().value_type)
        out = pa.ListArray.from_arrays(pa.array(offsets, pa.int32()), values, type=headers_type())
        return batch.with_columns(headers=out)


# Key / Value variants ------------------------------------------------------------------
def _variant_classes(base: type[Transformation], name: str) -> tuple[type, type]:
    key_name, value_name = _variants(name)
    key_cls = type(f"{base.__name__}Key", (base,), {"type_name": key_name, "side": "key", "reads_key": True,
                                                    "__module__": __name__, "__doc__": base.__doc__})
    value_cls = type(f"{base.__name__}Value", (base,), {"type_name": value_name, "side": "value",
                                                        "__module__": __name__, "__doc__": base.__doc__})
    return key_cls, value_cls


InsertFieldKey, InsertFieldValue = _variant_classes(InsertField, "InsertField")
ReplaceFieldKey, ReplaceFieldValue = _variant_classes(ReplaceField, "ReplaceField")
MaskFieldKey, MaskFieldValue = _variant_classes(MaskField, "MaskField")
ExtractFieldKey, ExtractFieldValue = _variant_classes(ExtractField, "ExtractField")
HoistFieldKey, HoistFieldValue = _variant_classes(HoistField, "HoistField")
CastKey, CastValue = _variant_classes(Cast, "Cast")
TimestampConverterKey, TimestampConverterValue = _variant_classes(TimestampConverter, "TimestampConverter")


# --------------------------------------------------------------------------------------
# Predicates
# --------------------------------------------------------------------------------------
class TopicNameMatches(Predicate):
    """True for records whose whole topic name matches ``pattern`` (a regex)."""

    type_name = f"{_PKG}.predicates.TopicNameMatches"
    doc = "A predicate which is true for records with a topic name that matches the configured regular expression."
    config_def = ConfigDef((ConfigKey("pattern", "STRING", None, required=True, importance="MEDIUM"),))

    def configure(self, config):
        try:
            self.pattern = re.compile(config["pattern"])
        except re.error as e:
            raise ConfigException(str(e), {"pattern": [
                f"Invalid value {config['pattern']} for configuration pattern: {e}"]}) from None

    def test(self, batch):
        import pyarrow as pa
        import pyarrow.compute as pc

        topics = batch.column("topic")
        matching = [t for t in pc.unique(topics).to_pylist() if t is not None and self.pattern.fullmatch(t)]
        return pc.fill_null(pc.is_in(topics, value_set=pa.array(matching, pa.string())), False)


class HasHeaderKey(Predicate):
    """True for records with at least one header named ``name``."""

    type_name = f"{_PKG}.predicates.HasHeaderKey"
    doc = "A predicate which is true for records with at least one header with the configured name."
    config_def = ConfigDef((ConfigKey("name", "STRING", None, required=True, importance="MEDIUM"),))

    def configure(self, config):
        self.name = config["name"]

    def test(self, batch):
        import numpy as np
        import pyarrow as pa
        import pyarrow.compute as pc

        headers = batch.column("headers")
        n = batch.num_rows
        flat = headers.flatten()
        if len(flat) == 0:
            return pa.array(np.zeros(n, dtype=bool))
        parents = pc.list_parent_indices(headers).to_numpy(zero_copy_only=False)
        hit = np.asarray(pc.fill_null(pc.equal(flat.field("key"), self.name), False).to_numpy(zero_copy_only=False),
                         dtype=bool)
        return pa.array(np.bincount(parents[hit], minlength=n) > 0)


class RecordIsTombstone(Predicate):
    """True for records whose value is null."""

    type_name = f"{_PKG}.predicates.RecordIsTombstone"
    doc = "A predicate which is true for records which are tombstones (i.e. have null value)."

    def test(self, batch):
        import pyarrow.compute as pc

        return pc.is_null(batch.column("value"))


# --------------------------------------------------------------------------------------
# Registry
# --------------------------------------------------------------------------------------
TRANSFORMATIONS: dict[str, type[Transformation]] = {c.type_name: c for c in (
    InsertFieldKey, InsertFieldValue, ReplaceFieldKey, ReplaceFieldValue, MaskFieldKey, MaskFieldValue,
    ValueToKey, ExtractFieldKey, ExtractFieldValue, HoistFieldKey, HoistFieldValue, CastKey, CastValue,
    TimestampConverterKey, TimestampConverterValue, RegexRouter, TimestampRouter, Filter, InsertHeader,
    DropHeaders)}
PREDICATES: dict[str, type[Predicate]] = {c.type_name: c for c in (TopicNameMatches, HasHeaderKey,
                                                                   RecordIsTombstone)}


def _lookup(registry: Mapping[str, type], name: str) -> type | None:
    name = (name or "").strip()
    if name in registry:
        return registry[name]
    for full, cls in registry.items():  # short names: "InsertField$Value", "Filter", "predicates.HasHeaderKey"
        short = full[len(_PKG) + 1:]
        if name in (short, short.rsplit(".", 1)[-1]):
            return cls
    return None


def resolve_transformation(name: str) -> type[Transformation]:
    """The transformation class for a full or short name (``InsertField$Value``). Raises ConfigException."""
    cls = _lookup(TRANSFORMATIONS, name)
    if cls is None:
        raise ConfigException(f"Class {name} could not be found.")
    return cls


def resolve_predicate(name: str) -> type[Predicate]:
    """The predicate class for a full or short name (``TopicNameMatches``). Raises ConfigException."""
    cls = _lookup(PREDICATES, name)
    if cls is None:
        raise ConfigException(f"Class {name} could not be found.")
    return cls


def transform_plugins() -> list[dict[str, str]]:
    """Transformations and predicates as ``GET /connector-plugins?connectorsOnly=false`` lists them.

    Returns ``[{"class": full name, "type": "transformation" | "predicate", "version": ...}]``,
    sorted by class name.
    """
    out = [{"class": n, "type": "transformation", "version": VERSION} for n in TRANSFORMATIONS]
    out += [{"class": n, "type": "predicate", "version": VERSION} for n in PREDICATES]
    return sorted(out, key=lambda p: p["class"])


# --------------------------------------------------------------------------------------
# The chain
# --------------------------------------------------------------------------------------
@dataclass
class _Step:
    alias: str
    transform: Transformation
    predicate: Predicate | None = None
    negate: bool = False


class TransformError(ConnectException):
    """A transformation failed on some record; ``executing_class`` names it (Kafka's class name)."""

    def __init__(self, message: str, executing_class: str, cause: BaseException):
        super().__init__(message)
        self.executing_class = executing_class
        self.cause = cause


def _prefixed(config: Mapping[str, str], prefix: str) -> dict[str, str]:
    return {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix) and len(k) > len(prefix)}


def _qualify(message: str, key: str, prefix: str) -> str:
    """A transformation's message about ``key``, naming the connector config key (``transforms.a.key``)."""
    return message.replace(f'"{key}"', f'"{prefix}{key}"').replace(f"configuration {key}:",
                                                                    f"configuration {prefix}{key}:")


def _parse(config: Mapping[str, str]) -> tuple[list[_Step], dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}
    steps: list[_Step] = []

    def err(key: str, msg: str) -> None:
        errors.setdefault(key, []).append(msg)

    predicates: dict[str, Predicate] = {}
    for alias in _list_cfg(config.get("predicates")):
        key = f"predicates.{alias}.type"
        type_name = config.get(key)
        if not type_name:
            err(key, f"Missing required configuration \"{key}\" which has no default value.")
            continue
        cls = _lookup(PREDICATES, type_name)
        if cls is None:
            err(key, f"Invalid value {type_name} for configuration {key}: Class {type_name} could not be found.")
            continue
        try:
            predicates[alias] = cls(_prefixed(config, f"predicates.{alias}."))
        except ConfigException as e:
            for k, msgs in (e.errors or {"type": [str(e)]}).items():
                for m in msgs:
                    err(f"predicates.{alias}.{k}", _qualify(m, k, f"predicates.{alias}."))
    seen = set()
    for alias in _list_cfg(config.get("transforms")):
        if alias in seen:
            err("transforms", f"Duplicate alias provided: {alias}")
            continue
        seen.add(alias)
        key = f"transforms.{alias}.type"
        type_name = config.get(key)
        if not type_name:
            err(key, f"Missing required configuration \"{key}\" which has no default value.")
            continue
        cls = _lookup(TRANSFORMATIONS, type_name)
        if cls is None:
            err(key, f"Invalid value {type_name} for configuration {key}: Class {type_name} could not be found.")
            continue
        own = {k: v for k, v in _prefixed(config, f"transforms.{alias}.").items()
               if k not in ("type", "predicate", "negate")}
        try:
            transform = cls(own)
        except ConfigException as e:
            for k, msgs in (e.errors or {"type": [str(e)]}).items():
                for m in msgs:
                    err(f"transforms.{alias}.{k}", _qualify(m, k, f"transforms.{alias}."))
            continue
        pred_alias = config.get(f"transforms.{alias}.predicate")
        negate_raw = config.get(f"transforms.{alias}.negate")
        predicate = None
        if negate_raw is not None and str(negate_raw).strip().lower() not in ("true", "false"):
            err(f"transforms.{alias}.negate", f"Invalid value {negate_raw} for configuration "
                                              f"transforms.{alias}.negate: Expected value to be either true or false")
        if pred_alias:
            if pred_alias not in predicates and not any(k.startswith(f"predicates.{pred_alias}.") for k in errors):
                err(f"transforms.{alias}.predicate", f"Invalid value {pred_alias} for configuration "
                                                     f"transforms.{alias}.predicate: There is no predicate "
                                                     f"'{pred_alias}' (it must be listed in 'predicates')")
            predicate = predicates.get(pred_alias)
        elif negate_raw is not None and _bool_cfg(negate_raw):
            err(f"transforms.{alias}.negate", f"transforms.{alias}.negate needs transforms.{alias}.predicate")
        steps.append(_Step(alias, transform, predicate, _bool_cfg(negate_raw)))
    return steps, errors


def validate_transforms(config: Mapping[str, str]) -> dict[str, list[str]]:
    """Per-key errors of the ``transforms`` / ``predicates`` part of a connector config (empty: valid).

    Checks aliases, ``type`` (unknown class), each transformation's and predicate's
    own keys (required, types, allowed values, semantic checks such as a Cast
    spec), and that ``predicate`` names a listed predicate.
    """
    return _parse(config)[1]


def _conform(arr, target):
    """Cast ``arr`` to ``target``; structs gain missing fields as nulls (recursively)."""
    import pyarrow as pa
    import pyarrow.types as pt

    if arr.type.equals(target):
        return arr
    if pt.is_null(arr.type):
        return pa.nulls(len(arr), target)
    if pt.is_struct(target) and pt.is_struct(arr.type):
        children = _struct_children(arr)
        out = [(f.name, _conform(children[f.name], f.type) if f.name in children else pa.nulls(len(arr), f.type))
               for f in target]
        return _make_struct(out, _null_mask(arr), len(arr))
    return arr.cast(target)


def _merge_schema(a, b, a_type, b_type):
    """Union of two Connect schemas of one column (None = schemaless); raises DataException if they conflict."""
    if a is None and b is None:
        return None
    if a is None or b is None:
        return a if b is None else b
    if a == b:
        return a
    if a.get("type") == "struct" and b.get("type") == "struct":
        try:
            return merge_connect_schemas([a, b])
        except SchemaConversionError as e:
            raise DataException(f"Records of one batch got conflicting schemas: {e}") from None
    raise DataException(f"Records of one batch got conflicting schemas: {a} vs {b}")


def _unify_type(a, b):
    import pyarrow as pa
    import pyarrow.types as pt

    if a.equals(b):
        return a
    if pt.is_null(a):
        return b
    if pt.is_null(b):
        return a
    if pt.is_struct(a) and pt.is_struct(b):
        fields = {f.name: f.type for f in a}
        for f in b:
            fields[f.name] = _unify_type(fields[f.name], f.type) if f.name in fields else f.type
        return pa.struct([pa.field(n, t) for n, t in fields.items()])
    try:
        return pa.unify_schemas([pa.schema([("x", a)]), pa.schema([("x", b)])],
                                promote_options="permissive").field("x").type
    except (pa.ArrowInvalid, pa.ArrowTypeError):
        raise DataException(f"Records of one batch got conflicting types: {a} vs {b}") from None


def concat_batches(parts: Sequence[RecordBatch]) -> RecordBatch:
    """Concatenate batches whose schemas may differ: key/value types and Connect schemas are unified.

    Raises:
        DataException: two parts have incompatible schemas.
    """
    import pyarrow as pa

    parts = [p for p in parts if p is not None]
    if len(parts) == 1:
        return parts[0]
    ks, vs = parts[0].key_schema, parts[0].value_schema
    kt, vt = parts[0].table.schema.field("key").type, parts[0].table.schema.field("value").type
    for p in parts[1:]:
        ks = _merge_schema(ks, p.key_schema, kt, p.table.schema.field("key").type)
        vs = _merge_schema(vs, p.value_schema, vt, p.table.schema.field("value").type)
        kt = _unify_type(kt, p.table.schema.field("key").type)
        vt = _unify_type(vt, p.table.schema.field("value").type)
    tables = []
    for p in parts:
        b = p.with_columns(key=_conform(p.column("key"), kt), value=_conform(p.column("value"), vt))
        tables.append(b.table)
    names = tables[0].column_names
    table = pa.concat_tables([t.select(names) for t in tables], promote_options="permissive")
    return RecordBatch(table, ks, vs, parts[0].sink)


class TransformationChain:
    """The configured transformations, in order, each with its optional predicate and ``negate``.

    Build with :meth:`from_config`. Picklable: it is shipped to Spark's Python workers.
    """

    def __init__(self, steps: Sequence[_Step] = ()):
        self.steps = list(steps)

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> "TransformationChain":
        """Parse ``transforms`` / ``predicates`` keys. Raises :class:`ConfigException` listing every error."""
        steps, errors = _parse(config)
        if errors:
            msgs = [m for v in errors.values() for m in v]
            raise ConfigException("Invalid transforms configuration: " + "; ".join(msgs), errors)
        return cls(steps)

    def __bool__(self) -> bool:
        return bool(self.steps)

    def __len__(self) -> int:
        return len(self.steps)

    @property
    def reads_key(self) -> bool:
        """True if some transformation or predicate looks at the record key."""
        return any(s.transform.reads_key for s in self.steps)

    def apply(self, batch: RecordBatch) -> RecordBatch:
        """Run every step on the whole batch; raises :class:`TransformError` on the first failure.

        A step with a predicate transforms only the records where the predicate
        (negated when ``negate``) is true; the others pass unchanged, and the batch
        keeps the union of both schemas. Rows keep their order.
        """
        import pyarrow as pa
        import pyarrow.compute as pc

        for step in self.steps:
            name = step.transform.type_name
            try:
                if step.predicate is None:
                    batch = step.transform.apply(batch)
                    continue
                mask = pc.fill_null(step.predicate.test(batch), False)
                if step.negate:
                    mask = pc.invert(mask)
                hits = pc.sum(mask).as_py() or 0
                if hits == batch.num_rows and batch.num_rows:
                    batch = step.transform.apply(batch)
                    continue
                numbered = batch.with_columns(**{_ROW: pa.array(range(batch.num_rows), pa.int64())})
                done = step.transform.apply(numbered.filter(mask))
                rest = numbered.filter(pc.invert(mask))
                merged = concat_batches([done, rest])
                order = pc.sort_indices(merged.table.column(_ROW))
                batch = replace(merged, table=merged.table.take(order).drop_columns([_ROW]))
            except TransformError:
                raise
            except Exception as e:
                raise TransformError(f"{type(e).__name__}: {e}", name, e) from e
        return batch

    def apply_tolerant(self, batch: RecordBatch) -> tuple[RecordBatch, list[tuple[int, TransformError]]]:
        """Like :meth:`apply`, but records that fail are left out instead of failing the batch.

        Runs the whole batch first; only if that fails does it run each record on
        its own (per-record Python, the slow path) to find the bad ones.

        Returns:
            (transformed good records, [(row index in ``batch``, error), ...]).
        """
        try:
            return self.apply(batch), []
        except TransformError:
            pass
        good, errors = [], []
        for i in range(batch.num_rows):
            try:
                good.append(self.apply(batch.slice(i, 1)))
            except TransformError as e:
                errors.append((i, e))
        if not good:
            return self.output_empty(batch), errors
        return concat_batches(good), errors

    def output_empty(self, batch: RecordBatch) -> RecordBatch:
        """The chain's output for no records with ``batch``'s schemas: gives the output types and schemas.

        For a step with a predicate, the output is the union of the transformed and
        the untransformed shape, as :meth:`apply` produces for a mixed batch.
        """
        out = batch.slice(0, 0)
        for step in self.steps:
            done = step.transform.apply(out)
            out = done if step.predicate is None else concat_batches([done, out])
        return out
