"""Internal endpoints used by worker agents: heartbeat, leave, task configs, status, offsets.

Only HMAC-signed requests from cluster members are accepted (see
``webapp.coordinator.signing``). Writes carry the sender's worker id and the
generation of its assignment; stale ones are refused with 409 (fencing).
"""
from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

from django.conf import settings
from rest_framework.authentication import BaseAuthentication
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission
from rest_framework.request import Request
from rest_framework.views import APIView
from rest_framework.response import Response

from raftnode import CommandRejected, RaftUnavailable
from raftnode.state import STORE_RAFT
from webapp.connect.herder import BadRequest, ConnectRestError
from webapp.connect.locator import NodeNotReady, current
from webapp.plugin import ConnectorTaskId, SourceOffset
from webapp.coordinator.coordinator import NotCoordinator
from webapp.coordinator.signing import verify_request
from webapp.states import STATES
from webapp.storage.base import OffsetCommit, StatusReport

from .views import ConnectAPIView

log = logging.getLogger(__name__)

__all__ = ["ClusterMemberAuthentication", "LeaderView", "LocalRaftView", "UserDirectoryView", "HeartbeatView", "LeaveView", "TaskConfigsView", "StatusReportView",
           "StatusReportsView", "OffsetsCommitView", "OffsetCommitsView", "TaskStartView"]


class ClusterMember:
    """The authenticated principal of a signed internal request."""

    is_authenticated = True

    def __str__(self) -> str:
        return "cluster-member"


class ClusterMemberAuthentication(BaseAuthentication):
    """Accepts a request only with a valid HMAC signature by the cluster secret."""

    def authenticate(self, request: Request):
        try:
            secret = current().secret
        except NodeNotReady as exc:
            raise AuthenticationFailed("Node is starting") from exc
        raw = request._request
        why = verify_request(secret, raw)
        if why:
            raise AuthenticationFailed(why)
        return ClusterMember(), None

    def authenticate_header(self, request: Request) -> str:
        return "HMAC-SHA256"


class IsClusterMember(BasePermission):
    def has_permission(self, request, view) -> bool:
        return isinstance(request.user, ClusterMember)


class InternalView(ConnectAPIView):
    """Base of internal views: signed requests only; writes go to the leader like public ones."""

    authentication_classes = [ClusterMemberAuthentication]
    permission_classes = [IsClusterMember]

    @staticmethod
    def field(body: dict[str, Any], name: str, kind: type | tuple, optional: bool = False):
        value = body.get(name)
        if value is None and optional:
            return None
        if not isinstance(value, kind) or isinstance(value, bool) and kind is int:
            raise BadRequest(f"Field {name} is missing or has the wrong type")
        return value

    @classmethod
    def objects(cls, body: dict[str, Any], name: str, what: str) -> Iterator[dict[str, Any]]:
        """The items of the list field ``name`` of ``body``, each checked to be an object as it is reached.
        Errors: :class:`BadRequest` (``"Each {what} must be an object"``, or the field's own)."""
        for item in cls.field(body, name, list):
            if not isinstance(item, dict):
                raise BadRequest(f"Each {what} must be an object")
            yield item


def _coordinator():
    node = current()
    return node.coordinator


def _touch(worker_id: str) -> None:
    coordinator = _coordinator()
    if coordinator is not None and coordinator.active:
        coordinator.touch(worker_id)


class HeartbeatView(InternalView):
    """``POST /raftconnect/v1/internal/heartbeat``: join/heartbeat; returns the worker's view."""

    def post(self, request: Request) -> Response:
        body = request.data
        worker_id = self.field(body, "worker_id", str)
        t0 = time.monotonic()
        try:
            view = _coordinator().heartbeat(worker_id, body.get("member") or {}, body.get("running") or {})
        except NotCoordinator as exc:
            raise ConnectRestError(str(exc), 421) from exc
        took = time.monotonic() - t0
        if took > 0.5:
            log.warning("heartbeat of %s took %.2f s to handle", worker_id, took)
        return Response(view)


