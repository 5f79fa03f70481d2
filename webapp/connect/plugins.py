"""Every plugin type ``/connector-plugins`` lists, their config definitions, and config validation.

Owns the registry of non-connector plugins (converters, header converters,
transformations, predicates) beside the connector registry
(:mod:`webapp.runtime.registry`), the JSON shapes of Kafka Connect's
``PluginInfo``, ``ConfigKeyInfo`` and ``ConfigInfos`` entities, and building a
``ConfigInfos`` from a connector config (``PUT /connector-plugins/{p}/config/validate``).

A plugin of another type is added by an entry point in the group of its type
(:data:`ENTRY_POINT_GROUPS`, e.g. ``raftconnect.transformations``) naming a class
with ``version`` and ``config_def`` (a :class:`~webapp.plugin.ConfigDef`)
attributes, or in code with :func:`register`. The converters the runtime
implements (:mod:`webapp.runtime.converters`) are registered here.
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from importlib.metadata import entry_points
from typing import Any, Mapping

from webapp.runtime import registry
from webapp.plugin import ConfigDef, ConfigKey
from webapp.runtime import restart
from webapp.runtime.config_providers import HIDDEN
from webapp.runtime.converters import JSON_CONVERTER_CLASS, STRING_CONVERTER_CLASS

__all__ = [
    "PLUGIN_TYPES", "ENTRY_POINT_GROUPS", "PluginInfo", "register", "all_plugins", "find", "UnknownPlugin",
    "config_key_info", "validate", "COMMON_CONFIG",
]

log = logging.getLogger(__name__)

#: Kafka Connect's PluginType names, in the order ``/connector-plugins`` lists them.
PLUGIN_TYPES = ("sink", "source", "transformation", "predicate", "converter", "header_converter")
#: Entry-point group of each non-connector plugin type (connectors: ``raftconnect.connectors``).
ENTRY_POINT_GROUPS = {
    "transformation": "raftconnect.transformations",
    "predicate": "raftconnect.predicates",
    "converter": "raftconnect.converters",
    "header_converter": "raftconnect.header_converters",
}
RUNTIME_VERSION = "0.1.0"


class UnknownPlugin(LookupError):
    """No installed plugin has that class name or alias (404 ``Unknown plugin {name}.``)."""


@dataclass(frozen=True)
class PluginInfo:
    """One installed plugin: Connect's PluginInfo plus its config definition."""

    class_name: str
    type: str
    version: str
    config_def: ConfigDef = ConfigDef()

    def as_json(self) -> dict[str, str]:
        """``{"class", "type", "version"}`` as in Kafka Connect."""
        return {"class": self.class_name, "type": self.type, "version": self.version}


_registered: dict[str, PluginInfo] = {}


def register(class_name: str, plugin_type: str, version: str = RUNTIME_VERSION,
             config_def: ConfigDef | None = None) -> None:
    """Add a non-connector plugin to the list (idempotent; the last registration of a name wins).

    Errors: :class:`ValueError` for a type outside :data:`ENTRY_POINT_GROUPS`.
    """
    if plugin_type not in ENTRY_POINT_GROUPS:
        raise ValueError(f"unknown plugin type {plugin_type!r} (one of {', '.join(ENTRY_POINT_GROUPS)})")
    _registered[class_name] = PluginInfo(class_name, plugin_type, version, config_def or ConfigDef())
    if "_discovered" in globals():
        _discovered.cache_clear()


register(JSON_CONVERTER_CLASS, "converter", config_def=ConfigDef((
    ConfigKey("schemas.enable", "BOOLEAN", "true", importance="HIGH",
              documentation="Include schemas within each of the serialized values and keys."),
    ConfigKey("converter.type", "STRING", None, importance="LOW", allowed=("key", "value", "header"),
              documentation="How this converter will be used."),
)))
register(STRING_CONVERTER_CLASS, "converter", config_def=ConfigDef((
    ConfigKey("converter.encoding", "STRING", "UTF-8", importance="HIGH",
              documentation="The name of the Java character set to use for encoding strings as byte arrays."),
    ConfigKey("converter.type", "STRING", None, importance="LOW", allowed=("key", "value", "header"),
              documentation="How this converter will be used."),
)))


@functools.lru_cache(maxsize=1)
def _discovered() -> tuple[PluginInfo, ...]:
    found = dict(_registered)
    for plugin_type, group in ENTRY_POINT_GROUPS.items():
        for ep in entry_points(group=group):
            try:
                cls = ep.load()
            except Exception:  # one broken plugin must not hide the others
                log.exception("%s plugin %s could not be loaded", plugin_type, ep.name)
                continue
            found[ep.name] = PluginInfo(ep.name, plugin_type, str(getattr(cls, "version", RUNTIME_VERSION)),
                                        getattr(cls, "config_def", None) or ConfigDef())
    return tuple(found.values())


def all_plugins(connectors_only: bool = True) -> list[PluginInfo]:
    """Installed plugins: connectors (sink, then source) and, unless ``connectors_only``, the other
    types in :data:`PLUGIN_TYPES` order, each sorted by class name."""
    out = [PluginInfo(p.class_name, p.type, p.version, p.cls.config_def) for p in registry.plugins()]
    if not connectors_only:
        out += list(_discovered())
    return sorted(out, key=lambda p: (PLUGIN_TYPES.index(p.type) if p.type in PLUGIN_TYPES else 99, p.class_name))


