"""The chain and its loader: the registry of SMTs and predicates, parsing and validating ``transforms=…`` /
``predicates=…``, and :class:`TransformationChain`, which runs the steps on a batch.

Owns Connect's ``TransformationChain`` and the part of ``ConnectorConfig`` that
reads ``transforms.<alias>.*`` / ``predicates.<alias>.*`` (aliases, ``type`` by
full or short class name, each plugin's own keys, ``predicate`` / ``negate``),
the per-key errors that connector validation reports (:func:`validate_transforms`),
the plugin list of ``GET /connector-plugins?connectorsOnly=false``
(:func:`transform_plugins`), and the tolerant run that isolates bad records
(:meth:`TransformationChain.apply_tolerant`). A new transformation family is
registered here, in :data:`TRANSFORMATIONS` / :data:`PREDICATES`.

Must not touch: how any single transformation works (the family modules), error
tolerance and the dead letter queue (``webapp.runtime.errors``), Kafka, Spark or Django.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, Callable, Mapping, Sequence

from webapp.plugin import AbstractConfig, ConfigDef, ConfigException, ConfigKey, ConnectException

from .base import _PKG, VERSION, Predicate, Transformation
from .cast import CastKey, CastValue
from .field import (
    ExtractFieldKey,
    ExtractFieldValue,
    HoistFieldKey,
    HoistFieldValue,
    InsertFieldKey,
    InsertFieldValue,
    MaskFieldKey,
    MaskFieldValue,
    ReplaceFieldKey,
    ReplaceFieldValue,
    ValueToKey,
)
from .filters import Filter, HasHeaderKey, RecordIsTombstone, TopicNameMatches
from .headers import DropHeaders, InsertHeader
from .record import RecordBatch, concat_batches
from .routers import RegexRouter, TimestampRouter
from .timestamp_converter import TimestampConverterKey, TimestampConverterValue

_ROW = "__smt_row"


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


#: the chain's own keys of a connector config, and of one ``transforms.<alias>.`` step
_CHAIN_KEYS = ConfigDef((ConfigKey("transforms", "LIST", None), ConfigKey("predicates", "LIST", None)))
_STEP_KEYS = ConfigDef((ConfigKey("predicate", "STRING", None), ConfigKey("negate", "BOOLEAN", "false")))


def _build(config: Mapping[str, str], family: str, alias: str, registry: Mapping[str, type], own: Mapping[str, str],
           err: Callable[[str, str], None]) -> Any:
    """The ``family`` (``"predicates"`` or ``"transforms"``) plugin ``alias``: its ``<family>.<alias>.type``
    class from ``registry``, built with ``own`` (its keys without the prefix). None after reporting, through
    ``err(key, message)`` and in Connect's words, a missing or unknown type or the plugin's config errors."""
    key = f"{family}.{alias}.type"
    type_name = config.get(key)
    if not type_name:
        err(key, f"Missing required configuration \"{key}\" which has no default value.")
        return None
    cls = _lookup(registry, type_name)
    if cls is None:
        err(key, f"Invalid value {type_name} for configuration {key}: Class {type_name} could not be found.")
        return None
    try:
        return cls(own)
    except ConfigException as e:
        for k, msgs in (e.errors or {"type": [str(e)]}).items():
            for m in msgs:
                err(f"{family}.{alias}.{k}", _qualify(m, k, f"{family}.{alias}."))
        return None


def _parse(config: Mapping[str, str]) -> tuple[list[_Step], dict[str, list[str]]]:
    errors: dict[str, list[str]] = {}
    steps: list[_Step] = []
    chain = AbstractConfig(_CHAIN_KEYS, config)

    def err(key: str, msg: str) -> None:
        errors.setdefault(key, []).append(msg)

    predicates: dict[str, Predicate] = {}
    for alias in chain.get_list("predicates"):
        predicate = _build(config, "predicates", alias, PREDICATES, _prefixed(config, f"predicates.{alias}."), err)
        if predicate is not None:
            predicates[alias] = predicate
    seen = set()
    for alias in chain.get_list("transforms"):
        if alias in seen:
            err("transforms", f"Duplicate alias provided: {alias}")
            continue
        seen.add(alias)
        own = {k: v for k, v in _prefixed(config, f"transforms.{alias}.").items()
               if k not in ("type", "predicate", "negate")}
        transform = _build(config, "transforms", alias, TRANSFORMATIONS, own, err)
        if transform is None:
            continue
        step = AbstractConfig(_STEP_KEYS, _prefixed(config, f"transforms.{alias}."))
        pred_alias = step.get_string("predicate")
        predicate = None
        try:
            negate = step.get_bool("negate")
        except ConfigException as e:
            err(f"transforms.{alias}.negate", _qualify(str(e), "negate", f"transforms.{alias}."))
            negate = False
        if pred_alias:
            if pred_alias not in predicates and not any(k.startswith(f"predicates.{pred_alias}.") for k in errors):
                err(f"transforms.{alias}.predicate", f"Invalid value {pred_alias} for configuration "
                                                     f"transforms.{alias}.predicate: There is no predicate "
                                                     f"'{pred_alias}' (it must be listed in 'predicates')")
            predicate = predicates.get(pred_alias)
        elif negate:
            err(f"transforms.{alias}.negate", f"transforms.{alias}.negate needs transforms.{alias}.predicate")
        steps.append(_Step(alias, transform, predicate, negate))
    return steps, errors


def validate_transforms(config: Mapping[str, str]) -> dict[str, list[str]]:
    """Per-key errors of the ``transforms`` / ``predicates`` part of a connector config (empty: valid).

    Checks aliases, ``type`` (unknown class), each transformation's and predicate's
    own keys (required, types, allowed values, semantic checks such as a Cast
    spec), and that ``predicate`` names a listed predicate.
    """
    return _parse(config)[1]


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
