"""Error handling of connector tasks: ``errors.*`` configs, retries, tolerance, dead letter queue.

Owns Kafka Connect's error-handling contract (KIP-298) as RaftConnect runs it:

* :class:`ErrorHandlingConfig` — the ``errors.*`` keys with Connect's defaults,
  and :func:`validate_error_config` for the Herder;
* :class:`RetryWithToleranceOperator` — runs an operation, retrying
  :func:`is_retriable` failures with exponential backoff (300 ms doubling, capped
  by ``errors.retry.delay.max.ms``, within ``errors.retry.timeout``), then either
  fails the task (``errors.tolerance=none``: "Tolerance exceeded in error
  handler") or, for per-record stages with ``errors.tolerance=all``, counts,
  logs and skips the record;
* :class:`ProcessingError` and :func:`dlq_headers` — a failed record's context,
  and the ``__connect.errors.*`` headers of Kafka's ``DeadLetterQueueReporter``.

Where records fail: inside the Spark job (converter and transformation stages,
``webapp.connectors.file`` and ``webapp.connectors.jdbc``), where a tolerant task
turns a bad record into an error row instead of failing the job; the task then
produces those rows' original bytes to ``errors.deadletterqueue.topic.name`` (sink
connectors only, as in Connect; the JDBC sink before committing its transaction). This module touches no Kafka client and no metadata store.
"""
from __future__ import annotations

import logging
import random
import time
import traceback
from dataclasses import dataclass
from typing import Any, Callable, Mapping, TypeVar

from webapp.plugin import AbstractConfig, ConfigDef, ConfigKey, ConnectException

__all__ = [
    "Stage",
    "ERROR_CONFIG_KEYS",
    "ErrorHandlingConfig",
    "validate_error_config",
    "RetriableException",
    "ToleranceExceeded",
    "is_retriable",
    "RetryWithToleranceOperator",
    "ProcessingError",
    "dlq_headers",
    "DLQ_HEADER_PREFIX",
    "RETRIES_DELAY_MIN_MS",
]

log = logging.getLogger(__name__)
T = TypeVar("T")

#: First retry delay (ms); doubles each attempt (Kafka's RetryWithToleranceOperator).
RETRIES_DELAY_MIN_MS = 300
DLQ_HEADER_PREFIX = "__connect.errors."


class Stage:
    """Where in a task's pipeline an error happened (Connect's ``Stage`` names)."""

    KEY_CONVERTER = "KEY_CONVERTER"
    VALUE_CONVERTER = "VALUE_CONVERTER"
    HEADER_CONVERTER = "HEADER_CONVERTER"
    TRANSFORMATION = "TRANSFORMATION"
    TASK_PUT = "TASK_PUT"
    TASK_POLL = "TASK_POLL"
    KAFKA_PRODUCE = "KAFKA_PRODUCE"
    KAFKA_CONSUME = "KAFKA_CONSUME"
    #: stages where ``errors.tolerance=all`` may skip a record
    PER_RECORD = frozenset({KEY_CONVERTER, VALUE_CONVERTER, HEADER_CONVERTER, TRANSFORMATION})


