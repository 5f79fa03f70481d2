"""URL routes of the Kafka Connect REST API and RaftConnect's own ``/raftconnect/v1/`` API."""
from django.urls import path
from drf_spectacular.views import SpectacularJSONAPIView, SpectacularRedocView, SpectacularSwaggerView

from webapp.states import TargetState

from . import internal, lifecycle, loggers, openapi, plugins, tokens, users, views  # noqa: F401 - openapi declares the schema of the views
from . import stores as store_api

__all__ = ["urlpatterns"]

urlpatterns = [
    path("", views.RootView.as_view()),
    path("health", views.HealthView.as_view()),
    path("metrics", views.MetricsView.as_view()),
    path("connectors", views.ConnectorsView.as_view()),
    path("connectors/<str:name>", views.ConnectorView.as_view()),
    path("connectors/<str:name>/config", views.ConnectorConfigView.as_view()),
    path("connectors/<str:name>/status", views.ConnectorStatusView.as_view()),
    path("connectors/<str:name>/tasks", views.ConnectorTasksView.as_view()),
    path("connectors/<str:name>/offsets", views.ConnectorOffsetsView.as_view()),
    path("connectors/<str:name>/pause", views.ConnectorTargetStateView.as_view(target_state=TargetState.PAUSED, status_code=202)),
    path("connectors/<str:name>/resume", views.ConnectorTargetStateView.as_view(target_state=TargetState.STARTED, status_code=202)),
    path("connectors/<str:name>/stop", views.ConnectorTargetStateView.as_view(target_state=TargetState.STOPPED, status_code=204)),
    path("connector-plugins", views.ConnectorPluginsView.as_view()),
    # issue 5: the rest of Connect's REST API
    path("connectors/<str:name>/tasks/<int:task>/status", lifecycle.TaskStatusView.as_view()),
    path("connectors/<str:name>/tasks/<int:task>/restart", lifecycle.TaskRestartView.as_view()),
    path("connectors/<str:name>/restart", lifecycle.ConnectorRestartView.as_view()),
    path("connectors/<str:name>/topics", lifecycle.ConnectorTopicsView.as_view()),
    path("connectors/<str:name>/topics/reset", lifecycle.ConnectorTopicsResetView.as_view()),
    path("connector-plugins/<str:plugin>/config", plugins.ConnectorPluginConfigView.as_view()),
    path("connector-plugins/<str:plugin>/config/validate", plugins.ConnectorPluginValidateView.as_view()),
    path("admin/loggers", loggers.LoggersView.as_view()),
    path("admin/loggers/<str:name>", loggers.LoggerView.as_view()),
    path("raftconnect/v1/internal/loggers/<str:name>", loggers.InternalLoggerView.as_view()),
    path("raftconnect/v1/cluster", views.ClusterView.as_view()),
    path("raftconnect/v1/assignment", views.AssignmentView.as_view()),
    path("raftconnect/v1/raft", views.RaftStatusView.as_view()),
    path("raftconnect/v1/raft/members", views.RaftMembersView.as_view()),
    path("raftconnect/v1/raft/members/<str:address>", views.RaftMemberView.as_view()),
    path("raftconnect/v1/tokens", tokens.TokensView.as_view()),
    path("raftconnect/v1/tokens/<str:name>", tokens.TokenView.as_view()),
    path("raftconnect/v1/users", users.UsersView.as_view()),
    path("raftconnect/v1/users/<str:name>", users.UserView.as_view()),
    path("raftconnect/v1/openapi.json", SpectacularJSONAPIView.as_view(), name="openapi"),
    path("raftconnect/v1/docs", SpectacularSwaggerView.as_view(url_name="openapi"), name="openapi-docs"),
    path("raftconnect/v1/redoc", SpectacularRedocView.as_view(url_name="openapi", template_name="raftconnect/redoc.html"), name="openapi-redoc"),
    path("raftconnect/v1/metadata-store", store_api.MetadataStoreView.as_view()),
    path("raftconnect/v1/metadata-store/switch", store_api.MetadataStoreSwitchView.as_view()),
    path("raftconnect/v1/metadata-store/rollback", store_api.MetadataStoreRollbackView.as_view()),
    path("raftconnect/v1/metadata-store/stores", store_api.MetadataStoresView.as_view()),
    path("raftconnect/v1/metadata-store/stores/<str:name>", store_api.MetadataStoreEntryView.as_view()),
    path("raftconnect/v1/metadata-store/stores/<str:name>/test", store_api.MetadataStoreTestView.as_view()),
    path("raftconnect/v1/backup", store_api.BackupView.as_view()),
    path("raftconnect/v1/restore", store_api.RestoreView.as_view()),
    path("raftconnect/v1/internal/heartbeat", internal.HeartbeatView.as_view()),
    path("raftconnect/v1/internal/leave", internal.LeaveView.as_view()),
    path("raftconnect/v1/internal/leader", internal.LeaderView.as_view()),
    path("raftconnect/v1/internal/raft", internal.LocalRaftView.as_view()),
    path("raftconnect/v1/internal/users", internal.UserDirectoryView.as_view()),
    path("raftconnect/v1/internal/connectors/<str:name>/tasks", internal.TaskConfigsView.as_view()),
    path("raftconnect/v1/internal/connectors/<str:name>/tasks/<int:task>/start", internal.TaskStartView.as_view()),
    path("raftconnect/v1/internal/connectors/<str:name>/status", internal.StatusReportView.as_view()),
    path("raftconnect/v1/internal/statuses", internal.StatusReportsView.as_view()),
    path("raftconnect/v1/internal/starts", internal.TaskStartsView.as_view()),
    path("raftconnect/v1/internal/offsets", internal.OffsetCommitsView.as_view()),
    path("raftconnect/v1/internal/connectors/<str:name>/offsets", internal.OffsetsCommitView.as_view()),
]

# benchmarks/rest adds its baseline views through tools.bench_urls (tools.settings), never here
