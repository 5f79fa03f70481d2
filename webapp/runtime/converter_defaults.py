"""Worker-level converters as the defaults of connector configs (Kafka Connect's ``key.converter``,
``value.converter`` and ``header.converter`` in worker properties).

Owns which keys are converter keys, carrying them from the worker properties to every process that
validates or runs a connector (``RAFTCONNECT_CONVERTER_DEFAULTS``, a JSON object, set by
``webapp.connect.workerconfig``), and overlaying them on a connector config. As in Connect, a
connector that names its own converter of a kind (``value.converter``) keeps its own settings of that
kind; one that names none gets the worker's converter with the worker's settings of it
(``value.converter.schemas.enable``, ...). Unlike Connect, where the worker's settings of that kind
then win, a setting the connector does give (``value.converter.schemas.enable`` without
``value.converter``) is kept. The overlay is applied where a config is checked (the leader's
validation) and where it runs (the worker's task split and task start); the stored config stays as
the user wrote it.
"""
from __future__ import annotations

import functools
import json
import os
from typing import Mapping

__all__ = ["ENV", "KINDS", "is_converter_key", "from_environment", "with_defaults", "with_worker_defaults"]

ENV = "RAFTCONNECT_CONVERTER_DEFAULTS"
#: the three converters a connector has, each a key naming its class and keys ``<kind>.<setting>``
KINDS = ("key.converter", "value.converter", "header.converter")


def is_converter_key(key: str) -> bool:
    """Whether ``key`` names a converter class (``value.converter``) or one of its settings."""
    return any(key == kind or key.startswith(kind + ".") for kind in KINDS)


@functools.lru_cache(maxsize=4)
def _parse(text: str) -> Mapping[str, str]:
    try:
        value = json.loads(text)
    except ValueError as exc:
        raise ValueError(f"{ENV} is not JSON: {exc}") from None
    if not isinstance(value, dict) or not all(isinstance(k, str) and isinstance(v, str) for k, v in value.items()):
        raise ValueError(f"{ENV} must be a JSON object of strings")
    return value


def from_environment(environ: Mapping[str, str] | None = None) -> Mapping[str, str]:
    """The worker's converter settings (``{}`` when none were given). Errors: ``ValueError`` naming
    :data:`ENV` when it is not a JSON object of strings."""
    text = (os.environ if environ is None else environ).get(ENV, "")
    return _parse(text) if text.strip() else {}


def with_defaults(config: Mapping[str, str], defaults: Mapping[str, str]) -> dict[str, str]:
    """``config`` with the worker's converter ``defaults`` of each kind it names no converter of (see the
    module docstring); ``config`` itself (not a copy) when nothing is added."""
    added: dict[str, str] = {}
    for kind in KINDS:
        if kind in config or kind not in defaults:
            continue
        prefix = kind + "."
        added.update((k, v) for k, v in defaults.items()
                     if (k == kind or k.startswith(prefix)) and k not in config)
    return {**config, **added} if added else config  # type: ignore[return-value]


def with_worker_defaults(config: Mapping[str, str]) -> dict[str, str]:
    """:func:`with_defaults` of this process's worker settings (:func:`from_environment`): what the leader
    validates and the worker runs."""
    return with_defaults(config, from_environment())
