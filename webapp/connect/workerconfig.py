"""Kafka Connect worker properties for ``runnode --config FILE`` (and ``raftconnect node --config FILE``).

Owns reading a Java ``.properties`` file and mapping Connect's distributed-worker
keys onto a node's settings:

* keys that have a ``runnode`` flag (``bootstrap.servers``, ``session.timeout.ms``,
  ``heartbeat.interval.ms``, ``listeners``, ``rest.advertised.host.name`` /
  ``rest.advertised.port`` and the ``raftconnect.*`` keys) become that flag, put in
  front of the command line so a flag given there wins (argparse keeps the last);
  a key whose ``RAFTCONNECT_*`` variable is set is skipped, so the environment
  wins over the file too. Precedence: command line > environment > file > default.
* keys read through the environment by the node or its agent
  (``task.shutdown.graceful.timeout.ms``, ``topic.tracking.*``,
  ``connector.client.config.override.policy``) set that variable when it is not
  set already;
* Connect's ``config.providers`` with ``config.providers.<alias>.class`` naming one of
  Kafka's three providers (FileConfigProvider, DirectoryConfigProvider,
  EnvVarConfigProvider) enable those aliases (``RAFTCONNECT_CONFIG_PROVIDERS``,
  ``alias=kind`` entries for aliases of one's own); their ``param.allowed.paths``
  and ``param.allowlist.pattern`` set the providers' allowed roots and the env
  provider's pattern (:mod:`webapp.runtime.config_providers`); another class is a
  :class:`PropertiesError` (RaftConnect cannot load Java providers);
* Kafka client keys (``security.protocol``, ``sasl.*``, ``ssl.*``, ``client.id``
  and the ``producer.`` / ``consumer.`` / ``admin.`` prefixed ones) become the
  tasks' librdkafka settings (:data:`KAFKA_CLIENT_CONFIG_ENV`, JSON), translated
  from the Java client's names where librdkafka differs (the table of
  :mod:`webapp.kafka.client_overrides`, shared with connectors' override keys);
* the worker's converters (``key.converter``, ``value.converter``, ``header.converter``
  and their settings) become the defaults of connectors that name none of their own
  (:mod:`webapp.runtime.converter_defaults`, JSON in its variable); a class RaftConnect
  does not have warns, since connectors relying on it will be refused;
* Connect keys that have no meaning here (internal topics, group id, ...) are
  logged as ignored; any other key warns.

Imports nothing from Django: it runs before settings are loaded (the data
directory decides where the node's database lives).
"""
from __future__ import annotations

import json
import logging
import os
import re
import socket
from dataclasses import dataclass, field
from typing import Mapping

from webapp.connect import cors, response_headers
from webapp.kafka import client_overrides
from webapp import environment
from webapp.runtime import converter_defaults, converters
from webapp.kafka.client_config import (
    KAFKA_CLIENT_CONFIG_ENV,
    ClientConfigError,
    client_config_from_env,
)

__all__ = ["PropertiesError", "WorkerConfig", "read_properties", "parse_properties", "worker_config",
           "expand_config_argv", "kafka_client_config_from_env", "check_client_config", "report", "KAFKA_CLIENT_CONFIG_ENV",
           "CLIENT_PREFIXES"]

log = logging.getLogger("raftconnect.node")


#: Prefixes of client-specific settings, as in Connect's worker config; kept in the tasks' config with
#: the prefix and applied to that client type only (``webapp.kafka.spark_io``, ``webapp.kafka.topics``).
CLIENT_PREFIXES = ("producer.", "consumer.", "admin.")