ERROR_CONFIG_KEYS = (
    ConfigKey("errors.retry.timeout", "LONG", "0", importance="MEDIUM",
              documentation="Milliseconds a failed operation is retried; 0 no retries, -1 forever."),
    ConfigKey("errors.retry.delay.max.ms", "LONG", "60000", importance="MEDIUM",
              documentation="Maximum milliseconds between consecutive retries."),
    ConfigKey("errors.tolerance", "STRING", "none", importance="MEDIUM", allowed=("none", "all"),
              documentation="none: an error fails the task; all: bad records are skipped."),
    ConfigKey("errors.log.enable", "BOOLEAN", "false", importance="MEDIUM",
              documentation="Log each error and failed operation."),
    ConfigKey("errors.log.include.messages", "BOOLEAN", "false", importance="MEDIUM",
              documentation="Include the record (topic, partition, offset, key, value) in the log."),
    ConfigKey("errors.deadletterqueue.topic.name", "STRING", "", importance="MEDIUM",
              documentation="Sink connectors: topic receiving the records that failed (empty: none)."),
    ConfigKey("errors.deadletterqueue.topic.replication.factor", "INT", "3", importance="LOW",
              documentation="Replication factor of the dead letter queue topic when it is created."),
    ConfigKey("errors.deadletterqueue.context.headers.enable", "BOOLEAN", "false", importance="MEDIUM",
              documentation="Add __connect.errors.* headers describing the error to dead letter queue records."),
)
_CONFIG_DEF = ConfigDef(ERROR_CONFIG_KEYS)


def validate_error_config(config: Mapping[str, str], sink: bool = True) -> dict[str, list[str]]:
    """Per-key errors of the ``errors.*`` keys (types, allowed values, ranges); empty lists when valid.

    A dead letter queue on a source connector is an error (Connect ignores it;
    refusing it tells the user it would have no effect).
    """
    errors = {k: v for k, v in _CONFIG_DEF.validate(config).items() if v}
    for key, low in (("errors.retry.timeout", -1), ("errors.retry.delay.max.ms", 1),
                     ("errors.deadletterqueue.topic.replication.factor", -1)):
        raw = config.get(key)
        if raw is not None and key not in errors:
            if int(raw) < low or (key.endswith("replication.factor") and int(raw) == 0):
                errors.setdefault(key, []).append(f"Invalid value {raw} for configuration {key}: "
                                                  f"Value must be at least {low}" if int(raw) < low else
                                                  f"Invalid value {raw} for configuration {key}: "
                                                  "Replication factor must be positive or -1")
    dlq = (config.get("errors.deadletterqueue.topic.name") or "").strip()
    if dlq and not sink:
        errors.setdefault("errors.deadletterqueue.topic.name", []).append(
            "The dead letter queue is only available to sink connectors")
    if dlq and sink:
        topics = [t.strip() for t in str(config.get("topics") or "").split(",")]
        if dlq in topics:
            errors.setdefault("errors.deadletterqueue.topic.name", []).append(
                f"The DLQ topic '{dlq}' may not be included in the list of topics ('topics=...') consumed by the "
                "connector")
    return errors


@dataclass(frozen=True)
class ErrorHandlingConfig:
    """The ``errors.*`` settings of one connector (Connect's names and defaults; times in ms)."""

    tolerance: str = "none"
    retry_timeout_ms: int = 0
    retry_delay_max_ms: int = 60_000
    log_enable: bool = False
    log_include_messages: bool = False
    dlq_topic: str = ""
    dlq_replication_factor: int = 3
    dlq_context_headers: bool = False

    @classmethod
    def from_config(cls, config: Mapping[str, str]) -> "ErrorHandlingConfig":
        """Read the keys (defaults for missing ones). Raises ConnectException for invalid values."""
        errors = validate_error_config({k: v for k, v in config.items() if k != "topics"}, sink=True)
        if errors:
            raise ConnectException("Invalid errors configuration: " + "; ".join(m for v in errors.values() for m in v))

        conf = AbstractConfig(_CONFIG_DEF, config)
        return cls(
            tolerance=conf.get_string("errors.tolerance").strip().lower(),
            retry_timeout_ms=conf.get_long("errors.retry.timeout"),
            retry_delay_max_ms=conf.get_long("errors.retry.delay.max.ms"),
            log_enable=conf.get_bool("errors.log.enable"),
            log_include_messages=conf.get_bool("errors.log.include.messages"),
            dlq_topic=conf.get_string("errors.deadletterqueue.topic.name").strip(),
            dlq_replication_factor=conf.get_int("errors.deadletterqueue.topic.replication.factor"),
            dlq_context_headers=conf.get_bool("errors.deadletterqueue.context.headers.enable"),
        )

    @property
    def tolerate_all(self) -> bool:
        return self.tolerance == "all"


