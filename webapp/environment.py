"""The node's and the agent's ``RAFTCONNECT_*`` settings from the environment: each variable parsed in one place.

Owns the name, default, unit and parsing of every operator variable read outside Django's settings
(``webapp/settings.py``, which reads the Django-only ones and takes the shared ones from here). Each
accessor reads the environment when called, not at import: ``runnode`` and ``prepare_runnode`` set
variables after the first imports, and tests change them per test. Imports nothing from Django or the
rest of ``webapp``, so the agent, Spark's Python workers and the command line can use it.

=============================================  ==============  ==========================================
variable                                        default         accessor
=============================================  ==============  ==========================================
``RAFTCONNECT_DATA_DIR``                        ``var/default``  :func:`data_dir`
``RAFTCONNECT_CLUSTER_SECRET``                  none            :func:`cluster_secret`
``RAFTCONNECT_CELERY_BROKER``                   embedded        :func:`celery_broker`
``RAFTCONNECT_ADMIN_USER`` / ``_PASSWORD``      none            :func:`admin_credentials`
``RAFTCONNECT_FORWARD_WAIT_S``                  10 s            :func:`forward_wait_s`
``RAFTCONNECT_REST_FAST_PATH``                  on (``1``)      :func:`rest_fast_path`
``RAFTCONNECT_AGENT_RESTART_BACKOFF_MS``        1000 ms         :func:`agent_restart_backoff_s`
``RAFTCONNECT_AGENT_LOG_LEVEL``                 ``WARNING``     :func:`agent_log_level`
``RAFTCONNECT_TASK_THREADS``                    0 (automatic)   :func:`task_threads`
``RAFTCONNECT_TASK_IDLE_MAX_MS``                1000 ms         :func:`task_idle_max_s`
``RAFTCONNECT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS`` 5000 ms        :func:`task_shutdown_graceful_timeout_s`
``RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS``        0 (each batch)  :func:`offset_flush_interval_s`
``RAFTCONNECT_OFFSET_FLUSH_TIMEOUT_MS``         5000 ms         :func:`offset_flush_timeout_s`
``..._SCHEDULED_REBALANCE_MAX_DELAY_MS``        0 (at once)     :func:`scheduled_rebalance_max_delay_ms`
``RAFTCONNECT_TASK_ENGINE``                     ``auto``        :func:`task_engine`
``RAFTCONNECT_SPARK_MIN_BATCH_ROWS``            the engine's    :func:`spark_min_batch_rows`
``RAFTCONNECT_ENGINE_PROCESSES``                CPU cores       :func:`engine_processes`
``RAFTCONNECT_FILE_WATCH_INTERVAL_MS``          1000 ms         :func:`file_watch_interval_s`
``RAFTCONNECT_SINK_WAKE_INTERVAL_MS``           100 ms          :func:`sink_wake_interval_s`
``RAFTCONNECT_CONFIG_PROVIDERS``                env,file,dir.   :func:`config_providers`
``..._CONFIG_PROVIDERS_ALLOWED_PATHS``          the file roots  :func:`config_provider_allowed_paths`
``..._CONFIG_PROVIDERS_ENV_ALLOWLIST_PATTERN``  ``.*``          :func:`config_provider_env_pattern`
=============================================  ==============  ==========================================

Variables owned by another module stay there with their parsing: the file connectors' allowed paths
(``webapp.runtime.file_access``), metadata store URLs (``webapp.storage.registry``), the tasks'
Kafka client settings (``webapp.kafka.client_config``), the log format and level (``webapp.logconfig``),
the CLI's connection (``webapp.cli.contexts``), the connector client override policy
(``webapp.kafka.client_overrides``). A malformed number raises ``ValueError`` naming nothing
more than Python's ``int()``/``float()`` do, as before.
"""
from __future__ import annotations

import os

