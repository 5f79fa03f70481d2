"""The ``raft`` metadata store: metadata replicated by the cluster's own Raft group.

Owns translating :class:`~webapp.storage.base.MetadataStore` calls into replicated
commands of :class:`raftnode.state.ClusterStateMachine` and their rejections into
store errors. Reads are served from the local replica. Fencing is checked inside
the state machine's apply, atomically with the write.
"""
from __future__ import annotations

from typing import Any
from collections.abc import Callable, Iterator

from raftnode import CommandRejected, RaftNode, RaftUnavailable
from webapp.plugin import ConnectorTaskId, SourceOffset, partition_key

from .base import (
    KINDS, AlreadyExists, ConnectorRecord, ConnectorSummary, FencedWrite, ListingRevisions, MetadataStore, NameSnapshot, NotFound,
    OffsetCommit, StatusReport, StoreError, StoreUnavailable,
)

__all__ = ["RaftMetadataStore"]


def _log_entries(offsets: list[SourceOffset]) -> list[list]:
    """``offsets`` as the offset commands take them: ``[[partition key, partition, offset], ...]`` (copies)."""
    return [[partition_key(o.partition), dict(o.partition), dict(o.offset)] for o in offsets]


def _store_error(reason: str, code: int) -> StoreError:
    """The store error for a command the state machine refused with ``reason`` and HTTP ``code``."""
    if code == 404:
        return NotFound(reason)
    if code == 503:
        return StoreUnavailable(reason)
    if "already exists" in reason:
        return AlreadyExists(reason)
    return FencedWrite(reason)


