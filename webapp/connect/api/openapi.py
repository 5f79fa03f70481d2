"""OpenAPI descriptions of the public REST API: request/response bodies, error responses, auth schemes.

Owns what ``/raftconnect/v1/openapi.json`` says about each view; the views stay
free of schema code. Imported by ``urls`` so the declarations are applied to
the view classes (drf-spectacular's ``extend_schema_view``) before any schema
is generated. Bodies follow Kafka Connect's REST entities (ConnectorInfo,
ConnectorStateInfo, TaskInfo, ConnectorOffsets, PluginInfo, ServerInfo); RaftConnect's
own bodies are the serializers of :mod:`.serializers` (the console's:
``webapp.console.serializers``). Each operation's one-line summary is in :data:`SUMMARIES`.

:func:`add_error_responses` (a postprocessing hook) adds Connect's error body
``{"error_code", "message"}`` for the codes every operation can answer (401,
403, 500, 503), those of operations with a body (400, 413, 415), those of
``{name}`` paths (404) and of creating writes (409), in one place.
"""
from __future__ import annotations

from typing import Any

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema, extend_schema_view

from raftnode.state import SWITCH_PHASES
from webapp.connect import health

from webapp.states import STATES, State
from . import lifecycle, loggers, plugins, serializers as rc, stores as store_api, views

__all__ = ["add_error_responses", "SCHEMAS", "SUMMARIES"]

_STR_MAP = {"type": "object", "additionalProperties": {"type": "string"}}
_TASK_ID = {"type": "object", "required": ["connector", "task"],
            "properties": {"connector": {"type": "string"}, "task": {"type": "integer"}}}
_STATE = {"type": "string", "enum": list(STATES)}
_FREE_FORM = rc.FREE_FORM

#: Kafka Connect's entities as JSON Schema (registered as components by the hook)
SCHEMAS: dict[str, dict[str, Any]] = {
    "ConnectError": {"type": "object", "required": ["error_code", "message"],
                     "properties": {"error_code": {"type": "integer"}, "message": {"type": "string"}}},
    "ConnectorInfo": {"type": "object", "required": ["name", "config", "tasks", "type"],
                      "properties": {"name": {"type": "string"}, "config": _STR_MAP,
                                     "tasks": {"type": "array", "items": _TASK_ID},
                                     "type": {"type": "string", "enum": ["source", "sink", "unknown"]}}},
    "ConnectorStateInfo": {
        "type": "object", "required": ["name", "connector", "tasks"],
        "properties": {
            "name": {"type": "string"},
            "connector": {"type": "object", "required": ["state"],
                          "properties": {"state": _STATE, "worker_id": {"type": ["string", "null"]},
                                         "trace": {"type": "string"}}},
            "tasks": {"type": "array", "items": {
                "type": "object", "required": ["id", "state"],
                "properties": {"id": {"type": "integer"}, "state": _STATE,
                               "worker_id": {"type": ["string", "null"]}, "trace": {"type": "string"}}}},
            "type": {"type": "string"}}},
    "CreateConnectorRequest": {
        "type": "object", "required": ["name", "config"],
        "properties": {"name": {"type": "string"}, "config": _STR_MAP,
                       "initial_state": {"type": "string", "enum": [State.RUNNING.value, State.PAUSED.value, State.STOPPED.value]}}},
    "ConfigKeyInfo": {
        "type": "object", "required": ["name", "type", "required", "default_value", "importance", "documentation",
                                       "group", "order_in_group", "width", "display_name", "dependents"],
        "properties": {"name": {"type": "string"},
                       "type": {"type": "string", "description": "STRING, INT, LONG, DOUBLE, BOOLEAN, LIST, PASSWORD, "
                                                                 "CLASS"},
                       "required": {"type": "boolean"}, "default_value": {"type": ["string", "null"]},
                       "importance": {"type": "string", "enum": ["HIGH", "MEDIUM", "LOW"]},
                       "documentation": {"type": "string"}, "group": {"type": ["string", "null"]},
                       "order_in_group": {"type": "integer"}, "width": {"type": "string"},
                       "display_name": {"type": "string"}, "dependents": {"type": "array", "items": {"type": "string"}}}},
    "ConfigInfos": {"type": "object", "required": ["name", "error_count", "groups", "configs"], "properties": {
        "name": {"type": "string"}, "error_count": {"type": "integer"},
        "groups": {"type": "array", "items": {"type": "string"}},
        "configs": {"type": "array", "items": {"type": "object", "required": ["definition", "value"], "properties": {
            "definition": {"$ref": "#/components/schemas/ConfigKeyInfo"},
            "value": {"type": "object", "required": ["name", "errors"], "properties": {
                "name": {"type": "string"}, "value": {"type": ["string", "null"]},
                "recommended_values": {"type": "array", "items": {"type": "string"}},
                "errors": {"type": "array", "items": {"type": "string"}}, "visible": {"type": "boolean"}}}}}}}},
    "LoggerLevel": {"type": "object", "required": ["level"], "properties": {
        "level": {"type": "string"}, "last_modified": {"type": ["integer", "null"]}}},
    "ConnectorOffsets": {"type": "object", "required": ["offsets"], "properties": {"offsets": {
        "type": "array", "items": {"type": "object", "required": ["partition", "offset"],
                                   "properties": {"partition": {"type": "object", "description": _FREE_FORM},
                                                  "offset": {"type": ["object", "null"],
                                                             "description": _FREE_FORM}}}}}},
}


