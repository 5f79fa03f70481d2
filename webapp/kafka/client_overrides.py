"""Kafka Connect's client settings in Java client names, mapped to librdkafka's: the one table and its checks.

Owns :data:`CLIENT_KEYS` (Java client key -> librdkafka key, per client type), the keys a task may
not override (:data:`RESERVED`), the translation of Java TLS/SASL settings (JKS/PEM stores,
``sasl.jaas.config``), Connect's ``connector.client.config.override.policy`` (``All`` / ``None`` /
``Principal``, carried by :data:`OVERRIDE_POLICY_ENV`) and the checks of a connector's
``producer.override.*`` / ``consumer.override.*`` / ``admin.override.*`` keys.

Used by the worker properties file (:mod:`webapp.connect.workerconfig`: worker-level ``producer.*``
keys, warnings), by the one connector validation (``herder.connector_config_errors``: 400 naming
the key), by the tasks (:func:`client_overrides`) and by :mod:`webapp.kafka.spark_io` (plain
renames left in a merged config). A key that is neither in the table nor one of librdkafka's own
properties for that client is refused; so is one the table marks as having no equivalent.
README's table is :func:`markdown_table` (a test keeps them in step).

Imports nothing from Django or the rest of ``webapp`` (the node reads worker properties before
Django is set up); ``confluent_kafka`` only inside :func:`librdkafka_value_error`.
"""
from __future__ import annotations

import functools
import math
import os
import re
from dataclasses import dataclass
from typing import Callable, Mapping

__all__ = ["CLIENTS", "OVERRIDE_PREFIXES", "ClientKey", "CLIENT_KEYS", "RESERVED", "WORKER_ONLY", "OVERRIDE_POLICY_ENV",
           "OVERRIDE_POLICIES", "override_policy", "normalize_policy", "translate", "librdkafka_names",
           "client_overrides", "with_admin_overrides", "override_errors", "librdkafka_value_error", "markdown_table"]

#: The client types a task uses: a source task's producer, a sink task's consumer (and its dead letter
#: queue's producer), and the admin client that creates topics.
CLIENTS = ("producer", "consumer", "admin")

#: Connect's connector-level override prefixes, per client type.
OVERRIDE_PREFIXES = {c: f"{c}.override." for c in CLIENTS}

#: Environment variable carrying the worker's ``connector.client.config.override.policy`` to the node.
OVERRIDE_POLICY_ENV = "RAFTCONNECT_CLIENT_CONFIG_OVERRIDE_POLICY"

#: Connect's policies: what each lets a connector override (``None``: everything).
OVERRIDE_POLICIES: dict[str, frozenset[str] | None] = {
    "All": None,
    "None": frozenset(),
    "Principal": frozenset({"sasl.jaas.config", "sasl.mechanism", "security.protocol"}),
}

_P, _C, _A = frozenset({"producer"}), frozenset({"consumer"}), frozenset({"admin"})
_ALL = frozenset(CLIENTS)


def _kbytes(value: str) -> str:
    return str(max(1, math.ceil(int(value) / 1024)))


@dataclass(frozen=True)
class ClientKey:
    """One row of the mapping: a Java client key for some client types.

    Attributes:
        java: the Java client's key (as after ``producer.override.``).
        librdkafka: librdkafka's key, or ``None`` when librdkafka has no equivalent (the key is refused).
        clients: the client types (:data:`CLIENTS`) the row applies to.
        note: what the mapping means, or why there is none (README shows it).
        convert: turns the Java value into librdkafka's (e.g. bytes into kilobytes); ``None``: as is.
    """

    java: str
    librdkafka: str | None
    clients: frozenset[str]
    note: str = ""
    convert: Callable[[str], str] | None = None


