"""Tables of the relational metadata stores (PostgreSQL, MySQL/MariaDB).

Owns the schema that :class:`webapp.storage.relational.RelationalMetadataStore`
reads and writes through a runtime database alias; the schema is created by this
app's migrations (``migrate storage --database <alias>``). Nothing else should
write these tables: go through the store so fencing and atomicity hold.

Shapes:
    Connector: one row per connector — ``config`` ``{str: str}``, ``target_state``
        one of STARTED/PAUSED/STOPPED, ``task_configs`` ``[{str: str}, ..]``.
    Status: one row per connector (``task = -1``) or task (``task >= 0``).
    Offset: one row per source partition of a connector; ``partition_key`` is
        :func:`webapp.plugin.partition_key` of ``partition`` and
        ``key_hash`` its SHA-256 (hex), which carries the uniqueness (a long
        partition key could not be indexed on MySQL).
    ActiveTopic: one row per topic a connector's tasks used (Connect's KIP-558 active topics).

Text that PostgreSQL cannot hold: its ``text`` values may not contain NUL (U+0000) and its ``jsonb``
refuses the ``\\u0000`` escape, while the Raft store and MySQL/MariaDB keep any string. Configs,
status traces and offsets are written there by :class:`PortableJSONField` / :class:`PortableTextField`
with NUL escaped (:func:`escape_nul`) and read back unescaped, so every backend stores what it was
given and a store switch copies it unchanged. Other databases get the values as they are.
"""
from __future__ import annotations

import re
from typing import Any

import orjson
from django.db import models

from webapp.states import TargetState

__all__ = ["Connector", "Status", "Offset", "ActiveTopic", "WriterLease", "CONNECTOR_TASK", "LEASE_ID",
           "PortableJSONField", "PortableTextField", "escape_nul", "unescape_nul", "escape_nul_json",
           "NUL_ESCAPE"]

#: the escape character of :func:`escape_nul`: U+FFFF, a noncharacter (Unicode reserves it for a
#: program's internal use; it never stands for text), so user data practically never holds it
NUL_ESCAPE = "\uffff"
_UNESCAPE = re.compile("\uffff([01])")


def escape_nul(text: str) -> str:
    """``text`` without NUL, reversibly: U+FFFF becomes U+FFFF ``1``, then NUL becomes U+FFFF ``0``.

    Text with neither comes back as it is (the same object). Inverse: :func:`unescape_nul`.
    """
    if "\x00" not in text and NUL_ESCAPE not in text:
        return text
    return text.replace(NUL_ESCAPE, NUL_ESCAPE + "1").replace("\x00", NUL_ESCAPE + "0")


def unescape_nul(text: str) -> str:
    """The text :func:`escape_nul` was given. U+FFFF followed by anything but ``0``/``1`` is kept as it is."""
    if NUL_ESCAPE not in text:
        return text
    return _UNESCAPE.sub(lambda m: "\x00" if m.group(1) == "0" else NUL_ESCAPE, text)


