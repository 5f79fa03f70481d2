"""Connector plugin discovery: resolves ``connector.class`` to a plugin class.

Plugins are found through the entry-point group ``raftconnect.connectors``
(name = the full class name users put in ``connector.class``). As Kafka Connect
does, a connector may also be named by its simple class name
(``FileSourceConnector``) or that name without the ``Connector`` suffix
(``FileSource``).

Kafka keeps this in the runtime (``runtime.isolation.Plugins``, ``PluginDesc``), and so do we:
it is the one way the runtime and the web layer reach a connector (contract ``plugin-api-layers``:
nothing of ``webapp.runtime`` imports ``webapp.connectors``; the classes come from entry points).
Must not import a connector module, Django, Spark or a Kafka client (the REST layer lists and
validates plugins on nodes that run no tasks).
"""
from __future__ import annotations

import functools
import logging
from dataclasses import dataclass
from importlib.metadata import entry_points

from webapp.plugin import Connector

__all__ = ["PluginDesc", "plugins", "resolve", "UnknownPlugin"]

GROUP = "raftconnect.connectors"
log = logging.getLogger(__name__)


class UnknownPlugin(LookupError):
    """No installed plugin matches the given ``connector.class``."""


@dataclass(frozen=True)
class PluginDesc:
    """An installed plugin as ``GET /connector-plugins`` lists it."""

    class_name: str
    type: str
    version: str
    cls: type[Connector]

    def as_json(self) -> dict[str, str]:
        """``{"class", "type", "version"}`` as in Kafka Connect."""
        return {"class": self.class_name, "type": self.type, "version": self.version}


@functools.lru_cache(maxsize=1)
def plugins() -> tuple[PluginDesc, ...]:
    """All installed connector plugins, sorted by class name."""
    found = []
    for ep in entry_points(group=GROUP):
        try:
            cls = ep.load()
        except Exception:  # one broken plugin must not hide the others
            log.exception("connector plugin %s could not be loaded", ep.name)
            continue
        found.append(PluginDesc(ep.name, cls.type, cls.version, cls))
    return tuple(sorted(found, key=lambda p: p.class_name))


_index: tuple[tuple[PluginDesc, ...], dict[str, PluginDesc]] = ((), {})


def _by_name() -> dict[str, PluginDesc]:
    """``{full name | simple name | simple name without "Connector": plugin}`` of :func:`plugins`, the
    first plugin in class-name order winning a shared alias; rebuilt when ``plugins`` is reloaded."""
    global _index
    found, index = _index
    current = plugins()
    if found is not current:
        index = {}
        for p in current:
            simple = p.class_name.rsplit(".", 1)[-1]
            aliases = [p.class_name, simple] + ([simple[: -len("Connector")]] if simple.endswith("Connector") else [])
            for alias in aliases:
                index.setdefault(alias, p)
        _index = (current, index)
    return index


def resolve(connector_class: str) -> PluginDesc:
    """The plugin named by ``connector_class`` (full name, simple name or alias).

    A dictionary lookup: every REST write resolves its class several times (validation, the
    response's type, its secret keys; benchmarks/cluster). Raises :class:`UnknownPlugin` with the
    list of installed classes.
    """
    name = (connector_class or "").strip()
    found = _by_name().get(name)
    if found is not None:
        return found
    known = ", ".join(p.class_name for p in plugins())
    raise UnknownPlugin(
        f"Failed to find any class that implements Connector and which name matches {name}, "
        f"available connectors are: {known}"
    )
