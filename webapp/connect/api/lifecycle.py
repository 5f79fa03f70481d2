"""Connector lifecycle resources of Connect's ``ConnectorsResource`` added for issue 5.

``GET /connectors/{name}/tasks/{task}/status``, ``POST /connectors/{name}/restart``,
``POST /connectors/{name}/tasks/{task}/restart``, ``GET /connectors/{name}/topics`` and
``PUT /connectors/{name}/topics/reset``. Thin: parse, call the Herder, answer with
Connect's status codes. (``PATCH .../config`` and ``PATCH|DELETE .../offsets`` are
methods of the existing views in ``views.py``.)
"""
from __future__ import annotations

from django.conf import settings
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.connect.herder import ConnectRestError

from .params import bool_param
from .views import ConnectAPIView, herder

__all__ = ["TaskStatusView", "ConnectorRestartView", "TaskRestartView", "ConnectorTopicsView",
           "ConnectorTopicsResetView"]


class TaskStatusView(ConnectAPIView):
    """``GET /connectors/{name}/tasks/{task}/status``: one TaskState (404 for an unknown task)."""

    def get(self, request: Request, name: str, task: int) -> Response:
        return Response(herder().task_status(name, task))


class ConnectorRestartView(ConnectAPIView):
    """``POST /connectors/{name}/restart?includeTasks=&onlyFailed=``.

    Both false (the default): restart the connector instance only, 204. Otherwise 202
    with the ConnectorStateInfo in which the instances being restarted are RESTARTING.
    """

    def post(self, request: Request, name: str) -> Response:
        info = herder().connector_restart(name=name, include_tasks=bool_param(request, "includeTasks"),
                                          only_failed=bool_param(request, "onlyFailed"))
        return Response(status=204) if info is None else Response(info, status=202)


class TaskRestartView(ConnectAPIView):
    """``POST /connectors/{name}/tasks/{task}/restart``: 204."""

    def post(self, request: Request, name: str, task: int) -> Response:
        herder().task_restart(name=name, task=task)
        return Response(status=204)


def _tracking_enabled() -> None:
    if not settings.TOPIC_TRACKING_ENABLE:
        raise ConnectRestError("Topic tracking is disabled.", 403)


class ConnectorTopicsView(ConnectAPIView):
    """``GET /connectors/{name}/topics``: ActiveTopicsInfo ``{name: {"topics": [...]}}`` (403 when
    ``topic.tracking.enable`` is off)."""

    def get(self, request: Request, name: str) -> Response:
        _tracking_enabled()
        return Response(herder().connector_active_topics(name))


class ConnectorTopicsResetView(ConnectAPIView):
    """``PUT /connectors/{name}/topics/reset``: 202 (403 when tracking or its reset is disabled)."""

    def put(self, request: Request, name: str) -> Response:
        _tracking_enabled()
        if not settings.TOPIC_TRACKING_ALLOW_RESET:
            raise ConnectRestError("Topic tracking reset is disabled.", 403)
        herder().connector_reset_active_topics(name=name)
        return Response(status=202)