class LeaderView(InternalView):
    """``GET /raftconnect/v1/internal/leader``: ``{"leader_rest_address"}`` as this member knows it (never forwarded)."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        APIView.initial(self, request, *args, **kwargs)  # authentication only: always answered here

    def get(self, request: Request) -> Response:
        node = current()
        if node.raft is None:
            raise ConnectRestError("This node is not a Raft member", 421)
        address = node.options.rest_address if node.raft.is_leader else node.leader_rest_address()
        return Response({"leader_rest_address": address})


class UserDirectoryView(InternalView):
    """``GET /raftconnect/v1/internal/users``: this member's replicated users and token digests (never forwarded).

    ``{"users": {name: record}, "tokens": {digest: record}}`` as in ``ClusterStateMachine``; for
    worker-only nodes, which hold no replica (``accounts.RemoteDirectory``). Members only (signed).
    """

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        APIView.initial(self, request, *args, **kwargs)

    def get(self, request: Request) -> Response:
        node = current()
        if node.raft is None:
            raise ConnectRestError("This node is not a Raft member", 404)
        state = node.raft.state
        return Response({"users": {n: state.user(n) for n in state.user_names()},
                         "tokens": {d: dict(t) for d, t in list(state.tokens.items())}})


class LocalRaftView(InternalView):
    """``GET /raftconnect/v1/internal/raft``: this member's own Raft status (never forwarded)."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        APIView.initial(self, request, *args, **kwargs)

    def get(self, request: Request) -> Response:
        node = current()
        if node.raft is None:
            raise ConnectRestError("This node is not a Raft member", 404)
        return Response(node.raft.status())


class LeaveView(InternalView):
    """``POST /raftconnect/v1/internal/leave``: a worker leaves the group."""

    def post(self, request: Request) -> Response:
        _coordinator().leave(self.field(request.data, "worker_id", str))
        return Response(status=204)


class TaskConfigsView(InternalView):
    """``POST /raftconnect/v1/internal/connectors/{name}/tasks``: store task configs (fenced)."""

    def post(self, request: Request, name: str) -> Response:
        body = request.data
        configs = self.field(body, "configs", list)
        worker_id, generation = self.field(body, "worker_id", str), self.field(body, "generation", int)
        _touch(worker_id)
        node = current()
        # The Raft store grants the connector's tasks anew in the entry that writes their configs. Another
        # store keeps task configs outside Raft, so the grant follows the write (see
        # ClusterStateMachine._zzzzzz_regrant_tasks); a worker writes configs only when they changed, so a
        # write over existing ones is a change, or a retry of one, which may be granted twice.
        outside_raft = node.raft is not None and node.raft.state.active_store != STORE_RAFT
        before = node.store.get_connector(name) if outside_raft else None
        node.store.put_task_configs(name, configs, worker_id=worker_id, generation=generation)
        if before is not None and before.tasks:
            node.raft.commands.zzzzzz_regrant_tasks(name=name, count=max(len(before.tasks), len(configs)))
        _coordinator().poke(name)
        return Response(status=204)


class StatusReportView(InternalView):
    """``POST /raftconnect/v1/internal/connectors/{name}/status``: report a connector or task state (fenced)."""

    def post(self, request: Request, name: str) -> Response:
        body = request.data
        state = self.field(body, "state", str)
        _touch(body.get("worker_id", ""))
        if state not in STATES:
            raise BadRequest(f"Unknown state {state}")
        current().store.put_status(name, self.field(body, "task", int, optional=True),
                                   {"state": state, "trace": body.get("trace")},
                                   worker_id=self.field(body, "worker_id", str),
                                   generation=self.field(body, "generation", int))
        return Response(status=204)


class StatusReportsView(InternalView):
    """``POST /raftconnect/v1/internal/statuses``: report many connector and task states at once.

    Body: ``{"worker_id", "statuses": [{"connector", "task" (int or null), "generation", "state",
    "trace"}, ...]}``. Answers 200 ``{"results": [...]}``, one entry per status in order: ``null``
    when recorded, else ``{"error_code": 409 | 404, "message"}`` for a status refused alone (fenced,
    unknown connector); the others are recorded. A malformed status fails the whole request (400).
    What an agent's status reports become when many are due at once (``ControlPlaneClient``
    gathers them): one request and, on the Raft store, one log entry instead of one per task.
    """

    def post(self, request: Request) -> Response:
        body = request.data
        worker_id = self.field(body, "worker_id", str)
        reports = []
        for item in self.objects(body, "statuses", "status"):
            state = self.field(item, "state", str)
            if state not in STATES:
                raise BadRequest(f"Unknown state {state}")
            trace = item.get("trace")
            if trace is not None and not isinstance(trace, str):
                raise BadRequest("Field trace has the wrong type")
            reports.append(StatusReport(self.field(item, "connector", str), self.field(item, "task", int, optional=True),
                                        {"state": state, "trace": trace}, self.field(item, "generation", int)))
        _touch(worker_id)
        outcomes = current().store.put_statuses(reports, worker_id=worker_id)
        return Response({"results": [None if e is None else {"error_code": e.http_status, "message": str(e)}
                                     for e in outcomes]})