def find(name: str) -> PluginInfo:
    """The plugin named ``name``: full class name, simple name, or a connector's alias without ``Connector``.

    Errors: :class:`UnknownPlugin`.
    """
    try:
        p = registry.resolve(name)
        return PluginInfo(p.class_name, p.type, p.version, p.cls.config_def)
    except registry.UnknownPlugin:
        pass
    for p in _discovered():
        if name in (p.class_name, p.class_name.rsplit(".", 1)[-1]):
            return p
    raise UnknownPlugin(f"Unknown plugin {name}.")


def config_key_info(key: ConfigKey, group: str | None = None, order: int = -1) -> dict[str, Any]:
    """Connect's ConfigKeyInfo: ``{"name", "type", "required", "default_value", "importance",
    "documentation", "group", "order_in_group", "width", "display_name", "dependents"}``."""
    return {"name": key.name, "type": key.type, "required": key.required and key.default is None,
            "default_value": key.default, "importance": key.importance, "documentation": key.documentation,
            "group": group, "order_in_group": order, "width": "NONE", "display_name": key.name, "dependents": []}


#: Keys every connector has (Connect's ConnectorConfig "Common" group), plus RaftConnect's auto-restart keys.
COMMON_CONFIG = ConfigDef((
    ConfigKey("name", "STRING", None, required=True, importance="HIGH",
              documentation="Globally unique name to use for this connector."),
    ConfigKey("connector.class", "STRING", None, required=True, importance="HIGH",
              documentation="Name or alias of the class for this connector."),
    ConfigKey("tasks.max", "INT", "1", importance="HIGH", documentation="Maximum number of tasks to use for this connector."),
    ConfigKey(restart.AUTO_RESTART, "BOOLEAN", "false", importance="LOW",
              documentation="Restart FAILED tasks automatically with exponential backoff (RaftConnect)."),
    ConfigKey(restart.BACKOFF_MS, "LONG", "1000", importance="LOW",
              documentation="First delay before an automatic restart, in milliseconds (doubles per failure)."),
    ConfigKey(restart.BACKOFF_MAX_MS, "LONG", "60000", importance="LOW",
              documentation="Longest delay between automatic restarts, in milliseconds."),
    ConfigKey("raftconnect.task.engine", "STRING", None, importance="LOW", allowed=("auto", "local", "spark"),
              documentation="Where the tasks' batches run: auto (in the worker process unless a batch reaches "
                            "raftconnect.spark.min.batch.rows), local (always in the worker process) or spark "
                            "(always a Spark job). Default: the worker's RAFTCONNECT_TASK_ENGINE, else auto."),
    ConfigKey("raftconnect.spark.min.batch.rows", "LONG", None, importance="LOW",
              documentation="With raftconnect.task.engine=auto: planned batch size, in rows, from which a batch runs "
                            "as a Spark job. Default: the worker's RAFTCONNECT_SPARK_MIN_BATCH_ROWS, else 1000000."),
))


def validate(config: Mapping[str, Any], errors: Mapping[str, list[str]], connector_type: str,
             plugin_def: ConfigDef) -> dict[str, Any]:
    """Connect's ConfigInfos for ``config``: ``{"name", "error_count", "groups", "configs":
    [{"definition": ConfigKeyInfo, "value": {"name", "value", "recommended_values", "errors", "visible"}}]}``.

    ``errors``: ``{key: [message]}`` from the connector's and the runtime's checks;
    errors of keys without a definition are reported under ad-hoc definitions.
    Values of PASSWORD keys are shown as ``[hidden]``, as Kafka does.
    """
    configs, seen = [], set()

    def add(key: ConfigKey, group: str | None, order: int) -> None:
        seen.add(key.name)
        raw = config.get(key.name, key.default)
        errs = list(dict.fromkeys(errors.get(key.name, [])))
        if key.name in COMMON_CONFIG_NAMES and key.required and not config.get(key.name):
            msg = f"Missing required configuration \"{key.name}\" which has no default value."
            if msg not in errs:
                errs.append(msg)
        shown = None if raw is None else HIDDEN if key.type == "PASSWORD" else str(raw)
        configs.append({"definition": config_key_info(key, group, order),
                        "value": {"name": key.name, "value": shown,
                                  "recommended_values": list(key.allowed), "errors": errs, "visible": True}})

    for i, key in enumerate(COMMON_CONFIG.keys):
        add(key, "Common", i + 1)
    for key in plugin_def.keys:
        if key.name not in seen:
            add(key, None, -1)
    for name, errs in errors.items():
        if name not in seen and errs:
            add(ConfigKey(name), None, -1)
    return {"name": connector_type, "error_count": sum(len(c["value"]["errors"]) for c in configs),
            "groups": ["Common"], "configs": configs}


COMMON_CONFIG_NAMES = frozenset(k.name for k in COMMON_CONFIG.keys)
