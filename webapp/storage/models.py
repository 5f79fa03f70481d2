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
"""
from __future__ import annotations

from django.db import models

from webapp.states import TargetState

__all__ = ["Connector", "Status", "Offset", "ActiveTopic", "WriterLease", "CONNECTOR_TASK", "LEASE_ID"]

#: ``Status.task`` of the connector instance's own status.
CONNECTOR_TASK = -1
#: Primary key of the single :class:`WriterLease` row.
LEASE_ID = 1


class Connector(models.Model):
    """A connector's config, desired state and task configs."""

    name = models.CharField(max_length=255, primary_key=True)
    config = models.JSONField(default=dict)
    target_state = models.CharField(max_length=16, default=TargetState.STARTED.value)
    task_configs = models.JSONField(default=list)

    class Meta:
        app_label = "storage"


class Status(models.Model):
    """The last reported status of a connector (``task = -1``) or one of its tasks."""

    connector = models.CharField(max_length=255)
    task = models.IntegerField()
    state = models.CharField(max_length=32)
    trace = models.TextField(null=True, blank=True)
    worker_id = models.CharField(max_length=255)
    generation = models.BigIntegerField()

    class Meta:
        app_label = "storage"
        constraints = [models.UniqueConstraint(fields=["connector", "task"], name="storage_status_unique_task")]


class Offset(models.Model):
    """The committed offset of one source partition of a connector (kept when the connector is deleted)."""

    connector = models.CharField(max_length=255)
    key_hash = models.CharField(max_length=64)
    partition_key = models.TextField()
    partition = models.JSONField()
    offset = models.JSONField()

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