class OffsetsCommitView(InternalView):
    """``GET|POST /raftconnect/v1/internal/connectors/{name}/offsets``: read or commit (fenced) offsets."""

    def get(self, request: Request, name: str) -> Response:
        """The offsets a task starts from: current on any member (``latest_offsets``), never older than a
        commit acknowledged before the request; 503 when this member cannot catch up in time (the
        agent's client then asks another)."""
        return Response(_offsets_body(current().store.latest_offsets(name)))

    def post(self, request: Request, name: str) -> Response:
        body = request.data
        entries = _offsets_of(body)
        worker_id = self.field(body, "worker_id", str)
        _touch(worker_id)
        store = current().store
        task_id, generation = ConnectorTaskId(name, self.field(body, "task", int)), self.field(body, "generation", int)
        seq = self.field(body, "seq", int, optional=True)
        if seq is None:  # an agent from before commit numbers
            store.commit_offsets(task_id, entries, worker_id=worker_id, generation=generation)
        else:
            [error] = store.commit_offsets_many([OffsetCommit(task_id, entries, generation, seq)], worker_id=worker_id)
            if error is not None:
                raise error
        _record_topics(store, name, body.get("topics"))
        return Response(status=204)


class TaskStartView(InternalView):
    """``POST /raftconnect/v1/internal/connectors/{name}/tasks/{task}/start``: a task instance starts; answers
    the offsets it starts from.

    Body: ``{"worker_id", "generation", "seq"}`` (``seq``: the agent's counter now). Commits the start
    through Raft (``ClusterStateMachine._zzzzzzz_start_task``: fenced, 409 when the task is not this
    worker's at that generation; it raises the task's commit floor, so a late commit of an earlier
    instance is refused from then on), then answers ``{"offsets": [[partition, offset], ...]}`` read
    after that entry applied: never older than a commit acknowledged before the request.
    """

    def post(self, request: Request, name: str, task: int) -> Response:
        body = request.data
        worker_id = self.field(body, "worker_id", str)
        _touch(worker_id)
        node = current()
        if node.raft is None:
            raise ConnectRestError("This node is not a Raft member", 404)
        try:
            node.raft.commands.zzzzzzz_start_task(name=name, task=task, worker_id=worker_id,
                                                  generation=self.field(body, "generation", int),
                                                  seq=self.field(body, "seq", int))
        except CommandRejected as exc:
            raise ConnectRestError(str(exc), exc.code) from exc
        except RaftUnavailable as exc:
            raise ConnectRestError(f"The start of task {name}-{task} was not committed: {exc}", 503) from exc
        return Response(_offsets_body(node.store.get_offsets(name)))


class TaskStartsView(InternalView):
    """``POST /raftconnect/v1/internal/starts``: many task instances of one worker start at once; answers the
    offsets they start from.

    Body: ``{"worker_id", "starts": [{"connector", "task", "generation", "seq"}, ...]}``. Commits every
    start in one Raft entry (``ClusterStateMachine._zzzzzzzz_start_tasks``), each fenced and raising its
    task's commit floor alone, as :class:`TaskStartView` does for one. Answers 200 ``{"results": [...],
    "offsets": {connector: [[partition, offset], ...]}}``: one result per start in order (``null`` when
    recorded, else ``{"error_code": 409, "message"}`` for a start fenced alone), and the committed offsets
    of each connector with a recorded start, read after the entry applied. A malformed start fails the
    whole request (400) and nothing is recorded. What an agent's task threads start at once after a
    rebalance (``ControlPlaneClient`` gathers them): one request and one entry instead of one of each
    per task (``benchmarks/scale``).
    """

    def post(self, request: Request) -> Response:
        body = request.data
        worker_id = self.field(body, "worker_id", str)
        items = []
        for item in self.objects(body, "starts", "start"):
            items.append([self.field(item, "connector", str), self.field(item, "task", int),
                          self.field(item, "generation", int), self.field(item, "seq", int)])
        _touch(worker_id)
        node = current()
        if node.raft is None:
            raise ConnectRestError("This node is not a Raft member", 404)
        if not items:
            return Response({"results": [], "offsets": {}})
        try:
            results = node.raft.commands.zzzzzzzz_start_tasks(worker_id=worker_id, items=items)
        except RaftUnavailable as exc:
            raise ConnectRestError(f"The start of {len(items)} task(s) was not committed: {exc}", 503) from exc
        started = sorted({name for (name, *_), result in zip(items, results) if "rejected" not in result})
        return Response({"results": [None if "rejected" not in r else {"error_code": int(r.get("code", 409)),
                                                                       "message": r["rejected"]} for r in results],
                         "offsets": {name: _offsets_body(node.store.get_offsets(name))["offsets"]
                                     for name in started}})


