"""Kafka Connect's public REST resources (ConnectorsResource, ConnectorPluginsResource, root).

Thin: parse the request, call the Herder, shape the response with Kafka
Connect's status codes. Every view but ``/`` and ``/health`` requires an
authenticated user with the role the path needs (``roles.HasRole``, applied in
:class:`ConnectAPIView`; the rules are declared in ``roles.POLICY``).
"""
from __future__ import annotations

import logging
import time
from typing import Any

from django.http import HttpResponse
from rest_framework.permissions import AllowAny
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from raftnode import without_leader_wait

from webapp import gcpolicy
from webapp.connect.health import health_report
from webapp.connect.herder import BadRequest, ConnectRestError, Herder
from webapp.connect.locator import NodeNotReady, current, current_or_none
from webapp.plugin import RAFTCONNECT_VERSION
from webapp.states import TargetState

from .params import bool_param, json_object
from .roles import HasRole
from .forwarding import (FORWARDED_HEADER, NOT_LEADER_HEADER, ForwardToLeader, forward, forward_target,
                         forwarded_budget_s, request_budget_s)

__all__ = [
    "accepts_plain_json", "ConnectAPIView", "RootView", "HealthView", "ConnectorsView", "ConnectorView", "ConnectorConfigView",
    "ConnectorStatusView", "ConnectorTasksView", "ConnectorTargetStateView", "ConnectorOffsetsView",
    "ConnectorPluginsView", "ClusterView", "AssignmentView", "RaftStatusView", "RaftMembersView", "RaftMemberView",
    "MetricsView",
]

log = logging.getLogger(__name__)

VERSION = f"3.9.0-raftconnect-{RAFTCONNECT_VERSION}"
_JSON = "application/json"
#: ``Accept`` values for which DRF's negotiation can only answer :data:`_JSON` with the JSON renderer
_PLAIN_ACCEPT = frozenset({"*/*", _JSON})


def accepts_plain_json(meta: dict[str, Any]) -> bool:
    """Whether a request's ``Accept`` (from its WSGI ``meta``) is one DRF's negotiation can only answer with
    ``application/json``: absent, ``*/*`` or exactly ``application/json``. The rule of
    :meth:`ConnectAPIView.perform_content_negotiation` and of the REST fast path (``fastpath``)."""
    return meta.get("HTTP_ACCEPT", "*/*") in _PLAIN_ACCEPT


def herder() -> Herder:
    """The Herder of the node in this process (503 while it starts)."""
    try:
        return current().herder
    except NodeNotReady as exc:
        raise ConnectRestError(str(exc), 503) from exc


class ConnectAPIView(APIView):
    """Base of every authenticated view: checks the role, then serves the request here or forwards it (see ``forwarding``).

    Subclasses may declare ``required_role`` (a role or ``{METHOD: role}``) to override ``roles.POLICY``.
    """

    permission_classes = [HasRole]
    #: serve reads on the leader too (the view shows leader-local state such as liveness)
    leader_only = False

    def dispatch(self, request, *args: Any, **kwargs: Any):
        if request.headers.get(FORWARDED_HEADER) == "1":
            # The forwarding member retries elsewhere if this one is no longer the leader: a write here
            # must not wait for a leader, nor outlive the forwarder's budget, and land after the client's
            # newer writes (raftnode.without_leader_wait). Authentication (signature) is checked inside.
            with without_leader_wait(forwarded_budget_s(request.headers)) as attempt:
                response = super().dispatch(request, *args, **kwargs)
            if attempt.not_leader and response.status_code == 503:
                response[NOT_LEADER_HEADER] = "1"  # nothing reached a log: safe to send to the leader
            return response
        return super().dispatch(request, *args, **kwargs)

    def perform_content_negotiation(self, request: Request, force: bool = False):
        """``(renderer, media type)`` for the response; DRF's negotiation unless the answer is plain JSON anyway.

        With the one JSON renderer and a request that accepts anything or exactly ``application/json``
        (no ``?format=``, no parameters such as ``indent``), DRF's negotiation (parsing the ``Accept``
        list and ordering it by precedence) always picks that renderer and ``application/json``; this
        answers so directly. Any other request goes through DRF's, which may answer 406.
        """
        renderers = self.get_renderers()
        if (len(renderers) == 1 and renderers[0].media_type == _JSON and self.format_kwarg is None
                and accepts_plain_json(request.META)
                and "format" not in request.query_params):
            return renderers[0], _JSON
        return super().perform_content_negotiation(request, force)

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        super().initial(request, *args, **kwargs)  # authentication and permissions first
        request.leader_only = self.leader_only
        try:
            node = current()
        except NodeNotReady as exc:
            raise ConnectRestError(str(exc), 503) from exc
        request.forward_deadline = time.monotonic() + request_budget_s(request.method)
        target = forward_target(request, node)
        if target:
            raise ForwardToLeader(target)

    def handle_exception(self, exc: Exception):
        if isinstance(exc, ForwardToLeader):
            try:
                return self._forward(exc.target)
            except Exception as inner:  # noqa: BLE001 - rendered as Connect's error body below
                exc = inner
        return super().handle_exception(exc)

    def _forward(self, target: str):
        """Proxy to ``target``; if it is gone (leader died), wait for the next leader or serve here
        (:func:`~webapp.connect.api.forwarding.forward`)."""
        def serve_here():
            return getattr(self, self.request.method.lower())(self.request, *self.args, **self.kwargs)

        return forward(self.request, current(), target, serve_here)


