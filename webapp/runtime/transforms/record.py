"""What a transformation sees: the record model, batches of records, and the errors an SMT raises.

Owns :class:`RecordBatch` (one ``pyarrow.Table`` of records sharing a key and a
value schema; columns in the package docstring), :class:`ConnectRecord` (one
record, for tests and small uses), the ``headers`` column's Arrow type, the Arrow
struct helpers every family uses, and
:func:`concat_batches` / :func:`conform`, which join batches whose schemas
differ (a predicate that transforms some records gives the batch the union).

The errors an SMT raises (``DataException``, ``ConfigException``) are the plugin
API's (``webapp.plugin``). Must not touch: any transformation (the families import this module, never the
reverse), Kafka, Spark, the metadata store or Django. pyarrow is imported lazily.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Mapping, Sequence

from webapp.plugin import DataException
from webapp.runtime.converters import SchemaConversionError, connect_to_arrow_type, merge_connect_schemas

RECORD_COLUMNS = ("key", "value", "topic", "partition", "offset", "timestamp", "headers")


def headers_type():
    """Arrow type of the ``headers`` column: ``list<struct<key: string, value: binary>>``."""
    import pyarrow as pa

    return pa.list_(pa.struct([pa.field("key", pa.string()), pa.field("value", pa.binary())]))


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


# Arrow struct helpers --------------------------------------------------------------------
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


# Batches of different shapes ------------------------------------------------------------
def conform(arr, target):
    """Cast ``arr`` to ``target``; structs gain missing fields as nulls (recursively)."""
    import pyarrow as pa
    import pyarrow.types as pt

    if arr.type.equals(target):
        return arr
    if pt.is_null(arr.type):
        return pa.nulls(len(arr), target)
    if pt.is_struct(target) and pt.is_struct(arr.type):
        children = _struct_children(arr)
        out = [(f.name, conform(children[f.name], f.type) if f.name in children else pa.nulls(len(arr), f.type))
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
        b = p.with_columns(key=conform(p.column("key"), kt), value=conform(p.column("value"), vt))
        tables.append(b.table)
    names = tables[0].column_names
    table = pa.concat_tables([t.select(names) for t in tables], promote_options="permissive")
    return RecordBatch(table, ks, vs, parts[0].sink)
