"""The Herder: the one place through which REST changes connector state.

Owns validation of connector configs and names, the service functions that
change cluster state (``connector_create``, ``connector_pause``, ...) and the
selectors that build Kafka Connect's response shapes. Views stay thin and call
these. Writes go to the active metadata store on the leader; the coordinator is
poked so the change reaches workers at once.
"""
from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from webapp.connectors import registry
from webapp.storage.base import AlreadyExists, ConnectorRecord, MetadataStore, NotFound

__all__ = [
    "Herder",
    "ConnectRestError",
    "BadRequest",
    "NotFoundError",
    "Conflict",
    "validate_name",
]

MAX_NAME_LENGTH = 249
_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


class ConnectRestError(Exception):
    """An error with an HTTP status, rendered as ``{"error_code", "message"}``."""

    status = 500

    def __init__(self, message: str, status: int | None = None):
        super().__init__(message)
        self.message = message
        if status is not None:
            self.status = status


class BadRequest(ConnectRestError):
    status = 400


class NotFoundError(ConnectRestError):
    status = 404


class Conflict(ConnectRestError):
    status = 409


def validate_name(name: Any) -> str:
    """Check a connector name; returns it stripped. Raises :class:`BadRequest`.

    Rules: a non-empty string of at most 249 characters without ``/`` (it is a
    URL path segment) and without control characters.
    """
    if not isinstance(name, str) or not name.strip():
        raise BadRequest("Connector name is required and must be a non-empty string")
    name = name.strip()
    if len(name) > MAX_NAME_LENGTH:
        raise BadRequest(f"Connector name is too long ({len(name)} characters, at most {MAX_NAME_LENGTH})")
    if "/" in name:
        raise BadRequest("Connector name may not contain '/'")
    if _CONTROL.search(name):
        raise BadRequest("Connector name may not contain control characters (ISO control codes)")
    return name


def _check_config_map(config: Any) -> dict[str, str]:
    if not isinstance(config, dict):
        raise BadRequest("Connector configuration must be a JSON object of string keys and values")
    out = {}
    for k, v in config.items():
        if not isinstance(k, str):
            raise BadRequest("Connector configuration keys must be strings")
        if v is None:
            raise BadRequest(f"Connector configuration value for {k} must not be null")
        if isinstance(v, (dict, list)):
            raise BadRequest(f"Connector configuration value for {k} must be a string, not {type(v).__name__}")
        out[k] = v if isinstance(v, str) else (str(v).lower() if isinstance(v, bool) else str(v))
    return out


