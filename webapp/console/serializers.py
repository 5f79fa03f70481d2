"""Response bodies of the console's resources (``/raftconnect/v1/whoami``, task metrics, ``console/*``).

Owns the published shape of what :mod:`webapp.console.api` answers, declared on its views
by :mod:`webapp.console.urls`; the bodies are built by :mod:`webapp.console.api`,
:mod:`.state`, :mod:`.kafka`, :mod:`.offsets` and :mod:`.history`, which these classes
describe (they are not run on the answers). Must not import views or services.
"""
from __future__ import annotations

from drf_spectacular.utils import PolymorphicProxySerializer
from rest_framework import serializers

from webapp.connect.api.roles import ROLES
from webapp.connect.api.serializers import FREE_FORM
from webapp.states import STATES

from .state import HEALTH_WORDS

__all__ = ["WhoAmISerializer", "WorkerNameSerializer", "TaskMetricsSerializer", "TaskMetricsListSerializer",
           "ConnectorMetricsSerializer", "TaskHealthSerializer", "ConnectorHealthSerializer",
           "ConnectorHealthListSerializer", "KafkaBrokerSerializer", "KafkaPartitionSerializer", "KafkaTopicSerializer",
           "KafkaClusterSerializer", "TaskSeriesSerializer", "TaskHistorySerializer", "SinkPartitionOffsetSerializer",
           "SinkOffsetsSerializer", "FileProgressSerializer", "SourceOffsetsSerializer", "OtherOffsetEntrySerializer",
           "OtherOffsetsSerializer", "CONSOLE_OFFSETS"]


class WhoAmISerializer(serializers.Serializer):
    """``GET /raftconnect/v1/whoami`` (and a login's 200): the authenticated user."""

    username = serializers.CharField()
    roles = serializers.ListField(child=serializers.ChoiceField(choices=ROLES),
                                 help_text="the user's role, or empty: a user without one is refused everywhere")
    is_superuser = serializers.BooleanField()
    is_staff = serializers.BooleanField(help_text="may open the Django admin")


class WorkerNameSerializer(serializers.Serializer):
    """One worker by node id, with its REST address (what status bodies call ``worker_id``)."""

    node_id = serializers.CharField(allow_null=True, help_text="null for a REST address no member has")
    rest_address = serializers.CharField(allow_null=True)


class TaskMetricsSerializer(serializers.Serializer):
    """One running task's counters from its agent's latest heartbeat (since the task started on its worker)."""

    connector = serializers.CharField()
    task = serializers.IntegerField()
    worker_id = serializers.CharField(help_text="the worker's REST address, as in status")
    worker = WorkerNameSerializer()
    state = serializers.ChoiceField(choices=STATES, allow_null=True)
    records = serializers.IntegerField()
    batches = serializers.IntegerField()
    last_batch_seconds = serializers.FloatField()
    records_per_second = serializers.FloatField(help_text="over about the last 30 s")
    lag = serializers.IntegerField(allow_null=True, help_text="a sink's consumer lag in records; null if unknown")
    phases = serializers.DictField(child=serializers.FloatField(),
                                   help_text="seconds per phase: read, encode, produce, consume, decode, write, "
                                             "commit, spark")
    errors = serializers.DictField(child=serializers.IntegerField(),
                                   help_text="Connect's task-error-metrics: total_record_errors, "
                                             "total_records_skipped, ...")


class TaskMetricsListSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/task-metrics``."""

    tasks = serializers.ListField(child=TaskMetricsSerializer())


class ConnectorMetricsSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/connectors/{name}/metrics``: one connector's tasks and their sums."""

    connector = serializers.CharField()
    tasks = serializers.ListField(child=TaskMetricsSerializer())
    records = serializers.IntegerField()
    records_per_second = serializers.FloatField()


class TaskHealthSerializer(serializers.Serializer):
    """One task of a connector as the console shows it."""

    id = serializers.IntegerField()
    state = serializers.ChoiceField(choices=STATES)
    worker = WorkerNameSerializer(allow_null=True)
    root_cause = serializers.CharField(allow_null=True, help_text="the line of its trace that says why it failed")
    trace = serializers.CharField(required=False)


class ConnectorHealthSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/console/connectors/{name}``: a connector's health derived from its tasks."""

    name = serializers.CharField()
    type = serializers.CharField(allow_null=True, help_text="source or sink")
    state = serializers.ChoiceField(choices=STATES)
    health = serializers.ChoiceField(choices=HEALTH_WORDS)
    task_counts = serializers.DictField(child=serializers.IntegerField(), help_text="tasks per state")
    tasks_total = serializers.IntegerField()
    worker = WorkerNameSerializer(allow_null=True)
    root_cause = serializers.CharField(allow_null=True)
    trace = serializers.CharField(allow_null=True)
    tasks = serializers.ListField(child=TaskHealthSerializer())


class ConnectorHealthListSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/console/connectors``: every connector's health and the totals."""

    connectors = serializers.ListField(child=ConnectorHealthSerializer())
    health = serializers.DictField(child=serializers.IntegerField(), help_text="connectors per health word")
    tasks = serializers.DictField(child=serializers.IntegerField(), help_text="tasks per state")
    generated_at = serializers.FloatField(help_text="unix seconds")


class KafkaBrokerSerializer(serializers.Serializer):
    """A broker from Kafka's metadata."""

    id = serializers.IntegerField()
    host = serializers.CharField()
    port = serializers.IntegerField()


class KafkaPartitionSerializer(serializers.Serializer):
    """A topic partition with its leader and end offset."""

    partition = serializers.IntegerField()
    leader = serializers.IntegerField()
    end_offset = serializers.IntegerField(allow_null=True, help_text="read_committed; null if it did not answer")


class KafkaTopicSerializer(serializers.Serializer):
    """A topic (internal ones, starting with __, are left out)."""

    name = serializers.CharField()
    partitions = serializers.ListField(child=KafkaPartitionSerializer())
    error = serializers.CharField(required=False)


class KafkaClusterSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/console/kafka``: the Kafka cluster this node uses (200 also when unreachable)."""

    state = serializers.ChoiceField(choices=("ok", "unreachable"))
    bootstrap_servers = serializers.CharField()
    cluster_id = serializers.CharField(required=False, allow_null=True)
    controller_id = serializers.IntegerField(required=False, allow_null=True)
    brokers = serializers.ListField(child=KafkaBrokerSerializer())
    topics = serializers.ListField(child=KafkaTopicSerializer(), help_text="the first 200 by name")
    topic_count = serializers.IntegerField()
    error = serializers.CharField(required=False, help_text="names the address tried")


class TaskSeriesSerializer(serializers.Serializer):
    """One task's samples."""

    connector = serializers.CharField()
    task = serializers.IntegerField()
    worker = serializers.CharField(allow_null=True, help_text="node id of the worker that reported it")
    points = serializers.ListField(
        child=serializers.ListField(child=serializers.FloatField(allow_null=True), min_length=5, max_length=5),
        help_text="[unix seconds, records/s, lag, errors/s, records skipped in total]; a rate is null for a "
                  "task's first sample and after a restart")


class TaskHistorySerializer(serializers.Serializer):
    """``GET /raftconnect/v1/console/history``: recent per-task rates kept on the leader."""

    interval = serializers.FloatField(help_text="seconds between samples")
    keep_seconds = serializers.FloatField()
    tasks = serializers.ListField(child=TaskSeriesSerializer())


class SinkPartitionOffsetSerializer(serializers.Serializer):
    """A sink's Kafka partition: committed offset, the partition's start and end, and lag."""

    topic = serializers.CharField()
    partition = serializers.IntegerField()
    committed = serializers.IntegerField(allow_null=True, help_text="next offset to read; null: nothing committed")
    start_offset = serializers.IntegerField(allow_null=True)
    end_offset = serializers.IntegerField(allow_null=True)
    lag = serializers.IntegerField(allow_null=True)
    offset_for_timestamp = serializers.IntegerField(allow_null=True, required=False,
                                                    help_text="with ?timestamp=: the first offset at or after it")


class SinkOffsetsSerializer(serializers.Serializer):
    """A sink connector's offsets per Kafka partition."""

    kind = serializers.ChoiceField(choices=("sink",))
    partitions = serializers.ListField(child=SinkPartitionOffsetSerializer())


class FileProgressSerializer(serializers.Serializer):
    """A file source's position in one file."""

    partition = serializers.DictField(help_text="Connect's source partition: filename[, range.start, range.end]")
    offset = serializers.DictField(help_text=FREE_FORM)
    position = serializers.IntegerField(allow_null=True)
    unit = serializers.ChoiceField(choices=("bytes", "rows"))
    size = serializers.IntegerField(allow_null=True, help_text="bytes; null when this node cannot see the file")


class SourceOffsetsSerializer(serializers.Serializer):
    """A file source connector's progress per file."""

    kind = serializers.ChoiceField(choices=("source",))
    partitions = serializers.ListField(child=FileProgressSerializer())


class OtherOffsetEntrySerializer(serializers.Serializer):
    """Kafka Connect's ``{"partition", "offset"}`` as committed (null partition or offset are passed through)."""

    partition = serializers.DictField(allow_null=True, help_text=FREE_FORM)
    offset = serializers.DictField(allow_null=True, help_text=FREE_FORM)


class OtherOffsetsSerializer(serializers.Serializer):
    """Any other connector's offsets, as Connect lists them."""

    kind = serializers.ChoiceField(choices=("other",))
    partitions = serializers.ListField(child=OtherOffsetEntrySerializer())


#: ``GET /raftconnect/v1/console/connectors/{name}/offsets``: one of three shapes, told apart by ``kind``
CONSOLE_OFFSETS = PolymorphicProxySerializer(
    component_name="ConsoleConnectorOffsets",
    serializers={"sink": SinkOffsetsSerializer, "source": SourceOffsetsSerializer, "other": OtherOffsetsSerializer},
    resource_type_field_name="kind")