class RaftMetadataStore(MetadataStore):
    """Metadata in the Raft log and snapshot of ``raft`` (see module docstring).

    Args:
        raft: the local Raft member.
        write_timeout: seconds a write waits to be committed (covers a leader
            election) before :class:`StoreUnavailable`.
        read_timeout: seconds :meth:`latest_offsets` waits for its read barrier before
            :class:`StoreUnavailable` (less than an agent's request timeout, so that its client
            can still ask another member).
    """

    name = "raft"
    external = False  # a deposed leader cannot commit to the Raft log: claim() has nothing to fence

    def __init__(self, raft: RaftNode, write_timeout: float = 10.0, read_timeout: float = 5.0):
        self.raft = raft
        self.write_timeout = write_timeout
        self.read_timeout = read_timeout

    def _commit(self, command: Callable[..., dict[str, Any]], **args: Any) -> dict[str, Any]:
        """Run one of ``self.raft.commands``' methods with this store's write timeout, mapping its errors."""
        try:
            return command(timeout=self.write_timeout, **args)
        except RaftUnavailable as exc:
            raise StoreUnavailable(str(exc)) from exc
        except CommandRejected as exc:
            raise _store_error(exc.reason, exc.code) from exc

    def ping(self) -> None:
        """Reads come from the local replica and always answer; writes need a Raft leader.

        Errors: :class:`StoreUnavailable` while this member knows no leader.
        """
        if self.raft.leader is None:
            raise StoreUnavailable("metadata store 'raft': no Raft leader is known, so writes cannot commit")

    # config
    def connector_names(self) -> list[str]:
        return self.raft.state.connector_names()

    def get_connector(self, name: str) -> ConnectorRecord | None:
        rec = self.raft.state.connector(name)
        if rec is None:
            return None
        return ConnectorRecord(name=name, config=rec["config"], target_state=rec["target_state"], tasks=rec["tasks"])

    def connector_summaries(self) -> Iterator[ConnectorSummary]:
        """Every connector without its task configs, read from the local replica one connector at a
        time as the caller iterates (task configs are neither copied nor walked)."""
        state = self.raft.state
        for name in state.connector_names():
            row = state.connector_summary(name)
            if row is not None:
                yield ConnectorSummary(name, *row)

    def connector_summary(self, name: str) -> ConnectorSummary | None:
        row = self.raft.state.connector_summary(name)
        return None if row is None else ConnectorSummary(name, *row)

    def listing_revisions(self) -> ListingRevisions:
        """The local replica's listing revisions (``ClusterStateMachine.listing_revisions``), raised
        as this member applies each change."""
        state = self.raft.state
        floor, revisions = state.listing_revisions()
        return ListingRevisions((self.name, id(state)), floor, revisions)

    def put_connector_config(self, name: str, config: dict[str, str], *, target_state: str | None = None,
                             create_only: bool = False) -> bool:
        return bool(self._commit(self.raft.commands.put_connector_config, name=name, config=dict(config),
                                 target_state=target_state, create_only=create_only)["created"])

    def remove_connector_config(self, name: str) -> None:
        self._commit(self.raft.commands.delete_connector, name=name)

    def put_target_state(self, name: str, target_state: str) -> None:
        self._commit(self.raft.commands.put_target_state, name=name, target_state=target_state)

    def put_task_configs(self, name: str, task_configs: list[dict[str, str]], *, worker_id: str | None,
                         generation: int) -> None:
        """Replace the task configs; when they replace others, the same log entry grants the connector's
        assigned tasks anew, fencing every instance started before (``_zzzzzz_put_task_configs``)."""
        self._commit(self.raft.commands.zzzzzz_put_task_configs, name=name, worker_id=worker_id,
                     generation=generation, task_configs=[dict(t) for t in task_configs])

    # status
    def put_status(self, name: str, task: int | None, status: dict[str, Any], *, worker_id: str,
                   generation: int) -> None:
        self._commit(self.raft.commands.put_status, name=name, task=task, worker_id=worker_id, generation=generation,
                     status=dict(status))

    def put_statuses(self, reports: list[StatusReport], *, worker_id: str) -> list[StoreError | None]:
        """Every report in one log entry (``_zzzz_put_statuses``), each fenced on its own."""
        if not reports:
            return []
        results = self._commit(self.raft.commands.zzzz_put_statuses, worker_id=worker_id,
                               items=[[r.name, r.task, r.generation, dict(r.status)] for r in reports])
        return self._outcomes(results)

    @staticmethod
    def _outcomes(results: list[dict[str, Any]]) -> list[StoreError | None]:
        """Per-item outcomes of a many-item command: ``None`` or the item's own store error; raises
        :class:`StoreUnavailable` when the store closed (a switch), since then nothing was written."""
        outcomes: list[StoreError | None] = []
        for result in results:
            error = _store_error(result["rejected"], result["code"]) if "rejected" in result else None
            if isinstance(error, StoreUnavailable):
                raise error
            outcomes.append(error)
        return outcomes

    def get_statuses(self, name: str) -> dict[str, Any]:
        return self.raft.state.status(name)

    def put_topics(self, name: str, topics: list[str]) -> None:
        self._commit(self.raft.commands.put_topics, name=name, topics=sorted(set(topics)))

    def get_topics(self, name: str) -> list[str]:
        return self.raft.state.connector_topics(name)

    def reset_topics(self, name: str) -> None:
        self._commit(self.raft.commands.reset_topics, name=name)

    # offsets
    def get_offsets(self, name: str) -> list[SourceOffset]:
        return [SourceOffset(p, o) for p, o in self.raft.state.connector_offsets(name).values()]

    def latest_offsets(self, name: str) -> list[SourceOffset]:
        """The local replica's offsets after a Raft read barrier (:meth:`RaftNode.read_barrier`): a
        follower behind the leader (just back from a partition, a slow or full disk) answered older
        offsets, and a task started from them rewound its source (benchmarks/chaos, invariant
        ``offsets-monotonic``). Errors: :class:`StoreUnavailable` when the barrier is not applied here
        within :attr:`read_timeout` seconds; an agent's client then asks another member."""
        try:
            self.raft.read_barrier(timeout=self.read_timeout)
        except RaftUnavailable as exc:
            raise StoreUnavailable(f"offsets of {name} not read: this member could not catch up with the Raft "
                                   f"log ({exc})") from exc
        return self.get_offsets(name)

    def commit_offsets(self, task_id: ConnectorTaskId, offsets: list[SourceOffset], *, worker_id: str,
                       generation: int) -> None:
        entries = _log_entries(offsets)
        self._commit(self.raft.commands.commit_offsets, name=task_id.connector, task=task_id.task, worker_id=worker_id,
                     generation=generation, entries=entries)

    def commit_offsets_many(self, commits: list[OffsetCommit], *, worker_id: str) -> list[StoreError | None]:
        """Every commit in one log entry (``_zzzzzzz_commit_offsets``), each fenced, checked against its
        task's later commits by ``seq`` and applied on its own."""
        if not commits:
            return []
        items = [[c.task_id.connector, c.task_id.task, c.generation, c.seq, _log_entries(c.offsets)]
                 for c in commits]
        results = self._commit(self.raft.commands.zzzzzzz_commit_offsets, worker_id=worker_id, items=items)
        return self._outcomes(results)

    def alter_offsets(self, name: str, offsets: list) -> None:
        entries = []
        for item in offsets:
            partition, offset = (item.partition, item.offset) if isinstance(item, SourceOffset) else item
            entries.append([partition_key(partition), dict(partition), dict(offset) if offset is not None else None])
        self._commit(self.raft.commands.commit_offsets, name=name, task=None, worker_id="", generation=0, entries=entries)

    def reset_offsets(self, name: str) -> None:
        self._commit(self.raft.commands.reset_offsets, name=name)

    # switch support
    def offset_names(self) -> list[str]:
        return sorted(n for n, offs in list(self.raft.state.offsets.items()) if offs)

    def export_name(self, name: str) -> NameSnapshot:
        """As every store's, with ``offset_commits`` the numbers of the offsets imported from another store
        that no commit has written since (``ClusterStateMachine.offset_orders``); the others' order is their
        task's commit floor, in the cluster state."""
        snap = super().export_name(name)
        snap.offset_commits = {k: (v[0], v[1]) for k, v in dict(self.raft.state.offset_orders.get(name, {})).items()}
        return snap

    def import_name(self, snapshot: NameSnapshot, kinds: tuple[str, ...] = KINDS) -> None:
        self.import_names([snapshot], kinds)

    def import_names(self, snapshots: list[NameSnapshot], kinds: tuple[str, ...] = KINDS) -> None:
        """:meth:`import_name` for many names in one log entry (the switch copies in batches)."""
        items = []
        for snap in snapshots:
            rec = snap.record
            record = None if rec is None else {"config": dict(rec.config), "target_state": rec.target_state,
                                               "tasks": [dict(t) for t in rec.tasks]}
            offsets = _log_entries(snap.offsets)
            orders = {k: [g, q] for k, (g, q) in snap.offset_commits.items()}
            items.append([snap.name, list(kinds), record, snap.statuses, offsets, sorted(set(snap.topics)), orders])
        if items:
            self._commit(self.raft.commands.import_names, items=items)

    def clear(self) -> None:
        self._commit(self.raft.commands.clear_metadata)