_CHECK_STATE = {"type": "string", "enum": list(health.STATES), "description": (
    "ok; unreachable (configured but does not answer: `error` names the address tried); down (this node's own "
    "part is not running); starting; not_started (Spark only: the session starts when a batch first needs it); "
    "not_applicable (the node's roles do not include it)")}
_NULLABLE_INT = {"type": ["integer", "null"]}


def _check(description: str, **properties: Any) -> dict[str, Any]:
    return {"type": "object", "required": ["state"], "description": description, "additionalProperties": True,
            "properties": {"state": _CHECK_STATE, "error": {"type": "string"}, "reason": {"type": "string"},
                           **properties}}


SCHEMAS["HealthReport"] = {
    "type": "object", "required": ["status", "message", "state", "node_id", "roles", "checks"],
    "description": "503 (state down) only when the node cannot serve requests: still starting, or a Raft member "
                   "that knows no leader. A failing dependency otherwise answers 200 with state degraded.",
    "properties": {
        "status": {"type": "string", "enum": ["healthy", "unhealthy", "starting"],
                   "description": "Kafka Connect's word (KIP-1017)"},
        "message": {"type": "string"},
        "state": {"type": "string", "enum": ["ok", "degraded", "down"],
                  "description": "ok: every check ok, not_started or not_applicable; degraded: some other check "
                                 "state; down: the node cannot serve requests (HTTP 503)"},
        "node_id": {"type": ["string", "null"]},
        "roles": {"type": "array", "items": {"type": "string", "enum": ["raft", "worker"]}},
        "checks": {"type": "object", "required": list(health.CHECKS), "properties": {
            "raft": _check("This member's Raft view; unreachable without a known leader or a majority",
                           role={"type": "string", "enum": ["LEADER", "FOLLOWER", "CANDIDATE"]},
                           term=_NULLABLE_INT, leader={"type": ["string", "null"]}, members=_NULLABLE_INT,
                           reachable_members=_NULLABLE_INT, has_quorum={"type": "boolean"},
                           commit_index=_NULLABLE_INT, applied_index=_NULLABLE_INT,
                           cluster={"type": "array", "items": {"type": "string"}}),
            "metadata_store": _check(f"The active metadata store (one cheap round trip, cached "
                                     f"{health.CACHE_TTL_S:g} s)",
                                     name={"type": "string"}, backend={"type": ["string", "null"]},
                                     switch={"type": "object", "description": "the store switch in progress",
                                             "required": ["source", "target", "phase"], "properties": {
                                                 "source": {"type": "string"}, "target": {"type": "string"},
                                                 "phase": {"type": "string", "enum": list(SWITCH_PHASES)}}}),
            "kafka": _check(f"A metadata request to the node's bootstrap servers (timeout {health.KAFKA_TIMEOUT_S:g} s, "
                            f"cached {health.CACHE_TTL_S:g} s)",
                            bootstrap_servers={"type": "string"}, cluster_id={"type": ["string", "null"]},
                            brokers={"type": "integer"}),
            "spark": _check("The agent's SparkSession", master={"type": "string"}),
            "agent": _check("The node's worker agent process and its last heartbeat acknowledged by the "
                            "coordinator (seconds)", pid={"type": "integer"}, exit_code={"type": "integer"},
                            last_heartbeat_s_ago={"type": ["number", "null"]},
                            session_timeout_s={"type": "number"}, generation=_NULLABLE_INT,
                            connectors=_NULLABLE_INT, tasks=_NULLABLE_INT),
        }},
    },
}