# worker key -> (runnode flag, environment variable that overrides the file)
_FLAG_KEYS: dict[str, tuple[str, str | None]] = {
    "bootstrap.servers": ("--bootstrap-servers", "RAFTCONNECT_BOOTSTRAP_SERVERS"),
    "session.timeout.ms": ("--session-timeout-ms", "RAFTCONNECT_SESSION_TIMEOUT_MS"),
    "heartbeat.interval.ms": ("--heartbeat-interval-ms", "RAFTCONNECT_HEARTBEAT_INTERVAL_MS"),
    "raftconnect.node.id": ("--node-id", "RAFTCONNECT_NODE_ID"),
    "raftconnect.roles": ("--roles", "RAFTCONNECT_ROLES"),
    "raftconnect.raft.address": ("--raft-address", "RAFTCONNECT_RAFT_ADDRESS"),
    "raftconnect.raft.peers": ("--raft-peers", "RAFTCONNECT_RAFT_PEERS"),
    "raftconnect.cluster": ("--cluster", "RAFTCONNECT_CLUSTER"),
    "raftconnect.data.dir": ("--data-dir", None),
    "raftconnect.weight": ("--weight", "RAFTCONNECT_WEIGHT"),
    "raftconnect.spark.master": ("--spark-master", "RAFTCONNECT_SPARK_MASTER"),
    "raftconnect.metadata.store": ("--metadata-store", "RAFTCONNECT_METADATA_STORE"),
    "raftconnect.file.allowed.paths": ("--file-allowed-paths", "RAFTCONNECT_FILE_ALLOWED_PATHS"),
    "raftconnect.jdbc.allowed.hosts": ("--jdbc-allowed-hosts", "RAFTCONNECT_JDBC_ALLOWED_HOSTS"),
    "raftconnect.switch.hold.seconds": ("--switch-hold-seconds", "RAFTCONNECT_SWITCH_HOLD_SECONDS"),
    "raftconnect.rest.threads": ("--rest-threads", "RAFTCONNECT_REST_THREADS"),
    "raftconnect.rest.server": ("--rest-server", "RAFTCONNECT_REST_SERVER"),
}

# worker key -> environment variable read by the node or its agent
_ENV_KEYS: dict[str, str] = {
    "task.shutdown.graceful.timeout.ms": "RAFTCONNECT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS",
    "offset.flush.interval.ms": "RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS",
    "offset.flush.timeout.ms": "RAFTCONNECT_OFFSET_FLUSH_TIMEOUT_MS",
    "scheduled.rebalance.max.delay.ms": "RAFTCONNECT_SCHEDULED_REBALANCE_MAX_DELAY_MS",
    "access.control.allow.origin": cors.ORIGINS_ENV,
    "access.control.allow.methods": cors.METHODS_ENV,
    "response.http.headers.config": response_headers.ENV,
    "topic.tracking.enable": "RAFTCONNECT_TOPIC_TRACKING_ENABLE",
    "topic.tracking.allow.reset": "RAFTCONNECT_TOPIC_TRACKING_ALLOW_RESET",
    "raftconnect.celery.broker": "RAFTCONNECT_CELERY_BROKER",
    "raftconnect.log.level": "RAFTCONNECT_LOG_LEVEL",
    "raftconnect.log.format": "RAFTCONNECT_LOG_FORMAT",
    "connector.client.config.override.policy": client_overrides.OVERRIDE_POLICY_ENV,
}

# keys of _ENV_KEYS whose value must be a whole number of milliseconds
_MS_KEYS = ("offset.flush.interval.ms", "offset.flush.timeout.ms", "scheduled.rebalance.max.delay.ms")

#: the converter classes RaftConnect has
_CONVERTERS = (converters.JSON_CONVERTER_CLASS, converters.STRING_CONVERTER_CLASS)

_REST_KEYS = ("listeners", "rest.advertised.host.name", "rest.advertised.port", "rest.advertised.listener")

# Connect worker keys that RaftConnect does not need (its metadata lives in Raft / the metadata store, plugins
# are Python entry points, metrics are Prometheus'): accepted and reported once, at info level.
_IGNORED_KEYS = {
    "group.id", "config.storage.topic", "offset.storage.topic", "status.storage.topic",
    "config.storage.replication.factor", "offset.storage.replication.factor",
    "status.storage.replication.factor", "offset.storage.partitions", "status.storage.partitions",
    "plugin.path", "plugin.discovery",
    "connect.protocol",
    "rebalance.timeout.ms", "worker.sync.timeout.ms", "worker.unsync.backoff.ms",
    "exactly.once.source.support", "inter.worker.key.generation.algorithm", "inter.worker.key.size",
    "inter.worker.key.ttl.ms", "inter.worker.signature.algorithm", "inter.worker.verification.algorithms",
    "admin.listeners", "rest.extension.classes", "metric.reporters",
    "metrics.num.samples", "metrics.sample.window.ms", "metrics.recording.level",
}

