"""REST resources the console uses besides Kafka Connect's API.

* ``GET /raftconnect/v1/whoami`` — ``{"username", "roles", "is_superuser", "is_staff"}``
  of the authenticated user: ``roles`` is ``[role]`` as the REST API enforces it
  (:func:`webapp.connect.api.roles.user_role`), ``[]`` for a user without one. Always
  answered by the node that received it (sessions and users are per node) and
  sets the ``csrftoken`` cookie, also on its 401, so the console can log in next.
* ``POST /raftconnect/v1/session`` ``{"username", "password"}`` — log in with a
  Django session (CSRF checked: send the ``csrftoken`` cookie's value as
  ``X-CSRFToken``); 200 with the whoami body, 401 on bad credentials, 403 on a
  missing CSRF token. ``DELETE /raftconnect/v1/session`` logs out (204).
* ``GET /raftconnect/v1/task-metrics`` — ``{"tasks": [TaskMetrics]}`` of every running
  task, and ``GET /raftconnect/v1/connectors/{name}/metrics`` —
  ``{"connector", "tasks": [TaskMetrics], "records", "records_per_second"}``
  (404 for an unknown connector). A TaskMetrics is ``{"connector", "task",
  "worker_id" (REST address, as in status), "state", "records", "batches",
  "last_batch_seconds", "records_per_second", "lag", "phases"}``: what the agent reported
  in its latest heartbeat (at most one heartbeat interval old; see
  :class:`webapp.runtime.task_metrics.TaskMetrics`): counts since the task last
  started on its worker, its recent records/s, and a sink task's consumer lag
  in records (``None`` while unknown or for a source), ``worker`` (``{"node_id",
  "rest_address"}``: the one name the console shows) and ``errors`` (the task's
  task-error-metrics: ``total_record_errors``, ``total_records_skipped``, ...). Served
  by the leader, which receives the heartbeats (``/metrics`` exports the same figures).
* ``GET /raftconnect/v1/console/connectors`` — every connector's health (see
  :mod:`webapp.console.state`): ``{"connectors": [ConnectorHealth], "health": {word: n},
  "tasks": {STATE: n}, "generated_at"}``; ``GET /raftconnect/v1/console/connectors/{name}``
  one ConnectorHealth (404 for an unknown connector). Connect's own status bodies are unchanged.
* ``GET /raftconnect/v1/console/kafka`` — the Kafka cluster this node uses
  (:func:`webapp.console.kafka.kafka_cluster`): 200 also when it is unreachable
  (``state`` says so, ``error`` names the address).
* ``GET /raftconnect/v1/console/connectors/{name}/offsets[?timestamp=MS]`` — per partition
  committed, start and end offsets and lag of a sink, or a file source's progress
  (:func:`webapp.console.offsets.connector_offsets_view`); 400 for a bad timestamp.
* ``GET /raftconnect/v1/console/history[?connector=NAME]`` — the last 15 minutes of
  records/s, lag and errors/s per task (:class:`webapp.console.history.TaskHistory`), leader.
"""
from __future__ import annotations

import time
from typing import Any

from django.contrib.auth import authenticate, login, logout
from django.utils.decorators import method_decorator
from django.views.decorators.csrf import ensure_csrf_cookie
from drf_spectacular.utils import OpenApiResponse, extend_schema
from rest_framework.authentication import SessionAuthentication
from rest_framework.permissions import AllowAny, IsAuthenticated
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from webapp.connect.api.views import ConnectAPIView, herder
from webapp.connect.herder import BadRequest, ConnectRestError
from webapp.connect.locator import current
from webapp.connect.node import ConnectNode

from webapp.connect.api.roles import user_role

from .serializers import WhoAmISerializer

__all__ = ["WhoAmIView", "SessionView", "TaskMetricsView", "ConnectorMetricsView", "task_metrics", "whoami",
           "ConnectorHealthListView", "ConnectorHealthView", "KafkaClusterView", "TaskHistoryView", "connectors_health",
           "ConnectorOffsetsView"]


