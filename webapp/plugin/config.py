"""Connector configuration as a plugin declares and reads it: :class:`ConfigKey`, :class:`ConfigDef`,
:class:`AbstractConfig` (Kafka's ``ConfigDef`` and ``AbstractConfig``).

Owns the declaration of a plugin's keys (name, Connect type, default, importance, allowed values),
the validation of a raw string map against them (``ConfigDef.validate``: per-key messages, as
``PUT /connector-plugins/{class}/config/validate`` shows them) and the parsing of one value to its
type (``AbstractConfig.get_int(key)``, ``get_bool``, ``get_list``, ``get_password``, ...: the
declared default when the key is absent, a :class:`~webapp.plugin.errors.ConfigException` naming
the key when the value does not parse). Both use one parser, so a value that validates parses.

Must not import anything of ``webapp`` but the plugin API's errors, nor Django, Spark or Kafka
clients: the REST layer imports it on nodes that run no tasks.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Any, Literal, Mapping

from .errors import ConfigException, ConnectException

__all__ = ["ConfigKey", "ConfigDef", "AbstractConfig", "Password", "merge_errors", "raise_if_errors"]

#: Connect's type names of a :class:`ConfigKey`
TYPES = ("STRING", "INT", "LONG", "DOUBLE", "BOOLEAN", "LIST", "PASSWORD", "CLASS")


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


class Password:
    """A PASSWORD value (Kafka's ``Password``): ``value`` is the secret; ``str()`` / ``repr()`` say ``[hidden]``."""

    __slots__ = ("value",)
    HIDDEN = "[hidden]"

    def __init__(self, value: str):
        self.value = value

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Password) and other.value == self.value

    def __hash__(self) -> int:
        return hash(self.value)

    def __str__(self) -> str:
        return self.HIDDEN

    __repr__ = __str__


def _parse(name: str, type_: str, raw: str) -> Any:
    """``raw`` (a non-empty string) as a value of Connect type ``type_``; ConfigException naming ``name``.

    INT / LONG → int, DOUBLE → float, BOOLEAN → bool (``true`` / ``false``, any case, surrounding blanks
    ignored as Kafka does), LIST → list of
    the comma-separated items (stripped, empty ones dropped), PASSWORD → :class:`Password`,
    STRING / CLASS → the string.
    """
    if type_ in ("INT", "LONG", "DOUBLE"):
        try:
            return float(raw) if type_ == "DOUBLE" else int(raw)
        except ValueError:
            raise ConfigException(f"Invalid value {raw} for configuration {name}: Not a number of type {type_}",
                                  {name: [f"Not a number of type {type_}"]}) from None
    if type_ == "BOOLEAN":  # trimmed, as Kafka's ConfigDef.parseType (int() and float() trim the numbers)
        if raw.strip().lower() not in ("true", "false"):
            raise ConfigException(f"Invalid value {raw} for configuration {name}: "
                                  "Expected value to be either true or false",
                                  {name: ["Expected value to be either true or false"]})
        return raw.strip().lower() == "true"
    if type_ == "LIST":
        return [v.strip() for v in raw.split(",") if v.strip()]
    if type_ == "PASSWORD":
        return Password(raw)
    return raw