class RootView(APIView):
    """``GET /``: version information (no authentication), as Connect's root resource."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    def get(self, request: Request) -> Response:
        cluster = None
        try:
            cluster = current().options.bootstrap_servers and "raftconnect"
        except NodeNotReady:
            pass
        return Response({"version": VERSION, "commit": "raftconnect", "kafka_cluster_id": cluster})


class HealthView(APIView):
    """``GET /health`` (no authentication): each dependency's state; 200 while the node can serve requests,
    503 otherwise. The report and the rule are :mod:`webapp.connect.health`'s."""

    permission_classes = [AllowAny]
    authentication_classes: list = []

    def get(self, request: Request) -> Response:
        try:
            node = current()
        except NodeNotReady:
            node = None
        status, body = health_report(node)
        return Response(body, status=status)


class ConnectorsView(ConnectAPIView):
    """``GET /connectors[?expand=status&expand=info]`` and ``POST /connectors``."""

    def get(self, request: Request) -> Response:
        h = herder()
        names = h.connector_names()
        expand = request.query_params.getlist("expand")
        if not expand:
            return Response(names)
        for e in expand:  # as Connect: unknown expansions are ignored (and logged)
            if e not in ("status", "info"):
                log.info("Ignoring unknown expansion type %.50r", e)
        return Response(h.connectors_listed(expand))

    def post(self, request: Request) -> Response:
        body = json_object(request)
        info = herder().connector_create(name=body.get("name"), config=body.get("config"),
                                         initial_state=body.get("initial_state"))
        resp = Response(info, status=201)
        resp["Location"] = request.build_absolute_uri(f"/connectors/{info['name']}")
        return resp


class ConnectorView(ConnectAPIView):
    """``GET /connectors/{name}`` and ``DELETE /connectors/{name}``."""

    def get(self, request: Request, name: str) -> Response:
        return Response(herder().connector_info(name))

    def delete(self, request: Request, name: str) -> Response:
        herder().connector_delete(name=name)
        return Response(status=204)


class ConnectorConfigView(ConnectAPIView):
    """``GET|PUT /connectors/{name}/config`` (PUT: 201 on create, 200 on update)."""

    def get(self, request: Request, name: str) -> Response:
        return Response(herder().connector_config(name))

    def put(self, request: Request, name: str) -> Response:
        created, info = herder().connector_put_config(name=name, config=json_object(request))
        resp = Response(info, status=201 if created else 200)
        if created:
            resp["Location"] = request.build_absolute_uri(f"/connectors/{name}")
        return resp

    def patch(self, request: Request, name: str) -> Response:
        """``PATCH``: merge into the config (a null value removes the key); ConnectorInfo, 200."""
        return Response(herder().connector_patch_config(name=name, patch=request.data))


class ConnectorStatusView(ConnectAPIView):
    """``GET /connectors/{name}/status``."""

    def get(self, request: Request, name: str) -> Response:
        return Response(herder().connector_status(name))


class ConnectorTasksView(ConnectAPIView):
    """``GET /connectors/{name}/tasks``."""

    def get(self, request: Request, name: str) -> Response:
        return Response(herder().connector_tasks(name))


