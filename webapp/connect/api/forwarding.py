"""Forwarding REST requests to the node that must answer them.

Owns the one rule of where a request is served:

* writes (POST/PUT/PATCH/DELETE) on a Raft follower go to the leader, one hop;
  during an election they wait for a leader instead of failing. A write has one
  time budget from its arrival (``RAFTCONNECT_FORWARD_WAIT_S``, default 10 s) for
  finding the leader, forwarding (again, if leadership moves) and committing;
  the remaining budget travels with the forwarded request
  (``X-RaftConnect-Budget-Ms``) and bounds the leader's proposal, so nothing of
  the request is proposed after the forwarding member has answered its client;
* the receiving member proposes a forwarded write only while it is the leader
  (``raftnode.without_leader_wait``). A member that is not (any more) answers 503
  with ``X-RaftConnect-Not-Leader: 1`` before anything reached a log, and the
  forwarding member, if still within the budget, sends it to the leader it
  knows now. A request delayed in the network cannot land late this way;
* every request on a worker-only node (it holds no Raft state) goes to a cluster
  node from ``--cluster``;
* reads on a Raft member are answered locally, except views marked
  ``leader_only`` (those showing leader-local memory such as liveness).

A forwarded request is signed with the cluster secret (HMAC) and names the user
the forwarding node authenticated and that user's role
(``X-RaftConnect-Forwarded-User: name;role=operator``), so the leader need not
hold the same user database and applies the same role (the forwarding node has
already checked it too). A forwarded request is never forwarded again.
"""
from __future__ import annotations

import logging
import time
from collections.abc import Callable

import urllib3
from django.conf import settings
from django.http import HttpResponse
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from webapp.coordinator.connections import ClusterConnections
from webapp.coordinator.signing import signed_headers, verify_request

__all__ = ["ForwardToLeader", "TargetUnreachable", "proxy_watching_leader", "ForwardedUserAuthentication", "forward_target",
           "forwarded_claim", "forwarded_user", "forward",
           "proxy", "request_budget_s", "forwarded_budget_s", "FORWARDED_HEADER", "FORWARDED_USER_HEADER",
           "BUDGET_HEADER", "NOT_LEADER_HEADER"]

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-RaftConnect-Forwarded"
FORWARDED_USER_HEADER = "X-RaftConnect-Forwarded-User"
BUDGET_HEADER = "X-RaftConnect-Budget-Ms"
NOT_LEADER_HEADER = "X-RaftConnect-Not-Leader"
#: seconds a forwarded read may take (reads propose nothing, so they only need a bound on waiting)
READ_BUDGET_S = 30.0
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
#: forwarded requests in flight at once (:func:`proxy_watching_leader`'s threads), and the connections kept
#: open to each member (requests' default pool, used before, kept 10: under more concurrent forwards every
#: request past the tenth opened a connection of its own and closed it after one answer)
FORWARD_CONCURRENCY = 32
#: the member-to-member connections (``ClusterConnections``: direct, no proxy from the environment, no
#: redirects, no retries; the caller decides: :class:`TargetUnreachable`)
_http = ClusterConnections(maxsize=FORWARD_CONCURRENCY)


def request_budget_s(method: str) -> float:
    """Seconds a REST request arriving now may spend on finding the leader, forwarding and committing.

    Writes: ``RAFTCONNECT_FORWARD_WAIT_S`` (default 10); reads: 30.
    """
    if method.upper() in UNSAFE:
        return settings.FORWARD_WAIT_S
    return READ_BUDGET_S


def forwarded_budget_s(headers) -> float | None:
    """The remaining budget (seconds) a forwarded request carries, or ``None`` if it carries none/garbage."""
    raw = headers.get(BUDGET_HEADER)
    try:
        return max(0.0, int(raw) / 1000.0) if raw is not None else None
    except ValueError:
        return None


class ForwardToLeader(Exception):
    """Raised in a view's ``initial()`` to have the request proxied to ``target``."""

    def __init__(self, target: str):
        super().__init__(target)
        self.target = target


class ForwardedUser:
    """A user authenticated by the forwarding node (trusted because the request is signed)."""

    is_authenticated = True
    is_active = True

    def __init__(self, username: str, role: str | None):
        self.username = username
        self.role = role
        self.is_superuser = self.is_staff = False

    def __str__(self) -> str:
        return self.username


