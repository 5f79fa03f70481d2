"""ControlPlaneClient: how an agent talks to the cluster's internal REST endpoints.

Owns signing, retries with backoff (tenacity) for transient failures, mapping
replies to exceptions, and gathering the status reports and offset commits that
an agent's threads make at the same time into one request each
(:class:`_RequestGroup`, the batch endpoints). A 409 means the write was fenced: the caller no
longer owns the task and must stop it.
"""
from __future__ import annotations

import itertools
import json
import logging
import threading
from typing import Any, Callable

import urllib3
from tenacity import retry, retry_if_exception_type, stop_after_delay, wait_exponential

from webapp.coordinator.connections import ClusterConnections, error_message
from webapp.coordinator.signing import signed_headers
from webapp.environment import OFFSET_FLUSH_TIMEOUT_MS_DEFAULT
from webapp.plugin import ConnectorTaskId, SourceOffset

__all__ = ["ControlPlaneClient", "Fenced", "ControlPlaneUnavailable"]

log = logging.getLogger(__name__)


class Fenced(Exception):
    """The leader refused a write because this worker no longer owns the task/connector."""


class ControlPlaneUnavailable(Exception):
    """No node answered in time (network, election, overload)."""


class _Retryable(Exception):
    pass


#: the batch endpoints of status reports and of offset commits
STATUSES_PATH = "/raftconnect/v1/internal/statuses"
OFFSETS_PATH = "/raftconnect/v1/internal/offsets"
#: the batch endpoint of task starts
STARTS_PATH = "/raftconnect/v1/internal/starts"
TASK_START_SUFFIX = "/start"


class _NoSuchEndpoint(RuntimeError):
    """The node answered 404 for the path itself (a node of a version without it)."""


class _Pending:
    """One call waiting for the request that carries its item (:class:`_RequestGroup`)."""

    __slots__ = ("event", "item", "lead", "outcome")

    def __init__(self, item: dict[str, Any]) -> None:
        self.item = item
        self.event = threading.Event()
        self.lead = False
        self.outcome: Any = None


class _RequestGroup:
    """Calls made at the same time share one request, as a group commit does (the client side of a
    batch endpoint).

    A call finding no request of the group in flight sends at once whatever is queued (its own
    item first in line); calls arriving meanwhile queue, and when the request is answered the
    first of them sends the next batch (up to ``max_batch`` items). No timer: a lone call goes
    out at once. Each caller gets its own item's outcome.

    Args:
        send: sends one request with the given items; returns one outcome per item: the exception
            that item's caller raises, or else the value its caller gets (``None`` for a write that
            answers nothing); an exception it raises fails every item.
        max_batch: most items in one request.
    """

    def __init__(self, send: Callable[[list[dict[str, Any]]], list[Exception | None]], max_batch: int) -> None:
        self._send = send
        self.max_batch = max_batch
        self._lock = threading.Lock()
        self._queue: list[_Pending] = []
        self._sending = False
        #: requests sent, and items they carried (tests, diagnostics)
        self.requests = self.items = 0

    def submit(self, item: dict[str, Any]) -> Any:
        """Have ``item`` sent; returns its outcome once its request was answered. Errors: the item's own
        outcome, when that is an exception."""
        me = _Pending(item)
        with self._lock:
            self._queue.append(me)
            lead = not self._sending
            self._sending = True
        if not lead:
            me.event.wait()
            if not me.lead:
                return _result(me.outcome)
        # this call sends: the queue's head (its own item is first in line), then hands over
        with self._lock:
            batch = self._queue[:self.max_batch]
            del self._queue[:self.max_batch]
            self.requests += 1
            self.items += len(batch)
        try:
            outcomes = self._send([p.item for p in batch])
        except Exception as exc:  # noqa: BLE001 - every item of the request shares its failure
            outcomes = [exc] * len(batch)
        for p, outcome in zip(batch, outcomes):
            p.outcome = outcome
            if p is not me:
                p.event.set()
        with self._lock:
            if self._queue:
                nxt = self._queue[0]
                nxt.lead = True
                nxt.event.set()
            else:
                self._sending = False
        return _result(me.outcome)