__all__ = [
    "DATA_DIR_ENV", "CONFIG_PROVIDER_PATHS_ENV",
    "REST_FAST_PATH_ENV", "OFFSET_FLUSH_TIMEOUT_MS_DEFAULT",
    "data_dir", "cluster_secret", "celery_broker", "admin_credentials", "forward_wait_s", "rest_fast_path",
    "agent_restart_backoff_s", "agent_log_level", "task_threads", "task_idle_max_s",
    "task_shutdown_graceful_timeout_s", "whole_ms", "offset_flush_interval_s", "offset_flush_timeout_s",
    "scheduled_rebalance_max_delay_ms", "task_engine", "spark_min_batch_rows", "engine_processes",
    "file_watch_interval_s", "sink_wake_interval_s", "config_providers", "config_provider_allowed_paths",
    "config_provider_env_pattern",
]

#: The node's data directory (``runnode --data-dir`` puts its absolute path here before settings load).
DATA_DIR_ENV = "RAFTCONNECT_DATA_DIR"
#: Roots the ``file``/``directory`` config providers may read (comma-separated; else the file connectors').
CONFIG_PROVIDER_PATHS_ENV = "RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS"
#: ``0`` sends every REST request through Django's full path (``webapp.connect.api.fastpath``)
REST_FAST_PATH_ENV = "RAFTCONNECT_REST_FAST_PATH"
#: Connect's default ``offset.flush.timeout.ms`` (:func:`offset_flush_timeout_s`; the agent client's default too)
OFFSET_FLUSH_TIMEOUT_MS_DEFAULT = 5000


def _get(name: str, default: str) -> str:
    return os.environ.get(name, default)


def _ms_as_s(name: str, default_ms: int) -> float:
    return int(_get(name, str(default_ms))) / 1000.0


def whole_ms(name: str, raw: str) -> int:
    """``raw``, the value of setting ``name``, as a whole number of milliseconds >= 0; ``ValueError`` naming
    ``name`` otherwise. Shared by the variables below and the worker properties that set them."""
    if not raw.strip().isdigit():
        raise ValueError(f"{name} must be a whole number of milliseconds >= 0, got {raw!r}")
    return int(raw)


def _whole_ms(name: str, default: str = "0") -> int:
    """Variable ``name`` as :func:`whole_ms` (``default`` when unset)."""
    return whole_ms(name, _get(name, default))


def data_dir(default: str = "var/default") -> str:
    """``RAFTCONNECT_DATA_DIR`` as given (relative paths are relative to the working directory)."""
    return _get(DATA_DIR_ENV, default)


def cluster_secret() -> str | None:
    """``RAFTCONNECT_CLUSTER_SECRET``, or None when unset or empty."""
    return os.environ.get("RAFTCONNECT_CLUSTER_SECRET") or None


def celery_broker() -> str | None:
    """``RAFTCONNECT_CELERY_BROKER`` (a broker URL), or None for the embedded filesystem broker."""
    return os.environ.get("RAFTCONNECT_CELERY_BROKER")


def admin_credentials() -> tuple[str | None, str | None]:
    """``(RAFTCONNECT_ADMIN_USER, RAFTCONNECT_ADMIN_PASSWORD)``, each None when unset."""
    return os.environ.get("RAFTCONNECT_ADMIN_USER"), os.environ.get("RAFTCONNECT_ADMIN_PASSWORD")


def forward_wait_s() -> float:
    """Seconds a write forwarded to a leader that died waits for the next one (default 10)."""
    return float(_get("RAFTCONNECT_FORWARD_WAIT_S", "10"))


def rest_fast_path() -> bool:
    """Whether the leader's REST fast path may answer connector creates and config writes
    (``webapp.connect.api.fastpath``): any value but ``0`` (default on). ``0`` is for an A/B measurement
    or a suspected fault; answers are the same either way."""
    return _get(REST_FAST_PATH_ENV, "1") != "0"


def agent_restart_backoff_s() -> float:
    """First delay, in seconds, before the node starts its exited agent again (doubling; default 1)."""
    return _ms_as_s("RAFTCONNECT_AGENT_RESTART_BACKOFF_MS", 1000)


def agent_log_level() -> str:
    """The agent's Celery log level (default ``WARNING``)."""
    return _get("RAFTCONNECT_AGENT_LOG_LEVEL", "WARNING")


def task_threads() -> int:
    """Threads of a worker's task pool; 0 (the default) lets the ``Worker`` choose from the CPU count."""
    return int(_get("RAFTCONNECT_TASK_THREADS", "0"))


