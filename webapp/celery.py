"""The Celery application that carries assignment messages to worker agents.

Broker: ``RAFTCONNECT_CELERY_BROKER`` (Redis in deployments); the embedded
default is kombu's filesystem transport under the node's data directory, which
needs no server. Results are not used: the Raft state is the truth and agents
report through heartbeats, so every task ignores its result.
"""
from __future__ import annotations

import os

from celery import Celery

from webapp import environment

__all__ = ["app", "configure_broker", "worker_queue"]


def worker_queue(worker_id: str) -> str:
    """The Celery queue a worker agent consumes: ``connect.worker.<worker_id>``."""
    return f"connect.worker.{worker_id}"


def configure_broker(broker_url: str | None, data_dir: str, create: bool = True) -> dict:
    """Celery settings for ``broker_url``, or the filesystem transport under ``data_dir``.

    All nodes of one machine that share a filesystem broker must use the same
    folder; the node passes its folder to its agent through the environment.
    """
    if broker_url and not broker_url.startswith("filesystem"):
        return {"broker_url": broker_url, "broker_transport": None, "broker_transport_options": {}}
    folder = os.path.abspath(os.path.join(data_dir, "broker"))
    if create:
        for sub in ("queue", "processed", "control"):
            os.makedirs(os.path.join(folder, sub), exist_ok=True)
    return {
        "broker_url": "filesystem://",
        # kombu's filesystem transport, with atomic message files (webapp/runtime/fs_transport.py)
        "broker_transport": "webapp.runtime.fs_transport:Transport",
        "broker_transport_options": {
            "data_folder_in": os.path.join(folder, "queue"),
            "data_folder_out": os.path.join(folder, "queue"),
            "processed_folder": os.path.join(folder, "processed"),
            "control_folder": os.path.join(folder, "control"),
            "store_processed": False,
            "polling_interval": 0.1,
        },
    }


app = Celery("raftconnect")
app.conf.update(
    task_serializer="json",
    accept_content=["json"],
    task_ignore_result=True,
    worker_prefetch_multiplier=1,
    worker_hijack_root_logger=False,
    broker_connection_retry_on_startup=True,
    task_default_queue="connect.default",
    **configure_broker(environment.celery_broker(), environment.data_dir(), create=False),
)
app.conf.imports = ("webapp.runtime.tasks",)
