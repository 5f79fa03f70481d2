"""Config providers: ``${provider:[path:]key}`` references in connector configs, resolved on the worker.

Kafka Connect's ConfigProvider / ConfigTransformer, with the three providers
Kafka ships:

* ``${env:VAR}`` — environment variable ``VAR`` of the worker process
  (Kafka's EnvVarConfigProvider);
* ``${file:/path/to/file.properties:key}`` — ``key`` of a Java properties file
  (FileConfigProvider);
* ``${directory:/path/to/dir:key}`` — the content of the file named ``key`` in
  the directory, as is (DirectoryConfigProvider; e.g. mounted Kubernetes secrets).

The stored config (Raft / metadata store, REST responses, task configs) keeps
the references; values are substituted only in the worker, immediately before
a connector or task is started (:func:`transform`), and task configs a
connector derives are turned back into references before they are stored
(:func:`reverse_transform`), as Kafka's ``AbstractHerder.reverseTransform`` does.

Worker settings (environment; Kafka's ``config.providers`` worker config):

* ``RAFTCONNECT_CONFIG_PROVIDERS`` — enabled aliases, default ``env,file,directory``; an entry
  ``alias=kind`` names a provider of one's own (Connect's ``config.providers.<alias>.class``);
* ``RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS`` — comma-separated directories
  ``file``/``directory`` may read under (Kafka's ``allowed.paths``). When it is
  not set they follow the file connectors' ``raftconnect.file.allowed.paths``
  (``RAFTCONNECT_FILE_ALLOWED_PATHS``; default: the node's ``<data dir>/files/``),
  so by default a reference can read nothing else. Either way a path that
  resolves (symbolic links, ``..``) into the node's data directory — its
  ``cluster.secret`` — is refused, except under its ``files/``
  (:mod:`webapp.runtime.file_access`);
* ``RAFTCONNECT_CONFIG_PROVIDERS_ENV_ALLOWLIST_PATTERN`` — regex of resolvable
  variables (Kafka's ``allowlist.pattern``; default ``.*``). Variables named
  ``RAFTCONNECT_*`` (cluster secret, admin password) are never resolvable.

Unlike Kafka, which leaves a reference it cannot resolve in place, an unknown
provider, a missing key or an unreadable file raise :class:`ConfigProviderError`,
so the connector or task fails with a message saying which reference failed.
"""
from __future__ import annotations

import os
import re
from pathlib import Path
from typing import Callable, Mapping

from webapp import environment
from webapp.runtime import file_access

__all__ = ["ConfigProviderError", "PATTERN", "HIDDEN", "providers", "transform", "reverse_transform", "has_references",
           "password_keys", "mask_passwords", "hide_secrets", "keep_hidden", "hide_url_password", "is_secret_key"]

#: Kafka's ConfigTransformer.DEFAULT_PATTERN: ``${provider:[path:]key}``
PATTERN = re.compile(r"\$\{([^}]*?):(([^}]*?):)?([^}]*?)\}")
#: what Kafka shows instead of a PASSWORD value (``Password.HIDDEN``)
HIDDEN = "[hidden]"
_SECRET_ENV = re.compile(r"^RAFTCONNECT_")


class ConfigProviderError(ValueError):
    """A reference could not be resolved; the message names the reference and why."""


_PROVIDER_PATHS = environment.CONFIG_PROVIDER_PATHS_ENV


def _allowed(path: str) -> Path:
    """The real path of ``path`` if the ``file``/``directory`` providers may read it; else ConfigProviderError.

    Roots: ``RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS`` if set, else the file connectors' setting
    (``raftconnect.file.allowed.paths``); the node's data directory is refused in both cases.
    """
    roots = environment.config_provider_allowed_paths()
    access = file_access.policy(roots=roots, label=_PROVIDER_PATHS) if roots else file_access.policy()
    problem = access.violation(path)
    if problem is not None:
        raise ConfigProviderError(problem)
    return Path(os.path.realpath(path))


def _env(path: str | None, key: str) -> str:
    pattern = environment.config_provider_env_pattern()
    if _SECRET_ENV.match(key) or not re.fullmatch(pattern, key):
        raise ConfigProviderError(f"environment variable {key} is not allowed")
    if key not in os.environ:
        raise ConfigProviderError(f"environment variable {key} is not set on this worker")
    return os.environ[key]