def _result(outcome: Any) -> Any:
    """``outcome`` raised when it is an exception, else returned."""
    if isinstance(outcome, Exception):
        raise outcome
    return outcome


class ControlPlaneClient:
    """Signed JSON calls to the internal API of the nodes in ``cluster``.

    Args:
        cluster: REST addresses (``host:port``) of nodes; the first that answers is used.
        secret: the cluster secret (HMAC key).
        worker_id: this agent's worker id.
        timeout: seconds per HTTP request.
        commit_timeout: seconds an offset commit keeps retrying before it raises
            :class:`ControlPlaneUnavailable` (Connect's ``offset.flush.timeout.ms``; other calls retry
            :attr:`RETRY_S`).
    """

    #: seconds an internal call is retried by default (:meth:`call`)
    RETRY_S = 15.0

    def __init__(self, cluster: list[str], secret: str, worker_id: str, timeout: float = 10.0,
                 commit_timeout: float = OFFSET_FLUSH_TIMEOUT_MS_DEFAULT / 1000.0):
        self.cluster = list(cluster)
        self.secret = secret
        self.worker_id = worker_id
        self.timeout = timeout
        self.commit_timeout = commit_timeout
        #: connections to the nodes, direct as between members (``ClusterConnections``): an agent's proxy for
        #: the outside world (``HTTP_PROXY``) is not the way to its own cluster, and a signed internal
        #: request has no business there; ~0.4 ms less per call than the requests session used before
        self._http = ClusterConnections(maxsize=self.POOL_SIZE)
        #: batch endpoints a node answered 404 for (a node of an earlier version): one request per item since
        self._unbatched: set[str] = set()
        #: numbers this process's offset commits and task starts, in the order they are made: a task's
        #: later commit, by the same instance or one started after it here, has a higher number, so the
        #: Raft store can refuse a late copy of an earlier one (``OffsetCommit.seq``)
        self._seq = itertools.count(1)
        #: whether the cluster answered 404 for a task start (a node of an earlier version): read offsets
        self._no_task_start = False
        self._statuses = _RequestGroup(self._send_statuses, self.MAX_STATUS_BATCH)
        self._commits = _RequestGroup(self._send_commits, self.MAX_COMMIT_BATCH)
        self._starts = _RequestGroup(self._send_starts, self.MAX_START_BATCH)

    def _call(self, method: str, path: str, payload: Any | None = None, timeout: float | None = None) -> Any:
        body = json.dumps(payload).encode() if payload is not None else b""
        last: Exception | None = None
        for address in self.cluster:
            headers = signed_headers(self.secret, method, path, body)
            headers["Content-Type"] = "application/json"
            try:
                resp = self._http.request(method, address, path, body=body or None, headers=headers,
                                          timeout=timeout or self.timeout)
            except urllib3.exceptions.HTTPError as exc:
                last = exc
                continue
            status, text = resp.status, resp.data.decode("utf-8", "replace")
            if status == 409:
                raise Fenced(error_message(resp.data))
            if status in (421, 502, 503, 504):
                last = _Retryable(f"{address}: {status} {text[:200]}")
                continue
            if status == 404 and (path in self._BATCH_PATHS or path.endswith(TASK_START_SUFFIX)
                                  and "HTTP 404 Not Found" in text):  # no view: an older node
                raise _NoSuchEndpoint(f"{method} {path} failed: 404 {text[:500]}")
            if status >= 400:
                raise RuntimeError(f"{method} {path} failed: {status} {text[:500]}")
            return json.loads(resp.data) if resp.data else None
        raise _Retryable(str(last))

    def call(self, method: str, path: str, payload: Any | None = None, retry_for: float = RETRY_S,
             timeout: float | None = None) -> Any:
        """One internal call, retried with exponential backoff for ``retry_for`` seconds.

        Errors: :class:`Fenced` (409, not retried), :class:`ControlPlaneUnavailable`.
        """
        @retry(retry=retry_if_exception_type(_Retryable), stop=stop_after_delay(retry_for),
               wait=wait_exponential(multiplier=0.05, max=1.0), reraise=True)
        def attempt():
            return self._call(method, path, payload, timeout)

        try:
            return attempt()
        except _Retryable as exc:
            raise ControlPlaneUnavailable(str(exc)) from exc

    # ------------------------------------------------------------ endpoints
    def heartbeat(self, member: dict[str, Any], running: dict[str, Any], timeout: float = 2.0) -> dict[str, Any]:
        """Heartbeat (or join); returns this worker's assignment view.

        Not retried, and each node gets at most ``timeout`` seconds: a heartbeat
        that waits longer is worth less than the next one.
        """
        return self.call("POST", "/raftconnect/v1/internal/heartbeat",
                         {"worker_id": self.worker_id, "member": member, "running": running}, retry_for=0,
                         timeout=timeout)

    def leave(self) -> None:
        """Leave the group (best effort)."""
        self.call("POST", "/raftconnect/v1/internal/leave", {"worker_id": self.worker_id}, retry_for=0, timeout=2.0)

    def put_task_configs(self, connector: str, generation: int, configs: list[dict[str, str]]) -> None:
        """Store the connector's task configs (fenced by ``generation``)."""
        self.call("POST", f"/raftconnect/v1/internal/connectors/{connector}/tasks",
                  {"worker_id": self.worker_id, "generation": generation, "configs": configs})

    #: connections kept to each node (requests' default): the batched calls send one request at a time
    #: per endpoint, heartbeats and the rest beside them
    POOL_SIZE = 10
    #: most statuses in one request
    MAX_STATUS_BATCH = 500
    #: most offset commits in one request
    MAX_COMMIT_BATCH = 500
    #: most task starts in one request
    MAX_START_BATCH = 500
    #: the batch endpoints, which a node of an earlier version answers 404 (then one request per item)
    _BATCH_PATHS = (STATUSES_PATH, OFFSETS_PATH, STARTS_PATH)

    def report_status(self, connector: str, task: int | None, generation: int, state: str,
                      trace: str | None = None) -> None:
        """Report a connector (``task=None``) or task state; returns once the leader recorded it.

        Errors: :class:`Fenced` (this worker no longer owns the instance), :class:`ControlPlaneUnavailable`,
        ``RuntimeError`` (e.g. the connector was deleted).

        Reports made at the same time share one request (``POST /raftconnect/v1/internal/statuses``),
        as a group commit does: a call finding no request of this client in flight sends at once
        whatever is queued (its own report first in line); calls arriving meanwhile queue, and when
        the request is answered the first of them sends the next batch (up to
        :attr:`MAX_STATUS_BATCH`). No timer: a lone report goes out at once. Each caller gets its
        own report's outcome. An agent starting a thousand tasks made a thousand requests, most of
        what the leader did while they started (benchmarks/scale). Against a node without the batch
        endpoint, reports go one per request as before.
        """
        item = {"connector": connector, "task": task, "generation": generation, "state": state, "trace": trace}
        if STATUSES_PATH in self._unbatched:
            return self._report_one(item)
        self._statuses.submit(item)

    def report_statuses(self, items: list[dict[str, Any]]) -> list[Exception | None]:
        """Report many states at once, for a caller that has them together (e.g. a worker starting a
        view's tasks); ``items`` ``[{"connector", "task", "generation", "state", "trace"}, ...]``.

        Returns one outcome per item, in order: ``None`` when recorded, else the exception its own
        :meth:`report_status` would have raised (:class:`Fenced`, ``RuntimeError``). Sent in requests
        of at most :attr:`MAX_STATUS_BATCH`. Errors: :class:`ControlPlaneUnavailable` for a request
        that no node took (the outcomes of earlier requests are then unknown to the caller).
        """
        items = [{"trace": None, **item} for item in items]
        outcomes: list[Exception | None] = []
        for i in range(0, len(items), self.MAX_STATUS_BATCH):
            outcomes.extend(self._send_statuses(items[i:i + self.MAX_STATUS_BATCH]))
        return outcomes

    def _send_statuses(self, items: list[dict[str, Any]]) -> list[Exception | None]:
        """One request with ``items``; one outcome per item (``None``: recorded)."""
        return self._send_batch(STATUSES_PATH, "statuses", items, self._report_one)

    def _send_batch(self, path: str, field: str, items: list[dict[str, Any]],
                    one: Callable[[dict[str, Any]], None], retry_for: float = RETRY_S) -> list[Exception | None]:
        """``POST path`` with ``{"worker_id", field: items}`` (retried for ``retry_for`` seconds); one outcome
        per item from its ``results``. Against a node without that endpoint (404), ``one(item)`` for each
        item, now and from then on."""
        if path not in self._unbatched:
            try:
                answer = self.call("POST", path, {"worker_id": self.worker_id, field: items}, retry_for=retry_for)
            except _NoSuchEndpoint:
                log.info("the cluster has no %s endpoint: sending one request per item", path)
                self._unbatched.add(path)
            else:
                return [self._outcome_in(item, result) for item, result in zip(items, answer["results"])]
        return [self._outcome_of(one, item) for item in items]

    @staticmethod
    def _outcome_in(item: dict[str, Any], result: dict[str, Any] | None) -> Exception | None:
        """The outcome of ``item`` from its entry in the batch endpoint's ``results``."""
        if result is None:
            return None
        if result.get("error_code") == 409:
            return Fenced(result.get("message", ""))
        what = "offsets" if "offsets" in item else "status" if "state" in item else "start"
        return RuntimeError(f"{what} of {item['connector']} task {item['task']} refused: "
                            f"{result.get('error_code')} {result.get('message', '')}")

    @staticmethod
    def _outcome_of(fn: Any, item: dict[str, Any]) -> Any:
        """``fn(item)``'s value, or the exception it raised (handed to the item's own caller)."""
        try:
            return fn(item)
        except Exception as exc:  # noqa: BLE001 - handed to the report's own caller
            return exc

    def _report_one(self, item: dict[str, Any]) -> None:
        self.call("POST", f"/raftconnect/v1/internal/connectors/{item['connector']}/status",
                  {"worker_id": self.worker_id, "generation": item["generation"], "task": item["task"],
                   "state": item["state"], "trace": item["trace"]})

    def get_offsets(self, connector: str) -> list[SourceOffset]:
        """Committed offsets of ``connector``."""
        return self._offsets_in(self.call("GET", f"/raftconnect/v1/internal/connectors/{connector}/offsets"))

    @staticmethod
    def _offsets_in(data: dict[str, Any]) -> list[SourceOffset]:
        """The offsets of an answer ``{"offsets": [[partition, offset], ...]}``."""
        return [SourceOffset(p, o) for p, o in data["offsets"]]

    def start_task(self, task_id: ConnectorTaskId, generation: int) -> list[SourceOffset]:
        """Record that ``task_id`` starts here at ``generation`` and return its connector's committed offsets,
        read after that record: a late commit of an earlier instance of the task is refused from then on
        (``POST .../connectors/{name}/tasks/{task}/start``). Against a node without that endpoint, the
        offsets alone (:meth:`get_offsets`). Errors: :class:`Fenced` (the task is not this worker's at
        ``generation``), :class:`ControlPlaneUnavailable`, ``RuntimeError``.

        Starts made at the same time share one request (``POST /raftconnect/v1/internal/starts``, one
        Raft entry), as commits do (:meth:`commit_offsets`): after a rebalance an agent's task threads
        start its tasks together, and at 1,000 tasks a worker one request each was most of what the
        leader did meanwhile (``benchmarks/scale``). Each start stays fenced on its own. A lone start
        goes to the single-task endpoint; against a node without the batch endpoint, one request per
        start as before.
        """
        item = {"connector": task_id.connector, "task": task_id.task, "generation": generation}
        if self._no_task_start or STARTS_PATH in self._unbatched:
            return self._start_one(item)
        return self._starts.submit(item)

    def _send_starts(self, items: list[dict[str, Any]]) -> list[Any]:
        """One request with ``items``; one outcome per item: the offsets it starts from, or its exception.
        Each item is numbered as it is sent (one number per start, in the order of the requests)."""
        if len(items) == 1 or self._no_task_start or STARTS_PATH in self._unbatched:
            return [self._outcome_of(self._start_one, item) for item in items]
        numbered = [{**item, "seq": next(self._seq)} for item in items]
        try:
            answer = self.call("POST", STARTS_PATH, {"worker_id": self.worker_id, "starts": numbered})
        except _NoSuchEndpoint:
            log.info("the cluster has no %s endpoint: sending one request per item", STARTS_PATH)
            self._unbatched.add(STARTS_PATH)
            return [self._outcome_of(self._start_one, item) for item in items]
        offsets = answer.get("offsets", {})
        return [self._outcome_in(item, result) if result is not None
                else self._offsets_in({"offsets": offsets.get(item["connector"], [])})
                for item, result in zip(items, answer["results"])]

    def _start_one(self, item: dict[str, Any]) -> list[SourceOffset]:
        """One task start in its own request; the offsets it starts from."""
        if not self._no_task_start:
            path = f"/raftconnect/v1/internal/connectors/{item['connector']}/tasks/{item['task']}{TASK_START_SUFFIX}"
            try:
                data = self.call("POST", path, {"worker_id": self.worker_id, "generation": item["generation"],
                                                "seq": next(self._seq)})
            except _NoSuchEndpoint:
                log.info("the cluster has no task start endpoint: tasks read their offsets only")
                self._no_task_start = True
            else:
                return self._offsets_in(data)
        return self.get_offsets(item["connector"])

    def commit_offsets(self, task_id: ConnectorTaskId, generation: int, offsets: list[SourceOffset],
                       topics: list[str] | None = None) -> None:
        """Commit one batch's offsets (fenced); ``topics``: Kafka topics the batch produced to or consumed
        from, which the leader records as the connector's active topics. Returns once committed.

        Errors: :class:`Fenced` (this worker no longer owns the task), :class:`ControlPlaneUnavailable`
        (after ``commit_timeout`` seconds of retries), ``RuntimeError``. Commits of this agent's tasks made
        at the same time share one request
        (``POST /raftconnect/v1/internal/offsets``, one Raft log entry on the Raft store), as status
        reports do (:meth:`report_status`); each stays atomic and fenced on its own. Against a node
        without that endpoint, one request per commit as before.
        """
        item: dict[str, Any] = {"connector": task_id.connector, "task": task_id.task, "generation": generation,
                                "seq": next(self._seq), "offsets": [[dict(o.partition), dict(o.offset)] for o in offsets]}
        if topics:
            item["topics"] = sorted(set(topics))
        if OFFSETS_PATH in self._unbatched:
            return self._commit_one(item)
        self._commits.submit(item)

    def _send_commits(self, items: list[dict[str, Any]]) -> list[Exception | None]:
        """One request with ``items``; one outcome per item (``None``: committed). A lone commit goes to
        the single-commit endpoint, as before the batch endpoint: at 100 workers each committing one
        offset a second, sending those through the batch endpoint cut the leader's connector creation
        from ~100 to ~30 a second (benchmarks/scale, 2026-11-26, waitress serving). Measured again on
        granian (2026-12-03, 1,000 connectors, two interleaved rounds each): creation no slower (55 and
        73 creates/s this way, 60 and 63 through the batch endpoint), lone commits from 89 workers still
        slower through the batch endpoint (150 and 211 commits/s this way, 76 and 114 through it, its first
        round beside a test run). Again 2026-12-03 evening (urllib3 pools, 1,000 connectors, alternating
        runs): 796, 796, 711 commits/s this way against 733 and 715 through the batch endpoint, a gap within
        a few percent now; the single endpoint stays, answering 204 without a results body."""
        if len(items) == 1:
            return [self._outcome_of(self._commit_one, items[0])]
        return self._send_batch(OFFSETS_PATH, "commits", items, self._commit_one, retry_for=self.commit_timeout)

    def _commit_one(self, item: dict[str, Any]) -> None:
        body = {"worker_id": self.worker_id, **{k: v for k, v in item.items() if k != "connector"}}
        self.call("POST", f"/raftconnect/v1/internal/connectors/{item['connector']}/offsets", body,
                  retry_for=self.commit_timeout)
