"""Connector definitions read from files for ``raftconnect apply -f``.

Owns the three formats a Connect user already has:

* JSON ``{"name": ..., "config": {...}}`` (the body of ``POST /connectors``);
* flat JSON ``{"name": ..., "connector.class": ..., ...}`` (the body of
  ``PUT /connectors/{name}/config``, with its ``name``);
* a Java ``.properties`` connector file (standalone Connect's), with ``name=``.

A JSON file may also hold a list of either JSON form. Values are turned into
strings as Connect's configs are (``true`` → ``"true"``, ``2`` → ``"2"``).
"""
from __future__ import annotations

import json
from typing import Any

from webapp.connect.workerconfig import parse_properties

__all__ = ["ConnectorFileError", "parse_connector_file"]


class ConnectorFileError(ValueError):
    """A file does not hold connector definitions (message names the file and what is wrong)."""


def _as_string(value: Any) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value)
    return "" if value is None else str(value)


def _from_json_object(obj: Any, source: str) -> tuple[str, dict[str, str]]:
    if not isinstance(obj, dict):
        raise ConnectorFileError(f"{source}: expected a JSON object, got {type(obj).__name__}")
    if "config" in obj and isinstance(obj["config"], dict):
        config = obj["config"]
        name = obj.get("name") or config.get("name")
    else:
        config = {k: v for k, v in obj.items()}
        name = obj.get("name")
    if not name:
        raise ConnectorFileError(f"{source}: no connector name (a \"name\" key)")
    config = {str(k): _as_string(v) for k, v in config.items()}
    config["name"] = str(name)
    return str(name), config


def parse_connector_file(text: str, source: str = "<stdin>") -> list[tuple[str, dict[str, str]]]:
    """Connector definitions in ``text``: ``[(name, config)]``; ``config`` includes ``name``.

    ``source`` (a file name) decides the format when it ends in ``.properties``;
    otherwise text starting with ``{`` or ``[`` is JSON and anything else properties.
    Raises :class:`ConnectorFileError`.
    """
    stripped = text.lstrip()
    if not source.endswith(".properties") and stripped[:1] in ("{", "["):
        try:
            data = json.loads(text)
        except ValueError as exc:
            raise ConnectorFileError(f"{source}: not valid JSON: {exc}") from exc
        items = data if isinstance(data, list) else [data]
        if not items:
            raise ConnectorFileError(f"{source}: an empty list")
        return [_from_json_object(item, source) for item in items]
    props = parse_properties(text)
    if not props:
        raise ConnectorFileError(f"{source}: no settings found")
    if not props.get("name"):
        raise ConnectorFileError(f"{source}: no connector name (a name= line)")
    return [(props["name"], props)]
