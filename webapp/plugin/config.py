"""Connector configuration as a plugin declares it: :class:`ConfigKey` and :class:`ConfigDef` (Kafka's ``ConfigDef``).

Owns the declaration of a plugin's keys (name, Connect type, default, importance, allowed values)
and the validation of a raw string map against them (``ConfigDef.validate``: per-key messages, as
``PUT /connector-plugins/{class}/config/validate`` shows them).

Must not import anything of ``webapp`` outside the plugin API, nor Django, Spark or Kafka clients:
the REST layer imports it on nodes that run no tasks.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal, Mapping

__all__ = ["ConfigKey", "ConfigDef"]


@dataclass(frozen=True)
class ConfigKey:
    """One configuration key of a connector (Connect's ``ConfigDef.ConfigKey``).

    ``type`` is one of Connect's type names: STRING, INT, LONG, DOUBLE, BOOLEAN,
    LIST, PASSWORD, CLASS. ``default`` of ``None`` with ``required`` means the
    user must set it.
    """

    name: str
    type: str = "STRING"
    default: str | None = None
    required: bool = False
    importance: Literal["HIGH", "MEDIUM", "LOW"] = "MEDIUM"
    documentation: str = ""
    allowed: tuple[str, ...] = ()


@dataclass(frozen=True)
class ConfigDef:
    """An ordered set of :class:`ConfigKey` with validation of a raw string map."""

    keys: tuple[ConfigKey, ...] = ()

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Check ``config`` against the keys.

        Returns ``{key: [error messages]}`` for every declared key (empty list when
        valid). Checks presence of required keys, numeric types and allowed values.
        """
        errors: dict[str, list[str]] = {}
        for key in self.keys:
            errs: list[str] = []
            raw = config.get(key.name, key.default)
            if raw is None or raw == "":
                if key.required:
                    errs.append(f"Missing required configuration \"{key.name}\" which has no default value.")
            else:
                raw = str(raw)
                if key.type in ("INT", "LONG"):
                    try:
                        int(raw)
                    except ValueError:
                        errs.append(f"Invalid value {raw} for configuration {key.name}: Not a number of type {key.type}")
                elif key.type == "DOUBLE":
                    try:
                        float(raw)
                    except ValueError:
                        errs.append(f"Invalid value {raw} for configuration {key.name}: Not a number of type DOUBLE")
                elif key.type == "BOOLEAN" and raw.lower() not in ("true", "false"):
                    errs.append(f"Invalid value {raw} for configuration {key.name}: Expected value to be either true or false")
                if key.allowed and raw not in key.allowed:
                    errs.append(
                        f"Invalid value {raw} for configuration {key.name}: String must be one of: {', '.join(key.allowed)}"
                    )
            errors[key.name] = errs
        return errors

    def get(self, config: Mapping[str, str], name: str) -> str | None:
        """The value of ``name`` in ``config``, or the key's default."""
        for key in self.keys:
            if key.name == name:
                return config.get(name, key.default)
        return config.get(name)