def _ref(name: str) -> dict[str, str]:
    return {"$ref": f"#/components/schemas/{name}"}


_LIST = {"oneOf": [
    {"type": "array", "items": {"type": "string"}},
    {"type": "object", "additionalProperties": {
        "type": "object", "properties": {"status": _ref("ConnectorStateInfo"), "info": _ref("ConnectorInfo")}}},
]}
_EXPAND = OpenApiParameter("expand", str, many=True, enum=["status", "info"],
                           description="Add each connector's status and/or info (unknown values are ignored, as in Connect)")


def _declare() -> None:
    """Attach the bodies to the view classes (idempotent: drf-spectacular only records overrides)."""
    extend_schema_view(
        get=extend_schema(responses={200: {"type": "object", "required": ["version"], "properties": {
            "version": {"type": "string"}, "commit": {"type": "string"},
            "kafka_cluster_id": {"type": ["string", "null"]}}}}, auth=[]),
    )(views.RootView)
    extend_schema_view(
        get=extend_schema(responses={200: _ref("HealthReport"), 503: _ref("HealthReport")}, auth=[],
                          description="Each dependency's state (Raft, metadata store, Kafka, Spark, the worker "
                                      "agent); no authentication. 200 while the node can serve requests, even "
                                      "when a dependency is unreachable (state degraded); 503 only when it cannot."),
    )(views.HealthView)
    extend_schema_view(
        get=extend_schema(parameters=[_EXPAND], responses={200: _LIST}, operation_id="connectors_list"),
        post=extend_schema(request={"application/json": _ref("CreateConnectorRequest")}, responses={201: _ref("ConnectorInfo")}),
    )(views.ConnectorsView)
    extend_schema_view(
        get=extend_schema(responses={200: _ref("ConnectorInfo")}),
        delete=extend_schema(responses={204: OpenApiResponse(description="Deleted")}),
    )(views.ConnectorView)
    extend_schema_view(
        get=extend_schema(responses={200: _STR_MAP}),
        put=extend_schema(request={"application/json": _STR_MAP}, responses={200: _ref("ConnectorInfo"), 201: _ref("ConnectorInfo")}),
    )(views.ConnectorConfigView)
    extend_schema_view(get=extend_schema(responses={200: _ref("ConnectorStateInfo")}))(views.ConnectorStatusView)
    extend_schema_view(get=extend_schema(responses={200: {"type": "array", "items": {
        "type": "object", "required": ["id", "config"], "properties": {"id": _TASK_ID, "config": _STR_MAP}}}}),
    )(views.ConnectorTasksView)
    extend_schema_view(put=extend_schema(request=None, responses={
        202: OpenApiResponse(description="Accepted (pause, resume)"),
        204: OpenApiResponse(description="Stopped")}))(views.ConnectorTargetStateView)
    extend_schema_view(get=extend_schema(responses={200: _ref("ConnectorOffsets")}))(views.ConnectorOffsetsView)
    extend_schema_view(get=extend_schema(responses={200: {"type": "array", "items": {
        "type": "object", "required": ["class", "type"],
        "properties": {"class": {"type": "string"}, "type": {"type": "string"}, "version": {"type": "string"}}}}}),
    )(views.ConnectorPluginsView)
    extend_schema_view(get=extend_schema(responses={200: rc.ClusterViewSerializer}))(views.ClusterView)
    extend_schema_view(get=extend_schema(responses={200: rc.RaftMemberStatusSerializer}))(views.RaftStatusView)
    extend_schema_view(get=extend_schema(responses={200: rc.AssignmentSerializer}))(views.AssignmentView)
    extend_schema_view(get=extend_schema(responses={200: rc.MetadataStoreStatusSerializer}))(store_api.MetadataStoreView)
    extend_schema_view(
        get=extend_schema(responses={200: rc.RaftMembersSerializer}),
        post=extend_schema(request={"application/json": {
            "type": "object", "required": ["address"],
            "properties": {"address": {"type": "string", "pattern": "^[^:]+:[0-9]+$"}}}},
                           responses={201: rc.RaftMembersSerializer}),
    )(views.RaftMembersView)
    extend_schema_view(delete=extend_schema(responses={204: OpenApiResponse(description="Removed")}))(views.RaftMemberView)
    extend_schema_view(post=extend_schema(request={"application/json": {
        "type": "object", "required": ["target"], "properties": {"target": {"type": "string"}},
        "additionalProperties": False}},
                                          responses={202: rc.MetadataStoreStatusSerializer}))(store_api.MetadataStoreSwitchView)
    extend_schema_view(post=extend_schema(request=None, responses={202: rc.MetadataStoreStatusSerializer}))(
        store_api.MetadataStoreRollbackView)
    extend_schema_view(get=extend_schema(parameters=[
        OpenApiParameter("users", bool, description="include the leader's REST users (default true)")],
        responses={200: rc.BackupSerializer}))(store_api.BackupView)
    extend_schema_view(post=extend_schema(request=rc.BackupSerializer,
                                          responses={200: rc.RestoreSummarySerializer}))(store_api.RestoreView)
    extend_schema_view(get=extend_schema(responses={(200, "text/plain"): OpenApiResponse(
        description="Prometheus text format")}))(views.MetricsView)
    _declare_lifecycle()