#: The mapping. Keys librdkafka spells the same way are listed where Connect users set them, so the
#: README table answers "does my key work"; any other librdkafka property of the client passes as is.
CLIENT_KEYS: tuple[ClientKey, ...] = (
    ClientKey("max.request.size", "message.max.bytes", _P,
              "largest request, so largest record; raise the topic's max.message.bytes too"),
    ClientKey("batch.size", "batch.size", _P),
    ClientKey("linger.ms", "linger.ms", _P),
    ClientKey("acks", "acks", _P, "all, -1, 0, 1"),
    ClientKey("enable.idempotence", "enable.idempotence", _P),
    ClientKey("compression.type", "compression.type", _P, "none, gzip, snappy, lz4, zstd"),
    ClientKey("retries", "retries", _P),
    ClientKey("delivery.timeout.ms", "delivery.timeout.ms", _P),
    ClientKey("request.timeout.ms", "request.timeout.ms", _P),
    ClientKey("request.timeout.ms", "socket.timeout.ms", _C | _A, "librdkafka's timeout of a network request"),
    ClientKey("max.in.flight.requests.per.connection", "max.in.flight.requests.per.connection", _P),
    ClientKey("buffer.memory", "queue.buffering.max.kbytes", _P, "bytes, rounded up to kilobytes", _kbytes),
    ClientKey("max.block.ms", None, _P, "librdkafka's produce() does not block; the task waits for "
                                        "delivery within delivery.timeout.ms"),
    ClientKey("partitioner.class", None, _P, "a Java class; librdkafka's own partitioner setting is "
                                             "`partitioner`"),
    ClientKey("max.partition.fetch.bytes", "max.partition.fetch.bytes", _C),
    ClientKey("fetch.max.bytes", "fetch.max.bytes", _C),
    ClientKey("fetch.min.bytes", "fetch.min.bytes", _C),
    ClientKey("fetch.max.wait.ms", "fetch.wait.max.ms", _C),
    ClientKey("isolation.level", "isolation.level", _C),
    ClientKey("max.poll.records", None, _C, "librdkafka has no such bound; a sink task's batch is bounded "
                                            "by the connector's batch.max.rows"),
    ClientKey("max.poll.interval.ms", "max.poll.interval.ms", _C, "no effect: tasks read with assign(), "
                                                                   "no consumer group"),
    ClientKey("session.timeout.ms", "session.timeout.ms", _C, "no effect: no consumer group"),
    ClientKey("heartbeat.interval.ms", "heartbeat.interval.ms", _C, "no effect: no consumer group"),
    ClientKey("check.crcs", "check.crcs", _C),
    ClientKey("client.rack", "client.rack", _C),
    ClientKey("client.id", "client.id", _ALL),
    ClientKey("client.dns.lookup", "client.dns.lookup", _ALL),
    ClientKey("metadata.max.age.ms", "metadata.max.age.ms", _ALL),
    ClientKey("connections.max.idle.ms", "connections.max.idle.ms", _ALL),
    ClientKey("reconnect.backoff.ms", "reconnect.backoff.ms", _ALL),
    ClientKey("reconnect.backoff.max.ms", "reconnect.backoff.max.ms", _ALL),
    ClientKey("retry.backoff.ms", "retry.backoff.ms", _ALL),
    ClientKey("retry.backoff.max.ms", "retry.backoff.max.ms", _ALL),
    ClientKey("socket.connection.setup.timeout.ms", "socket.connection.setup.timeout.ms", _ALL),
    ClientKey("send.buffer.bytes", "socket.send.buffer.bytes", _ALL),
    ClientKey("receive.buffer.bytes", "socket.receive.buffer.bytes", _ALL),
    ClientKey("security.protocol", "security.protocol", _ALL),
    ClientKey("sasl.mechanism", "sasl.mechanism", _ALL, "also `sasl.mechanisms`"),
    ClientKey("sasl.jaas.config", "sasl.username / sasl.password", _ALL,
              "PlainLoginModule and ScramLoginModule credentials only"),
    ClientKey("sasl.kerberos.service.name", "sasl.kerberos.service.name", _ALL),
    ClientKey("ssl.truststore.location", "ssl.ca.location", _ALL, "with ssl.truststore.type=PEM only"),
    ClientKey("ssl.truststore.certificates", "ssl.ca.pem", _ALL),
    ClientKey("ssl.keystore.location", "ssl.keystore.location", _ALL, "PKCS12 keystores only"),
    ClientKey("ssl.keystore.password", "ssl.keystore.password", _ALL, "PKCS12 keystores only"),
    ClientKey("ssl.keystore.certificate.chain", "ssl.certificate.pem", _ALL),
    ClientKey("ssl.keystore.key", "ssl.key.pem", _ALL),
    ClientKey("ssl.key.password", "ssl.key.password", _ALL),
    ClientKey("ssl.cipher.suites", "ssl.cipher.suites", _ALL),
    ClientKey("ssl.endpoint.identification.algorithm", "ssl.endpoint.identification.algorithm", _ALL,
              "empty means `none`"),
    *(ClientKey(k, None, _ALL, "the JVM's TLS / login machinery; librdkafka has none")
      for k in ("ssl.protocol", "ssl.enabled.protocols", "ssl.keymanager.algorithm", "ssl.trustmanager.algorithm",
                "ssl.secure.random.implementation", "ssl.provider", "ssl.engine.factory.class",
                "sasl.login.callback.handler.class", "sasl.client.callback.handler.class", "sasl.login.class",
                "sasl.login.refresh.window.factor", "sasl.login.refresh.window.jitter",
                "sasl.login.refresh.min.period.seconds", "sasl.login.refresh.buffer.seconds",
                "sasl.kerberos.ticket.renew.window.factor", "sasl.kerberos.ticket.renew.jitter")),
)