def _offsets_body(offsets: list[SourceOffset]) -> dict[str, Any]:
    """The answer a task starts from: ``{"offsets": [[partition, offset], ...]}`` (read by
    ``ControlPlaneClient._offsets_in``)."""
    return {"offsets": [[dict(o.partition), dict(o.offset)] for o in offsets]}


def _record_topics(store, name: str, topics: Any) -> None:
    """Add the topics a committed batch of ``name`` used (Connect's active topics, KIP-558) that are not
    recorded yet; ignored unless ``topics`` is a list and topic tracking is on."""
    if topics and settings.TOPIC_TRACKING_ENABLE and isinstance(topics, list):
        new = sorted({t for t in topics if isinstance(t, str) and t} - set(store.get_topics(name)))
        if new:  # written once per topic: later batches find it already recorded
            store.put_topics(name, new)


def _offsets_of(item: dict[str, Any]) -> list[SourceOffset]:
    """The ``offsets`` field of a commit, ``[[partition, offset], ...]`` of JSON objects, as SourceOffsets.
    Errors: :class:`BadRequest` naming what is wrong."""
    pairs = InternalView.field(item, "offsets", list)
    out = []
    for pair in pairs:
        if not (isinstance(pair, list) and len(pair) == 2 and isinstance(pair[0], dict) and isinstance(pair[1], dict)):
            raise BadRequest("Each offset must be a [partition, offset] pair of objects")
        out.append(SourceOffset(pair[0], pair[1]))
    return out


class OffsetCommitsView(InternalView):
    """``POST /raftconnect/v1/internal/offsets``: commit many tasks' offsets at once (each fenced).

    Body: ``{"worker_id", "commits": [{"connector", "task", "generation", "seq"?, "offsets": [[partition,
    offset], ...], "topics"?: [...]}, ...]}`` (``seq``: the agent's number of the commit, see
    :class:`~webapp.storage.base.OffsetCommit`). Answers 200 ``{"results": [...]}``, one entry per
    commit in order: ``null`` when committed, else ``{"error_code": 409, "message"}`` for a commit
    fenced alone (its task moved or its generation is stale); the others are committed, each as
    atomically as alone. A malformed commit fails the whole request (400) and nothing is written.
    What an agent's task threads commit at the same time (``ControlPlaneClient`` gathers them):
    one request and, on the Raft store, one log entry instead of one of each per commit.
    """

    def post(self, request: Request) -> Response:
        body = request.data
        worker_id = self.field(body, "worker_id", str)
        commits, topics = [], []
        for item in self.objects(body, "commits", "commit"):
            name = self.field(item, "connector", str)
            commits.append(OffsetCommit(ConnectorTaskId(name, self.field(item, "task", int)), _offsets_of(item),
                                        self.field(item, "generation", int), self.field(item, "seq", int, optional=True)))
            topics.append(item.get("topics"))
        _touch(worker_id)
        store = current().store
        outcomes = store.commit_offsets_many(commits, worker_id=worker_id)
        used: dict[str, set[str]] = {}  # per connector: one read of its recorded topics, not one per commit
        for c, named, error in zip(commits, topics, outcomes):
            if error is None and isinstance(named, list):
                used.setdefault(c.task_id.connector, set()).update(t for t in named if isinstance(t, str))
        for name, named in used.items():
            _record_topics(store, name, sorted(named))
        return Response({"results": [None if e is None else {"error_code": e.http_status, "message": str(e)}
                                     for e in outcomes]})
