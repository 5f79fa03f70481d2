"""The tasks' extra Kafka client settings as they travel from a node to its agent.

Owns the environment variable that carries them (:data:`KAFKA_CLIENT_CONFIG_ENV`, a JSON
object of librdkafka settings, prefixed keys kept) and reading it back. The node writes it
(``webapp.connect.workerconfig`` translates a worker properties file into it); the agent
reads it (``webapp.runtime.agent``). Imports nothing from Django or the rest of ``webapp``,
so the runtime does not have to import the node's modules for it.
"""
from __future__ import annotations

import json
import os
from collections.abc import Mapping

__all__ = ["KAFKA_CLIENT_CONFIG_ENV", "ClientConfigError", "client_config_from_env"]

#: Environment variable carrying the tasks' extra librdkafka settings (a JSON object) from node to agent.
KAFKA_CLIENT_CONFIG_ENV = "RAFTCONNECT_KAFKA_CLIENT_CONFIG"


class ClientConfigError(ValueError):
    """:data:`KAFKA_CLIENT_CONFIG_ENV` holds something other than a JSON object (message says what)."""


def client_config_from_env(environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """The tasks' extra librdkafka settings from :data:`KAFKA_CLIENT_CONFIG_ENV` (``{}`` when unset).

    Args:
        environ: the environment to read (default ``os.environ``).
    Returns: ``{librdkafka key: value}``, values as strings.
    Raises: :class:`ClientConfigError` when the variable is not a JSON object.
    """
    raw = (os.environ if environ is None else environ).get(KAFKA_CLIENT_CONFIG_ENV)
    if not raw:
        return {}
    try:
        value = json.loads(raw)
    except ValueError as exc:
        raise ClientConfigError(f"{KAFKA_CLIENT_CONFIG_ENV} is not JSON: {exc}") from exc
    if not isinstance(value, dict):
        raise ClientConfigError(f"{KAFKA_CLIENT_CONFIG_ENV} must be a JSON object")
    return {str(k): str(v) for k, v in value.items()}