class ConnectorTargetStateView(ConnectAPIView):
    """``PUT /connectors/{name}/pause|resume|stop`` (202, 202, 204 as in Connect)."""

    target_state = TargetState.STARTED
    status_code = 202

    def put(self, request: Request, name: str) -> Response:
        herder().connector_set_target_state(name=name, target_state=self.target_state)
        return Response(status=self.status_code)


class ConnectorOffsetsView(ConnectAPIView):
    """``GET|PATCH|DELETE /connectors/{name}/offsets`` (PATCH and DELETE only while STOPPED; 200 with a Message)."""

    def get(self, request: Request, name: str) -> Response:
        return Response(herder().connector_offsets(name))

    def patch(self, request: Request, name: str) -> Response:
        return Response(herder().connector_alter_offsets(name=name, body=request.data))

    def delete(self, request: Request, name: str) -> Response:
        return Response(herder().connector_reset_offsets(name=name))


class ConnectorPluginsView(ConnectAPIView):
    """``GET /connector-plugins[?connectorsOnly=true]``: installed plugins; ``connectorsOnly=false`` adds
    transformations, predicates and converters (see ``webapp.connect.plugins``)."""

    def get(self, request: Request) -> Response:
        from webapp.connect import plugins

        only = bool_param(request, "connectorsOnly", default=True)
        return Response([p.as_json() for p in plugins.all_plugins(connectors_only=only)])


class ClusterView(ConnectAPIView):
    """``GET /raftconnect/v1/cluster``: nodes, Raft state, assignment per worker (served by the leader)."""

    leader_only = True

    def get(self, request: Request) -> Response:
        return Response(current().cluster_view())


class RaftStatusView(ConnectAPIView):
    """``GET /raftconnect/v1/raft``: this member's own Raft status (never forwarded), with its process's
    garbage collection pauses (a leader paused past the election timeout is voted out)."""

    def get(self, request: Request) -> Response:
        node = current()
        if node.raft is None:
            raise ConnectRestError("This node is not a Raft member (roles: worker)", 404)
        return Response({"node_id": node.options.node_id, **node.raft.status(),
                         "members": node.raft.raft_members(), "gc": gcpolicy.status()})


class RaftMembersView(ConnectAPIView):
    """``GET|POST /raftconnect/v1/raft/members``: list voting members, add one (``{"address": "h:p"}``)."""

    leader_only = True

    def get(self, request: Request) -> Response:
        node = current()
        return Response({"members": node.raft.raft_members(), "leader": node.raft.leader})

    def post(self, request: Request) -> Response:
        address = json_object(request).get("address")
        if not isinstance(address, str) or ":" not in address:
            raise BadRequest("Body must be {\"address\": \"HOST:PORT\"} of the new Raft member")
        current().raft.add_member(address)
        return Response({"members": current().raft.raft_members()}, status=201)


class RaftMemberView(ConnectAPIView):
    """``DELETE /raftconnect/v1/raft/members/{address}``: remove a voting member."""

    def delete(self, request: Request, address: str) -> Response:
        current().raft.remove_member(address)
        return Response(status=204)


class AssignmentView(ConnectAPIView):
    """``GET /raftconnect/v1/assignment``: the committed assignment and its generation."""

    def get(self, request: Request) -> Response:
        a = current().raft.state.assignment
        return Response({"generation": a["generation"], "epoch": a["epoch"],
                         "connectors": a["connectors"], "tasks": a["tasks"]})


class MetricsView(ConnectAPIView):
    """``GET /metrics``: this node's metrics in Prometheus' text format (authenticated; never forwarded).

    Scrape each node with basic auth (``basic_auth`` in Prometheus' scrape config).
    """

    def initial(self, request: Request, *args: Any, **kwargs: Any) -> None:
        APIView.initial(self, request, *args, **kwargs)  # authentication only: each node reports itself

    def get(self, request: Request) -> HttpResponse:
        from prometheus_client import CONTENT_TYPE_LATEST

        from webapp import connect_metrics, metrics

        metrics.install(current_or_none)  # normally done when the node started
        connect_metrics.install(current_or_none)  # Kafka Connect's metric groups beside raftconnect_*
        return HttpResponse(connect_metrics.exposition(), content_type=CONTENT_TYPE_LATEST)