def task_idle_max_s() -> float:
    """Longest pause, in seconds, of an idle task between polls (default 1)."""
    return _ms_as_s("RAFTCONNECT_TASK_IDLE_MAX_MS", 1000)


def task_shutdown_graceful_timeout_s() -> float:
    """Connect's ``task.shutdown.graceful.timeout.ms`` in seconds (default 5)."""
    return float(_get("RAFTCONNECT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS", "5000")) / 1000


def offset_flush_interval_s() -> float:
    """Connect's ``offset.flush.interval.ms`` in seconds (default 0: a task commits after every batch).

    Above 0, a task commits its offsets at most this often, and when it pauses or stops; a crash then
    replays up to this long of its work instead of one batch. Errors: ``ValueError`` when not an
    integer or negative.
    """
    return _whole_ms("RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS") / 1000.0


def offset_flush_timeout_s() -> float:
    """Connect's ``offset.flush.timeout.ms`` in seconds (default 5, Connect's default).

    How long one offset commit keeps trying to reach the control plane (its requests retried with
    backoff) before the task gives that attempt up. The task then keeps its offsets, runs no new batch
    and tries again a second later, until a commit succeeds, the task is fenced or it stops
    (:class:`~webapp.runtime.worker_task.WorkerTask`): as in Connect, an unavailable offset store does
    not fail the task. 0: one request per attempt. Errors: ``ValueError`` when not an integer or negative.
    """
    return _whole_ms("RAFTCONNECT_OFFSET_FLUSH_TIMEOUT_MS", str(OFFSET_FLUSH_TIMEOUT_MS_DEFAULT)) / 1000.0


def scheduled_rebalance_max_delay_ms() -> int:
    """Connect's ``scheduled.rebalance.max.delay.ms`` (default 0: a departed worker's work moves at once).

    How long the coordinator keeps a departed worker's connectors and tasks for it before reassigning
    them (``GroupCoordinator``). Errors: ``ValueError`` when not an integer or negative.
    """
    return _whole_ms("RAFTCONNECT_SCHEDULED_REBALANCE_MAX_DELAY_MS")


def task_engine() -> str:
    """The worker's default task engine mode, lower-cased and stripped (default ``auto``; not checked here)."""
    return _get("RAFTCONNECT_TASK_ENGINE", "auto").strip().lower() or "auto"


def spark_min_batch_rows(default: int) -> int:
    """Rows from which a batch runs on Spark in ``auto`` mode (``default``: the engine's)."""
    return int(_get("RAFTCONNECT_SPARK_MIN_BATCH_ROWS", str(default)))


def engine_processes() -> int:
    """Worker processes of the in-process engine (default: the CPU cores; 0: threads only)."""
    return int(_get("RAFTCONNECT_ENGINE_PROCESSES", str(os.cpu_count() or 2)))


def file_watch_interval_s() -> float:
    """Seconds between scans of a watched source directory (default 1)."""
    return _ms_as_s("RAFTCONNECT_FILE_WATCH_INTERVAL_MS", 1000)


def sink_wake_interval_s() -> float:
    """Seconds between a sink's end-offset checks that wake idle sink tasks (default 0.1)."""
    return _ms_as_s("RAFTCONNECT_SINK_WAKE_INTERVAL_MS", 100)


def config_providers() -> list[str]:
    """Names of the enabled config providers (default ``env``, ``file``, ``directory``), stripped."""
    return [n.strip() for n in _get("RAFTCONNECT_CONFIG_PROVIDERS", "env,file,directory").split(",")]


def config_provider_allowed_paths() -> list[str]:
    """Roots the ``file``/``directory`` providers may read; empty: the file connectors' roots."""
    return [r.strip() for r in _get(CONFIG_PROVIDER_PATHS_ENV, "").split(",") if r.strip()]


def config_provider_env_pattern() -> str:
    """Regular expression a variable's name must match for the ``env`` provider (default ``.*``)."""
    return _get("RAFTCONNECT_CONFIG_PROVIDERS_ENV_ALLOWLIST_PATTERN", ".*")
