"""The Herder: the one place through which REST changes connector state.

Owns validation of connector configs and names, the service functions that
change cluster state (``connector_create``, ``connector_pause``, ...) and the
selectors that build Kafka Connect's response shapes. Views stay thin and call
these. Writes go to the active metadata store on the leader; the coordinator is
poked so the change reaches workers at once.
"""
from __future__ import annotations

import re
from collections.abc import Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any

from webapp.connect.listing import ListingCache
from webapp.kafka.client_overrides import override_errors
from webapp.runtime import converter_defaults, registry
from webapp.runtime.config_providers import (
    HIDDEN,
    has_references,
    hide_secrets,
    keep_hidden,
    password_keys,
)
from webapp.runtime.engine import engine_config_errors
from webapp.runtime.errors import validate_error_config
from webapp.runtime.restart import config_errors as auto_restart_errors
from webapp.runtime.transforms import validate_transforms
from webapp.states import State, TargetState, target_from_initial_state
from webapp.storage.base import AlreadyExists, ConnectorRecord, ConnectorSummary, MetadataStore, NotFound

__all__ = [
    "Herder",
    "ConnectRestError",
    "BadRequest",
    "NotFoundError",
    "Conflict",
    "validate_name",
    "connector_config_errors",
]

MAX_NAME_LENGTH = 249
_TASK_KEYS = tuple(str(i) for i in range(256))  # task numbers as status keys, made once (lists of 100,000 tasks)
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")  # Java's Character.isISOControl, as Connect checks names


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


