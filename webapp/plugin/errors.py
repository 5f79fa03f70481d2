"""The exceptions of the plugin API (Kafka's ``org.apache.kafka.connect.errors`` and ``ConfigException``).

Owns :class:`ConnectException` (an error meant for the operator, the base of the others),
:class:`DataException` (a record does not fit) and :class:`ConfigException` (a config value is
missing or invalid; names the key). A connector, a task, a transformation and the runtime raise
these; the runtime writes their messages into the task's status and the DLQ headers.

Must not import anything: it is the bottom of the plugin API.
"""
from __future__ import annotations

from typing import Mapping

__all__ = ["ConnectException", "DataException", "ConfigException"]


class ConnectException(Exception):
    """A connector or task error with a message meant for the operator."""


class DataException(ConnectException):
    """A record does not fit a transformation or a converter (Connect's ``DataException``)."""

    java_class = "org.apache.kafka.connect.errors.DataException"


class ConfigException(ConnectException):
    """A config is invalid (Kafka's ``ConfigException``).

    ``errors`` maps config keys to messages (the keys at fault; the message names them too).
    """

    java_class = "org.apache.kafka.common.config.ConfigException"

    def __init__(self, message: str, errors: Mapping[str, list[str]] | None = None):
        super().__init__(message)
        self.errors = dict(errors or {})
