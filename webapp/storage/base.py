"""The metadata store interface: ConfigBackingStore + StatusBackingStore + OffsetBackingStore.

Owns the programming interface every metadata backend implements, named after
Kafka Connect's backing stores. A backend never decides fencing policy itself:
writes that carry ``(worker_id, generation)`` are checked against the Raft
assignment by the leader before (or, for the Raft backend, atomically with) the
write, and a stale write raises :class:`FencedWrite`.

Consistency: every write goes through the leader and is durable in the backend
when the method returns. Reads on a follower are served from that member's
replica and may lag the leader by the replication delay.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any, Callable, NamedTuple

from webapp.plugin import ConnectorTaskId, SourceOffset
from webapp.states import TARGET_STATES as _TARGET_STATES
from webapp.states import TargetState

__all__ = [
    "StatusReport",
    "OffsetCommit",
    "FenceCheck",
    "check_fence",
    "fenced_apart",
    "ConnectorRecord",
    "ConnectorSummary",
    "ListingRevisions",
    "empty_statuses",
    "NameSnapshot",
    "KINDS",
    "ConfigBackingStore",
    "StatusBackingStore",
    "OffsetBackingStore",
    "MetadataStore",
    "StoreError",
    "StoreUnavailable",
    "NotFound",
    "AlreadyExists",
    "FencedWrite",
    "LeaseLost",
    "TARGET_STATES",
]

TARGET_STATES = _TARGET_STATES  # re-exported: the one list lives in webapp.states


class StoreError(Exception):
    """Base class of metadata store errors; ``http_status`` maps it to a REST status."""

    http_status = 500


class StoreUnavailable(StoreError):
    """The store could not durably take the write or answer in time (retryable)."""

    http_status = 503


class LeaseLost(StoreUnavailable):
    """This writer no longer holds the store's writer lease (a newer leader claimed it, or the
    cluster switched to another store). Retryable through the current leader, so 503 — not a
    fencing of the worker, whose assignment may be perfectly current."""


class NotFound(StoreError):
    """The connector does not exist."""

    http_status = 404


class AlreadyExists(StoreError):
    """A create-only write found the connector already there."""

    http_status = 409


class FencedWrite(StoreError):
    """A write from a worker or generation that no longer owns the connector or task."""

    http_status = 409


#: ``fence(connector, task, worker_id, generation[, seq=])`` → reason to refuse the write, or ``None``: the
#: check a store is given for worker writes (the leader's assignment and, with a commit's ``seq``, its
#: task's start floor: ``raftnode.state``'s ``check_fence``).
FenceCheck = Callable[..., "str | None"]


def check_fence(fence: FenceCheck | None, connector: str, task: int | None, worker_id: str | None,
                generation: int, *, seq: int | None = None) -> None:
    """Refuse a worker's write that ``fence`` rejects: raises :class:`FencedWrite` with its reason.

    ``fence(connector, task, worker_id, generation)`` (``ClusterStateMachine.check_fence``); with
    ``seq`` (a task commit's number) it is called with ``seq=`` as well, which also refuses a commit
    older than its task's last start. Writes without a ``worker_id`` (REST, the leader itself) and
    stores without a fence pass.
    """
    if worker_id is None or fence is None:
        return
    why = fence(connector, task, worker_id, generation) if seq is None else \
        fence(connector, task, worker_id, generation, seq=seq)
    if why:
        raise FencedWrite(why)


def fenced_apart(commits: "list[OffsetCommit]", check: Callable[["OffsetCommit"], None]) \
        -> "tuple[list[StoreError | None], list[OffsetCommit]]":
    """``(outcomes, passed)`` for :meth:`OffsetBackingStore.commit_offsets_many`: each commit through
    ``check`` (which raises :class:`FencedWrite` to refuse it: a store's fence with the commit's
    number, or the default's whole :meth:`~OffsetBackingStore.commit_offsets`); ``outcomes`` has one
    entry per commit in order (``None``, or the refusal), ``passed`` the commits it let through, in
    order. Other errors of ``check`` propagate."""
    outcomes: list[StoreError | None] = []
    passed: list[OffsetCommit] = []
    for c in commits:
        try:
            check(c)
        except FencedWrite as exc:
            outcomes.append(exc)
            continue
        outcomes.append(None)
        passed.append(c)
    return outcomes, passed


@dataclass
class ConnectorRecord:
    """One connector as stored.

    Attributes:
        name: connector name.
        config: the connector config as submitted (``{str: str}``), secrets as references.
        target_state: desired state, one of :data:`TARGET_STATES`.
        tasks: task configs produced by the connector, index = task number.
    """

    name: str
    config: dict[str, str]
    target_state: str = TargetState.STARTED.value
    tasks: list[dict[str, str]] = field(default_factory=list)

    @property
    def task_ids(self) -> list[ConnectorTaskId]:
        """The ids of this connector's tasks, in order."""
        return [ConnectorTaskId(self.name, i) for i in range(len(self.tasks))]


class ConnectorSummary(NamedTuple):
    """One connector as a list of all of them needs it: the record without its task configs.

    What :meth:`ConfigBackingStore.connector_summaries` yields, so listing every connector
    (``GET /connectors?expand=status|info``) neither copies nor transfers each task's config.
    Immutable; ``config`` is the caller's own copy (changing it changes nothing in the store).

    Attributes:
        name: connector name.
        config: the connector config as submitted (``{str: str}``), secrets as references.
        target_state: desired state, one of :data:`TARGET_STATES`.
        task_count: how many task configs the connector has (``len(ConnectorRecord.tasks)``).
    """

    name: str
    config: dict[str, str]
    target_state: str
    task_count: int

    @classmethod
    def of(cls, record: ConnectorRecord) -> ConnectorSummary:
        """The summary of ``record`` (shares its ``config``: pass a record that is the caller's own)."""
        return cls(record.name, record.config, record.target_state, len(record.tasks))


class ListingRevisions(NamedTuple):
    """Revision numbers of what a list of every connector shows of each, from
    :meth:`MetadataStore.listing_revisions`.

    Connector ``name``'s revision is ``max(floor, revisions.get(name, 0))``; it grows whenever its
    config, target state, task count, statuses or the owners of it and its tasks change. Two
    equal revisions of one name within one ``scope`` mean nothing it shows changed in between.

    Attributes:
        scope: identifies the store instance the numbers belong to (revisions of different scopes
            are unrelated).
        floor: the least revision of every connector (raised by changes that touch any of them).
        revisions: ``{name: revision}`` of connectors changed since the floor was last raised.
    """

    scope: Any
    floor: int
    revisions: dict[str, int]

    def of(self, name: str) -> int:
        """Connector ``name``'s revision."""
        rev = self.revisions.get(name, 0)
        return rev if rev > self.floor else self.floor


def empty_statuses() -> dict[str, Any]:
    """The statuses of a connector that has reported none, as :meth:`StatusBackingStore.get_statuses`
    returns them: ``{"connector": None, "tasks": {}}`` (a new dict each call)."""
    return {"connector": None, "tasks": {}}


#: The kinds of metadata a store holds for one connector name, as named in switch progress and digests.
#: ``config`` is the connector config, its target state and its task configs.
KINDS = ("config", "statuses", "offsets")


@dataclass
class NameSnapshot:
    """Everything one store holds under one connector name (the unit the store switch copies).

    Attributes:
        name: connector name.
        record: the connector, or ``None`` when only offsets (or nothing) remain under the name.
        statuses: ``{"connector": status | None, "tasks": {"<i>": status}}`` as
            :meth:`StatusBackingStore.get_statuses` returns it.
        offsets: committed offsets, in any order.
        topics: the connector's active topics (:meth:`StatusBackingStore.get_topics`); they
            travel with the ``statuses`` kind, as Connect keeps them in its status store.
        offset_commits: ``{partition key: (generation, seq)}``: the numbered commit that wrote a
            partition's offset (``OffsetCommit.generation`` / ``.seq``), for the partitions a store
            knows it of; it travels with the ``offsets`` kind so that a store switch keeps a late
            copy of an older commit from moving the copied offset back. A store that keeps commit
            order per partition (the relational stores, the example Redis plugin) exports and
            imports it; others leave it empty and ignore it. The Raft store keeps its own commits'
            order per task, in the cluster state, which a switch does not touch, and imported
            numbers per partition until the partition's next write (``offset_orders``).
    """

    name: str
    record: ConnectorRecord | None
    statuses: dict[str, Any]
    offsets: list[SourceOffset]
    topics: list[str] = field(default_factory=list)
    offset_commits: dict[str, tuple[int, int]] = field(default_factory=dict)


class ConfigBackingStore(ABC):
    """Connector configs, target states and task configs (Connect's ``ConfigBackingStore``)."""

    @abstractmethod
    def connector_names(self) -> list[str]:
        """Names of all connectors, sorted."""

    @abstractmethod
    def get_connector(self, name: str) -> ConnectorRecord | None:
        """The connector's record, or ``None`` when it does not exist.

        The record is the caller's own copy: changing it changes nothing in the store.
        """

    def connector_summaries(self) -> Iterator[ConnectorSummary]:
        """Every connector without its task configs (see :class:`ConnectorSummary`), in name order.

        The same as ``ConnectorSummary.of(get_connector(name))`` for each of :meth:`connector_names`,
        without one read per connector: backends override it with one query, or with reads of their
        local state that neither copy nor walk task configs (the list endpoints read every connector,
        10,000 of them at the scale of issue 16). An iterator, which a backend may produce as the
        caller goes, so a long list is never held whole twice. This default loops over the per-name
        methods and leaves out a connector deleted meanwhile, so a third-party store works unchanged.

        Consistency: each connector as of some moment during the iteration; one created or deleted
        meanwhile may be listed or not. Errors: :class:`StoreUnavailable` (possibly while iterating).
        """
        for name in self.connector_names():
            rec = self.get_connector(name)
            if rec is not None:
                yield ConnectorSummary.of(rec)

    def connector_summary(self, name: str) -> ConnectorSummary | None:
        """One connector without its task configs, or ``None`` when it does not exist.

        This default reads the whole record (:meth:`get_connector`); local stores override it so
        that no task config is copied. Errors: :class:`StoreUnavailable`.
        """
        rec = self.get_connector(name)
        return None if rec is None else ConnectorSummary.of(rec)

    @abstractmethod
    def put_connector_config(self, name: str, config: dict[str, str], *, target_state: str | None = None,
                             create_only: bool = False) -> bool:
        """Create or replace a connector's config; returns ``True`` when it was created.

        ``target_state`` applies on create (default STARTED) and, when given, on
        update. Errors: :class:`AlreadyExists` with ``create_only``,
        :class:`StoreUnavailable`.
        """

    @abstractmethod
    def remove_connector_config(self, name: str) -> None:
        """Delete the connector, its task configs and statuses (offsets are kept, as in Connect).

        Errors: :class:`NotFound`, :class:`StoreUnavailable`.
        """

    @abstractmethod
    def put_target_state(self, name: str, target_state: str) -> None:
        """Set the desired state. Errors: :class:`NotFound`, :class:`StoreUnavailable`."""

    @abstractmethod
    def put_task_configs(self, name: str, task_configs: list[dict[str, str]], *, worker_id: str | None,
                         generation: int) -> None:
        """Replace the task configs, written by the worker running the connector.

        ``worker_id=None`` is the coordinator's own write (no fencing), used when a
        connector is stopped and its tasks are removed.

        Errors: :class:`FencedWrite` (not the connector's current owner),
        :class:`NotFound`, :class:`StoreUnavailable`.
        """


class StatusReport(NamedTuple):
    """One status a worker reports (an item of :meth:`StatusBackingStore.put_statuses`).

    Attributes:
        name: connector name.
        task: task number, or ``None`` for the connector instance.
        status: ``{"state", "trace"}`` (see :class:`StatusBackingStore`).
        generation: the assignment generation the worker runs the instance at (fencing).
    """

    name: str
    task: int | None
    status: dict[str, Any]
    generation: int


class OffsetCommit(NamedTuple):
    """One batch's offsets a worker commits (an item of :meth:`OffsetBackingStore.commit_offsets_many`).

    Attributes:
        task_id: the task whose batch it is.
        offsets: the batch's offsets (within it, the last offset of a partition wins).
        generation: the assignment generation the worker runs the task at (fencing).
        seq: the agent's number for this commit (one counter per agent process, so a task's later
            commits have higher numbers), or ``None`` from an agent that sends none. The Raft store
            refuses a commit older than one of its task already applied at its generation (a late
            copy; ``ClusterStateMachine._zzzzzzz_commit_offsets``); the relational stores keep each
            partition's offset from its newest commit and refuse a commit older than its task's last
            start (``webapp.storage.relational.offsets``; the example Redis plugin too); a plugin store
            may ignore it.
    """

    task_id: ConnectorTaskId
    offsets: list[SourceOffset]
    generation: int
    seq: int | None = None


class StatusBackingStore(ABC):
    """Observed states of connectors and tasks (Connect's ``StatusBackingStore``).

    A status is ``{"state": "RUNNING"|"PAUSED"|"STOPPED"|"FAILED"|"UNASSIGNED"|"RESTARTING",
    "trace": str | None, "worker_id": str, "generation": int}``.
    """

    @abstractmethod
    def put_status(self, name: str, task: int | None, status: dict[str, Any], *, worker_id: str,
                   generation: int) -> None:
        """Record the status of the connector (``task=None``) or one task.

        Errors: :class:`FencedWrite`, :class:`NotFound`, :class:`StoreUnavailable`.
        """

    def put_statuses(self, reports: list[StatusReport], *, worker_id: str) -> list[StoreError | None]:
        """Record many statuses reported by ``worker_id`` at once; one outcome per report, in order:
        ``None`` when recorded, else the :class:`FencedWrite` or :class:`NotFound` that refused it
        alone (the others are recorded).

        What a worker starting many tasks reports together (at 100,000 tasks, one request and one
        write per task was most of the leader's work; ``benchmarks/scale``). This default calls
        :meth:`put_status` for each report, so a third-party store works unchanged; backends that
        can write many in one round trip override it. Errors: :class:`StoreUnavailable` for the
        whole call (reports before it may be recorded; recording one again is harmless).
        """
        outcomes: list[StoreError | None] = []
        for r in reports:
            try:
                self.put_status(r.name, r.task, r.status, worker_id=worker_id, generation=r.generation)
                outcomes.append(None)
            except (FencedWrite, NotFound) as exc:
                outcomes.append(exc)
        return outcomes

    @abstractmethod
    def get_statuses(self, name: str) -> dict[str, Any]:
        """``{"connector": status | None, "tasks": {"<i>": status}}``; the caller's own copy."""

    # Active topics (Connect's KIP-558 ``TopicStatus`` records, names only).
    @abstractmethod
    def put_topics(self, name: str, topics: list[str]) -> None:
        """Add ``topics`` to the connector's active topics (idempotent; written by the leader when a
        task reports it used them). A connector that does not exist is ignored, so a late report
        cannot resurrect a deleted connector's topics. Removed with the connector.

        Errors: :class:`StoreUnavailable`.
        """

    @abstractmethod
    def get_topics(self, name: str) -> list[str]:
        """The connector's active topics, sorted (empty when none or no such connector)."""

    @abstractmethod
    def reset_topics(self, name: str) -> None:
        """Forget every active topic of ``name``. Errors: :class:`StoreUnavailable`."""


class OffsetBackingStore(ABC):
    """Source offsets and sink positions (Connect's ``OffsetBackingStore``)."""

    @abstractmethod
    def get_offsets(self, name: str) -> list[SourceOffset]:
        """Committed offsets of connector ``name`` (empty list when none)."""

    def latest_offsets(self, name: str) -> list[SourceOffset]:
        """Committed offsets of connector ``name``, every commit acknowledged before the call included.

        Connect reads its offsets topic to the end before it answers (``KafkaOffsetBackingStore.get``);
        this is that read, for a task's starting offsets and ``GET /connectors/{name}/offsets``, where an
        older answer would start a task back in time and its next commit would move the offsets
        backwards. The default is :meth:`get_offsets`, right for a store whose reads are all current (a
        database); a store that reads a replica overrides it. Errors: :class:`StoreUnavailable` when
        the answer cannot be made current in time.
        """
        return self.get_offsets(name)

    @abstractmethod
    def commit_offsets(self, task_id: ConnectorTaskId, offsets: list[SourceOffset], *, worker_id: str,
                       generation: int) -> None:
        """Atomically store all ``offsets`` of one batch of ``task_id``.

        Errors: :class:`FencedWrite` when the task moved away from ``worker_id``
        or ``generation`` is stale; :class:`StoreUnavailable`.
        """

    def commit_offsets_many(self, commits: list[OffsetCommit], *, worker_id: str) -> list[StoreError | None]:
        """Commit many tasks' batches of ``worker_id`` at once; one outcome per commit, in order: ``None``
        when committed, else the :class:`FencedWrite` that refused it alone (the others are committed).

        What an agent's task threads commit together (``ControlPlaneClient`` gathers them into one
        request). This default calls :meth:`commit_offsets` for each, so a third-party store works
        unchanged; backends that can write many in one round trip override it. Each commit stays
        atomic on its own. Errors: :class:`StoreUnavailable` for the whole call (commits before it
        may be written; writing one again is harmless, the last offset wins).
        """
        outcomes, _ = fenced_apart(commits, lambda c: self.commit_offsets(
            c.task_id, c.offsets, worker_id=worker_id, generation=c.generation))  # fenced and written
        return outcomes

    @abstractmethod
    def alter_offsets(self, name: str, offsets: list[SourceOffset | tuple[dict, None]]) -> None:
        """Operator change of a stopped connector's offsets; an offset of ``None`` removes the partition."""

    @abstractmethod
    def reset_offsets(self, name: str) -> None:
        """Remove every offset of ``name``."""


class MetadataStore(ConfigBackingStore, StatusBackingStore, OffsetBackingStore, ABC):
    """One metadata backend: configs, statuses and offsets behind one object.

    Besides the three backing-store interfaces, a backend implements what the
    online store switch (:mod:`webapp.storage.switch`) needs: listing every name
    it holds, exporting and importing one name whole, clearing everything, and a
    writer lease (:meth:`claim`) that fences writes of a deposed leader.

    Attributes:
        name: the store's configured name (``raft``, ``pg``, ...).
        external: ``True`` when the data lives outside the Raft group, so a
            deposed leader could still reach it and :meth:`claim` must fence it.
    """

    name: str = "abstract"
    external: bool = True

    def prepare(self) -> None:
        """Make the store ready for use: reach it, create its schema. Idempotent.

        Errors: :class:`StoreUnavailable` when it cannot be reached or set up.
        """

    def close(self) -> None:
        """Release connections. The object must not be used afterwards."""

    def ping(self) -> None:
        """Check that the store answers now: one cheap round trip, for ``GET /health``.

        The default reads a connector that cannot exist (the empty name), which
        reaches any backend; backends override it with their own no-op round trip
        (``SELECT 1``, Redis ``PING``). Bounded by the backend's connect timeout.

        Errors: :class:`StoreUnavailable` (the message names the store and its
        redacted address).
        """
        self.get_connector("")

    @abstractmethod
    def offset_names(self) -> list[str]:
        """Names that have committed offsets (including deleted connectors, whose offsets are kept), sorted."""

    def connectors_with_statuses(self) -> Iterator[tuple[ConnectorSummary, dict[str, Any]]]:
        """Every connector with its statuses, in name order: ``(summary, statuses)`` where ``summary``
        is what :meth:`connector_summaries` gives and ``statuses`` what :meth:`get_statuses` gives
        (the empty shape, :func:`empty_statuses`, for a connector that reported nothing).

        For ``GET /connectors?expand=status``. This default is :meth:`connector_summaries` with
        :meth:`get_statuses` per connector, one connector at a time as the caller iterates: right for
        stores whose reads are local (the Raft store), and the only way for a plugin that has no
        bulk read. Stores with a round trip per read override it (relational: two queries). Lazy on
        purpose: at 10,000 connectors of 10 tasks, holding every status copy at once cost the Raft
        store's list 0.38 s of CPU against 0.27 s, mostly the garbage collector's full collections.
        Everything yielded is the caller's own copy.

        Consistency: each connector's summary and statuses as of some moment during the iteration
        (not necessarily the same moment for both). Errors: :class:`StoreUnavailable`.
        """
        for summary in self.connector_summaries():
            yield summary, self.get_statuses(summary.name)

    def listing_revisions(self) -> ListingRevisions | None:
        """Revisions of what a list of every connector shows of each (see :class:`ListingRevisions`),
        or ``None`` when the store keeps none (this default: a store whose data other processes
        change, as a database's, cannot tell).

        With them, ``GET /connectors?expand=...`` rebuilds only the entries that changed since the
        last list (:mod:`webapp.connect.listing`). Contract: every revision is raised after the
        change it stands for is readable, so data read after this call is at least as new as the
        revisions it returned. Cheap: a copy of one dict, no I/O.
        """
        return None

    def all_names(self) -> list[str]:
        """Every name the store holds anything under (configs or offsets), sorted."""
        return sorted(set(self.connector_names()) | set(self.offset_names()))

    def export_name(self, name: str) -> NameSnapshot:
        """Everything held under ``name`` (see :class:`NameSnapshot`); an empty snapshot when nothing is."""
        return NameSnapshot(name, self.get_connector(name), self.get_statuses(name), self.get_offsets(name),
                            self.get_topics(name))

    @abstractmethod
    def import_name(self, snapshot: NameSnapshot, kinds: tuple[str, ...] = KINDS) -> None:
        """Replace what the store holds under ``snapshot.name`` for each of ``kinds`` (see :data:`KINDS`).

        Unfenced (the store switch copies what the source store already
        accepted) but subject to :meth:`claim`. ``config`` with
        ``snapshot.record=None`` removes the connector (config, target state and
        task configs); ``statuses`` (with ``snapshot.topics``) and ``offsets`` replace all of the name's
        statuses and active topics, or offsets with the snapshot's (empty removes them). One
        transaction where the backend has them.

        Errors: :class:`StoreUnavailable`, :class:`LeaseLost`.
        """

    @abstractmethod
    def clear(self) -> None:
        """Remove every connector, status and offset (a switch target starts empty).

        Errors: :class:`StoreUnavailable`, :class:`LeaseLost`.
        """

    def claim(self, term: int, *, read_only: bool = False) -> None:
        """Take the writer lease for leader ``term``: from now on writes through other
        objects (other nodes) holding an older term fail with :class:`LeaseLost`,
        and with ``read_only=True`` every write fails (the store was switched away
        from). A claim with a term older than the stored one fails with
        :class:`LeaseLost`.

        The default does nothing: right for stores whose writes are already
        ordered by Raft terms (``external = False``).
        """