class ForwardedUserAuthentication(BaseAuthentication):
    """Accepts requests forwarded by a cluster member (HMAC-signed, carrying the user name)."""

    def authenticate(self, request: Request):
        raw = request._request
        user = forwarded_claim(raw.headers)
        if user is None:
            return None
        from rest_framework.exceptions import AuthenticationFailed

        from webapp.connect.locator import NodeNotReady, current

        try:
            secret = current().secret
        except NodeNotReady as exc:
            raise AuthenticationFailed("Node is starting") from exc
        why = verify_request(secret, raw)
        if why:
            raise AuthenticationFailed(f"Forwarded request rejected: {why}")
        return ForwardedUser(*forwarded_user(user)), None


def forwarded_claim(headers) -> str | None:
    """The ``X-RaftConnect-Forwarded-User`` value of a request that says another member forwarded it
    (``X-RaftConnect-Forwarded: 1``), else ``None``. A claim only: its signature is checked by the caller
    (:class:`ForwardedUserAuthentication`, the REST fast path). ``headers``: Django's ``request.headers``."""
    user = headers.get(FORWARDED_USER_HEADER)
    return user if user and headers.get(FORWARDED_HEADER) == "1" else None


def forwarded_user(header: str) -> tuple[str, str | None]:
    """``(user name, role or None)`` of a ``X-RaftConnect-Forwarded-User`` value (``name;role=operator``).

    An older member's ``name;superuser`` names an admin. Trusted only on a request whose signature was
    verified (:class:`ForwardedUserAuthentication`, the REST fast path)."""
    name, _, flags = header.partition(";")
    fields = dict(f.partition("=")[::2] for f in flags.split(";") if f)
    return name, "admin" if "superuser" in fields else fields.get("role") or None


def forward_target(request: Request, node, stale: str | None = None) -> str | None:
    """The REST address to proxy ``request`` to, or ``None`` to serve it here.

    ``stale`` is a target that just proved unreachable (a worker-only node then
    asks the cluster for the leader again). A write waits for a leader until
    ``request.forward_deadline`` (``time.monotonic()``; set by the view when the
    request arrived).

    Raises :class:`~webapp.connect.herder.ConnectRestError` (503) when a write
    finds no leader within the wait.
    """
    raw = request._request
    if raw.headers.get(FORWARDED_HEADER) == "1":
        return None
    if node.raft is None:  # worker-only node: no local state, everything goes to the leader
        return node.cluster_leader(refresh=stale is not None and stale == node.cluster_leader())
    leader_only = getattr(request, "leader_only", False)
    if (request.method not in UNSAFE and not leader_only) or node.raft.is_leader:
        return None
    deadline = getattr(request, "forward_deadline", None) or time.monotonic() + request_budget_s(request.method)
    wait = max(0.0, deadline - time.monotonic())
    while True:
        if node.raft.is_leader:
            return None
        address = node.leader_rest_address()
        if address:
            return address
        if time.monotonic() >= deadline:
            from webapp.connect.herder import ConnectRestError

            raise ConnectRestError(f"No Raft leader was elected within {wait:.1f} s; retry the request", 503)
        time.sleep(0.05)


def forward(request, node, target: str, serve_here: Callable[[], HttpResponse]) -> HttpResponse:
    """The leader's answer to ``request``, proxied to ``target`` (:func:`proxy_watching_leader`); if the target
    is gone (a leader just died, or deposed), again to the leader known next, or ``serve_here()`` once this
    node leads, until the request's budget (``request.forward_deadline``) runs out.

    ``request`` is DRF's ``Request`` (``ConnectAPIView``) or what the REST fast path passes in its place
    (``_request``, ``method``, ``user``, ``forward_deadline``). Errors: ``ConnectRestError`` (503) when no
    leader answered within the budget, and those of :func:`proxy_watching_leader` and ``serve_here``.
    """
    deadline = getattr(request, "forward_deadline", None) or time.monotonic() + request_budget_s(request.method)
    while True:
        try:
            return proxy_watching_leader(request, target, node, deadline)
        except TargetUnreachable:
            if time.monotonic() >= deadline:
                from webapp.connect.herder import ConnectRestError

                raise ConnectRestError(f"The leader at {target} is unreachable and no other leader was found "
                                       "within the request's time budget (RAFTCONNECT_FORWARD_WAIT_S)", 503)
        time.sleep(0.05)
        # the old leader may still be the last known one until the election ends
        if node.raft is not None and node.raft.is_leader:
            return serve_here()
        target = forward_target(request, node, stale=target) or target


class TargetUnreachable(Exception):
    """The forwarding target refused the connection (e.g. a leader that just died)."""


