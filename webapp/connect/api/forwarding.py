"""Forwarding REST requests to the node that must answer them.

Owns the one rule of where a request is served:

* writes (POST/PUT/PATCH/DELETE) on a Raft follower go to the leader, one hop;
  during an election they wait (``RAFTCONNECT_FORWARD_WAIT_S``, default 10 s) for a
  leader instead of failing;
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

import requests
from django.conf import settings
from django.http import HttpResponse
from rest_framework.authentication import BaseAuthentication
from rest_framework.request import Request

from webapp.coordinator.signing import SIG_HEADER, TS_HEADER, signed_headers, verify

__all__ = ["ForwardToLeader", "TargetUnreachable", "proxy_watching_leader", "ForwardedUserAuthentication", "forward_target", "proxy", "FORWARDED_HEADER",
           "FORWARDED_USER_HEADER"]

log = logging.getLogger(__name__)

FORWARDED_HEADER = "X-RaftConnect-Forwarded"
FORWARDED_USER_HEADER = "X-RaftConnect-Forwarded-User"
UNSAFE = ("POST", "PUT", "PATCH", "DELETE")
_session = requests.Session()


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
        user = raw.headers.get(FORWARDED_USER_HEADER)
        if not user or raw.headers.get(FORWARDED_HEADER) != "1":
            return None
        from rest_framework.exceptions import AuthenticationFailed

        from webapp.connect.node import NodeNotReady, current

        try:
            secret = current().secret
        except NodeNotReady as exc:
            raise AuthenticationFailed("Node is starting") from exc
        why = verify(secret, raw.method, raw.get_full_path(), raw.body, raw.headers.get(TS_HEADER),
                     raw.headers.get(SIG_HEADER))
        if why:
            raise AuthenticationFailed(f"Forwarded request rejected: {why}")
        name, _, flags = user.partition(";")
        fields = dict(f.partition("=")[::2] for f in flags.split(";") if f)
        role = "admin" if "superuser" in fields else fields.get("role") or None  # "superuser": older members
        return ForwardedUser(name, role), None


def forward_target(request: Request, node, stale: str | None = None) -> str | None:
    """The REST address to proxy ``request`` to, or ``None`` to serve it here.

    ``stale`` is a target that just proved unreachable (a worker-only node then
    asks the cluster for the leader again).

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
    wait = settings.FORWARD_WAIT_S
    deadline = time.monotonic() + wait
    while True:
        if node.raft.is_leader:
            return None
        address = node.leader_rest_address()
        if address:
            return address
        if time.monotonic() >= deadline:
            from webapp.connect.herder import ConnectRestError

            raise ConnectRestError(f"No Raft leader was elected within {wait:.0f} s; retry the request", 503)
        time.sleep(0.05)


class TargetUnreachable(Exception):
    """The forwarding target refused the connection (e.g. a leader that just died)."""


def proxy(request: Request, target: str, secret: str, timeout: float = 30.0) -> HttpResponse:
    """Send ``request`` to ``target`` (``host:port``) signed, and return its answer as is.

    Raises :class:`TargetUnreachable` when the connection cannot be made (safe to
    retry elsewhere: nothing was sent) and ``ConnectRestError`` (503) on other
    transport failures.
    """
    raw = request._request
    body = raw.body
    path = raw.get_full_path()
    headers = signed_headers(secret, raw.method, path, body)
    headers[FORWARDED_HEADER] = "1"
    from .roles import user_role

    user = request.user
    headers[FORWARDED_USER_HEADER] = f"{getattr(user, 'username', str(user))};role={user_role(user) or ''}"
    if raw.content_type:
        headers["Content-Type"] = raw.content_type
    try:
        resp = _session.request(raw.method, f"http://{target}{path}", data=body or None, headers=headers,
                                timeout=timeout)
    except requests.ConnectionError as exc:
        if "refused" in str(exc).lower():
            raise TargetUnreachable(str(exc)) from exc
        from webapp.connect.herder import ConnectRestError

        raise ConnectRestError(f"Could not forward the request to {target}: {exc}", 503) from exc
    except requests.RequestException as exc:
        from webapp.connect.herder import ConnectRestError

        raise ConnectRestError(f"Could not forward the request to {target}: {exc}", 503) from exc
    out = HttpResponse(resp.content, status=resp.status_code,
                       content_type=resp.headers.get("Content-Type", "application/json"))
    if "Location" in resp.headers:
        out["Location"] = resp.headers["Location"]
    return out


_pool = None


def proxy_watching_leader(request: Request, target: str, node, timeout: float = 30.0) -> HttpResponse:
    """:func:`proxy`, abandoned as soon as this node sees that ``target`` is no longer the leader.

    A leader paused by SIGSTOP (or cut off) still completes TCP handshakes, so a
    forwarded request would wait for its full timeout. While waiting, the
    forwarding node checks its own view of the leader every 50 ms (a worker-only
    node asks the cluster every second); when another node leads, or this node
    itself, the request is abandoned with :class:`TargetUnreachable` and the
    caller forwards again. A deposed leader cannot commit without a quorum, so the
    abandoned request does not also take effect (unless it committed just before
    the change, when a retried create then answers 409).
    """
    global _pool
    from concurrent.futures import ThreadPoolExecutor, TimeoutError as FutureTimeout

    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=32, thread_name_prefix="forward")
    request._request.body  # read the body in this thread before handing the request over
    future = _pool.submit(proxy, request, target, node.secret, timeout)
    deadline = time.monotonic() + timeout
    last_remote_check = time.monotonic()
    while True:
        try:
            return future.result(timeout=0.05)
        except FutureTimeout:
            pass
        now = time.monotonic()
        if now >= deadline:
            from webapp.connect.herder import ConnectRestError

            raise ConnectRestError(f"The leader at {target} did not answer within {timeout:.0f} s", 503)
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
