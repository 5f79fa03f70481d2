"""Contexts of the ``raftconnect`` client: named clusters with their credentials, in one JSON file.

Owns the file's format, where it lives and how a command's connection is
resolved. The file (mode 0600, it holds passwords and tokens)::

    {"current-context": "local",
     "contexts": {"local": {"url": "http://127.0.0.1:8083", "user": "admin", "password": "..."},
                  "prod": {"url": "https://connect.example.com", "token": "..."}}}

Location: ``--cli-config FILE``, else ``$RAFTCONNECT_CLI_CONFIG``, else
``$XDG_CONFIG_HOME/raftconnect/config.json`` (``~/.config/raftconnect/config.json``).
"""
from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Mapping

__all__ = ["Connection", "ContextStore", "ContextError", "default_config_path", "resolve_connection",
           "DEFAULT_URL", "CONTEXT_KEYS"]

#: the URL used when neither a flag, the environment nor a context names one
DEFAULT_URL = "http://127.0.0.1:8083"
#: the settings a context may hold
CONTEXT_KEYS = ("url", "user", "password", "token")


class ContextError(ValueError):
    """The contexts file is unreadable or malformed, or names a context it lacks (message says which)."""


@dataclass(frozen=True)
class Connection:
    """Where and as whom one command talks: ``url`` plus basic ``user``/``password`` or a ``token``."""

    url: str
    user: str | None = None
    password: str | None = None
    token: str | None = None
    context: str | None = None


def default_config_path(environ: Mapping[str, str] | None = None) -> Path:
    """The contexts file's path from the environment (see the module docstring)."""
    env = os.environ if environ is None else environ
    if env.get("RAFTCONNECT_CLI_CONFIG"):
        return Path(env["RAFTCONNECT_CLI_CONFIG"]).expanduser()
    base = Path(env["XDG_CONFIG_HOME"]).expanduser() if env.get("XDG_CONFIG_HOME") else Path.home() / ".config"
    return base / "raftconnect" / "config.json"


class ContextStore:
    """The contexts file at ``path``: read on creation, written by :meth:`save`. Raises :class:`ContextError`."""

    def __init__(self, path: Path):
        self.path = Path(path)
        self.data: dict[str, Any] = {"current-context": None, "contexts": {}}
        if self.path.exists():
            try:
                data = json.loads(self.path.read_text(encoding="utf-8") or "{}")
            except (OSError, ValueError) as exc:
                raise ContextError(f"cannot read {self.path}: {exc}") from exc
            if not isinstance(data, dict) or not isinstance(data.get("contexts", {}), dict):
                raise ContextError(f"{self.path}: expected {{\"current-context\", \"contexts\": {{...}}}}")
            self.data.update(data)

    @property
    def contexts(self) -> dict[str, dict[str, Any]]:
        """``{name: {"url", "user", "password", "token"}}`` (keys present only when set)."""
        return self.data["contexts"]

    @property
    def current(self) -> str | None:
        """The current context's name, or ``None``."""
        return self.data.get("current-context")

    def get(self, name: str) -> dict[str, Any]:
        """The context ``name``. Raises :class:`ContextError` when there is none."""
        try:
            return self.contexts[name]
        except KeyError:
            known = ", ".join(sorted(self.contexts)) or "none"
            raise ContextError(f"no context named {name!r} in {self.path} (known: {known})") from None

    def set(self, name: str, values: Mapping[str, Any], *, make_current: bool = False) -> None:
        """Create or update context ``name`` with ``values`` (``None`` values are left unchanged);
        the first context, or ``make_current``, becomes current."""
        ctx = self.contexts.setdefault(name, {})
        ctx.update({k: v for k, v in values.items() if k in CONTEXT_KEYS and v is not None})
        if make_current or not self.current:
            self.data["current-context"] = name

    def use(self, name: str) -> None:
        """Make ``name`` the current context. Raises :class:`ContextError` when there is none."""
        self.get(name)
        self.data["current-context"] = name

    def delete(self, name: str) -> None:
        """Remove context ``name`` (and unset it as current). Raises :class:`ContextError` when there is none."""
        self.get(name)
        del self.contexts[name]
        if self.current == name:
            self.data["current-context"] = None

    def save(self) -> None:
        """Write the file (mode 0600, parent directory created). Raises :class:`ContextError`."""
        try:
            self.path.parent.mkdir(parents=True, exist_ok=True)
            tmp = self.path.with_name(self.path.name + ".tmp")
            fd = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
            with os.fdopen(fd, "w", encoding="utf-8") as fh:
                json.dump(self.data, fh, indent=2, sort_keys=True)
                fh.write("\n")
            os.replace(tmp, self.path)
        except OSError as exc:
            raise ContextError(f"cannot write {self.path}: {exc}") from exc


def resolve_connection(store: ContextStore, *, context: str | None = None, url: str | None = None,
                       user: str | None = None, password: str | None = None,
                       token: str | None = None) -> Connection:
    """The connection of one command: explicit values (flags or their ``RAFTCONNECT_*`` variables)
    over the named ``context``, over the current context, over :data:`DEFAULT_URL` without credentials.

    A ``user`` given explicitly drops the context's token and the other way round, so one flag
    switches the kind of authentication. Raises :class:`ContextError` for an unknown ``context``.
    """
    name = context or store.current
    ctx = dict(store.get(name)) if context else dict(store.contexts.get(name or "", {}))
    if user is not None:
        ctx.pop("token", None)
    if token is not None:
        ctx.pop("user", None)
        ctx.pop("password", None)
    return Connection(url=url or ctx.get("url") or DEFAULT_URL,
                      user=user if user is not None else ctx.get("user"),
                      password=password if password is not None else ctx.get("password"),
                      token=token if token is not None else ctx.get("token"),
                      context=name if name in store.contexts else None)
