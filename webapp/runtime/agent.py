"""Bootstrap of the worker agent inside the Celery worker process.

Owns creating the process's single :class:`~webapp.runtime.worker.Worker` from
the environment that ``runnode`` sets (``RAFTCONNECT_*``) when the Celery worker
starts, and shutting it down gracefully when Celery stops. Celery tasks
(``webapp.runtime.tasks``) reach it through :func:`current_worker`.
"""
from __future__ import annotations

import logging
import os
import signal

from celery import signals

from webapp import environment

from .client import ControlPlaneClient
from .worker import Worker

__all__ = ["current_worker", "build_worker_from_env", "kafka_config_from_env", "restart_agent"]

log = logging.getLogger(__name__)
_worker: Worker | None = None


def build_worker_from_env() -> Worker:
    """A :class:`Worker` configured from ``RAFTCONNECT_*`` variables (see ``ConnectNode.agent_env``)."""
    env = os.environ
    worker_id = env["RAFTCONNECT_NODE_ID"]
    client = ControlPlaneClient(env["RAFTCONNECT_CLUSTER"].split(","), env["RAFTCONNECT_CLUSTER_SECRET"], worker_id,
                                commit_timeout=environment.offset_flush_timeout_s())
    member = {"rest_address": env.get("RAFTCONNECT_REST_ADDRESS") or env["RAFTCONNECT_CLUSTER"].split(",")[0],
              "raft_address": env.get("RAFTCONNECT_RAFT_ADDRESS") or None,
              "weight": float(env.get("RAFTCONNECT_WEIGHT", "1.0")),
              "roles": sorted(env.get("RAFTCONNECT_ROLES", "worker").split(","))}
    master = env.get("RAFTCONNECT_SPARK_MASTER", "local[*]")

    def spark_factory():
        from .spark import get_spark_session

        return get_spark_session(master=master, app_name=f"raftconnect-{worker_id}")

    return Worker(worker_id=worker_id, client=client, member=member,
                  kafka_config=kafka_config_from_env(env),
                  data_dir=env.get("RAFTCONNECT_DATA_DIR", "var/default"), spark_factory=spark_factory,
                  heartbeat_interval=int(env.get("RAFTCONNECT_HEARTBEAT_INTERVAL_MS", "1000")) / 1000.0,
                  on_broken=restart_agent)


def restart_agent(error: str) -> None:
    """End this agent process so that its node starts a new one (``ConnectNode.start_agent``'s watchdog):
    SIGTERM to itself, Celery's warm shutdown (its tasks stop, it leaves the group). For a process whose own
    state fails every heartbeat (``Worker.on_broken``): seen once in CI, every request failing inside requests
    with a TypeError, the node's worker gone from the group until the agent was replaced."""
    log.error("restarting the agent: every heartbeat failed inside this process (%s)", error)
    os.kill(os.getpid(), signal.SIGTERM)


def kafka_config_from_env(env) -> dict[str, str]:
    """The tasks' librdkafka settings: ``bootstrap.servers`` plus the node's client settings.

    Client settings (security, SASL, TLS and ``producer.`` / ``consumer.`` / ``admin.``
    prefixed keys) come from a worker properties file through
    :data:`~webapp.kafka.client_config.KAFKA_CLIENT_CONFIG_ENV`; the prefixed ones are
    resolved per client type where clients are built (``webapp.kafka.spark_io``,
    ``webapp.kafka.topics``).
    """
    from webapp.kafka.client_config import client_config_from_env

    config = client_config_from_env(env)
    config["bootstrap.servers"] = env.get("RAFTCONNECT_BOOTSTRAP_SERVERS", "127.0.0.1:9092")
    return config


def current_worker() -> Worker:
    """The agent's Worker. Raises ``RuntimeError`` outside an agent process."""
    if _worker is None:
        raise RuntimeError("no worker agent runs in this process")
    return _worker


@signals.worker_ready.connect
def _start_worker(**_kwargs) -> None:
    global _worker
    if "RAFTCONNECT_NODE_ID" not in os.environ:
        return
    _worker = build_worker_from_env()
    _worker.start()
    log.warning("worker agent %s started", _worker.worker_id)


@signals.worker_shutting_down.connect
def _stop_worker(**_kwargs) -> None:
    if _worker is not None:
        _worker.shutdown()