_MESSAGE = {"type": "object", "required": ["message"], "properties": {"message": {"type": "string"}}}
_BOOL_PARAM = {"type": "boolean"}


def _declare_lifecycle() -> None:
    """Restarts, task status, topics, offsets changes, plugin configs and loggers."""
    extend_schema_view(
        patch=extend_schema(request={"application/json": {"type": "object", "additionalProperties": {
            "type": ["string", "null"]}}}, responses={200: _ref("ConnectorInfo")}),
    )(views.ConnectorConfigView)
    extend_schema_view(
        patch=extend_schema(request={"application/json": _ref("ConnectorOffsets")}, responses={200: _MESSAGE}),
        delete=extend_schema(responses={200: _MESSAGE}),
    )(views.ConnectorOffsetsView)
    extend_schema_view(get=extend_schema(responses={200: {"type": "object", "required": ["id", "state"], "properties": {
        "id": {"type": "integer"}, "state": _STATE, "worker_id": {"type": ["string", "null"]},
        "trace": {"type": "string"}}}}))(lifecycle.TaskStatusView)
    extend_schema_view(post=extend_schema(request=None, parameters=[
        OpenApiParameter("includeTasks", bool, description="Restart the connector's tasks too"),
        OpenApiParameter("onlyFailed", bool, description="Restart only FAILED instances")],
        responses={202: _ref("ConnectorStateInfo"), 204: OpenApiResponse(description="Connector restarted")},
    ))(lifecycle.ConnectorRestartView)
    extend_schema_view(post=extend_schema(request=None, responses={204: OpenApiResponse(description="Restarted")}))(
        lifecycle.TaskRestartView)
    extend_schema_view(get=extend_schema(responses={200: {"type": "object", "additionalProperties": {
        "type": "object", "properties": {"topics": {"type": "array", "items": {"type": "string"}}}}}}))(
        lifecycle.ConnectorTopicsView)
    extend_schema_view(put=extend_schema(request=None, responses={202: OpenApiResponse(description="Reset")}))(
        lifecycle.ConnectorTopicsResetView)
    extend_schema_view(get=extend_schema(responses={200: {"type": "array", "items": _ref("ConfigKeyInfo")}}))(
        plugins.ConnectorPluginConfigView)
    extend_schema_view(put=extend_schema(request={"application/json": _STR_MAP}, responses={200: _ref("ConfigInfos")}))(
        plugins.ConnectorPluginValidateView)
    scope = OpenApiParameter("scope", str, enum=["worker", "cluster"], description="worker (default) or cluster")
    extend_schema_view(get=extend_schema(responses={200: {"type": "object", "additionalProperties": _ref("LoggerLevel")}},
                                         operation_id="admin_loggers_list"))(loggers.LoggersView)
    extend_schema_view(
        get=extend_schema(responses={200: _ref("LoggerLevel")}),
        put=extend_schema(parameters=[scope], request={"application/json": _ref("LoggerLevel")}, responses={
            200: {"type": "array", "items": {"type": "string"}}, 204: OpenApiResponse(description="Cluster scope")}),
    )(loggers.LoggerView)
    # tokens.TokensView declares its own bodies beside the code; the console's views are declared in
    # webapp.console.urls (the web layer's top imports this module, never the other way)


