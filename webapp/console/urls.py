"""URL routes of the console's server side (``/raftconnect/v1/whoami``, ``session``, task metrics, ``console/*``).

Owns the routes and OpenAPI declarations of :mod:`webapp.console.api`, included by the root
URLconf after the REST API's. Lives here, not in ``webapp.connect.api.urls``, so the REST
layer never imports the console (the console sits on top of it).
"""
from django.urls import path
from drf_spectacular.utils import OpenApiResponse, extend_schema, extend_schema_view

from . import api as console_api
from . import serializers as body

__all__ = ["urlpatterns"]

# SessionView.post declares its own body beside the code
for _view, _body in ((console_api.WhoAmIView, body.WhoAmISerializer),
                     (console_api.TaskMetricsView, body.TaskMetricsListSerializer),
                     (console_api.ConnectorMetricsView, body.ConnectorMetricsSerializer),
                     (console_api.ConnectorHealthListView, body.ConnectorHealthListSerializer),
                     (console_api.ConnectorHealthView, body.ConnectorHealthSerializer),
                     (console_api.KafkaClusterView, body.KafkaClusterSerializer),
                     (console_api.TaskHistoryView, body.TaskHistorySerializer),
                     (console_api.ConnectorOffsetsView, body.CONSOLE_OFFSETS)):
    extend_schema_view(get=extend_schema(responses={200: _body}))(_view)
extend_schema_view(get=extend_schema(operation_id="raftconnect_v1_console_connectors_list"))(
    console_api.ConnectorHealthListView)
extend_schema_view(delete=extend_schema(responses={204: OpenApiResponse(description="Logged out")}))(
    console_api.SessionView)

urlpatterns = [
    path("raftconnect/v1/whoami", console_api.WhoAmIView.as_view()),
    path("raftconnect/v1/session", console_api.SessionView.as_view()),
    path("raftconnect/v1/task-metrics", console_api.TaskMetricsView.as_view()),
    path("raftconnect/v1/connectors/<str:name>/metrics", console_api.ConnectorMetricsView.as_view()),
    path("raftconnect/v1/console/connectors", console_api.ConnectorHealthListView.as_view()),
    path("raftconnect/v1/console/connectors/<str:name>", console_api.ConnectorHealthView.as_view()),
    path("raftconnect/v1/console/connectors/<str:name>/offsets", console_api.ConnectorOffsetsView.as_view()),
    path("raftconnect/v1/console/kafka", console_api.KafkaClusterView.as_view()),
    path("raftconnect/v1/console/history", console_api.TaskHistoryView.as_view()),
]