@dataclass(frozen=True)
class ConfigDef:
    """An ordered set of :class:`ConfigKey` with validation of a raw string map."""

    keys: tuple[ConfigKey, ...] = ()

    def key(self, name: str) -> ConfigKey | None:
        """The declared key ``name``, or None."""
        return self._by_name.get(name)

    @cached_property
    def _by_name(self) -> dict[str, ConfigKey]:
        """The keys by name, the first of a repeated name (as the linear search this replaced found it):
        a typed getter looks its key up on every call, validation once per key."""
        out: dict[str, ConfigKey] = {}
        for key in self.keys:
            out.setdefault(key.name, key)
        return out

    def get(self, config: Mapping[str, str], name: str) -> str | None:
        """The raw value of ``name`` in ``config``, or the key's default (unparsed).

        Prefer :class:`AbstractConfig`'s typed getters, which parse the value (every connector of this
        project reads its config with them); this stays for plugins that want the raw string.
        """
        key = self.key(name)
        return config.get(name, key.default if key is not None else None)

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Check ``config`` against the keys.

        Returns ``{key: [error messages]}`` for every declared key (empty list when
        valid). Checks presence of required keys, numeric and boolean types and allowed values.
        A key ``config`` leaves out is judged by its default, once per ConfigDef (most keys of a
        connector config are left out: the file source's 18 keys parsed their defaults on every write).
        """
        errors: dict[str, list[str]] = {}
        for key, default_errors in zip(self.keys, self._default_errors):
            name = key.name
            errors[name] = _key_errors(key, config[name]) if name in config else list(default_errors)
        return errors

    @cached_property
    def _default_errors(self) -> tuple[tuple[str, ...], ...]:
        """What :meth:`validate` says of each key's default, in ``keys`` order."""
        return tuple(tuple(_key_errors(key, key.default)) for key in self.keys)


def _key_errors(key: ConfigKey, raw: Any) -> list[str]:
    """The messages :meth:`ConfigDef.validate` gives for ``raw``, the value of ``key`` (or its default)."""
    errs: list[str] = []
    if raw is None or raw == "":
        if key.required:
            errs.append(f"Missing required configuration \"{key.name}\" which has no default value.")
        return errs
    raw = str(raw)
    if key.type in ("INT", "LONG", "DOUBLE", "BOOLEAN"):
        try:
            _parse(key.name, key.type, raw)
        except ConfigException as exc:
            errs.append(str(exc))
    if key.allowed and raw not in key.allowed:
        errs.append(f"Invalid value {raw} for configuration {key.name}: String must be one of: {', '.join(key.allowed)}")
    return errs


def merge_errors(*dicts: Mapping[str, list[str]]) -> dict[str, list[str]]:
    """Several ``{key: [messages]}`` maps (as :meth:`ConfigDef.validate` gives) as one; a message once per key."""
    out: dict[str, list[str]] = {}
    for d in dicts:
        for k, v in d.items():
            have = out.get(k)
            if have is None:
                out[k] = have = []
            for x in v:  # most keys have no message
                if x not in have:
                    have.append(x)
    return out


def raise_if_errors(errors: Mapping[str, list[str]], what: str) -> None:
    """Raise :class:`~webapp.plugin.errors.ConnectException` ``Invalid <what> configuration: key: message; ...``
    when any key of ``errors`` has a message (a task's start refusing what validation would refuse)."""
    bad = [f"{k}: {m}" for k, msgs in errors.items() for m in msgs]
    if bad:
        raise ConnectException(f"Invalid {what} configuration: " + "; ".join(bad))


class AbstractConfig:
    """A config map read through its :class:`ConfigDef` (Kafka's ``AbstractConfig``).

    ``AbstractConfig(definition, originals)``; each ``get_<type>(key)`` returns the value of a
    declared key parsed to that type: the user's value, else the key's default, else ``None``
    (``get_list``: ``[]``). An undeclared key, or a value that does not parse, raises
    :class:`~webapp.plugin.errors.ConfigException` naming the key (messages as
    :meth:`ConfigDef.validate` words them). Values are parsed on each call (cheap; nothing is
    cached, so ``originals`` may be read again after a config provider resolved it). A plugin may
    subclass it for its own accessors, as Kafka's connectors subclass ``AbstractConfig``.
    """

    def __init__(self, definition: ConfigDef, originals: Mapping[str, Any]):
        self.definition = definition
        self._originals = dict(originals)

    def originals(self) -> dict[str, Any]:
        """The map this config was built from (a copy)."""
        return dict(self._originals)

    def _raw(self, name: str) -> str | None:
        key = self.definition.key(name)
        if key is None:
            raise ConfigException(f"Unknown configuration '{name}'", {name: ["Unknown configuration"]})
        raw = self._originals.get(name, key.default)
        return None if raw is None else str(raw)

    def _get(self, name: str, type_: str) -> Any:
        raw = self._raw(name)
        if raw is None:
            return None
        if type_ == "INT" and self.definition.key(name).type == "LONG":
            type_ = "LONG"  # name the declared type in the message
        return _parse(name, type_, raw)

    def get_string(self, name: str) -> str | None:
        """The value as given (``""`` stays ``""``), else the default, else None."""
        return self._raw(name)

    def get_int(self, name: str) -> int | None:
        """The value as an int (INT or LONG keys; Python ints have no width)."""
        return self._get(name, "INT")

    get_long = get_int

    def get_double(self, name: str) -> float | None:
        """The value as a float."""
        return self._get(name, "DOUBLE")

    def get_bool(self, name: str) -> bool | None:
        """The value as a bool: ``true`` / ``false`` in any case, nothing else."""
        return self._get(name, "BOOLEAN")

    def get_list(self, name: str) -> list[str]:
        """The comma-separated items, stripped, empty ones dropped; ``[]`` when unset."""
        return self._get(name, "LIST") or []

    def get_password(self, name: str) -> Password | None:
        """The value wrapped in :class:`Password` (its ``str()`` is ``[hidden]``; ``.value`` the secret)."""
        return self._get(name, "PASSWORD")

    def get_class(self, name: str) -> str | None:
        """A CLASS value: the class name as a string (plugins are resolved by name, never imported here)."""
        return self._raw(name)