_KAFKA_KEYS_EXACT = ("security.protocol", "client.id", "client.dns.lookup", "socket.connection.setup.timeout.ms",
                     "reconnect.backoff.ms", "reconnect.backoff.max.ms", "metadata.max.age.ms")
_KAFKA_KEY_PREFIXES = ("sasl.", "ssl.")

#: Kafka's config provider classes → RaftConnect's provider kinds (webapp.runtime.config_providers)
PROVIDER_CLASSES = {
    "org.apache.kafka.common.config.provider.FileConfigProvider": "file",
    "org.apache.kafka.common.config.provider.DirectoryConfigProvider": "directory",
    "org.apache.kafka.common.config.provider.EnvVarConfigProvider": "env",
}
_PROVIDERS_ENV = "RAFTCONNECT_CONFIG_PROVIDERS"
_PROVIDER_PATHS_ENV = "RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS"
_PROVIDER_PATTERN_ENV = "RAFTCONNECT_CONFIG_PROVIDERS_ENV_ALLOWLIST_PATTERN"


class PropertiesError(ValueError):
    """A properties file cannot be read or holds a value that cannot be used (message says which)."""


@dataclass
class WorkerConfig:
    """What a worker properties file means for a node.

    Attributes:
        flags: runnode arguments (``["--node-id", "n1", ...]``) for the keys that have a flag.
        env: environment variables to set when not already set (``{name: value}``).
        kafka: the tasks' extra librdkafka settings (``{key: value}``; prefixed keys keep
            ``producer.`` / ``consumer.`` / ``admin.``); ``bootstrap.servers`` is a flag.
        warnings: one message per unknown or unusable key (already logged).
        ignored: Connect keys accepted but not used here.
    """

    flags: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    kafka: dict[str, str] = field(default_factory=dict)
    warnings: list[str] = field(default_factory=list)
    ignored: list[str] = field(default_factory=list)


_ESCAPES = {"t": "\t", "n": "\n", "r": "\r", "f": "\f"}


