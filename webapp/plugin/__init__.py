"""The plugin API: everything a connector plugin sees (Kafka's ``connect-api``).

The bottom of the layering: the runtime (``webapp.runtime``), the metadata stores
(``webapp.storage``), the SMTs, the web layer and every connector import it; it imports
nothing of ``webapp`` or ``raftnode`` and no Django, Spark or Kafka client (contracts
``plugin-api-alone`` and ``plugin-api-layers`` in ``pyproject.toml``). Import its names from
here; the modules are its rooms:

* ``connector`` — :class:`Connector` / :class:`SourceConnector` / :class:`SinkConnector`,
  :class:`Task`, :class:`TaskContext`, :class:`BatchResult`, :class:`ConnectorTaskId`;
* ``config`` — :class:`ConfigKey`, :class:`ConfigDef` (declare and validate keys),
  :class:`AbstractConfig` (typed getters: ``get_int``, ``get_bool``, ``get_list``,
  ``get_password``, ...), :class:`Password`;
* ``offsets`` — :class:`SourceOffset`, :func:`partition_key`;
* ``errors`` — :class:`ConnectException`, :class:`DataException`, :class:`ConfigException`.

Plugins are discovered by the runtime (``webapp.runtime.registry``, entry-point group
``raftconnect.connectors``); records and batches as a transformation sees them are
``webapp.runtime.transforms.record``.
"""
from .config import AbstractConfig, ConfigDef, ConfigKey, Password
from .connector import (
    BatchResult,
    Connector,
    ConnectorTaskId,
    SinkConnector,
    SourceConnector,
    Task,
    TaskContext,
)
from .errors import ConfigException, ConnectException, DataException
from .offsets import SourceOffset, partition_key

__all__ = [
    "AbstractConfig",
    "BatchResult",
    "ConfigDef",
    "ConfigException",
    "ConfigKey",
    "ConnectException",
    "Connector",
    "ConnectorTaskId",
    "DataException",
    "Password",
    "SinkConnector",
    "SourceConnector",
    "SourceOffset",
    "Task",
    "TaskContext",
    "partition_key",
]
