"""Connect's ``LoggingResource``: ``GET /admin/loggers``, ``GET|PUT /admin/loggers/{name}?scope=worker|cluster``.

``scope=worker`` (the default; an unknown scope is treated as worker, as Connect
does) sets the level on the node that got the request: its REST/Raft process and
its worker agent (a Celery message on the agent's queue). ``scope=cluster`` fans
the change out to every node of the cluster (signed internal requests to each
member's REST address, in parallel) and answers 204. Levels are process memory,
not replicated state: a node that joins or restarts later starts from its own
logging configuration, as in Connect.

Requires authentication only; the views carry ``admin_only = True`` so a role
check can be added in one place (``ConnectAPIView``) later.
"""
from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote

import urllib3
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.connect.herder import BadRequest, ConnectRestError, NotFoundError
from webapp.connect.locator import current
from webapp.coordinator.connections import OCCASIONAL
from webapp.loggers import InvalidLevel, process_loggers

from .forwarding import ForwardToLeader
from .internal import InternalView
from .views import ConnectAPIView

__all__ = ["LoggersView", "LoggerView", "InternalLoggerView", "set_worker_level"]

log = logging.getLogger(__name__)


def set_worker_level(namespace: str, level: str) -> list[str]:
    """Set the level in this process and ask this node's worker agent (if any) to do the same.

    Returns the affected logger names of this process. Errors: :class:`NotFoundError` (invalid level).
    """
    try:
        affected = process_loggers().set_level(namespace, level)
    except InvalidLevel as exc:
        raise NotFoundError(str(exc)) from exc
    node = current()
    if "worker" in node.options.roles:
        try:
            from webapp.celery import app as celery_app
            from webapp.celery import worker_queue

            celery_app.send_task("raftconnect.set_logger_level", args=[namespace, level],
                                 queue=worker_queue(node.options.node_id), expires=30)
        except Exception:  # the agent is best effort: the REST process already changed
            log.exception("could not send the log level of %s to the worker agent", namespace)
    return affected


def _fan_out(namespace: str, level: str) -> None:
    node = current()
    me = node.options.rest_address
    addresses = sorted({m.get("rest_address") for m in node.raft.state.members.values()
                        if m.get("rest_address") and m.get("rest_address") != me})
    path = f"/raftconnect/v1/internal/loggers/{quote(namespace, safe='')}"
    body = _dumps({"level": level})

    def send(address: str) -> None:
        try:
            resp = OCCASIONAL.signed("PUT", address, path, secret=node.secret, body=body,
                                     headers={"Content-Type": "application/json"}, timeout=5)
            if resp.status >= 400:
                log.warning("cluster log level %s=%s: %s answered %s", namespace, level, address, resp.status)
        except urllib3.exceptions.HTTPError as exc:
            log.warning("cluster log level %s=%s: %s unreachable: %s", namespace, level, address, exc)

    if addresses:
        with ThreadPoolExecutor(max_workers=min(8, len(addresses))) as pool:
            list(pool.map(send, addresses))


def _dumps(value: Any) -> bytes:
    import json

    return json.dumps(value).encode()


def _level_of(request: Request) -> str:
    body = request.data
    if not isinstance(body, dict):
        raise BadRequest("Request body must be a JSON object")
    level = body.get("level")
    if level is None:
        raise BadRequest("Desired 'level' parameter was not specified in request.")
    if not isinstance(level, str):
        raise BadRequest("The 'level' parameter must be a string")
    return level


class _LoggingView(ConnectAPIView):
    #: a future role check: only administrators may change or read log levels
    admin_only = True

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        # authentication only: log levels belong to the node asked (scope=cluster is handled in put)
        APIView.initial(self, request, *args, **kwargs)


class LoggersView(_LoggingView):
    """``GET /admin/loggers``: ``{logger: {"level", "last_modified"}}`` of this node's loggers with a set level."""

    def get(self, request: Request) -> Response:
        return Response(process_loggers().all_levels())


class LoggerView(_LoggingView):
    """``GET /admin/loggers/{name}`` (404 ``Logger {name} not found.``) and ``PUT`` with ``{"level": ...}``."""

    def get(self, request: Request, name: str) -> Response:
        level = process_loggers().level(name)
        if level is None:
            raise NotFoundError(f"Logger {name} not found.")
        return Response(level)

    def put(self, request: Request, name: str) -> Response:
        level = _level_of(request)
        try:
            process_loggers().parse_level(level)
        except InvalidLevel as exc:
            raise NotFoundError(str(exc)) from exc
        scope = (request.query_params.get("scope") or "worker").lower()
        if scope != "cluster":
            if scope != "worker":
                log.warning("invalid scope %r in a log level request; using worker", scope)
            return Response(set_worker_level(name, level))
        node = current()
        if node.raft is None:  # a worker-only node does not know the members: let the cluster do it
            target = node.cluster_leader()
            if not target:
                raise ConnectRestError("No cluster node is reachable to apply a cluster-wide log level", 503)
            raise ForwardToLeader(target)
        set_worker_level(name, level)
        _fan_out(name, level)
        return Response(status=204)


class InternalLoggerView(InternalView):
    """``PUT /raftconnect/v1/internal/loggers/{name}``: a cluster-scope level fanned out to this node."""

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        APIView.initial(self, request, *args, **kwargs)  # signed; applied here, never forwarded

    def put(self, request: Request, name: str) -> Response:
        return Response(set_worker_level(name, _level_of(request)))
