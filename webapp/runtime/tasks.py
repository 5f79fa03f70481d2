"""Celery tasks of the worker agent: thin shells over :class:`~webapp.runtime.worker.Worker`."""
from __future__ import annotations

from celery import shared_task

from .agent import current_worker

__all__ = ["apply_assignment"]


@shared_task(name="raftconnect.apply_assignment", ignore_result=True)
def apply_assignment(view: dict) -> None:
    """Make this agent run what ``view`` (the coordinator's worker view) says."""
    current_worker().apply_assignment(view)
