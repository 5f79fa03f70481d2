"""Single message transforms (SMTs) and predicates, applied to Arrow record batches.

The package mirrors Kafka's ``connect-transforms``: one module per family of
transformations, each with Kafka's class names and config keys, and this
``__init__`` as the public face (what a connector or the runtime imports):

=========================== ==============================================================
module                      owns
=========================== ==============================================================
``record``                  :class:`RecordBatch`, :class:`ConnectRecord`, ``headers``
                            type, :func:`concat_batches`
``base``                    :class:`Transformation`, :class:`Predicate`, config handling,
                            ``$Key`` / ``$Value`` variants, Connect's requirement checks
``java_compat``             Java regex replacements, ``SimpleDateFormat``, ``Double.toString``
``field``                   InsertField, ReplaceField, MaskField, ValueToKey, ExtractField,
                            HoistField
``cast``                    Cast
``timestamp_converter``     TimestampConverter
``routers``                 RegexRouter, TimestampRouter
``filters``                 Filter and the predicates (TopicNameMatches, HasHeaderKey,
                            RecordIsTombstone)
``headers``                 InsertHeader, DropHeaders
``chain``                   the registry, ``transforms=…`` / ``predicates=…`` parsing and
                            validation, :class:`TransformationChain`, the plugin list
=========================== ==============================================================

Imports point one way: ``record`` ← ``base`` ← the families ← ``chain`` (and
``java_compat`` beside them, importing nothing of the project). The package
imports the plugin API (``webapp.plugin``: ``ConfigDef``, ``ConnectException``,
``DataException`` / ``ConfigException``, the errors an SMT raises) and the converters' schema mapping
(``webapp.runtime.converters``); it must not import a connector, the rest of the
runtime (worker, pipeline, engine), Kafka, Spark, the metadata store or Django —
``pyproject.toml``'s import contract ``transforms-alone`` checks this.

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

pyarrow is imported lazily, inside the functions that use it.
"""
from __future__ import annotations

from .base import VERSION, Predicate, Transformation
from .cast import Cast, CastKey, CastValue
from .chain import (
    PREDICATES,
    TRANSFORMATIONS,
    TransformationChain,
    TransformError,
    resolve_predicate,
    resolve_transformation,
    transform_plugins,
    validate_transforms,
)
from .field import (
    ExtractField,
    ExtractFieldKey,
    ExtractFieldValue,
    HoistField,
    HoistFieldKey,
    HoistFieldValue,
    InsertField,
    InsertFieldKey,
    InsertFieldValue,
    MaskField,
    MaskFieldKey,
    MaskFieldValue,
    ReplaceField,
    ReplaceFieldKey,
    ReplaceFieldValue,
    ValueToKey,
)
from .filters import Filter, HasHeaderKey, RecordIsTombstone, TopicNameMatches
from .headers import DropHeaders, InsertHeader
from .record import (
    RECORD_COLUMNS,
    ConnectRecord,
    RecordBatch,
    concat_batches,
    headers_type,
)
from .routers import RegexRouter, TimestampRouter
from .timestamp_converter import TimestampConverter, TimestampConverterKey, TimestampConverterValue

__all__ = [
    # the record model (the errors an SMT raises are the plugin API's: webapp.plugin)
    "ConnectRecord", "RecordBatch", "RECORD_COLUMNS", "headers_type",
    "concat_batches",
    # the interface, the chain and its loader
    "Transformation", "Predicate", "TransformationChain", "TransformError", "TRANSFORMATIONS", "PREDICATES",
    "VERSION", "transform_plugins", "resolve_transformation", "resolve_predicate", "validate_transforms",
    # the transformations (Kafka's class names; $Key / $Value variants as <Name>Key / <Name>Value)
    "InsertField", "InsertFieldKey", "InsertFieldValue", "ReplaceField", "ReplaceFieldKey", "ReplaceFieldValue",
    "MaskField", "MaskFieldKey", "MaskFieldValue", "ValueToKey", "ExtractField", "ExtractFieldKey",
    "ExtractFieldValue", "HoistField", "HoistFieldKey", "HoistFieldValue", "Cast", "CastKey", "CastValue",
    "TimestampConverter", "TimestampConverterKey", "TimestampConverterValue", "RegexRouter", "TimestampRouter",
    "Filter", "InsertHeader", "DropHeaders",
    # the predicates
    "TopicNameMatches", "HasHeaderKey", "RecordIsTombstone",
]
