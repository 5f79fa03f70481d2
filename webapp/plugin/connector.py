"""What a connector and its tasks implement: :class:`Connector`, :class:`Task` and what they exchange.

Owns the contract between the task runtime (``webapp.runtime``) and connector
plugins (``webapp.connectors.*``, third-party packages): the base classes, a
task's identity (:class:`ConnectorTaskId`), what it is given (:class:`TaskContext`)
and what a batch returns (:class:`BatchResult`). Mirrors Kafka Connect's ``Connector`` /
``SourceTask`` / ``SinkTask`` split, with one difference that follows from
running on Spark: a task does not return records one by one from ``poll()`` /
take them in ``put()``; it runs one whole **micro-batch** per call to
:meth:`Task.run_batch` (read → convert → transform → write, as Spark jobs) and
returns the offsets that the batch made durable. The runtime commits those
offsets through the leader only after ``run_batch`` returned, so a batch whose
output was not acknowledged is never marked done.

Must not import anything of ``webapp`` outside the plugin API, nor Django, Spark
or Kafka clients: the REST layer imports it (validation, plugin listing) on nodes
that run no tasks.
"""
from __future__ import annotations

from abc import ABC, abstractmethod
from dataclasses import dataclass, field
from typing import Any, ClassVar, Literal, Mapping

from .config import ConfigDef
from .offsets import SourceOffset
from .version import RAFTCONNECT_VERSION

__all__ = ["ConnectorTaskId", "Connector", "SourceConnector", "SinkConnector", "Task", "TaskContext", "BatchResult"]


@dataclass(frozen=True, order=True)
class ConnectorTaskId:
    """Identity of one task: connector name and task number (0-based), as in Connect."""

    connector: str
    task: int

    def __str__(self) -> str:
        return f"{self.connector}-{self.task}"


@dataclass
class TaskContext:
    """Everything the runtime hands a task when it starts.

    Attributes:
        task_id: which task this is.
        spark: the agent's ``pyspark.sql.SparkSession`` (one per agent, shared by tasks).
        kafka_config: librdkafka settings for producers/consumers, at least
            ``bootstrap.servers``.
        work_dir: a private directory for this task's scratch files (exists).
        offsets: the committed offsets of this connector, as
            ``{partition_key(partition): SourceOffset}``; empty on first start.
        engine: the agent's ``webapp.runtime.engine.BatchEngine``: whether a batch runs
            in-process or as a Spark job, and the in-process runner (None: always Spark).
        end_offsets: the agent's ``webapp.kafka.clients.EndOffsetWatcher``: a sink asks it
            whether its partitions have records past its positions, and is woken when they do.
        wake: run the task's next step now (e.g. from a watcher's callback).
        file_changes: the agent's ``webapp.runtime.file_watcher.FileChangeWatcher``: a file
            source that found nothing new parks on it until one of its files changes.
        metrics: the task's ``webapp.runtime.task_metrics.TaskMetrics``; a task that skips records
            under ``errors.tolerance=all`` counts them with its ``record_errors(...)``.
    """

    task_id: ConnectorTaskId
    spark: Any
    kafka_config: dict[str, str]
    work_dir: str
    offsets: dict[str, SourceOffset] = field(default_factory=dict)
    engine: Any = None
    end_offsets: Any = None
    wake: Any = None
    file_changes: Any = None
    metrics: Any = None


@dataclass(frozen=True)
class BatchResult:
    """What one micro-batch achieved.

    Attributes:
        records: records read from the source (source tasks: produced to Kafka and
            acknowledged; sink tasks: written and committed), >= 0.
        offsets: the offsets made durable by this batch, to be committed; only
            partitions that moved.
    """

    records: int
    offsets: tuple[SourceOffset, ...] = ()


class Task(ABC):
    """One running task; constructed by the runtime with its context and config.

    Lifecycle: ``start()`` once, then ``run_batch()`` repeatedly from one thread,
    then ``stop()`` once (also after a failure). ``run_batch`` must return within
    about ``batch.max.ms`` so that pause and stop are honoured promptly.
    """

    def __init__(self, context: TaskContext, config: Mapping[str, str]):
        self.context = context
        self.config = dict(config)

    def start(self) -> None:
        """Prepare resources (clients, schemas); resume from ``context.offsets``."""

    @abstractmethod
    def run_batch(self) -> BatchResult | None:
        """Run one micro-batch and return what it made durable.

        Returns ``None`` when there was nothing to do (the runtime then backs off
        briefly). Raises any exception to fail the task; the runtime records the
        trace in the task's status.
        """

    def stop(self) -> None:
        """Release resources. Must not raise."""

    def idle_delay(self) -> float | None:
        """Seconds until this task has work again, after a batch that returned ``None``.

        ``None`` (the default) lets the runtime back off by itself (50 ms doubling
        to about a second). A task that knows better says so: a JDBC source its
        next poll, a sink that the runtime wakes when its partitions get records
        a long time.
        """
        return None


class Connector(ABC):
    """A connector plugin (Connect's ``Connector``): validates config and splits work.

    Subclasses set :attr:`config_def`, :attr:`task_class`, :attr:`version` and
    implement :meth:`task_configs`. The connector instance runs on the worker
    assigned to it; its task configs are sent to the leader and stored.
    """

    type: ClassVar[Literal["source", "sink"]]
    version: ClassVar[str] = RAFTCONNECT_VERSION  # built-in plugins ship with the runtime
    config_def: ClassVar[ConfigDef] = ConfigDef()
    task_class: ClassVar[type[Task]]

    def validate(self, config: Mapping[str, str]) -> dict[str, list[str]]:
        """Per-key errors for ``config`` (see :meth:`ConfigDef.validate`); override to add checks."""
        return self.config_def.validate(config)

    def start(self, config: Mapping[str, str]) -> None:
        """Keep the config; called on the assigned worker before :meth:`task_configs`."""
        self.config = dict(config)

    @abstractmethod
    def task_configs(self, max_tasks: int) -> list[dict[str, str]]:
        """Split the work into at most ``max_tasks`` task configs (>= 1 unless no work)."""

    def stop(self) -> None:
        """Release resources. Must not raise."""

    def task_configs_recheck_s(self) -> float | None:
        """Seconds between re-runs of :meth:`task_configs` while the connector runs, or ``None`` (never).

        Connect's connectors watch their source in a thread of their own and call
        ``context.requestTaskReconfiguration()`` when the work changed (the JDBC source's table
        monitor). Here a connector instance lives only for :meth:`start`, :meth:`task_configs` and
        :meth:`stop`, so the worker that owns the connector re-runs those three every this many
        seconds instead, and stores the task configs when they differ (the tasks are then
        reconfigured, as after a config change). Called after :meth:`start`.
        """
        return None


class SourceConnector(Connector, ABC):
    """A connector that reads an external system and produces to Kafka."""

    type: ClassVar[Literal["source", "sink"]] = "source"


class SinkConnector(Connector, ABC):
    """A connector that consumes Kafka topics and writes to an external system."""

    type: ClassVar[Literal["source", "sink"]] = "sink"