def whoami(user: Any) -> dict[str, Any]:
    """``{"username", "roles", "is_superuser", "is_staff"}`` of an authenticated user (``roles``: ``[]`` or one role)."""
    role = user_role(user)
    return {"username": getattr(user, "username", str(user)), "roles": [role] if role else [],
            "is_superuser": bool(getattr(user, "is_superuser", False)),
            "is_staff": bool(getattr(user, "is_staff", False))}


@method_decorator(ensure_csrf_cookie, name="dispatch")
class WhoAmIView(APIView):
    """``GET /raftconnect/v1/whoami``: the authenticated user and its console roles (never forwarded).

    Any authenticated user may ask, whatever its role.
    """

    permission_classes = [IsAuthenticated]

    def get(self, request: Request) -> Response:
        return Response(whoami(request.user))


_ERROR = {"$ref": "#/components/schemas/ConnectError"}


class SessionView(APIView):
    """``POST /raftconnect/v1/session`` (log in) and ``DELETE`` (log out, any authenticated user) for the console."""

    permission_classes = [IsAuthenticated]

    def get_permissions(self):
        if self.request.method == "POST":
            return [AllowAny()]
        return super().get_permissions()

    def get_authenticators(self):
        if self.request is not None and self.request.method == "POST":
            return []  # logging in: credentials come in the body
        return super().get_authenticators()

    @extend_schema(
        request={"application/json": {"type": "object", "required": ["username", "password"],
                                      "properties": {"username": {"type": "string"}, "password": {"type": "string"}}}},
        responses={200: OpenApiResponse(WhoAmISerializer, "Logged in: the session cookie is set"),
                   400: OpenApiResponse(_ERROR, "Body is not {username, password}"),
                   401: OpenApiResponse(_ERROR, "Invalid username or password"),
                   403: OpenApiResponse(_ERROR, "Missing or wrong CSRF token (X-CSRFToken)")})
    def post(self, request: Request) -> Response:
        SessionAuthentication().enforce_csrf(request)  # no login CSRF: same check as every session write
        body = request.data
        if not isinstance(body, dict) or not isinstance(body.get("username"), str) \
                or not isinstance(body.get("password"), str):
            raise BadRequest('Request body must be {"username": "...", "password": "..."}')
        user = authenticate(request._request, username=body["username"], password=body["password"])
        if user is None or not user.is_active:
            raise ConnectRestError("Invalid username or password", 401)
        login(request._request, user)
        return Response(whoami(user))

    def delete(self, request: Request) -> Response:
        logout(request._request)
        return Response(status=204)


def task_metrics(node: ConnectNode, connector: str | None = None) -> list[dict[str, Any]]:
    """Every running task's metrics from the agents' latest heartbeats (see module docstring).

    ``connector`` restricts to one connector's tasks. Sorted by connector, task.
    Empty when this node is not the active coordinator.
    """
    coordinator = node.coordinator
    if coordinator is None or not coordinator.active:
        return []
    members = node.raft.state.members
    out = []
    for worker_id, running in list(coordinator.reported.items()):
        address = (members.get(worker_id) or {}).get("rest_address") or worker_id
        worker = {"node_id": worker_id, "rest_address": address}
        for key, m in list((running or {}).get("tasks", {}).items()):
            name, _, task = key.rpartition("-")
            if not task.isdigit() or (connector is not None and name != connector):
                continue
            out.append({"connector": name, "task": int(task), "worker_id": address, "state": m.get("state"),
                        "records": m.get("records", 0), "batches": m.get("batches", 0),
                        "last_batch_seconds": m.get("last_batch_seconds", 0.0),
                        "records_per_second": m.get("records_per_second", 0.0), "lag": m.get("lag"),
                        "phases": m.get("phases") or {}, "worker": worker, "errors": m.get("errors") or {}})
    return sorted(out, key=lambda t: (t["connector"], t["task"]))


class TaskMetricsView(ConnectAPIView):
    """``GET /raftconnect/v1/task-metrics``: throughput counters of every running task (leader)."""

    leader_only = True

    def get(self, request: Request) -> Response:
        return Response({"tasks": task_metrics(current())})