def proxy(request: Request, target: str, secret: str, timeout: float = 30.0,
          budget_s: float | None = None) -> HttpResponse:
    """Send ``request`` to ``target`` (``host:port``) signed, and return its answer as is.

    ``budget_s`` (seconds) is sent as ``X-RaftConnect-Budget-Ms``: the target
    proposes nothing of the request after it; ``timeout`` bounds the HTTP call.

    Raises :class:`TargetUnreachable` when the connection cannot be made, or the
    target answers that it is not the leader and wrote nothing (both safe to
    retry elsewhere), and ``ConnectRestError`` (503) on other transport failures.
    """
    raw = request._request
    body = raw.body
    path = raw.get_full_path()
    headers = signed_headers(secret, raw.method, path, body)
    headers[FORWARDED_HEADER] = "1"
    if budget_s is not None:
        headers[BUDGET_HEADER] = str(int(budget_s * 1000))
    from .roles import user_role

    user = request.user
    headers[FORWARDED_USER_HEADER] = f"{getattr(user, 'username', str(user))};role={user_role(user) or ''}"
    if raw.content_type:
        headers["Content-Type"] = raw.content_type
    try:
        resp = _http.request(raw.method, target, path, body=body or None, headers=headers, timeout=timeout)
    except urllib3.exceptions.HTTPError as exc:
        if isinstance(exc, urllib3.exceptions.NewConnectionError) and "refused" in str(exc).lower():
            raise TargetUnreachable(str(exc)) from exc
        from webapp.connect.herder import ConnectRestError

        raise ConnectRestError(f"Could not forward the request to {target}: {exc}", 503) from exc
    if resp.status == 503 and resp.headers.get(NOT_LEADER_HEADER) == "1":
        raise TargetUnreachable(f"{target} is not the Raft leader (it wrote nothing)")
    out = HttpResponse(resp.data, status=resp.status,
                       content_type=resp.headers.get("Content-Type", "application/json"))
    if "Location" in resp.headers:
        out["Location"] = resp.headers["Location"]
    return out


_pool = None
#: seconds past a request's budget that the forwarding member waits for the target's answer
ANSWER_SLACK_S = 2.0


def proxy_watching_leader(request: Request, target: str, node, deadline: float | None = None) -> HttpResponse:
    """:func:`proxy`, abandoned as soon as this node sees that ``target`` is no longer the leader.

    A leader paused by SIGSTOP (or cut off) still completes TCP handshakes, so a
    forwarded request would wait for its full timeout. While waiting, the
    forwarding node checks its own view of the leader every 50 ms (a worker-only
    node asks the cluster every second); when another node leads, or this node
    itself, the request is abandoned with :class:`TargetUnreachable` and the
    caller forwards again. A deposed leader cannot commit without a quorum, so the
    abandoned request does not also take effect (unless it committed just before
    the change, when a retried create then answers 409).

    ``deadline`` (``time.monotonic()``; default: the request's
    ``forward_deadline``) is the request's budget: the remaining part is sent to
    the target, and the wait ends a moment after it (to receive the target's
    answer of a proposal that timed out there) with ``ConnectRestError`` (503).
    """
    global _pool
    from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout

    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=FORWARD_CONCURRENCY, thread_name_prefix="forward")
    request._request.body  # read the body in this thread before handing the request over
    if deadline is None:
        deadline = getattr(request, "forward_deadline", None) or time.monotonic() + request_budget_s(request.method)
    budget = max(0.0, deadline - time.monotonic())
    timeout = budget + ANSWER_SLACK_S
    future = _pool.submit(proxy, request, target, node.secret, timeout, budget)
    deadline += ANSWER_SLACK_S
    last_remote_check = time.monotonic()
    while True:
        try:
            return future.result(timeout=0.05)
        except FutureTimeout:
            pass
        now = time.monotonic()
        if now >= deadline:
            from webapp.connect.herder import ConnectRestError

            raise ConnectRestError(f"The leader at {target} did not answer within {timeout:.1f} s", 503)
        if node.raft is not None:
            moved = node.raft.is_leader or node.leader_rest_address() not in (None, target)
        elif now - last_remote_check >= 1.0:
            last_remote_check = now
            moved = node.cluster_leader(refresh=True) != target
        else:
            moved = False
        if moved:
            log.warning("forwarded %s %s: %s is no longer the leader, forwarding again",
                        request.method, request._request.path, target)
            raise TargetUnreachable(f"{target} is no longer the leader")