_declare()


class _BasicScheme(OpenApiAuthenticationExtension):
    target_class = "webapp.connect.api.authentication.CachedBasicAuthentication"
    name = "basicAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "basic"}


class _TokenScheme(OpenApiAuthenticationExtension):
    target_class = "webapp.connect.api.authentication.ReplicatedTokenAuthentication"
    name = "tokenAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "apiKey", "in": "header", "name": "Authorization",
                "description": "Token-based authentication with required prefix \"Token\" "
                               "(a key from POST /raftconnect/v1/tokens)"}


class _BearerScheme(OpenApiAuthenticationExtension):
    target_class = "webapp.connect.api.authentication.BearerTokenAuthentication"
    name = "bearerAuth"

    def get_security_definition(self, auto_schema):
        return {"type": "http", "scheme": "bearer", "description": "A token from POST /raftconnect/v1/tokens"}


#: One line of plain text per operation (``summary`` in the schema; Swagger UI's list, generated clients' docs).
#: The views' docstrings stay their ``description``. A new operation needs a line here
#: (tests/connect/test_openapi_schema.py checks).
SUMMARIES: dict[tuple[str, str], str] = {
    ("GET", "/"): "Version of the node",
    ("GET", "/health"): "Health of the node and each dependency",
    ("GET", "/metrics"): "Prometheus metrics of this node",
    ("GET", "/connectors"): "List connectors, optionally with status and info",
    ("POST", "/connectors"): "Create a connector",
    ("GET", "/connectors/{name}"): "Get a connector",
    ("DELETE", "/connectors/{name}"): "Delete a connector",
    ("GET", "/connectors/{name}/config"): "Get a connector's config",
    ("PUT", "/connectors/{name}/config"): "Create or replace a connector's config",
    ("PATCH", "/connectors/{name}/config"): "Change some keys of a connector's config",
    ("GET", "/connectors/{name}/status"): "Get a connector's and its tasks' states",
    ("GET", "/connectors/{name}/tasks"): "List a connector's task configs",
    ("GET", "/connectors/{name}/offsets"): "Get a connector's committed offsets",
    ("PATCH", "/connectors/{name}/offsets"): "Alter a stopped connector's offsets",
    ("DELETE", "/connectors/{name}/offsets"): "Reset a stopped connector's offsets",
    ("PUT", "/connectors/{name}/pause"): "Pause a connector and its tasks",
    ("PUT", "/connectors/{name}/resume"): "Resume a paused or stopped connector",
    ("PUT", "/connectors/{name}/stop"): "Stop a connector and shut down its tasks",
    ("POST", "/connectors/{name}/restart"): "Restart a connector, optionally with its (failed) tasks",
    ("GET", "/connectors/{name}/tasks/{task}/status"): "Get one task's state",
    ("POST", "/connectors/{name}/tasks/{task}/restart"): "Restart one task",
    ("GET", "/connectors/{name}/topics"): "List the topics a connector used",
    ("PUT", "/connectors/{name}/topics/reset"): "Forget the topics a connector used",
    ("GET", "/connector-plugins"): "List installed plugins",
    ("GET", "/connector-plugins/{plugin}/config"): "Describe a plugin's config keys",
    ("PUT", "/connector-plugins/{plugin}/config/validate"): "Validate a connector config",
    ("GET", "/admin/loggers"): "List loggers with a set level",
    ("GET", "/admin/loggers/{name}"): "Get a logger's level",
    ("PUT", "/admin/loggers/{name}"): "Set a logger's level on this node or the whole cluster",
    ("GET", "/raftconnect/v1/cluster"): "Nodes, Raft state and assigned tasks of the cluster",
    ("GET", "/raftconnect/v1/assignment"): "The committed assignment of connectors and tasks to workers",
    ("GET", "/raftconnect/v1/raft"): "This member's Raft status",
    ("GET", "/raftconnect/v1/raft/members"): "List the Raft voting members",
    ("POST", "/raftconnect/v1/raft/members"): "Add a Raft voting member",
    ("DELETE", "/raftconnect/v1/raft/members/{address}"): "Remove a Raft voting member",
    ("GET", "/raftconnect/v1/metadata-store"): "Active metadata store, configured stores and the latest switch",
    ("POST", "/raftconnect/v1/metadata-store/switch"): "Switch the cluster to another metadata store, online",
    ("POST", "/raftconnect/v1/metadata-store/rollback"): "Abort the running store switch or switch back",
    ("GET", "/raftconnect/v1/metadata-store/stores"): "List the metadata stores this node knows",
    ("POST", "/raftconnect/v1/metadata-store/stores"): "Add a metadata store to every node",
    ("GET", "/raftconnect/v1/metadata-store/stores/{name}"): "Get one metadata store",
    ("DELETE", "/raftconnect/v1/metadata-store/stores/{name}"): "Remove a metadata store added at run time",
    ("POST", "/raftconnect/v1/metadata-store/stores/{name}/test"): "Test that a metadata store answers and has its schema",
    ("GET", "/raftconnect/v1/backup"): "Back up every connector, offset and user as one document",
    ("POST", "/raftconnect/v1/restore"): "Restore a backup into this cluster",
    ("GET", "/raftconnect/v1/tokens"): "List your API tokens",
    ("POST", "/raftconnect/v1/tokens"): "Issue yourself a named API token",
    ("DELETE", "/raftconnect/v1/tokens/{name}"): "Revoke one of your API tokens",
    ("GET", "/raftconnect/v1/users"): "List the cluster's users",
    ("POST", "/raftconnect/v1/users"): "Create a user",
    ("GET", "/raftconnect/v1/users/{name}"): "Get a user",
    ("PATCH", "/raftconnect/v1/users/{name}"): "Change a user's password, role or active flag",
    ("DELETE", "/raftconnect/v1/users/{name}"): "Delete a user and its tokens",
    ("GET", "/raftconnect/v1/whoami"): "The authenticated user and its role",
    ("POST", "/raftconnect/v1/session"): "Log in to the console (session cookie)",
    ("DELETE", "/raftconnect/v1/session"): "Log out of the console",
    ("GET", "/raftconnect/v1/task-metrics"): "Throughput, lag and errors of every running task",
    ("GET", "/raftconnect/v1/connectors/{name}/metrics"): "Throughput, lag and errors of one connector's tasks",
    ("GET", "/raftconnect/v1/console/connectors"): "Health of every connector",
    ("GET", "/raftconnect/v1/console/connectors/{name}"): "Health of one connector",
    ("GET", "/raftconnect/v1/console/connectors/{name}/offsets"): "A connector's offsets with end offsets and lag",
    ("GET", "/raftconnect/v1/console/kafka"): "Brokers and topics of the Kafka cluster this node uses",
    ("GET", "/raftconnect/v1/console/history"): "The last 15 minutes of per-task rates",
}