class ConnectorMetricsView(ConnectAPIView):
    """``GET /raftconnect/v1/connectors/{name}/metrics``: one connector's task throughput (leader)."""

    leader_only = True

    def get(self, request: Request, name: str) -> Response:
        herder().connector_config(name)  # 404 for an unknown connector
        tasks = task_metrics(current(), name)
        return Response({"connector": name, "tasks": tasks,
                         "records": sum(t["records"] for t in tasks),
                         "records_per_second": round(sum(t["records_per_second"] for t in tasks), 1)})


def connectors_health(node: ConnectNode, names: list[str] | None = None) -> dict[str, Any]:
    """The console's connector list: health per connector (:func:`webapp.console.state.connector_health`) and totals.

    ``names`` restricts to those connectors (an unknown one raises the Herder's 404).
    Connectors deleted while the list is read are left out.
    """
    from webapp.console.state import HEALTH_WORDS, TASK_STATES, connector_health, worker_names
    from webapp.connect.herder import NotFoundError

    h = node.herder
    named = worker_names(node.raft.state.members if node.raft is not None else {})
    servers = node.options.bootstrap_servers
    out = []
    for name in (names if names is not None else sorted(h.connector_names())):
        try:
            status = h.connector_status(name)
        except NotFoundError:
            if names is not None:
                raise
            continue
        out.append(connector_health(status, names=named, bootstrap_servers=servers))
    health = {w: sum(1 for c in out if c["health"] == w) for w in HEALTH_WORDS}
    tasks = {s: sum(c["task_counts"].get(s, 0) for c in out) for s in TASK_STATES}
    return {"connectors": out, "health": health, "tasks": tasks, "generated_at": time.time()}


class ConnectorHealthListView(ConnectAPIView):
    """``GET /raftconnect/v1/console/connectors``: every connector's health, task counts and root causes."""

    def get(self, request: Request) -> Response:
        return Response(connectors_health(current()))


class ConnectorHealthView(ConnectAPIView):
    """``GET /raftconnect/v1/console/connectors/{name}``: one connector's health (404 if unknown)."""

    def get(self, request: Request, name: str) -> Response:
        return Response(connectors_health(current(), [name])["connectors"][0])


class KafkaClusterView(ConnectAPIView):
    """``GET /raftconnect/v1/console/kafka``: bootstrap servers, reachable brokers, topics with end offsets."""

    def get(self, request: Request) -> Response:
        from webapp.console.kafka import kafka_cluster

        node = current()
        return Response(kafka_cluster(node.options.bootstrap_servers, node.options.kafka_client_config))


class TaskHistoryView(ConnectAPIView):
    """``GET /raftconnect/v1/console/history[?connector=NAME]``: 15 minutes of per-task rates (leader)."""

    leader_only = True

    def get(self, request: Request) -> Response:
        from webapp.console.history import history_for

        name = request.query_params.get("connector") or None
        if name is not None:
            herder().connector_config(name)  # 404 for an unknown connector
        return Response(history_for(current()).series(name))


class ConnectorOffsetsView(ConnectAPIView):
    """``GET /raftconnect/v1/console/connectors/{name}/offsets[?timestamp=MS]``: offsets with end offsets and lag."""

    def get(self, request: Request, name: str) -> Response:
        from webapp.console.offsets import connector_offsets_view

        raw = request.query_params.get("timestamp")
        timestamp = None
        if raw not in (None, ""):
            try:
                timestamp = int(raw)
            except ValueError:
                raise BadRequest(f"timestamp must be epoch milliseconds, not {raw!r}") from None
        node = current()
        h = herder()
        info = h.connector_info(name)  # 404 for an unknown connector
        kafka = {**dict(node.options.kafka_client_config or {}), "bootstrap.servers": node.options.bootstrap_servers}
        return Response(connector_offsets_view(offsets=h.connector_offsets(name)["offsets"], config=info["config"],
                                               connector_type=info["type"], kafka_config=kafka, timestamp=timestamp))