#: Keys a connector may not override, with the reason (the task depends on RaftConnect's value).
RESERVED: dict[str, str] = {
    "bootstrap.servers": "a task's records and offsets live in the worker's Kafka cluster",
    "transactional.id": "source offsets are committed through the metadata store, not Kafka transactions",
    "enable.partition.eof": "sink tasks read each partition to its end",
    "enable.auto.offset.store": "offsets are committed through the metadata store",
    "enable.auto.commit": "offsets are committed through the metadata store",
    "key.serializer": "the connector's key.converter encodes keys",
    "value.serializer": "the connector's value.converter encodes values",
    "key.deserializer": "the connector's key.converter decodes keys",
    "value.deserializer": "the connector's value.converter decodes values",
    "interceptor.classes": "Java classes",
}

#: librdkafka settings that would let a connector config run code on the workers: refused in a
#: connector's overrides, accepted in the worker's own properties (the operator's).
WORKER_ONLY: dict[str, str] = {
    "plugin.library.paths": "it loads shared libraries into the worker; set it in the worker's properties",
    "ssl.engine.location": "it loads an OpenSSL engine into the worker; set it in the worker's properties",
    "sasl.kerberos.kinit.cmd": "it is a shell command run on the worker; set it in the worker's properties",
}

# Keys with a value check of their own: (allowed values, the first one named in messages; why)
_VALUE_RULES: dict[str, tuple[tuple[str, ...], str]] = {
    "auto.offset.reset": (("earliest", "smallest", "beginning"),
                          "a sink task with no committed offset starts at the earliest offset"),
}

_TABLE: dict[tuple[str, str], ClientKey] = {(c, k.java): k for k in CLIENT_KEYS for c in sorted(k.clients)}

# Java key families handled together below (store types decide what the location keys mean).
_STORE_TYPES = ("ssl.truststore.type", "ssl.keystore.type", "ssl.truststore.password")


def normalize_policy(name: str | None) -> str:
    """Connect's policy name (``All``/``None``/``Principal`` or the Java class name) -> its short name.

    Raises ValueError for anything else (Connect refuses to start such a worker).
    """
    raw = (name or "All").strip()
    short = raw.rsplit(".", 1)[-1]
    if short.endswith("ConnectorClientConfigOverridePolicy"):
        short = short[: -len("ConnectorClientConfigOverridePolicy")]
    for known in OVERRIDE_POLICIES:
        if short.lower() == known.lower():
            return known
    raise ValueError(f"connector.client.config.override.policy: unknown policy {raw!r} "
                     f"(one of {', '.join(OVERRIDE_POLICIES)})")


def override_policy(environ: Mapping[str, str] | None = None) -> str:
    """The worker's override policy from :data:`OVERRIDE_POLICY_ENV` (default ``All``, as Connect 3.0+)."""
    return normalize_policy((os.environ if environ is None else environ).get(OVERRIDE_POLICY_ENV))


def _jaas_credentials(jaas: str) -> dict[str, str]:
    """``username``/``password`` options of a PLAIN or SCRAM ``sasl.jaas.config`` (``{}`` for other modules)."""
    if not re.search(r"(PlainLoginModule|ScramLoginModule)\s", jaas + " "):
        return {}
    found = dict(re.findall(r'\b(username|password)\s*=\s*"((?:\\.|[^"\\])*)"', jaas))
    return {f"sasl.{k}": v.replace('\\"', '"') for k, v in found.items()}