@dataclass
class Herder:
    """Connector management on top of a metadata store (Connect's ``Herder``).

    Args:
        store: the active metadata store.
        members: callable returning Raft members ``{node_id: {..., "rest_address"}}``
            (used to show ``worker_id`` as Connect does, host:port).
        assignment: callable returning the committed assignment (see ClusterStateMachine).
        poke: called after every write so the coordinator acts at once.
    """

    store: MetadataStore
    members: Any
    assignment: Any
    poke: Any = None

    # ------------------------------------------------------------ validation
    def validate_config(self, name: str, config: dict[str, str]) -> registry.PluginDesc:
        """Check a full connector config; raises :class:`BadRequest` with every error."""
        cls_name = config.get("connector.class")
        if not cls_name:
            raise BadRequest("Connector config must contain 'connector.class'")
        try:
            plugin = registry.resolve(cls_name)
        except registry.UnknownPlugin as exc:
            raise BadRequest(str(exc)) from exc
        errors = plugin.cls().validate(config)
        from webapp.runtime.errors import validate_error_config  # SMTs and errors.* apply to every connector
        from webapp.runtime.transforms import validate_transforms

        for extra in (validate_transforms(config), validate_error_config(config, sink=plugin.type == "sink")):
            for key, msgs in extra.items():
                errors.setdefault(key, []).extend(msgs)
        tasks_max = config.get("tasks.max", "1")
        try:
            if int(tasks_max) < 1:
                errors.setdefault("tasks.max", []).append("Invalid value for configuration tasks.max: Value must be at least 1")
        except ValueError:
            errors.setdefault("tasks.max", []).append(f"Invalid value {tasks_max} for configuration tasks.max: Not a number of type INT")
        messages = [m for errs in errors.values() for m in errs]
        if messages:
            raise BadRequest(
                f"Connector configuration is invalid and contains the following {len(messages)} error(s):\n"
                + "\n".join(messages)
                + "\nYou can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`"
            )
        return plugin

    def _poke(self) -> None:
        if self.poke:
            self.poke()

    # ------------------------------------------------------------- services
    def connector_create(self, *, name: Any, config: Any, initial_state: str | None = None) -> dict[str, Any]:
        """Create a connector (``POST /connectors``); returns its info.

        Errors: :class:`BadRequest` (name, config, initial_state), :class:`Conflict`
        (exists). ``initial_state``: RUNNING (default), PAUSED or STOPPED.
        """
        name = validate_name(name)
        config = _check_config_map(config)
        if "name" in config and config["name"] != name:
            raise BadRequest(f"Connector name configuration ({config['name']}) doesn't match connector name in the URL ({name})")
        config["name"] = name
        target = {None: "STARTED", "RUNNING": "STARTED", "PAUSED": "PAUSED", "STOPPED": "STOPPED"}.get(initial_state)
        if target is None:
            raise BadRequest(f"Invalid initial state {initial_state}: must be one of RUNNING, PAUSED, STOPPED")
        self.validate_config(name, config)
        try:
            self.store.put_connector_config(name, config, target_state=target, create_only=True)
        except AlreadyExists as exc:
            raise Conflict(f"Connector {name} already exists") from exc
        self._poke()
        return self.connector_info(name)

    def connector_put_config(self, *, name: str, config: Any) -> tuple[bool, dict[str, Any]]:
        """Create or update (``PUT /connectors/{name}/config``); returns ``(created, info)``."""
        name = validate_name(name)
        config = _check_config_map(config)
        if "name" in config and config["name"] != name:
            raise BadRequest(f"Connector name configuration ({config['name']}) doesn't match connector name in the URL ({name})")
        config["name"] = name
        self.validate_config(name, config)
        created = self.store.put_connector_config(name, config)
        self._poke()
        return created, self.connector_info(name)

    def connector_delete(self, *, name: str) -> None:
        """Delete a connector (offsets are kept). Errors: :class:`NotFoundError`."""
        try:
            self.store.remove_connector_config(name)
        except NotFound as exc:
            raise NotFoundError(f"Connector {name} not found") from exc
        self._poke()

    def connector_set_target_state(self, *, name: str, target_state: str) -> None:
        """Pause (PAUSED), resume (STARTED) or stop (STOPPED) a connector and its tasks."""
        self._record(name)
        self.store.put_target_state(name, target_state)
        self._poke()

    # ------------------------------------------------------------- selectors
    def _record(self, name: str) -> ConnectorRecord:
        rec = self.store.get_connector(name)
        if rec is None:
            raise NotFoundError(f"Connector {name} not found")
        return rec

    def connector_names(self) -> list[str]:
        """All connector names, sorted."""
        return self.store.connector_names()

    @staticmethod
    def _type(rec: ConnectorRecord) -> str:
        try:
            return registry.resolve(rec.config.get("connector.class", "")).type
        except registry.UnknownPlugin:
            return "unknown"

    def connector_info(self, name: str) -> dict[str, Any]:
        """Connect's ConnectorInfo: ``{"name", "config", "tasks": [{"connector", "task"}], "type"}``."""
        rec = self._record(name)
        return {"name": name, "config": rec.config,
                "tasks": [{"connector": name, "task": i} for i in range(len(rec.tasks))] if rec.target_state != "STOPPED" else [],
                "type": self._type(rec)}

    def connector_config(self, name: str) -> dict[str, str]:
        """The connector's config as submitted."""
        return self._record(name).config

    def connector_tasks(self, name: str) -> list[dict[str, Any]]:
        """Connect's TaskInfo list: ``[{"id": {"connector", "task"}, "config": {...}}]``."""
        rec = self._record(name)
        if rec.target_state == "STOPPED":
            return []
        return [{"id": {"connector": name, "task": i}, "config": cfg} for i, cfg in enumerate(rec.tasks)]

    def _worker_address(self, worker_id: str | None) -> str | None:
        if worker_id is None:
            return None
        member = self.members().get(worker_id) or {}
        return member.get("rest_address") or worker_id

    def connector_status(self, name: str) -> dict[str, Any]:
        """Connect's ConnectorStateInfo: ``{"name", "connector": {"state", "worker_id", "trace"?},
        "tasks": [{"id", "state", "worker_id", "trace"?}], "type"}``.

        Entities with no reported status yet are UNASSIGNED (worker_id of the
        assigned worker, if any).
        """
        rec = self._record(name)
        statuses = self.store.get_statuses(name)
        assignment = self.assignment()

        def entry(status: dict | None, owner: str | None, extra: dict) -> dict[str, Any]:
            if status is None or (owner is not None and status.get("worker_id") != owner):
                out = {"state": "UNASSIGNED", "worker_id": self._worker_address(owner)}
            else:
                out = {"state": status["state"], "worker_id": self._worker_address(status.get("worker_id"))}
                if status["state"] == "FAILED" and status.get("trace"):
                    out["trace"] = status["trace"]
            return {**extra, **out}

        connector = entry(statuses.get("connector"), assignment["connectors"].get(name), {})
        if rec.target_state == "STOPPED" and connector["state"] not in ("FAILED", "UNASSIGNED"):
            connector["state"] = "STOPPED"
        tasks = []
        if rec.target_state != "STOPPED":
            for i in range(len(rec.tasks)):
                owner = assignment["tasks"].get(f"{name}-{i}")
                tasks.append(entry(statuses["tasks"].get(str(i)), owner, {"id": i}))
        return {"name": name, "connector": connector, "tasks": tasks, "type": self._type(rec)}

    def connector_offsets(self, name: str) -> dict[str, Any]:
        """Connect's ConnectorOffsets: ``{"offsets": [{"partition": {...}, "offset": {...}}]}``."""
        self._record(name)
        return {"offsets": [{"partition": dict(o.partition), "offset": dict(o.offset)}
                            for o in self.store.get_offsets(name)]}
