"""Automatic restart of FAILED tasks: the opt-in policy and its exponential backoff.

Owns the connector config keys ``raftconnect.auto.restart`` (default ``false``),
``raftconnect.auto.restart.backoff.ms`` (first delay, default 1000) and
``raftconnect.auto.restart.backoff.max.ms`` (cap, default 60000), their
validation, and the per-task bookkeeping of failures and the next restart time
that the :class:`~webapp.runtime.worker.Worker` consults on each reconcile.

As in Kafka Connect, a FAILED task stays FAILED until an operator restarts it
(``POST /connectors/{name}/restart`` or ``.../tasks/{id}/restart``); this policy
changes that only for connectors that ask for it. The backoff is worker-local:
a task that moves to another worker starts counting again there.

Algorithm: the n-th consecutive failure waits ``min(max, initial * 2**(n-1))``
milliseconds (plain exponential backoff with a cap, no jitter: one task's
restarts do not contend with anyone's). A task that ran for at least ``max``
before failing starts a new series (n = 1), as Kubernetes' CrashLoopBackOff
forgets old crashes after a stable run.

Does not touch the Raft state: automatic restarts are the worker's own decision.
"""
from __future__ import annotations

import time
from dataclasses import dataclass, field
from typing import Any, Callable, Mapping

__all__ = ["AUTO_RESTART", "BACKOFF_MS", "BACKOFF_MAX_MS", "AutoRestartPolicy", "RestartTracker", "config_errors"]

AUTO_RESTART = "raftconnect.auto.restart"
BACKOFF_MS = "raftconnect.auto.restart.backoff.ms"
BACKOFF_MAX_MS = "raftconnect.auto.restart.backoff.max.ms"
_DEFAULT_BACKOFF_MS = 1000
_DEFAULT_MAX_MS = 60000


def config_errors(config: Mapping[str, Any]) -> dict[str, list[str]]:
    """Errors of the auto-restart keys in a connector config, Connect's messages: ``{key: [message]}``."""
    errors: dict[str, list[str]] = {}
    raw = str(config.get(AUTO_RESTART, "false")).strip().lower()
    if raw not in ("true", "false"):
        errors[AUTO_RESTART] = [f"Invalid value {config.get(AUTO_RESTART)} for configuration {AUTO_RESTART}: "
                                "Expected value to be either true or false"]
    for key in (BACKOFF_MS, BACKOFF_MAX_MS):
        if key in config:
            try:
                if int(str(config[key])) < 0:
                    errors[key] = [f"Invalid value {config[key]} for configuration {key}: Value must be at least 0"]
            except ValueError:
                errors[key] = [f"Invalid value {config[key]} for configuration {key}: Not a number of type LONG"]
    return errors


@dataclass(frozen=True)
class AutoRestartPolicy:
    """Whether and how fast FAILED tasks of one connector are restarted.

    Attributes:
        enabled: ``raftconnect.auto.restart``.
        backoff_ms: first delay (ms).
        max_backoff_ms: cap of the delay (ms); also how long a task must run for its
            failure series to be forgotten.
    """

    enabled: bool = False
    backoff_ms: int = _DEFAULT_BACKOFF_MS
    max_backoff_ms: int = _DEFAULT_MAX_MS

    @classmethod
    def from_config(cls, config: Mapping[str, Any]) -> "AutoRestartPolicy":
        """The policy of a (validated) connector or task config; invalid values fall back to defaults."""
        if config_errors(config):
            return cls()
        initial = int(str(config.get(BACKOFF_MS, _DEFAULT_BACKOFF_MS)))
        cap = int(str(config.get(BACKOFF_MAX_MS, max(_DEFAULT_MAX_MS, initial))))
        return cls(str(config.get(AUTO_RESTART, "false")).strip().lower() == "true", initial, max(cap, initial))

    def delay_ms(self, failures: int) -> int:
        """Delay before restarting after the ``failures``-th consecutive failure (``failures >= 1``)."""
        if failures < 1:
            raise ValueError("failures must be at least 1")
        # 2**62 already exceeds any cap; avoid building huge integers for long series
        return min(self.max_backoff_ms, self.backoff_ms * (1 << min(failures - 1, 62)))


@dataclass
class _Series:
    failures: int = 0
    instance: int | None = None  # id() of the failed WorkerTask already counted
    due: float = 0.0


@dataclass
class RestartTracker:
    """Per-task failure series and restart deadlines (monotonic seconds; ``clock`` injectable).

    The worker calls :meth:`failed` for each failed task instance on every
    reconcile (counted once per instance) and restarts the task when it returns
    ``True``; :meth:`forget` when the task goes away.
    """

    clock: Callable[[], float] = time.monotonic
    _series: dict[str, _Series] = field(default_factory=dict)

    def failed(self, key: str, instance: Any, policy: AutoRestartPolicy, started_at: float) -> bool:
        """Record that ``instance`` (a task that started at ``started_at``) of task ``key`` is FAILED;
        ``True`` when its restart is due now."""
        now = self.clock()
        s = self._series.setdefault(key, _Series())
        if s.instance != id(instance):
            ran_ms = (now - started_at) * 1000.0
            s.failures = 1 if ran_ms >= policy.max_backoff_ms else s.failures + 1
            s.instance = id(instance)
            s.due = now + policy.delay_ms(s.failures) / 1000.0
        return now >= s.due

    def failures(self, key: str) -> int:
        """Consecutive failures counted for ``key`` (0 when none)."""
        s = self._series.get(key)
        return s.failures if s else 0

    def forget(self, key: str) -> None:
        """Drop the series of ``key`` (task removed, or restarted by an operator)."""
        self._series.pop(key, None)