class RetriableException(ConnectException):
    """An operation failed for a reason that may go away (Connect's ``RetriableException``)."""


class ToleranceExceeded(ConnectException):
    """An error the configured tolerance does not allow; the task fails with it."""


# Transient librdkafka errors (by name or message) that a retry may cure.
_TRANSIENT_MARKERS = ("_TRANSPORT", "_ALL_BROKERS_DOWN", "_MSG_TIMED_OUT", "_TIMED_OUT", "REQUEST_TIMED_OUT",
                      "NOT_LEADER", "LEADER_NOT_AVAILABLE", "NOT_ENOUGH_REPLICAS", "Broker transport failure",
                      "not delivered within", "UNKNOWN_TOPIC_OR_PART")


def is_retriable(exc: BaseException) -> bool:
    """True for :class:`RetriableException` and for transient Kafka errors anywhere in the cause chain."""
    seen = 0
    e: BaseException | None = exc
    while e is not None and seen < 10:
        if isinstance(e, RetriableException) or getattr(e, "retriable", False):
            return True
        text = str(e)
        if any(m in text for m in _TRANSIENT_MARKERS):
            return True
        e = e.__cause__ or e.__context__
        seen += 1
    return False


@dataclass(frozen=True)
class ProcessingError:
    """What Connect's ``ProcessingContext`` knows about one failed record.

    ``topic``/``partition``/``offset`` locate the original Kafka record (None for
    source records); ``executing_class`` is the converter or transformation
    class that failed; ``exception_class`` the error's class name.
    """

    stage: str
    executing_class: str
    exception_class: str
    message: str
    stacktrace: str = ""
    topic: str | None = None
    partition: int | None = None
    offset: int | None = None

    @classmethod
    def from_exception(cls, exc: BaseException, stage: str, executing_class: str, **where: Any) -> "ProcessingError":
        """Build from an exception (its Java class name if it declares one, else the Python qualname)."""
        cause = getattr(exc, "cause", None) or exc
        name = getattr(type(cause), "java_class", None) or f"{type(cause).__module__}.{type(cause).__qualname__}"
        trace = "".join(traceback.format_exception(type(cause), cause, cause.__traceback__))
        return cls(stage, executing_class, name, str(cause), trace, **where)

    def describe(self, include_record: bool = False) -> str:
        """One log line, as Connect's LogReporter writes it."""
        text = (f"Error encountered in task. Executing stage '{self.stage}' with class '{self.executing_class}'")
        if include_record and self.topic is not None:
            text += f", where consumed record is {{topic='{self.topic}', partition={self.partition}, " \
                    f"offset={self.offset}}}"
        return f"{text}. {self.exception_class}: {self.message}"


def dlq_headers(error: ProcessingError, connector: str, task: int) -> list[tuple[str, bytes]]:
    """The ``__connect.errors.*`` context headers Kafka's DeadLetterQueueReporter adds, in its order.

    Values are UTF-8 strings (partition and offset in decimal); the stack trace
    header is left out when there is none.
    """
    out: list[tuple[str, bytes]] = []
    p = DLQ_HEADER_PREFIX
    if error.topic is not None:
        out += [(p + "topic", error.topic.encode()), (p + "partition", str(error.partition).encode()),
                (p + "offset", str(error.offset).encode())]
    out += [(p + "connector.name", connector.encode()), (p + "task.id", str(task).encode()),
            (p + "stage", error.stage.encode()), (p + "class.name", error.executing_class.encode()),
            (p + "exception.class.name", error.exception_class.encode()),
            (p + "exception.message", (error.message or "").encode())]
    if error.stacktrace:
        out.append((p + "exception.stacktrace", error.stacktrace.encode()))
    return out