def _unescape(text: str) -> str:
    out, i = [], 0
    while i < len(text):
        c = text[i]
        if c != "\\" or i + 1 >= len(text):
            out.append(c)
            i += 1
            continue
        n = text[i + 1]
        if n == "u" and re.fullmatch(r"[0-9a-fA-F]{4}", text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        else:
            out.append(_ESCAPES.get(n, n))
            i += 2
    return "".join(out)


def parse_properties(text: str) -> dict[str, str]:
    """Parse Java ``.properties`` text (``java.util.Properties.load`` rules) into ``{key: value}``.

    Comments start with ``#`` or ``!``; the key ends at the first unescaped ``=``,
    ``:`` or whitespace; a line ending in an odd number of backslashes continues
    on the next (leading whitespace dropped); ``\\t``, ``\\n``, ``\\uXXXX`` escapes.
    A later duplicate key wins.
    """
    props: dict[str, str] = {}
    lines = text.splitlines()
    i = 0
    while i < len(lines):
        line = lines[i].lstrip()
        i += 1
        if not line or line[0] in "#!":
            continue
        while (len(line) - len(line.rstrip("\\"))) % 2 == 1 and i <= len(lines):
            line = line[:-1] + (lines[i].lstrip() if i < len(lines) else "")
            i += 1
        m = re.match(r"((?:\\.|[^=:\s\\])*)\s*(?:[=:]\s*|\s*)(.*)$", line, re.S)
        key, value = (m.group(1), m.group(2)) if m else (line, "")
        props[_unescape(key)] = _unescape(value)
    return props


def read_properties(path: str) -> dict[str, str]:
    """:func:`parse_properties` of the file at ``path`` (UTF-8). Raises :class:`PropertiesError`."""
    try:
        with open(path, encoding="utf-8") as fh:
            return parse_properties(fh.read())
    except OSError as exc:
        raise PropertiesError(f"cannot read worker properties {path}: {exc.strerror or exc}") from exc


def _to_librdkafka(settings: Mapping[str, str], where: str, warnings: list[str]) -> dict[str, str]:
    """Translate Java client settings to librdkafka's names (:func:`client_overrides.translate`, the one
    table); unusable ones are left out with a warning. ``where`` is ``""`` (keys of every client) or
    a :data:`CLIENT_PREFIXES` entry."""
    out, problems = client_overrides.translate(settings, where[:-1] or None, connector=False)
    for key, message in problems.items():
        warnings.append(f"{where}{key}: {message}; ignored")
    return out


def _rest_flags(props: Mapping[str, str], warnings: list[str]) -> list[tuple[str, str, str | None]]:
    """``(flag, value, env)`` for ``listeners`` (bind) and ``rest.advertised.*`` (what other nodes use)."""
    out: list[tuple[str, str, str | None]] = []
    bind_host = bind_port = None
    if props.get("listeners"):
        first = [x.strip() for x in props["listeners"].split(",") if x.strip()]
        m = re.fullmatch(r"(?i)(https?)://(\[[^\]]*\]|[^:/]*)(?::(\d+))?/?", first[0]) if first else None
        if not m:
            raise PropertiesError(f"listeners: expected http://HOST:PORT, got {props['listeners']!r}")
        if m.group(1).lower() == "https":
            raise PropertiesError("listeners: https is not served by the node itself; terminate TLS in a "
                                  "proxy in front of it and use an http:// listener")
        if len(first) > 1:
            warnings.append(f"listeners: only the first listener is served ({first[0]})")
        bind_host, bind_port = m.group(2) or "0.0.0.0", m.group(3) or "8083"
        out.append(("--rest-listen", f"{bind_host}:{bind_port}", "RAFTCONNECT_REST_LISTEN"))
    host = props.get("rest.advertised.host.name")
    port = props.get("rest.advertised.port")
    if host or port or bind_host:
        if not host:
            host = socket.getfqdn() if bind_host in (None, "0.0.0.0", "::", "[::]") else bind_host
        port = port or bind_port or "8083"
        if not port.isdigit():
            raise PropertiesError(f"rest.advertised.port: not a port number: {port!r}")
        out.append(("--rest-address", f"{host}:{port}", "RAFTCONNECT_REST_ADDRESS"))
    listener = props.get("rest.advertised.listener")
    if listener and listener.lower() != "http":
        warnings.append(f"rest.advertised.listener={listener}: only http is served")
    return out


def worker_config(props: Mapping[str, str], environ: Mapping[str, str] | None = None) -> WorkerConfig:
    """Map worker properties to a :class:`WorkerConfig` (see the module docstring for the rules).

    Args:
        props: the file's ``{key: value}``.
        environ: the environment deciding which keys it overrides (default ``os.environ``).

    Raises :class:`PropertiesError` for a value that cannot be used (e.g. an ``https`` listener).
    Unknown keys do not raise: they are listed in ``warnings`` (:func:`report` logs them).
    """
    environ = os.environ if environ is None else environ
    cfg = WorkerConfig()
    common: dict[str, str] = {}
    prefixed: dict[str, dict[str, str]] = {p: {} for p in CLIENT_PREFIXES}
    flags: list[tuple[str, str, str | None]] = []
    worker_converters: dict[str, str] = {}
    for key, value in props.items():
        if key in _FLAG_KEYS:
            flag, env = _FLAG_KEYS[key]
            flags.append((flag, value, env))
        elif key in _ENV_KEYS:
            if key == "connector.client.config.override.policy":
                try:
                    value = client_overrides.normalize_policy(value)
                except ValueError as exc:
                    raise PropertiesError(str(exc)) from None
            else:
                try:  # checked here, with the file's name for the key, rather than when read at run time
                    if key in _MS_KEYS:
                        environment.whole_ms(key, value)
                    elif key == "response.http.headers.config":
                        response_headers.parse_rules(value)
                    elif key.startswith("access.control.allow."):
                        cors.cors_settings(value if key.endswith("origin") else None,
                                           value if key.endswith("methods") else None)
                except ValueError as exc:
                    raise PropertiesError(str(exc)) from None
            if _ENV_KEYS[key] not in environ:
                cfg.env[_ENV_KEYS[key]] = value
        elif key in _REST_KEYS:
            continue  # below, together
        elif key.startswith(CLIENT_PREFIXES):
            prefix = key[:key.index(".") + 1]
            prefixed[prefix][key[len(prefix):]] = value
        elif key in _KAFKA_KEYS_EXACT or key.startswith(_KAFKA_KEY_PREFIXES):
            common[key] = value
        elif key == "config.providers" or key.startswith("config.providers."):
            continue  # below, together
        elif converter_defaults.is_converter_key(key):
            worker_converters[key] = value
        elif key in _IGNORED_KEYS or key.startswith(("metrics.", "listeners.https.")):
            cfg.ignored.append(key)
        else:
            cfg.warnings.append(f"{key}: unknown worker setting; ignored")
    if worker_converters and converter_defaults.ENV not in environ:
        cfg.env[converter_defaults.ENV] = json.dumps(worker_converters, sort_keys=True)
        for kind in ("key.converter", "value.converter"):
            if worker_converters.get(kind, _CONVERTERS[0]).strip() not in _CONVERTERS:
                cfg.warnings.append(f"{kind}={worker_converters[kind]}: not available in RaftConnect ({', '.join(_CONVERTERS)} "
                                    f"are); connectors that name no {kind} of their own will be refused")
    flags += _rest_flags(props, cfg.warnings)
    for env, value in _config_providers(props, cfg.warnings).items():
        if env not in environ:
            cfg.env[env] = value
    for flag, value, env in flags:
        if env is None or env not in environ:
            cfg.flags += [flag, value]
    cfg.kafka.update(_to_librdkafka(common, "", cfg.warnings))
    for prefix, settings in prefixed.items():
        for k, v in _to_librdkafka(settings, prefix, cfg.warnings).items():
            cfg.kafka[prefix + k] = v
    return cfg


def _config_providers(props: Mapping[str, str], warnings: list[str]) -> dict[str, str]:
    """``{environment variable: value}`` for Connect's ``config.providers`` keys (see the module docstring).

    ``config.providers=file,vault`` with ``config.providers.file.class=...FileConfigProvider`` gives
    ``RAFTCONNECT_CONFIG_PROVIDERS=file``; an alias of one's own (``secrets`` with the file class) gives
    ``secrets=file``. The ``allowed.paths`` of every file/directory alias are joined into one list of roots.
    Raises :class:`PropertiesError` for an alias without a class or with a class RaftConnect does not have.
    Keys of aliases not listed in ``config.providers`` are ignored with a warning, as Connect ignores them.
    """
    aliases = [a.strip() for a in props.get("config.providers", "").split(",") if a.strip()]
    out: dict[str, str] = {}
    if "config.providers" in props:
        out[_PROVIDERS_ENV] = ""  # the key present and empty: no provider enabled
    entries, roots, patterns = [], [], []
    for alias in aliases:
        cls = props.get(f"config.providers.{alias}.class", "").strip()
        if not cls:
            raise PropertiesError(f"config.providers.{alias}.class: missing (config.providers names {alias!r})")
        kind = PROVIDER_CLASSES.get(cls)
        if kind is None:
            raise PropertiesError(f"config.providers.{alias}.class={cls}: not available in RaftConnect; "
                                  f"it has {', '.join(sorted(PROVIDER_CLASSES))}")
        entries.append(alias if alias == kind else f"{alias}={kind}")
        prefix = f"config.providers.{alias}.param."
        for key, value in props.items():
            if not key.startswith(prefix):
                continue
            param = key[len(prefix):]
            if param == "allowed.paths" and kind in ("file", "directory"):
                roots += [r.strip() for r in value.split(",") if r.strip()]
            elif param == "allowlist.pattern" and kind == "env":
                patterns.append(value)
            else:
                warnings.append(f"{key}: not a parameter of RaftConnect's {kind} provider; ignored")
    if entries:
        out[_PROVIDERS_ENV] = ",".join(entries)
    if roots:
        out[_PROVIDER_PATHS_ENV] = ",".join(dict.fromkeys(roots))
    if patterns:
        if len(set(patterns)) > 1:
            raise PropertiesError("config.providers.*.param.allowlist.pattern: env providers with different "
                                  "patterns are not supported (one pattern applies to all)")
        out[_PROVIDER_PATTERN_ENV] = patterns[0]
    listed = {f"config.providers.{a}." for a in aliases}
    for key in props:
        if key.startswith("config.providers.") and not key.startswith(tuple(listed)):
            warnings.append(f"{key}: its alias is not in config.providers; ignored")
    return out


def report(cfg: WorkerConfig) -> None:
    """Log ``cfg``'s warnings (one per unknown or unusable key) and the Connect keys it does not use.

    ``runnode`` calls it once logging is configured (:func:`expand_config_argv` runs before).
    """
    for message in cfg.warnings:
        log.warning("worker properties: %s", message)
    if cfg.ignored:
        log.info("worker properties: not used by RaftConnect: %s", ", ".join(sorted(cfg.ignored)))


def _config_path(argv: list[str]) -> str | None:
    path = None
    for i, arg in enumerate(argv):
        if arg == "--config" and i + 1 < len(argv):
            path = argv[i + 1]
        elif arg.startswith("--config="):
            path = arg.split("=", 1)[1]
    return path


def expand_config_argv(argv: list[str], environ: dict[str, str] | None = None) -> list[str]:
    """runnode's ``argv`` with the flags of its ``--config FILE`` put in front (or ``argv`` unchanged).

    Also sets in ``environ`` (default ``os.environ``) the file's environment-backed
    keys not set there and :data:`KAFKA_CLIENT_CONFIG_ENV` (the tasks' client
    settings, JSON), so call it once, before Django loads settings. Raises
    :class:`PropertiesError`.
    """
    path = _config_path(argv)
    if path is None:
        return list(argv)
    environ = os.environ if environ is None else environ
    cfg = worker_config(read_properties(path), environ)
    for name, value in cfg.env.items():
        environ.setdefault(name, value)
    if cfg.kafka:
        environ[KAFKA_CLIENT_CONFIG_ENV] = json.dumps(cfg.kafka, sort_keys=True)
    return cfg.flags + list(argv)


def kafka_client_config_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tasks' extra librdkafka settings from :data:`KAFKA_CLIENT_CONFIG_ENV` (``{}`` when unset).

    Raises :class:`PropertiesError` when the variable is not a JSON object of strings.
    """
    try:
        return client_config_from_env(environ)
    except ClientConfigError as exc:
        raise PropertiesError(str(exc)) from exc


def check_client_config(kafka: Mapping[str, str]) -> tuple[dict[str, str], list[str]]:
    """Check the tasks' client settings with librdkafka itself, before any task uses them.

    Each group (common keys, then each :data:`CLIENT_PREFIXES` group on top of the
    common ones) is given to a ``confluent_kafka.Producer`` without bootstrap servers
    (it connects nowhere). A property librdkafka does not know is dropped with a
    warning; any other refusal (a bad value, a missing certificate file) raises
    :class:`PropertiesError` with librdkafka's message.

    Returns ``(settings that remain, warnings)``.
    """
    if not kafka:
        return {}, []
    from confluent_kafka import KafkaException, Producer

    kept = dict(kafka)
    warnings: list[str] = []
    common = {k: v for k, v in kept.items() if not k.startswith(CLIENT_PREFIXES)}
    groups = [("", common)] + [(p, {**common, **{k[len(p):]: v for k, v in kept.items() if k.startswith(p)}})
                               for p in CLIENT_PREFIXES]
    for prefix, conf in groups:
        for _ in range(len(conf) + 1):
            try:
                Producer({**conf, "log_level": 0})
                break
            except KafkaException as exc:
                text = str(exc.args[0].str() if exc.args and hasattr(exc.args[0], "str") else exc)
                m = re.search(r'No such configuration property: "([^"]+)"', text)
                if not m:
                    raise PropertiesError(f"Kafka client settings{' (' + prefix + ')' if prefix else ''}: {text}")
                bad = m.group(1)
                conf.pop(bad, None)
                name = prefix + bad if (prefix + bad) in kept else bad
                if kept.pop(name, None) is not None:
                    warnings.append(f"{name}: not a librdkafka setting; ignored")
    for message in warnings:
        log.warning("worker properties: %s", message)
    return kept, warnings