def _properties(text: str) -> dict[str, str]:
    """Java properties (``key=value``, ``key: value`` or ``key value``; ``#``/``!`` comments; ``\\`` continuations)."""
    out: dict[str, str] = {}
    logical = ""
    for line in text.splitlines():
        stripped = line.lstrip()
        if not logical and (not stripped or stripped[0] in "#!"):
            continue
        if stripped.endswith("\\") and not stripped.endswith("\\\\"):
            logical += stripped[:-1]
            continue
        logical += stripped
        m = re.match(r"((?:\\.|[^=:\s])*)\s*[=:\s]?\s*(.*)$", logical)
        logical = ""
        if m:
            unescape = lambda s: re.sub(r"\\(.)", lambda e: {"t": "\t", "n": "\n", "r": "\r"}.get(e[1], e[1]), s)  # noqa: E731
            out[unescape(m[1])] = unescape(m[2])
    return out


def _file(path: str | None, key: str) -> str:
    if not path:
        raise ConfigProviderError("the file provider needs a path: ${file:/path/file.properties:key}")
    try:
        data = _properties(_allowed(path).read_text(encoding="utf-8"))
    except OSError as exc:
        raise ConfigProviderError(f"cannot read {path}: {exc.strerror or exc}") from exc
    if key not in data:
        raise ConfigProviderError(f"key {key} not found in {path}")
    return data[key]


def _directory(path: str | None, key: str) -> str:
    if not path:
        raise ConfigProviderError("the directory provider needs a path: ${directory:/path/dir:key}")
    if "/" in key or key in ("", ".", ".."):
        raise ConfigProviderError(f"key {key!r} is not a file name")
    target = _allowed(str(_allowed(path) / key))  # the key may be a symbolic link out of the directory
    try:
        return target.read_text(encoding="utf-8")
    except FileNotFoundError as exc:
        raise ConfigProviderError(f"no file {key} in {path}") from exc
    except OSError as exc:
        raise ConfigProviderError(f"cannot read {target}: {exc.strerror or exc}") from exc


_BUILTIN: dict[str, Callable[[str | None, str], str]] = {"env": _env, "file": _file, "directory": _directory}


def providers() -> dict[str, Callable[[str | None, str], str]]:
    """The enabled providers ``{alias: fn(path or None, key) -> value}`` (``RAFTCONNECT_CONFIG_PROVIDERS``).

    Entries are a kind (``env``, ``file``, ``directory``: the alias is the kind) or ``alias=kind``
    (Connect's ``config.providers=secrets`` with a FileConfigProvider class; see
    :mod:`webapp.connect.workerconfig`). Entries naming another kind are skipped.
    """
    out = {}
    for entry in environment.config_providers():
        alias, _, kind = entry.partition("=")
        alias, kind = alias.strip(), (kind.strip() or alias.strip())
        if alias and kind in _BUILTIN:
            out[alias] = _BUILTIN[kind]
    return out


def has_references(value: str) -> bool:
    """True when ``value`` contains at least one ``${provider:...}`` reference."""
    return isinstance(value, str) and "${" in value and PATTERN.search(value) is not None


def transform(config: Mapping[str, str]) -> dict[str, str]:
    """``config`` with every reference replaced by its value; other values unchanged.

    Raises :class:`ConfigProviderError` naming the config key and the reference.
    Providers are called once per distinct reference.
    """
    table = providers()
    cache: dict[tuple[str, str | None, str], str] = {}

    def resolve(m: re.Match[str], name: str) -> str:
        provider, path, key = m[1], m[3], m[4]
        fn = table.get(provider)
        if fn is None:
            raise ConfigProviderError(f"config {name}: unknown config provider {provider!r} in {m[0]} "
                                      f"(enabled: {', '.join(table) or 'none'})")
        k = (provider, path, key)
        if k not in cache:
            try:
                cache[k] = fn(path, key)
            except ConfigProviderError as exc:
                raise ConfigProviderError(f"config {name}: cannot resolve {m[0]}: {exc}") from None
        return cache[k]

    return {name: PATTERN.sub(lambda m, n=name: resolve(m, n), v) if isinstance(v, str) else v
            for name, v in config.items()}