def _task_keys(count: int) -> tuple[str, ...] | list[str]:
    """``str(i)`` for ``i`` in ``range(count)``: how statuses and assignments name a connector's tasks."""
    return _TASK_KEYS[:count] if count <= len(_TASK_KEYS) else [str(i) for i in range(count)]


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
        poke: ``poke(name)`` after every write to connector ``name``, so the coordinator acts at once.
        restarts: ``restarts(name, connector: bool, tasks: list[int])`` commits a restart
            request (see ``ClusterStateMachine._request_restart``); ``None``: restarts refused (503).
    """

    store: MetadataStore
    members: Any
    assignment: Any
    poke: Any = None
    restarts: Any = None
    listing_cache: ListingCache = field(default_factory=ListingCache, repr=False, compare=False)

    # ------------------------------------------------------------ validation
    def validate_config(self, name: str, config: dict[str, str]) -> registry.PluginDesc:
        """Check a full connector config (create, PUT and PATCH of ``/connectors``); returns its plugin.

        The checks are :func:`connector_config_errors`, the same the validate endpoint reports.
        Errors: :class:`BadRequest` naming every error (and the validate endpoint).
        """
        cls_name = config.get("connector.class")
        if not cls_name:
            raise BadRequest("Connector config must contain 'connector.class'")
        try:
            plugin = registry.resolve(cls_name)
        except registry.UnknownPlugin as exc:
            raise BadRequest(str(exc)) from exc
        errors = connector_config_errors(config, plugin)
        messages = [m for errs in errors.values() for m in errs]
        if messages:
            raise BadRequest(
                f"Connector configuration is invalid and contains the following {len(messages)} error(s):\n"
                + "\n".join(messages)
                + "\nYou can also find the above list of errors at the endpoint `/connector-plugins/{connectorType}/config/validate`"
            )
        return plugin

    def _poke(self, name: str) -> None:
        if self.poke:
            self.poke(name)

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
        target = target_from_initial_state(initial_state)
        if target is None:
            raise BadRequest(f"Invalid initial state {initial_state}: must be one of RUNNING, PAUSED, STOPPED")
        self.validate_config(name, config)
        try:
            self.store.put_connector_config(name, config, target_state=target.value, create_only=True)
        except AlreadyExists as exc:
            raise Conflict(f"Connector {name} already exists") from exc
        self._poke(name)
        return self.connector_info(name)

    def connector_put_config(self, *, name: str, config: Any) -> tuple[bool, dict[str, Any]]:
        """Create or update (``PUT /connectors/{name}/config``); returns ``(created, info)``."""
        name = validate_name(name)
        config = _check_config_map(config)
        if "name" in config and config["name"] != name:
            raise BadRequest(f"Connector name configuration ({config['name']}) doesn't match connector name in the URL ({name})")
        config["name"] = name
        config = self._unhidden(name, config)
        self.validate_config(name, config)
        created = self.store.put_connector_config(name, config)
        self._poke(name)
        return created, self.connector_info(name)

    def connector_delete(self, *, name: str) -> None:
        """Delete a connector (offsets are kept). Errors: :class:`NotFoundError`."""
        try:
            self.store.remove_connector_config(name)
        except NotFound as exc:
            raise NotFoundError(f"Connector {name} not found") from exc
        self._poke(name)

    def connector_set_target_state(self, *, name: str, target_state: str) -> None:
        """Pause (PAUSED), resume (STARTED) or stop (STOPPED) a connector and its tasks."""
        self._summary(name)
        self.store.put_target_state(name, TargetState(target_state).value)
        self._poke(name)

    # ------------------------------------------------------------- selectors
    def _record(self, name: str) -> ConnectorRecord:
        rec = self.store.get_connector(name)
        if rec is None:
            raise NotFoundError(f"Connector {name} not found")
        return rec

    def _summary(self, name: str) -> ConnectorSummary:
        """The connector without its task configs (config, target state, task count); for every caller that
        needs no task config, as copying them is most of a record's read. Errors: :class:`NotFoundError`."""
        rec = self.store.connector_summary(name)
        if rec is None:
            raise NotFoundError(f"Connector {name} not found")
        return rec

    def connector_names(self) -> list[str]:
        """All connector names, sorted."""
        return self.store.connector_names()

    @staticmethod
    def _type(rec: ConnectorRecord | ConnectorSummary) -> str:
        try:
            return registry.resolve(rec.config.get("connector.class", "")).type
        except registry.UnknownPlugin:
            return "unknown"

    def connector_info(self, name: str) -> dict[str, Any]:
        """Connect's ConnectorInfo: ``{"name", "config", "tasks": [{"connector", "task"}], "type"}``.

        Read without the task configs (``connector_summary``), which ConnectorInfo only counts.
        Errors: :class:`NotFoundError`.
        """
        rec = self._summary(name)
        return self._info(rec, self._type(rec))

    def _info(self, rec: ConnectorSummary, type_: str, secret_keys: frozenset[str] | None = None) -> dict[str, Any]:
        """ConnectorInfo of ``rec``, its config as :meth:`shown_config` shows it; ``secret_keys`` are the
        plugin's PASSWORD keys when the caller already looked them up (once per class in a list)."""
        name = rec.name
        keys = self._password_keys(rec.config) if secret_keys is None else secret_keys
        return {"name": name, "config": hide_secrets(rec.config, keys),
                "tasks": [{"connector": name, "task": i} for i in range(rec.task_count)]
                if rec.target_state != TargetState.STOPPED else [],
                "type": type_}

    def connectors_expanded(self, expand: list[str] | tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """``GET /connectors?expand=status&expand=info``: ``{name: {"status": ConnectorStateInfo,
        "info": ConnectorInfo}}`` (each key only when asked), every connector in name order.

        The same shapes as :meth:`connector_status` and :meth:`connector_info`, from the store's bulk
        reads: :meth:`~webapp.storage.base.MetadataStore.connectors_with_statuses` for ``status``, else
        :meth:`~webapp.storage.base.ConfigBackingStore.connector_summaries` — no task config is read,
        and a relational store answers in two queries where one per connector and kind made 20,000
        round trips at 10,000 connectors. The members and the assignment are read once, each
        ``connector.class`` resolved once. A connector deleted while the list is built is left out or
        listed as it was (see the store method), never a 404 for the whole list.
        """
        want_status, want_info = "status" in expand, "info" in expand
        rows: Iterable[tuple[ConnectorSummary, dict[str, Any] | None, str]]
        if want_status:
            rows = ((rec, status, status["type"]) for rec, status in self.connector_states())
        else:
            rows = self._typed((rec, None) for rec in self.store.connector_summaries())
        secrets: dict[str, frozenset[str]] = {}
        out: dict[str, dict[str, Any]] = {}
        for rec, status, type_ in rows:
            entry: dict[str, Any] = {}
            if status is not None:
                entry["status"] = status
            if want_info:
                cls = rec.config.get("connector.class", "")
                keys = secrets.get(cls)
                if keys is None:
                    keys = secrets[cls] = self._password_keys(rec.config)
                entry["info"] = self._info(rec, type_, keys)
            out[rec.name] = entry
        return out

    def connector_states(self, names: Iterable[str] | None = None) -> Iterator[tuple[ConnectorSummary, dict[str, Any]]]:
        """``(summary, ConnectorStateInfo)`` of every connector in name order, from the store's bulk read
        (``names`` None: the statuses of :meth:`connectors_expanded`), or of each of ``names`` that
        exists, one summary and one statuses read each (for the few that changed since a cached copy).

        The ConnectorStateInfo is :meth:`connector_status`'s; the summary carries the config (no
        task configs are read). Also for the leader's ``/metrics`` (:mod:`webapp.connect_metrics`),
        which counts each connector's tasks by state and shows its class. Lazy: the members and the
        assignment are read at the first step. Errors: the store's (``StoreUnavailable``).
        """
        addresses = self._worker_addresses(self.members())
        assignment = self.assignment()
        if names is None:
            rows: Iterable[tuple[ConnectorSummary, Any]] = self.store.connectors_with_statuses()
        else:
            summaries = (self.store.connector_summary(name) for name in names)
            rows = ((rec, self.store.get_statuses(rec.name)) for rec in summaries if rec is not None)
        for rec, statuses, type_ in self._typed(rows):
            yield rec, self._status(rec, statuses, assignment, addresses, type_)

    def _typed(self, rows: Iterable[tuple[ConnectorSummary, Any]]) -> Iterator[tuple[ConnectorSummary, Any, str]]:
        """``rows`` of ``(summary, x)`` as ``(summary, x, connector type)``, each class resolved once."""
        types: dict[str, str] = {}
        for rec, x in rows:
            cls = rec.config.get("connector.class", "")
            type_ = types.get(cls)
            if type_ is None:
                type_ = types[cls] = self._type(rec)
            yield rec, x, type_

    def connectors_listed(self, expand: list[str] | tuple[str, ...]) -> dict[str, dict[str, Any]]:
        """What ``GET /connectors?expand=...`` responds: :meth:`connectors_expanded`, with each entry
        already encoded (an ``orjson.Fragment`` that the REST renderer writes as is) when the store
        keeps listing revisions, so only the connectors that changed since the last list are rebuilt
        (:class:`~webapp.connect.listing.ListingCache`); the plain result otherwise. Either way the
        same JSON.
        """
        revisions = self.store.listing_revisions()
        if revisions is None:
            self.listing_cache.clear()
            return self.connectors_expanded(expand)
        want_status = "status" in expand
        return self.listing_cache.listing(
            self.store, revisions, addresses=self._worker_addresses(self.members()) if want_status else None,
            assignment=self.assignment, kind=lambda rec: (self._type(rec), self._password_keys(rec.config)),
            status=self._status if want_status else None, info=self._info if "info" in expand else None)

    def connector_config(self, name: str) -> dict[str, str]:
        """The connector's config as submitted, secrets hidden (:meth:`shown_config`)."""
        return self.shown_config(self._summary(name).config)

    @staticmethod
    def _password_keys(config: dict[str, str]) -> frozenset[str]:
        try:
            return password_keys(registry.resolve(config.get("connector.class", "")).cls.config_def)
        except (registry.UnknownPlugin, AttributeError):
            return frozenset()

    def shown_config(self, config: dict[str, str]) -> dict[str, str]:
        """``config`` as every REST response shows it: the plugin's PASSWORD keys and Kafka's password-like keys
        as ``[hidden]``, passwords inside URLs hidden, references as written (config_providers.hide_secrets).

        Kafka Connect returns such values as submitted; RaftConnect never sends them back (issue 19): a write
        that sends ``[hidden]`` (or the hidden URL) back keeps the stored value (:meth:`_unhidden`).
        """
        return hide_secrets(config, self._password_keys(config))

    def _unhidden(self, name: str, config: dict[str, str]) -> dict[str, str]:
        """``config`` (a write of connector ``name``) with hidden values sent back replaced by the stored ones.

        Every value :func:`hide_secrets` changes holds ``[hidden]``, so a write with none (nearly every
        write) is returned as it is without reading the stored config."""
        if not any(isinstance(v, str) and HIDDEN in v for v in config.values()):
            return config  # nothing as shown hidden was sent back: the stored config need not be read
        rec = self.store.connector_summary(name)
        if rec is None:
            return config
        return keep_hidden(config, rec.config, self._password_keys({**rec.config, **config}))

    def connector_tasks(self, name: str) -> list[dict[str, Any]]:
        """Connect's TaskInfo list: ``[{"id": {"connector", "task"}, "config": {...}}]``."""
        rec = self._record(name)
        if rec.target_state == TargetState.STOPPED:
            return []
        return [{"id": {"connector": name, "task": i}, "config": self.shown_config(cfg)} for i, cfg in enumerate(rec.tasks)]

    @staticmethod
    def _worker_addresses(members: dict[str, Any]) -> dict[str, str]:
        """``{worker_id: its REST address}`` of ``members`` (the worker id when it has none), as Connect
        shows a ``worker_id`` (host:port); an id that is no member stands for itself."""
        return {wid: (m or {}).get("rest_address") or wid for wid, m in members.items()}

    def connector_status(self, name: str) -> dict[str, Any]:
        """Connect's ConnectorStateInfo: ``{"name", "connector": {"state", "worker_id", "trace"?},
        "tasks": [{"id", "state", "worker_id", "trace"?}], "type"}``.

        Entities with no reported status yet are UNASSIGNED (worker_id of the
        assigned worker, if any).
        """
        rec = self._summary(name)
        return self._status(rec, self.store.get_statuses(name), self.assignment(),
                            self._worker_addresses(self.members()), self._type(rec))

    @staticmethod
    def _status(rec: ConnectorSummary, statuses: dict[str, Any], assignment: dict[str, Any],
                addresses: dict[str, str], type_: str) -> dict[str, Any]:
        """One ConnectorStateInfo. A status counts only while its worker owns the instance (else
        UNASSIGNED, with the owner's address); a trace is shown for FAILED only. Written for lists of
        100,000 tasks: per task, dict lookups and one dict, no call."""
        name = rec.name
        unassigned, failed = State.UNASSIGNED.value, State.FAILED.value
        owner = assignment["connectors"].get(name)
        status = statuses.get("connector")
        if status is None or (owner is not None and status.get("worker_id") != owner):
            connector = {"state": unassigned, "worker_id": addresses.get(owner, owner)}
        else:
            worker = status.get("worker_id")
            connector = {"state": status["state"], "worker_id": addresses.get(worker, worker)}
            if status["state"] == failed and status.get("trace"):
                connector["trace"] = status["trace"]
        tasks: list[dict[str, Any]] = []
        if rec.target_state == TargetState.STOPPED:
            if connector["state"] not in (failed, unassigned):
                connector["state"] = State.STOPPED.value
        else:
            owner_of, status_of, address_of = assignment["tasks"].get, statuses["tasks"].get, addresses.get
            prefix, append = name + "-", tasks.append
            for i, key in enumerate(_task_keys(rec.task_count)):
                owner = owner_of(prefix + key)
                status = status_of(key)
                if status is None or (owner is not None and status.get("worker_id") != owner):
                    append({"id": i, "state": unassigned, "worker_id": address_of(owner, owner)})
                    continue
                state, worker = status["state"], status.get("worker_id")
                if state == failed and status.get("trace"):
                    append({"id": i, "state": state, "worker_id": address_of(worker, worker), "trace": status["trace"]})
                else:
                    append({"id": i, "state": state, "worker_id": address_of(worker, worker)})
        return {"name": name, "connector": connector, "tasks": tasks, "type": type_}

    def connector_offsets(self, name: str) -> dict[str, Any]:
        """Connect's ConnectorOffsets: ``{"offsets": [{"partition": {...}, "offset": {...}}]}``.

        Current on any member (``latest_offsets``): every commit acknowledged before the request is in
        it, as Connect reads its offsets topic to the end. Errors: :class:`NotFoundError`,
        ``StoreUnavailable`` (503) when this member cannot catch up with the Raft log in time.
        """
        self._summary(name)
        return {"offsets": [{"partition": dict(o.partition), "offset": dict(o.offset)}
                            for o in self.store.latest_offsets(name)]}

    # ------------------------------------------------- issue 5: more of Connect's REST API
    def connector_patch_config(self, *, name: str, patch: Any) -> dict[str, Any]:
        """Merge ``patch`` into the connector's config (``PATCH /connectors/{name}/config``); returns its info.

        A ``null`` value removes the key. The merged config is validated like a PUT.
        Errors: :class:`NotFoundError`, :class:`BadRequest` (body, values, name, config).
        """
        rec = self._summary(name)
        if not isinstance(patch, dict):
            raise BadRequest("Connector configuration must be a JSON object of string keys and values")
        removed = {k for k, v in patch.items() if v is None}
        kept = keep_hidden(_check_config_map({k: v for k, v in patch.items() if v is not None}), rec.config,
                           self._password_keys(rec.config))
        if "name" in removed:
            raise BadRequest("Connector configuration may not remove the key name")
        if "name" in kept and kept["name"] != name:
            raise BadRequest(f"Connector name configuration ({kept['name']}) doesn't match connector name in the URL ({name})")
        config = {k: v for k, v in {**rec.config, **kept}.items() if k not in removed}
        config["name"] = name
        self.validate_config(name, config)
        self.store.put_connector_config(name, config)
        self._poke(name)
        return self.connector_info(name)

    def task_status(self, name: str, task: int) -> dict[str, Any]:
        """Connect's TaskState ``{"id", "state", "worker_id", "trace"?}``.

        Errors: :class:`NotFoundError` ``No status found for task {name}-{task}`` for an
        unknown connector or task (as Connect).
        """
        rec = self.store.get_connector(name)
        if rec is None or rec.target_state == TargetState.STOPPED or not 0 <= task < len(rec.tasks):
            raise NotFoundError(f"No status found for task {name}-{task}")
        for t in self.connector_status(name)["tasks"]:
            if t["id"] == task:
                return t
        raise NotFoundError(f"No status found for task {name}-{task}")

    def _request_restart(self, name: str, connector: bool, tasks: list[int]) -> None:
        if self.restarts is None:
            raise ConnectRestError("Restarts are not available on this node", 503)
        if connector or tasks:
            self.restarts(name, connector, tasks)
            self._poke(name)

    def connector_restart(self, *, name: str, include_tasks: bool = False, only_failed: bool = False
                          ) -> dict[str, Any] | None:
        """Restart the connector instance and/or its tasks (``POST /connectors/{name}/restart``).

        Connect's RestartRequest: the connector instance restarts if ``not only_failed``
        or it is FAILED; each task restarts if ``include_tasks`` and (``not only_failed``
        or it is FAILED). The request is committed in Raft (a restart counter per
        instance) and the owning worker restarts the instances whose counter changed.

        Returns ``None`` when both flags are false (only the connector restarts; Connect
        answers 204), else the ConnectorStateInfo with RESTARTING for every instance to
        restart (Connect answers 202). Errors: :class:`NotFoundError`
        (``Unknown connector: name``; ``Status for connector name not found`` when it
        never reported a status).
        """
        if self.store.get_connector(name) is None:
            raise NotFoundError(f"Unknown connector: {name}")
        if not include_tasks and not only_failed:
            self._request_restart(name, True, [])
            return None
        if self.store.get_statuses(name).get("connector") is None:
            raise NotFoundError(f"Status for connector {name} not found")
        info = self.connector_status(name)
        restart_connector = not only_failed or info["connector"]["state"] == State.FAILED
        tasks = [t["id"] for t in info["tasks"] if include_tasks and (not only_failed or t["state"] == State.FAILED)]
        self._request_restart(name, restart_connector, tasks)
        if restart_connector:
            info["connector"] = {**{k: v for k, v in info["connector"].items() if k != "trace"}, "state": State.RESTARTING.value}
        info["tasks"] = [{**{k: v for k, v in t.items() if k != "trace"}, "state": State.RESTARTING.value}
                         if t["id"] in tasks else t for t in info["tasks"]]
        return info

    def task_restart(self, *, name: str, task: int) -> None:
        """Restart one task (``POST /connectors/{name}/tasks/{task}/restart``).

        Errors: :class:`NotFoundError` ``Unknown connector: name`` / ``Unknown task: name-task``.
        """
        rec = self.store.get_connector(name)
        if rec is None:
            raise NotFoundError(f"Unknown connector: {name}")
        if rec.target_state == TargetState.STOPPED or not 0 <= task < len(rec.tasks):
            raise NotFoundError(f"Unknown task: {name}-{task}")
        self._request_restart(name, False, [task])

    # offsets (KIP-875)
    def _require_stopped(self, name: str) -> ConnectorRecord:
        rec = self._record(name)
        if rec.target_state != TargetState.STOPPED:
            raise BadRequest("Connectors must be in the STOPPED state before their offsets can be modified. This can be "
                             f"done for the specified connector by issuing a 'PUT' request to the '/connectors/{name}/stop' "
                             "endpoint")
        return rec

    def connector_alter_offsets(self, *, name: str, body: Any) -> dict[str, str]:
        """``PATCH /connectors/{name}/offsets`` with Connect's ConnectorOffsets body; returns its Message.

        Sink connectors name partitions ``{"kafka_topic", "kafka_partition"}`` with
        offsets ``{"kafka_offset"}``; source connectors any maps. A ``null`` offset
        removes the partition. Nothing is written unless every entry is valid.
        Errors: :class:`NotFoundError`, :class:`BadRequest` (not STOPPED, body).
        """
        rec = self._require_stopped(name)
        entries = parse_offsets_body(body, sink=self._type(rec) == "sink")
        self.store.alter_offsets(name, entries)
        return {"message": "The offsets for this connector have been altered successfully"}

    def connector_reset_offsets(self, *, name: str) -> dict[str, str]:
        """``DELETE /connectors/{name}/offsets``: remove every committed offset; returns Connect's Message.

        Errors: :class:`NotFoundError`, :class:`BadRequest` (not STOPPED).
        """
        self._require_stopped(name)
        self.store.reset_offsets(name)
        return {"message": "The offsets for this connector have been reset successfully"}

    # active topics (KIP-558)
    def connector_active_topics(self, name: str) -> dict[str, Any]:
        """Connect's ActiveTopicsInfo for ``GET /connectors/{name}/topics``: ``{name: {"topics": [...]}}``.

        As in Connect, a connector that does not exist has no active topics (not 404).
        """
        return {name: {"topics": self.store.get_topics(name)}}

    def connector_reset_active_topics(self, *, name: str) -> None:
        """Forget the connector's active topics (``PUT /connectors/{name}/topics/reset``); tasks record
        them again as they use them."""
        self.store.reset_topics(name)

    # plugins
    def validate_plugin_config(self, *, plugin_name: str, config: Any) -> dict[str, Any]:
        """``PUT /connector-plugins/{plugin_name}/config/validate``: Connect's ConfigInfos of ``config``.

        Errors: :class:`BadRequest` when the body is not a string map, names no
        ``connector.class``, names an unknown one, or one that does not match
        ``plugin_name`` (compared as Connect does: without a ``Connector`` suffix, by suffix).
        """
        from webapp.connect import plugins

        config = _check_config_map(config)
        included = config.get("connector.class")

        def normalized(n: str) -> str:
            return n[: -len("Connector")] if n.endswith("Connector") and len(n) > len("Connector") else n

        if included is not None and not normalized(included).endswith(normalized(plugin_name)):
            raise BadRequest(f"Included connector type {included} does not match request type {plugin_name}")
        if not included:
            raise BadRequest(f"Connector config {config} contains no connector type")
        try:
            plugin = registry.resolve(included)
        except registry.UnknownPlugin as exc:
            raise BadRequest(str(exc)) from exc
        errors = connector_config_errors(config, plugin)
        return plugins.validate(config, errors, included, plugin.cls.config_def)


def connector_config_errors(config: dict[str, str], plugin: registry.PluginDesc) -> dict[str, list[str]]:
    """Every error of the full connector ``config`` of ``plugin``, as ``{config key: [message]}`` (empty: valid).

    The one set of checks behind ``POST /connectors``, ``PUT|PATCH /connectors/{name}/config`` (which
    answer 400 with the messages) and ``PUT /connector-plugins/{type}/config/validate`` (which reports
    them per key): the connector's own ``validate``, except for keys holding a ``${provider:...}``
    reference (only the worker that starts the connector resolves those); then what applies to every
    connector: automatic restart keys, the SMTs and predicates (``transforms``), error handling
    (``errors.*``, a dead letter queue for sinks), the task engine's keys, the Kafka client override
    keys (``producer.override.*``, ``consumer.override.*``, ``admin.override.*``: known, mappable to
    librdkafka, allowed by the worker's ``connector.client.config.override.policy``) and ``tasks.max``.
    The config is checked with the worker's converters where it names none of its own
    (:mod:`webapp.runtime.converter_defaults`), as the worker runs it.
    """
    config = converter_defaults.with_worker_defaults(config)  # the worker's
    errors = {k: list(v) for k, v in plugin.cls().validate(config).items() if not has_references(config.get(k))}
    for extra in (auto_restart_errors(config), validate_transforms(config),
                  validate_error_config(config, sink=plugin.type == "sink"), engine_config_errors(config),
                  override_errors(config, unresolved=has_references)):
        for key, msgs in extra.items():
            errors.setdefault(key, []).extend(msgs)
    tasks_max = config.get("tasks.max", "1")
    try:
        if int(tasks_max) < 1:
            errors.setdefault("tasks.max", []).append("Invalid value for configuration tasks.max: Value must be at least 1")
    except ValueError:
        errors.setdefault("tasks.max", []).append(f"Invalid value {tasks_max} for configuration tasks.max: Not a number of type INT")
    return errors


def parse_offsets_body(body: Any, *, sink: bool) -> list[tuple[dict, dict | None]]:
    """Check a ConnectorOffsets request body; returns ``[(partition, offset | None)]``.

    Messages follow Kafka Connect's (``Worker.modifyConnectorOffsets``, ``SinkUtils``).
    Errors: :class:`BadRequest`.
    """
    if not isinstance(body, dict) or not isinstance(body.get("offsets"), list) or not body["offsets"]:
        raise BadRequest("Partitions / offsets need to be provided for an alter offsets request")
    out: list[tuple[dict, dict | None]] = []
    for item in body["offsets"]:
        if not isinstance(item, dict) or set(item) - {"partition", "offset"}:
            raise BadRequest("Each offset entry must be an object with the keys 'partition' and 'offset'")
        partition, offset = item.get("partition"), item.get("offset")
        if not isinstance(partition, dict) or not partition:
            raise BadRequest("The partition of each offset entry must be a non-empty JSON object")
        if offset is not None and not isinstance(offset, dict):
            raise BadRequest("The offset of each offset entry must be a JSON object or null")
        if sink:
            if "kafka_topic" not in partition or "kafka_partition" not in partition:
                raise BadRequest("The partition for a sink connector offset must contain the keys 'kafka_topic' and "
                                 "'kafka_partition'")
            topic = partition["kafka_topic"]
            if not isinstance(topic, str) or not topic:
                raise BadRequest("Kafka topic names must be valid strings")
            part = _whole_number(partition["kafka_partition"], "Kafka partitions must be valid numbers")
            if part < 0:
                raise BadRequest("Kafka partitions must be greater than or equal to 0")
            partition = {"kafka_topic": topic, "kafka_partition": part}
            if offset is not None:
                if "kafka_offset" not in offset:
                    raise BadRequest("The offset for a sink connector should either be null or contain the key "
                                     "'kafka_offset'")
                value = _whole_number(offset["kafka_offset"], "Kafka offsets must be valid numbers")
                if value < 0:
                    raise BadRequest("Kafka offsets must be greater than or equal to 0")
                offset = {"kafka_offset": value}
        out.append((dict(partition), dict(offset) if offset is not None else None))
    return out


def _whole_number(value: Any, message: str) -> int:
    if isinstance(value, bool):
        raise BadRequest(message)
    if isinstance(value, int):
        return value
    if isinstance(value, str):
        try:
            return int(value)
        except ValueError:
            pass
    raise BadRequest(message)