def _codes(path: str, method: str, op: dict) -> dict[str, str]:
    public = not op.get("security") or op["security"] == [{}]
    codes = {"500": "Internal error"}
    if not public:
        codes.update({"401": "Not authenticated (WWW-Authenticate names the schemes)",
                      "403": "The user's role does not allow this operation, or a session write without its CSRF token"})
    if path not in ("/", "/health", "/metrics"):
        codes["503"] = "The node is starting or no Raft leader is known"
    if method in ("post", "put", "patch", "delete"):
        codes.update({"400": "Invalid request (body, name or config)", "409": "Conflict (exists, rebalancing, switch running)"})
        if method != "delete":
            codes.update({"413": "Request body over the size limit", "415": "Content-Type is not application/json"})
    if "{" in path:
        codes["404"] = "Not found"
    if method == "get" and path != "/health":
        codes.setdefault("400", "Invalid query")
    return codes


def add_error_responses(result: dict, generator, request, public) -> dict:
    """drf-spectacular postprocessing hook: Connect's entities as components, each operation's summary
    (:data:`SUMMARIES`) and its error responses."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(SCHEMAS)
    for path, item in result.get("paths", {}).items():
        for method, op in item.items():
            summary = SUMMARIES.get((method.upper(), path))
            if summary:
                op["summary"] = summary
            responses = op.setdefault("responses", {})
            for code, text in _codes(path, method, op).items():
                responses.setdefault(code, {"description": text,
                                            "content": {"application/json": {"schema": _ref("ConnectError")}}})
    return result