class RetryWithToleranceOperator:
    """Retries and tolerates errors as Connect's ``RetryWithToleranceOperator`` does.

    Args:
        config: the connector's :class:`ErrorHandlingConfig`.
        clock: monotonic seconds (injectable for tests).
        sleep: waits the given seconds; may return early (a stopping task).
        rng: random source for the capped backoff (Connect picks a random delay
            below the cap once the doubled delay exceeds it).

    Counters: ``total_retries``, ``total_failures`` (operations that failed after
    retries), ``total_errors_tolerated`` (records skipped).
    """

    def __init__(self, config: ErrorHandlingConfig, *, clock: Callable[[], float] = time.monotonic,
                 sleep: Callable[[float], Any] = time.sleep, rng: random.Random | None = None,
                 logger: logging.Logger | None = None):
        self.config = config
        self.clock = clock
        self.sleep = sleep
        self.rng = rng or random.Random()
        self.log = logger or log
        self.total_retries = 0
        self.total_failures = 0
        self.total_errors_tolerated = 0

    def backoff_ms(self, attempt: int, remaining_ms: float | None) -> float:
        """Delay before retry ``attempt`` (1-based): 300 ms · 2^(attempt-1), capped, never past the deadline."""
        delay = RETRIES_DELAY_MIN_MS << (attempt - 1) if attempt < 40 else float("inf")
        if delay > self.config.retry_delay_max_ms:
            delay = self.rng.uniform(0, self.config.retry_delay_max_ms)
        if remaining_ms is not None:
            delay = min(delay, max(0.0, remaining_ms))
        return delay

    def execute(self, operation: Callable[[], T], stage: str, executing_class: str = "") -> T:
        """Run ``operation``; retry retriable failures until ``errors.retry.timeout``; then raise.

        Returns the operation's result. Raises :class:`ToleranceExceeded` (cause:
        the last error) when it still fails: a batch-level operation can never be
        tolerated, only per-record stages are (see :meth:`tolerate`).
        """
        start = self.clock()
        timeout = self.config.retry_timeout_ms
        attempt = 0
        while True:
            attempt += 1
            try:
                return operation()
            except Exception as exc:
                if not is_retriable(exc):
                    self._failed(exc, stage, executing_class, attempt)
                    raise
                elapsed_ms = (self.clock() - start) * 1000.0
                if timeout == 0 or (timeout > 0 and elapsed_ms >= timeout):
                    self._failed(exc, stage, executing_class, attempt)
                    raise ToleranceExceeded(f"Tolerance exceeded in error handler: stage {stage} failed after "
                                            f"{attempt} attempt(s): {exc}") from exc
                remaining = None if timeout < 0 else timeout - elapsed_ms
                delay = self.backoff_ms(attempt, remaining)
                self.total_retries += 1
                if self.config.log_enable:
                    self.log.warning("Stage %s with class %s failed (attempt %d), retrying in %.0f ms: %s",
                                     stage, executing_class, attempt, delay, exc)
                self.sleep(delay / 1000.0)

    def _failed(self, exc: BaseException, stage: str, executing_class: str, attempts: int) -> None:
        self.total_failures += 1
        if self.config.log_enable:
            self.log.error("Stage %s with class %s failed after %d attempt(s): %s", stage, executing_class,
                           attempts, exc)

    def tolerate(self, error: ProcessingError) -> None:
        """Account for one failed record: skip it (tolerance all, per-record stage) or raise.

        Raises:
            ToleranceExceeded: ``errors.tolerance=none``, or a stage that cannot skip a record.
        """
        if not self.config.tolerate_all or error.stage not in Stage.PER_RECORD:
            raise ToleranceExceeded(f"Tolerance exceeded in error handler: {error.describe(True)}")
        self.total_errors_tolerated += 1
        if self.config.log_enable:
            self.log.error(error.describe(self.config.log_include_messages))