def translate(settings: Mapping[str, str], client: str | None,
              connector: bool = True) -> tuple[dict[str, str], dict[str, str]]:
    """Map one client's settings (Java or librdkafka names, no prefix) to librdkafka's.

    Args:
        settings: ``{key: value}`` as after ``producer.override.`` (or a worker's ``producer.``).
        client: one of :data:`CLIENTS`, or ``None`` for keys shared by every client (a worker's
            ``security.protocol``, ``ssl.*``): then only rows that apply to all clients are used.
        connector: the settings are a connector's overrides (:data:`WORKER_ONLY` keys refused);
            ``False`` for the worker's properties.
    Returns: ``(librdkafka settings, problems)``, problems ``{key: message}`` for keys that cannot
        be used (no equivalent, reserved, a value RaftConnect cannot honour). Keys not in the table
        pass through unchecked: :func:`librdkafka_value_error` checks those against librdkafka.
    """
    out: dict[str, str] = {}
    problems: dict[str, str] = {}
    truststore_type = settings.get("ssl.truststore.type", "JKS").upper()
    keystore_type = settings.get("ssl.keystore.type", "JKS").upper()
    for key, value in settings.items():
        row = _TABLE.get((client, key)) if client else (_TABLE.get(("admin", key))
                                                         if key in _SHARED_KEYS else None)
        if key in RESERVED:
            problems[key] = f"cannot be overridden: {RESERVED[key]}"
        elif connector and key in WORKER_ONLY:
            problems[key] = f"cannot be set by a connector: {WORKER_ONLY[key]}"
        elif key in _VALUE_RULES:
            allowed, why = _VALUE_RULES[key]
            if str(value).lower() not in allowed:
                problems[key] = f"only {allowed[0]} is supported: {why}"
        elif key in _STORE_TYPES:
            continue  # read above, with the location keys
        elif key == "sasl.jaas.config":
            creds = _jaas_credentials(value)
            if not creds:
                problems[key] = ("only PlainLoginModule and ScramLoginModule credentials can be used "
                                 "(set librdkafka's sasl.username / sasl.password or sasl.* keys)")
            for k, v in creds.items():
                out.setdefault(k, v)
        elif key == "ssl.truststore.location" and truststore_type != "PEM":
            problems[key] = (f"librdkafka reads a PEM CA file; set ssl.truststore.type=PEM with a PEM file "
                             f"(or ssl.ca.location) instead of a {truststore_type} truststore")
        elif key in ("ssl.keystore.location", "ssl.keystore.password") and keystore_type == "JKS":
            if key == "ssl.keystore.location":
                problems[key] = "librdkafka reads PKCS12 keystores only (ssl.keystore.type=PKCS12)"
        elif row is None and client and any((c, key) in _TABLE for c in CLIENTS):
            problems[key] = f"not a {client} setting"
        elif row is not None and row.librdkafka is None:
            problems[key] = f"a Java client setting with no librdkafka equivalent ({row.note})"
        elif row is not None:
            if key == "ssl.endpoint.identification.algorithm":
                out[row.librdkafka] = value or "none"
            else:
                try:
                    out[row.librdkafka] = row.convert(value) if row.convert else value
                except ValueError:
                    problems[key] = f"Invalid value {value} for configuration {key}: Not a number"
        else:
            out[key] = value
    return out, problems


_SHARED_KEYS = frozenset(k.java for k in CLIENT_KEYS if k.clients == _ALL)
_RENAMES = {c: {k.java: k.librdkafka for k in CLIENT_KEYS if c in k.clients and k.librdkafka
                and k.librdkafka != k.java and " " not in k.librdkafka and k.convert is None}
            for c in CLIENTS}


def librdkafka_names(conf: dict, client: str) -> dict:
    """``conf`` with the table's plain renames applied in place (Java name -> librdkafka's); returns it.

    For a config merged from several sources (defaults, worker keys, overrides) just before a client
    is made: a Java name left in it (``max.request.size``) becomes librdkafka's (``message.max.bytes``).
    """
    for java, native in _RENAMES[client].items():
        if java in conf:
            conf[native] = conf.pop(java)
    return conf


def client_overrides(config: Mapping[str, str], client: str) -> dict[str, str]:
    """A connector's ``<client>.override.*`` keys as librdkafka settings (prefix stripped, names mapped).

    Keys that cannot be used are left out: :func:`override_errors` refused them when the config was
    created, so this only happens for a config stored before the check existed.
    """
    prefix = OVERRIDE_PREFIXES[client]
    settings = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix) and len(k) > len(prefix)}
    return translate(settings, client)[0]


def with_admin_overrides(kafka_config: Mapping[str, object], config: Mapping[str, str]) -> dict[str, object]:
    """The worker's Kafka config plus a connector's ``admin.override.*`` keys, for the topics a task creates.

    The overrides become ``admin.``-prefixed keys, which :mod:`webapp.kafka.topics` applies last to its
    admin client (as it does a worker's ``admin.*`` keys). ``kafka_config`` itself when there are none.
    """
    admin = client_overrides(config, "admin")
    if not admin:
        return kafka_config  # type: ignore[return-value]
    return {**kafka_config, **{f"admin.{k}": v for k, v in admin.items()}}


