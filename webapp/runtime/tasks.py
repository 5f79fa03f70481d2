"""Celery tasks of the worker agent: thin shells over :class:`~webapp.runtime.worker.Worker`."""
from __future__ import annotations

from celery import shared_task

from .agent import current_worker

__all__ = ["apply_assignment", "set_logger_level"]


@shared_task(name="raftconnect.apply_assignment", ignore_result=True)
def apply_assignment(view: dict) -> None:
    """Make this agent run what ``view`` (the coordinator's worker view) says."""
    current_worker().apply_assignment(view)


@shared_task(name="raftconnect.set_logger_level", ignore_result=True)
def set_logger_level(namespace: str, level: str) -> None:
    """Set a log level in the agent process (``PUT /admin/loggers/{namespace}`` on its node)."""
    from webapp.loggers import process_loggers

    process_loggers().set_level(namespace, level)