def reverse_transform(raw: Mapping[str, str], resolved: Mapping[str, str],
                      task_configs: list[dict[str, str]]) -> list[dict[str, str]]:
    """Task configs with resolved secrets put back as the connector config's references.

    For every key whose raw value holds a reference, a task config value equal
    to the resolved value is replaced by the raw value, so stored task configs
    never hold the secret (Kafka's ``AbstractHerder.reverseTransform``).
    """
    refs = {k: v for k, v in raw.items() if has_references(v)}
    return [{k: (refs[k] if k in refs and v == resolved.get(k) else v) for k, v in cfg.items()}
            for cfg in task_configs]


def password_keys(config_def) -> frozenset[str]:
    """Names of the PASSWORD-typed keys of a :class:`~webapp.plugin.ConfigDef`."""
    return frozenset(k.name for k in config_def.keys if k.type == "PASSWORD")


def mask_passwords(config: Mapping[str, str], password_keys: set[str] | frozenset[str]) -> dict[str, str]:
    """``config`` with the values of PASSWORD-typed keys shown as ``[hidden]`` (Kafka's ConfigInfos behaviour).

    ``password_keys`` are the names of the connector's ``ConfigKey``s of type
    PASSWORD (:func:`password_keys`). Use it where Kafka shows ``[hidden]``: the
    ``value`` of ConfigInfos (``PUT /connector-plugins/{type}/config/validate``).
    Kafka's ``GET /connectors/{name}/config`` returns the config as submitted;
    so does RaftConnect (use references for secrets).
    """
    return {k: (HIDDEN if k in password_keys and v is not None else v) for k, v in config.items()}


# Kafka client settings of type PASSWORD (and their producer./consumer./admin./*.override. forms): shown hidden
# whatever the connector's ConfigDef says
_SECRET_KEY_ENDINGS = ("password", "sasl.jaas.config", "basic.auth.user.info", "secret", "secret.key", "api.key")
_URL_USERINFO_PASSWORD = re.compile(r"(://[^:/@?#\s]*:)[^@/?#\s]*@")
_URL_QUERY_PASSWORD = re.compile(r"([?&;]password=)[^&;#\s]*", re.IGNORECASE)


def is_secret_key(key: str, password_keys: set[str] | frozenset[str] = frozenset()) -> bool:
    """Whether a config key holds a secret: a PASSWORD key of the connector, or a key whose name ends like one of
    Kafka's PASSWORD client settings (``...password``, ``sasl.jaas.config``, ``basic.auth.user.info``, ``...secret``)."""
    return key in password_keys or key.lower().endswith(_SECRET_KEY_ENDINGS)


def hide_url_password(text: str) -> str:
    """``text`` with the password of any URL in it (``user:pw@`` or a ``password=`` parameter) as ``[hidden]``."""
    text = _URL_USERINFO_PASSWORD.sub(rf"\1{HIDDEN}@", text)
    return _URL_QUERY_PASSWORD.sub(rf"\1{HIDDEN}", text)


def hide_secrets(config: Mapping[str, str], password_keys: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """``config`` as REST shows it: secret keys (:func:`is_secret_key`) as ``[hidden]``, passwords inside URLs
    hidden (:func:`hide_url_password`); values holding a config provider reference are shown as written
    (a reference is not the secret). Used for every config a REST response carries (ConnectorInfo, the
    config, task configs); :func:`keep_hidden` turns such a value sent back into the stored one.
    """
    out: dict[str, str] = {}
    for k, v in config.items():
        if not isinstance(v, str) or has_references(v):
            out[k] = v
        elif is_secret_key(k, password_keys):
            out[k] = HIDDEN if v else v
        else:
            out[k] = hide_url_password(v) if "://" in v else v
    return out


def keep_hidden(config: Mapping[str, str], stored: Mapping[str, str] | None,
                password_keys: set[str] | frozenset[str] = frozenset()) -> dict[str, str]:
    """``config`` (a write) with every value that is exactly what :func:`hide_secrets` shows for the stored one
    replaced by the stored value: a client that reads a config and writes it back (the console, scripts,
    Terraform) keeps the secrets it never saw. Without a stored config, ``config`` unchanged."""
    if not stored:
        return dict(config)
    shown = hide_secrets({k: stored[k] for k in config if k in stored}, password_keys)
    return {k: (stored[k] if k in shown and v == shown[k] and v != stored[k] else v) for k, v in config.items()}