@functools.lru_cache(maxsize=512)
def librdkafka_value_error(client: str, key: str, value: str) -> str | None:
    """librdkafka's own verdict on one ``key=value`` for ``client``: ``None`` if accepted, else its message.

    A client is built from that one setting (no bootstrap servers: it connects nowhere, a few
    milliseconds) and destroyed; only errors about the property itself count (unknown property,
    invalid or out-of-range value) — a refusal that needs other settings (SASL credentials) is left
    to the task, where the worker's settings join in. Cached per ``(client, key, value)``.
    """
    from confluent_kafka import Consumer, KafkaException, Producer

    conf = {key: value, "log_level": 0}
    try:
        if client == "consumer":
            Consumer({"group.id": "raftconnect-validate", **conf}).close()
        else:
            Producer(conf)
    except (KafkaException, ValueError) as exc:
        err = exc.args[0] if exc.args else exc
        text = err.str() if hasattr(err, "str") else str(err)
        if "No such configuration property" in text:
            return "not a Kafka client setting (neither a Java client key RaftConnect maps nor a librdkafka property)"
        if "Invalid value" in text or "outside allowed range" in text or "Java TrustStores" in text:
            return text.strip().rstrip(".") if "outside" in text else f"Invalid value {value} for configuration {key}"
    return None


def override_errors(config: Mapping[str, str], policy: str | None = None,
                    unresolved: Callable[[str], bool] = lambda value: False) -> dict[str, list[str]]:
    """Errors of a connector config's ``producer.override.*`` / ``consumer.override.*`` / ``admin.override.*``.

    Args:
        config: the full connector config.
        policy: the worker's override policy (default :func:`override_policy`).
        unresolved: true for a value still holding a config provider reference (``${file:...}``):
            only its key is checked (the policy, and that the key exists), as only the worker that
            starts the task resolves it.
    Returns: ``{full key: [message]}``; each message names the key, so the 400 of a create lists them.
    """
    policy = normalize_policy(policy) if policy is not None else override_policy()
    allowed = OVERRIDE_POLICIES[policy]
    errors: dict[str, list[str]] = {}
    for client, prefix in OVERRIDE_PREFIXES.items():
        settings = {k[len(prefix):]: v for k, v in config.items() if k.startswith(prefix)}
        if not settings:
            continue
        _, problems = translate({k: v for k, v in settings.items() if not unresolved(v)}, client)
        for key, value in settings.items():
            full = prefix + key
            if allowed is not None and key not in allowed:
                msg = (f"The '{policy}' policy does not allow '{key}' to be overridden in the connector "
                       "configuration.")
            elif not key:
                msg = "empty client setting name"
            elif unresolved(value):  # what the name alone says
                row = _TABLE.get((client, key))
                if key in RESERVED or key in WORKER_ONLY or (row is not None and row.librdkafka is None) or \
                        (row is None and any((c, key) in _TABLE for c in CLIENTS)):
                    msg = translate({key: ""}, client)[1][key]
                elif row is not None or key in _STORE_TYPES or key in _VALUE_RULES:
                    continue
                else:
                    msg = librdkafka_value_error(client, key, "0")
                    if msg is None or not msg.startswith("not a Kafka client setting"):
                        continue
            elif key in problems:
                msg = problems[key]
            elif key in _STORE_TYPES or key == "sasl.jaas.config":
                continue  # read with the keys they qualify
            elif (client, key) in _TABLE:  # mapped by the table: librdkafka judges the mapped value
                row = _TABLE[(client, key)]
                if " " in row.librdkafka:
                    continue
                value = row.convert(value) if row.convert else value
                msg = librdkafka_value_error(client, row.librdkafka, str(value))
                if msg is None:
                    continue
                msg = msg.replace(f"configuration {row.librdkafka}", f"configuration {key}")
            else:
                msg = librdkafka_value_error(client, key, str(value))
                if msg is None:
                    continue
            errors.setdefault(full, []).append(f"{full}: {msg}")
    return errors


def markdown_table() -> str:
    """README's table of :data:`CLIENT_KEYS` (Markdown, one row per Java key and client types)."""
    lines = ["| Java client key | clients | librdkafka key | note |", "|---|---|---|---|"]
    for k in CLIENT_KEYS:
        clients = "all" if k.clients == _ALL else ", ".join(c for c in CLIENTS if c in k.clients)
        native = f"`{k.librdkafka}`" if k.librdkafka else "— (refused)"
        lines.append(f"| `{k.java}` | {clients} | {native} | {k.note} |")
    for key, why in RESERVED.items():
        lines.append(f"| `{key}` | all | — (refused) | {why} |")
    for key, why in WORKER_ONLY.items():
        lines.append(f"| `{key}` | all | — (refused in a connector) | {why} |")
    for key, (allowed, why) in _VALUE_RULES.items():
        lines.append(f"| `{key}` | consumer | only `{allowed[0]}` | {why} |")
    return "\n".join(lines) + "\n"
