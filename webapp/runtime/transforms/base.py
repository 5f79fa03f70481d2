"""The SMT interface: :class:`Transformation`, :class:`Predicate`, their config handling and shared checks.

Owns the base classes (Connect's ``Transformation`` / ``Predicate`` with a
``ConfigDef``), the ``$Key`` / ``$Value`` variant mechanism
(:func:`_variant_classes`), Connect's ``Requirements`` as whole-column checks
(``_require_struct``, ``_require_no_nulls``), the small helpers over Connect
schemas and config values that every family uses, and the package constants
(``VERSION``, Kafka's package name ``_PKG``).

Must not touch: any concrete transformation (families import this module), the
chain or the registry, Kafka, Spark, the metadata store or Django.
"""
from __future__ import annotations

from dataclasses import replace
from typing import Any, ClassVar, Mapping, Sequence

from webapp.plugin import ConfigDef, ConfigException, DataException
from webapp.runtime.converters import arrow_type_to_connect

from .record import RecordBatch, _make_struct, _null_mask, _struct_children

VERSION = "0.1.0"
_PKG = "org.apache.kafka.connect.transforms"

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


def _variant_classes(base: type[Transformation], name: str) -> tuple[type, type]:
    """Connect's ``$Key`` / ``$Value`` classes of ``base``, living (for pickling) in ``base``'s module."""
    key_name, value_name = _variants(name)
    key_cls = type(f"{base.__name__}Key", (base,), {"type_name": key_name, "side": "key", "reads_key": True,
                                                    "__module__": base.__module__, "__doc__": base.__doc__})
    value_cls = type(f"{base.__name__}Value", (base,), {"type_name": value_name, "side": "value",
                                                        "__module__": base.__module__, "__doc__": base.__doc__})
    return key_cls, value_cls