def _walk(value: Any, fn) -> Any:
    """``value`` (a JSON document: dict, list, str, number, bool, None) with ``fn`` applied to every string,
    keys included; a new document where anything changed."""
    if isinstance(value, str):
        return fn(value)
    if isinstance(value, dict):
        return {fn(k) if isinstance(k, str) else k: _walk(v, fn) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [_walk(v, fn) for v in value]
    return value


def escape_nul_json(value: Any) -> Any:
    """``value`` (a JSON document) with :func:`escape_nul` applied to every string, keys included.

    Looks first, with one ``orjson`` encoding (~1 µs for a config), whether any string holds NUL or
    U+FFFF; when none does (nearly always) ``value`` itself is returned.
    """
    try:
        text = orjson.dumps(value)
    except (orjson.JSONEncodeError, TypeError):  # integers beyond 64 bits, keys that are not strings: look
        return _walk(value, escape_nul)
    if b"\\u0000" not in text and b"\xef\xbf\xbf" not in text:  # orjson escapes NUL; U+FFFF is raw UTF-8
        return value
    return _walk(value, escape_nul)


class PortableJSONField(models.JSONField):
    """A ``JSONField`` whose strings may hold NUL on PostgreSQL too (see the module docstring).

    On PostgreSQL values are written through :func:`escape_nul_json` and read back through
    :func:`unescape_nul` (only when the stored text holds U+FFFF: one substring test per value
    otherwise). On other databases it is Django's ``JSONField``, byte for byte.
    """

    def get_db_prep_value(self, value: Any, connection, prepared: bool = False) -> Any:
        if connection.vendor == "postgresql" and not hasattr(value, "as_sql"):
            value = escape_nul_json(value)
        return super().get_db_prep_value(value, connection, prepared)

    def from_db_value(self, value: Any, expression, connection) -> Any:
        out = super().from_db_value(value, expression, connection)
        if connection.vendor == "postgresql" and isinstance(value, str) and NUL_ESCAPE in value:
            out = _walk(out, unescape_nul)
        return out


class PortableTextField(models.TextField):
    """A ``TextField`` whose text may hold NUL on PostgreSQL too (see the module docstring)."""

    def get_db_prep_value(self, value: Any, connection, prepared: bool = False) -> Any:
        value = super().get_db_prep_value(value, connection, prepared)
        if connection.vendor == "postgresql" and isinstance(value, str):
            value = escape_nul(value)
        return value

    def from_db_value(self, value: Any, expression, connection) -> Any:
        if connection.vendor == "postgresql" and isinstance(value, str):
            return unescape_nul(value)
        return value

#: ``Status.task`` of the connector instance's own status.
CONNECTOR_TASK = -1
#: Primary key of the single :class:`WriterLease` row.
LEASE_ID = 1


class Connector(models.Model):
    """A connector's config, desired state and task configs."""

    name = models.CharField(max_length=255, primary_key=True)
    config = PortableJSONField(default=dict)
    target_state = models.CharField(max_length=16, default=TargetState.STARTED.value)
    task_configs = PortableJSONField(default=list)

    class Meta:
        app_label = "storage"


class Status(models.Model):
    """The last reported status of a connector (``task = -1``) or one of its tasks."""

    connector = models.CharField(max_length=255)
    task = models.IntegerField()
    state = models.CharField(max_length=32)
    trace = PortableTextField(null=True, blank=True)
    worker_id = models.CharField(max_length=255)
    generation = models.BigIntegerField()

    class Meta:
        app_label = "storage"
        constraints = [models.UniqueConstraint(fields=["connector", "task"], name="storage_status_unique_task")]


class Offset(models.Model):
    """The committed offset of one source partition of a connector (kept when the connector is deleted).

    ``generation`` and ``seq`` are the assignment generation and the agent's commit number of the
    task commit that wrote the row (``OffsetCommit``), ``NULL`` when an operator or a store switch
    wrote it or the agent sent no number: a commit of the same generation with a lower number is a
    late copy and does not replace the row (``RelationalOffsets``).
    """

    connector = models.CharField(max_length=255)
    key_hash = models.CharField(max_length=64)
    partition_key = models.TextField()
    partition = PortableJSONField()
    offset = PortableJSONField()
    generation = models.BigIntegerField(null=True)
    seq = models.BigIntegerField(null=True)

    class Meta:
        app_label = "storage"
        constraints = [models.UniqueConstraint(fields=["connector", "key_hash"],
                                               name="storage_offset_unique_partition")]


class ActiveTopic(models.Model):
    """A topic one of the connector's tasks produced to or consumed from (removed with the connector)."""

    connector = models.CharField(max_length=255)
    topic = models.CharField(max_length=255)  # Kafka topic names are at most 249 characters

    class Meta:
        app_label = "storage"
        constraints = [models.UniqueConstraint(fields=["connector", "topic"], name="storage_activetopic_unique")]


class WriterLease(models.Model):
    """The store's writer lease: one row (``id = 1``) naming the Raft term allowed to write.

    ``term`` is the Raft term of the leader that last claimed the store;
    ``read_only`` is set when the cluster switched to another store. Every write
    transaction reads this row under a shared lock first; a claim updates it under
    an exclusive lock (see :meth:`RelationalMetadataStore.claim`).
    """

    id = models.IntegerField(primary_key=True)
    term = models.BigIntegerField(default=0)
    read_only = models.BooleanField(default=False)

    class Meta:
        app_label = "storage"
