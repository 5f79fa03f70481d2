"""Response bodies of RaftConnect's own ``/raftconnect/v1/`` resources, as DRF serializers.

Owns the published shape of what the cluster, Raft, assignment, metadata-store and
backup resources answer: :mod:`.openapi` names them in the schema (drf-spectacular
turns each into a component of the same name without ``Serializer``), so a generated
client gets typed models instead of free-form dicts. The views do not run them: the
bodies are built by the services (``ConnectNode.cluster_view``, ``RaftNode.status``,
``SwitchManager.status``, ``webapp.storage.backup``) and these classes describe them.
A field the service may leave out is ``required=False``; one it may send as ``null`` is
``allow_null=True``. Holds no secrets: store URLs are described as redacted and the
backup's users carry password hashes only.

Must not import views or services (the schema module imports this one).
"""
from __future__ import annotations

from rest_framework import serializers

from raftnode.state import SWITCH_PHASES
from webapp.states import TARGET_STATES

__all__ = [
    "RaftStatusSerializer", "RaftMemberStatusSerializer", "RaftMembersSerializer", "ClusterNodeRaftSerializer",
    "ClusterNodeSerializer", "ClusterViewSerializer", "AssignmentSerializer", "MetadataStoreSerializer",
    "StoreSwitchSerializer", "SwitchProgressSerializer", "CopyDigestSerializer", "MetadataStoreStatusSerializer", "RollbackPlanSerializer",
    "StoreCheckSerializer", "MetadataStoreTestSerializer", "BackupSerializer",
    "BackupConnectorSerializer", "BackupUserSerializer", "RestoreSummarySerializer", "RestoredUsersSerializer",
    "OffsetEntrySerializer", "FREE_FORM", "RAFT_ROLES",
]

#: Why a nested object stays free-form: Connect's source partitions and offsets belong to the connector.
FREE_FORM = "Defined by the connector (Kafka Connect's source partition or offset): any JSON object"

#: a Raft member's role in the group (``RaftNode.status``'s ``state``)
RAFT_ROLES = ("LEADER", "FOLLOWER", "CANDIDATE")


def _strings(**kwargs) -> serializers.ListField:
    return serializers.ListField(child=serializers.CharField(), **kwargs)


class RaftStatusSerializer(serializers.Serializer):
    """One Raft member's view of the group (``RaftNode.status``)."""

    state = serializers.ChoiceField(choices=RAFT_ROLES, help_text="this member's Raft role")
    term = serializers.IntegerField(help_text="current Raft term")
    leader = serializers.CharField(allow_null=True, help_text="Raft address of the leader; null while none is known")
    commit_index = serializers.IntegerField(help_text="highest log index known to be committed")
    applied_index = serializers.IntegerField(help_text="highest log index applied to this member's state")
    log_size = serializers.IntegerField(help_text="entries in this member's log since its last snapshot")
    has_quorum = serializers.BooleanField(help_text="whether this member reaches a majority")
    ready = serializers.BooleanField(help_text="whether this member applied the log it found at start")


class GcFreezeSerializer(serializers.Serializer):
    """The freeze policy of a node's process (``webapp.gcpolicy.LongLivedFreeze``)."""

    freezes = serializers.IntegerField(help_text="full collections whose survivors were frozen")
    thaws = serializers.IntegerField(help_text="times the frozen objects were handed back for a complete examination")
    baseline_blocks = serializers.IntegerField(allow_null=True,
                                               help_text="allocated blocks after the last complete examination")


class GcStatusSerializer(serializers.Serializer):
    """Garbage collection of a node's process since it started (``webapp.gcpolicy``)."""

    collections = serializers.ListField(child=serializers.IntegerField(), min_length=3, max_length=3,
                                        help_text="collections per generation (0, 1, 2; 2 is a full collection)")
    max_pause_s = serializers.ListField(child=serializers.FloatField(), min_length=3, max_length=3,
                                        help_text="longest pause per generation, seconds (an upper bound)")
    last_full_pause_s = serializers.FloatField(allow_null=True, help_text="the last full collection's pause, seconds")
    freeze = GcFreezeSerializer(allow_null=True, help_text="the freeze policy; null when it does not run")


class RaftMemberStatusSerializer(RaftStatusSerializer):
    """``GET /raftconnect/v1/raft``: this member's own Raft status, with its node id, the voting members and
    its process's garbage collection."""

    node_id = serializers.CharField()
    members = _strings(help_text="Raft addresses of the voting members, this one first")
    gc = GcStatusSerializer(allow_null=True, help_text="pauses of this process's garbage collector; null when the "
                                                       "process does not time them (a node started by runnode does)")


class RaftMembersSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/raft/members`` (and ``POST``'s 201, without ``leader``)."""

    members = _strings(help_text="Raft addresses of the voting members, the answering one first")
    leader = serializers.CharField(allow_null=True, required=False, help_text="Raft address of the leader")


class ClusterNodeRaftSerializer(serializers.Serializer):
    """A Raft member's status as the leader asked it; only ``state`` (``UNREACHABLE``) when it did not answer."""

    state = serializers.ChoiceField(choices=(*RAFT_ROLES, "UNREACHABLE"))
    term = serializers.IntegerField(allow_null=True, required=False)
    leader = serializers.CharField(allow_null=True, required=False)
    commit_index = serializers.IntegerField(allow_null=True, required=False)
    applied_index = serializers.IntegerField(allow_null=True, required=False)


class ClusterNodeSerializer(serializers.Serializer):
    """One member of the cluster: a Raft member, a worker or both."""

    id = serializers.CharField(help_text="node id (also its worker id in the assignment)")
    roles = serializers.ListField(child=serializers.ChoiceField(choices=("raft", "worker")), allow_null=True)
    rest_address = serializers.CharField(allow_null=True, help_text="REST address (Connect's worker_id in statuses)")
    raft_address = serializers.CharField(allow_null=True, help_text="Raft address; null for a worker-only node")
    weight = serializers.FloatField(allow_null=True, help_text="the worker's share in assignment")
    alive = serializers.BooleanField(help_text="whether its agent's heartbeats reach the coordinator")
    reassign_in_s = serializers.FloatField(
        allow_null=True, help_text="its session ended and scheduled.rebalance.max.delay.ms holds its connectors and "
                                   "tasks for it: seconds until they are reassigned (null otherwise)")
    raft = ClusterNodeRaftSerializer(allow_null=True, help_text="null for a worker-only node")
    raft_lag = serializers.IntegerField(allow_null=True, help_text="leader's commit index minus its applied index")
    connectors = _strings(help_text="connectors assigned to it")
    tasks = _strings(help_text="tasks assigned to it, as connector-N")
    running_tasks = _strings(help_text="tasks its agent said it runs in its last heartbeat")


class ClusterViewSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/cluster``: nodes, Raft state and assignment per worker, as the leader sees them."""

    node_id = serializers.CharField(help_text="the answering node (the leader)")
    raft = RaftStatusSerializer()
    leader = serializers.CharField(allow_null=True, help_text="Raft address of the leader")
    generation = serializers.IntegerField(help_text="generation of the committed assignment")
    epoch = serializers.IntegerField(help_text="coordinator epoch (the Raft term that wrote the assignment)")
    metadata_store = serializers.CharField(help_text="name of the active metadata store")
    nodes = serializers.ListField(child=ClusterNodeSerializer())


class AssignmentSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/assignment``: the committed assignment."""

    generation = serializers.IntegerField()
    epoch = serializers.IntegerField(help_text="coordinator epoch (Raft term) that committed it")
    connectors = serializers.DictField(child=serializers.CharField(), help_text="connector name to worker (node) id")
    tasks = serializers.DictField(child=serializers.CharField(), help_text="task (connector-N) to worker (node) id")


class CopyDigestSerializer(serializers.Serializer):
    """What the verify phase counted and hashed of one kind of metadata."""

    count = serializers.IntegerField()
    sha256 = serializers.CharField()


class SwitchProgressSerializer(serializers.Serializer):
    """How far a switch got; each figure appears once its phase reached it."""

    names_total = serializers.IntegerField(required=False, help_text="connector names to copy")
    names_copied = serializers.IntegerField(required=False)
    names_verified = serializers.IntegerField(required=False)
    names_caught_up_at_commit = serializers.IntegerField(required=False,
                                                         help_text="names written again during the copy")
    prepare_s = serializers.FloatField(required=False, help_text="seconds")
    copy_s = serializers.FloatField(required=False, help_text="seconds")
    duration_s = serializers.FloatField(required=False, help_text="seconds, whole switch")
    commit_stall_ms = serializers.FloatField(required=False, help_text="writes held at the commit point")
    longest_gate_wait_ms = serializers.FloatField(required=False, help_text="longest wait of one write")
    old_store_read_only = serializers.BooleanField(required=False)
    digest = serializers.DictField(child=CopyDigestSerializer(), required=False,
                                   help_text="the verified copy per kind (config, statuses, offsets), from the commit")


class StoreSwitchSerializer(serializers.Serializer):
    """The latest metadata-store switch."""

    id = serializers.CharField()
    source = serializers.CharField(help_text="store switched from")
    target = serializers.CharField(help_text="store switched to")
    phase = serializers.ChoiceField(choices=SWITCH_PHASES)
    epoch = serializers.IntegerField(help_text="Raft term of the leader that runs it")
    started_at = serializers.FloatField(help_text="unix seconds")
    updated_at = serializers.FloatField(help_text="unix seconds")
    progress = SwitchProgressSerializer()
    error = serializers.CharField(allow_null=True, help_text="why it was aborted")


class MetadataStoreSerializer(serializers.Serializer):
    """A metadata store this node knows (``StoreSet.describe``): built in, configured by
    ``RAFTCONNECT_STORE_<NAME>``, or added to the cluster at run time. Never a password."""

    name = serializers.CharField()
    backend = serializers.CharField(allow_null=True, help_text="raft, postgresql, mysql, ... or a plugin's scheme")
    url = serializers.CharField(allow_null=True, help_text="null for raft; an environment store's with its password "
                                                           "redacted; an added store's as added (references only)")
    source = serializers.ChoiceField(choices=("raft", "environment", "cluster"), allow_null=True,
                                     help_text="built in, this node's environment, or added at run time (replicated)")
    active = serializers.BooleanField()
    password = serializers.CharField(required=False, allow_null=True,
                                     help_text="an added store's config-provider reference, never a password")
    added_at = serializers.FloatField(required=False, allow_null=True, help_text="unix seconds")
    added_by = serializers.CharField(required=False, allow_null=True)
    shadows = serializers.CharField(required=False, help_text="set when an added store has this environment "
                                                              "store's name")
    error = serializers.CharField(required=False, help_text="set when the active store is not configured here")


class RollbackPlanSerializer(serializers.Serializer):
    """What a rollback would do now."""

    possible = serializers.BooleanField()
    action = serializers.ChoiceField(choices=("abort", "switch_back"), allow_null=True)
    target = serializers.CharField(allow_null=True, help_text="the store that would be active afterwards")
    reason = serializers.CharField(help_text="a sentence that says why, for people")


class MetadataStoreStatusSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/metadata-store`` (and the 202 of switch and rollback)."""

    active = serializers.CharField(help_text="name of the active store")
    previous = serializers.CharField(allow_null=True, help_text="store active before the last switch")
    stores = serializers.ListField(child=MetadataStoreSerializer())
    switch = StoreSwitchSerializer(allow_null=True, help_text="the latest switch; null if none ran")
    rollback = RollbackPlanSerializer()


class StoreCheckSerializer(serializers.Serializer):
    """One step of a store test."""

    check = serializers.ChoiceField(choices=("resolve", "connect", "schema"))
    ok = serializers.BooleanField()
    message = serializers.CharField(help_text="what was found, or why it failed")
    elapsed_ms = serializers.FloatField()


class MetadataStoreTestSerializer(serializers.Serializer):
    """``POST /raftconnect/v1/metadata-store/stores/{name}/test``: each check until one fails."""

    name = serializers.CharField()
    ok = serializers.BooleanField(help_text="every check passed")
    checks = serializers.ListField(child=StoreCheckSerializer())
    connectors = serializers.IntegerField(allow_null=True, help_text="connector names the store holds (a switch "
                                                                     "to it replaces them); null if not reached")


class OffsetEntrySerializer(serializers.Serializer):
    """One committed offset: Kafka Connect's ``{"partition", "offset"}``."""

    partition = serializers.DictField(help_text=FREE_FORM)
    offset = serializers.DictField(help_text=FREE_FORM)


class BackupConnectorSerializer(serializers.Serializer):
    """One connector name of a backup; config and target state are null for the offsets of a deleted one."""

    name = serializers.CharField()
    config = serializers.DictField(child=serializers.CharField(), allow_null=True)
    target_state = serializers.ChoiceField(choices=TARGET_STATES, allow_null=True)
    tasks = serializers.ListField(child=serializers.DictField(child=serializers.CharField()),
                                  help_text="task configs")
    offsets = serializers.ListField(child=OffsetEntrySerializer())


class BackupUserSerializer(serializers.Serializer):
    """A REST user in a backup: never a password, only Django's hash of it."""

    username = serializers.CharField()
    password = serializers.CharField(help_text="Django password hash (algorithm$iterations$salt$hash)")
    is_active = serializers.BooleanField()
    is_superuser = serializers.BooleanField(help_text="true for the admin role")
    groups = _strings(help_text="the user's role")


class BackupSerializer(serializers.Serializer):
    """``GET /raftconnect/v1/backup`` and the body of ``POST /raftconnect/v1/restore`` (format version 1)."""

    format = serializers.ChoiceField(choices=("raftconnect-backup",))
    version = serializers.IntegerField()
    created_at = serializers.CharField(help_text="ISO-8601, UTC")
    store = serializers.CharField(help_text="the store it was read from")
    connectors = serializers.ListField(child=BackupConnectorSerializer())
    users = serializers.ListField(child=BackupUserSerializer(), help_text="empty with ?users=false")
    sha256 = serializers.CharField(help_text="hex SHA-256 of the document without this key (canonical JSON)")


class RestoredUsersSerializer(serializers.Serializer):
    """Users a restore created, and those it kept because the cluster had them."""

    created = _strings()
    kept = _strings()


class RestoreSummarySerializer(serializers.Serializer):
    """``POST /raftconnect/v1/restore``: what was written."""

    connectors = serializers.IntegerField(help_text="connectors restored")
    offsets = serializers.IntegerField(help_text="committed offsets restored")
    names = _strings(help_text="connector names restored (configs or offsets)")
    users = RestoredUsersSerializer()
