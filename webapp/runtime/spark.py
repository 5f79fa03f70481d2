"""The process-wide SparkSession used by the agent's tasks.

One SparkSession per process (a JVM gateway does not survive a fork, and Spark
allows one active SparkContext per JVM). :func:`get_spark_session` creates it on
first use and returns the same object afterwards; :func:`stop_spark_session`
stops it so a later call creates a fresh one.

Spark's Python workers run this interpreter and import this project: for
``local[*]`` through the driver's environment (``PYSPARK_PYTHON``,
``PYTHONPATH``), for a cluster through Spark's configuration
(:func:`cluster_conf`: ``spark.pyspark.python`` and the project shipped with
``spark.submit.pyFiles``), so executors need no environment of ours.
"""
from __future__ import annotations

import os
import sys
import threading
from typing import Any, Mapping

__all__ = ["get_spark_session", "stop_spark_session", "is_running", "DEFAULT_SPARK_CONF", "cluster_conf", "project_zip"]

_PROJECT_ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

#: Settings applied unless the caller's ``conf`` overrides them.
DEFAULT_SPARK_CONF: dict[str, str] = {
    "spark.ui.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.execution.arrow.pyspark.enabled": "true",
    "spark.sql.execution.arrow.pyspark.fallback.enabled": "false",
    "spark.sql.execution.arrow.maxRecordsPerBatch": "20000",
    "spark.sql.shuffle.partitions": "4",
    "spark.default.parallelism": "4",
    "spark.sql.session.timeZone": "UTC",
    "spark.driver.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.executor.extraJavaOptions": "-Duser.timezone=UTC",
    "spark.hadoop.mapreduce.fileoutputcommitter.marksuccessfuljobs": "false",
    "spark.python.worker.reuse": "true",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.adaptive.enabled": "true",
}

_lock = threading.Lock()
_session: Any = None


def _prepare_environment() -> None:
    os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
    # Python workers must run this interpreter and import this project.
    os.environ["PYSPARK_PYTHON"] = sys.executable
    os.environ["PYSPARK_DRIVER_PYTHON"] = sys.executable
    paths = [p for p in os.environ.get("PYTHONPATH", "").split(os.pathsep) if p]
    if _PROJECT_ROOT not in paths:
        os.environ["PYTHONPATH"] = os.pathsep.join([_PROJECT_ROOT, *paths])


_code_zip: str | None = None


def project_zip() -> str:
    """A zip of this project's packages (``webapp``, ``raftnode``), built once per process.

    Shipped to a Spark cluster's executors with ``spark.submit.pyFiles``: the
    pieces' functions are pickled by reference and import ``webapp`` there.
    """
    global _code_zip
    if _code_zip is None or not os.path.exists(_code_zip):
        import tempfile
        import zipfile

        path = os.path.join(tempfile.mkdtemp(prefix="raftconnect-code-"), "raftconnect-code.zip")
        with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
            for package in ("webapp", "raftnode"):
                base = os.path.join(_PROJECT_ROOT, package)
                for folder, dirs, files in os.walk(base):
                    dirs[:] = [d for d in dirs if d != "__pycache__"]
                    for name in files:
                        if name.endswith((".py", ".json", ".html", ".txt")):
                            full = os.path.join(folder, name)
                            z.write(full, os.path.relpath(full, _PROJECT_ROOT))
        _code_zip = path
    return _code_zip


def cluster_conf(master: str, environ: Mapping[str, str] | None = None) -> dict[str, str]:
    """Settings that give a Spark cluster's executors what the driver's environment gives a local one.

    For a non-``local`` master: the Python interpreter (``spark.pyspark.python``,
    ``spark.executorEnv.PYSPARK_PYTHON``: the same path must exist on every
    executor host), this project as shipped code (``spark.submit.pyFiles``, see
    :func:`project_zip`), and where executors reach the driver:
    ``RAFTCONNECT_SPARK_DRIVER_HOST`` → ``spark.driver.host`` (the address other
    hosts can reach this node at) and ``RAFTCONNECT_SPARK_DRIVER_BIND_ADDRESS`` →
    ``spark.driver.bindAddress`` (the local interface, e.g. ``0.0.0.0`` in a
    container). Empty for ``local[...]`` masters, which need none of it.
    """
    env = os.environ if environ is None else environ
    out: dict[str, str] = {}
    host = env.get("RAFTCONNECT_SPARK_DRIVER_HOST")
    bind = env.get("RAFTCONNECT_SPARK_DRIVER_BIND_ADDRESS")
    if host:
        out["spark.driver.host"] = host
    if bind:
        out["spark.driver.bindAddress"] = bind
    if master.startswith("local"):
        return out
    python = env.get("RAFTCONNECT_SPARK_EXECUTOR_PYTHON") or sys.executable
    out.update({"spark.pyspark.python": python, "spark.executorEnv.PYSPARK_PYTHON": python,
                "spark.submit.pyFiles": project_zip()})
    return out


def get_spark_session(
    master: str = "local[*]",
    app_name: str = "raftconnect",
    conf: Mapping[str, Any] | None = None,
):
    """The process's SparkSession, created on first call.

    Args:
        master: ``spark.master`` (``local[*]`` by default; a cluster URL in deployments).
        app_name: Spark application name.
        conf: extra Spark settings (string values), applied over
            :data:`DEFAULT_SPARK_CONF`. Only honoured when the session is created;
            a later call with different arguments returns the existing session.

    Returns:
        ``pyspark.sql.SparkSession`` with log level WARN.

    Raises:
        Whatever pyspark raises if the JVM cannot start (e.g. no Java).
    """
    global _session
    with _lock:
        if _session is not None and not _is_stopped(_session):
            return _session
        _prepare_environment()
        from pyspark.sql import SparkSession

        builder = SparkSession.builder.master(master).appName(app_name)
        settings = dict(DEFAULT_SPARK_CONF)
        settings.update(cluster_conf(master))
        settings.update({k: str(v) for k, v in (conf or {}).items()})
        for key, value in settings.items():
            builder = builder.config(key, value)
        session = builder.getOrCreate()
        session.sparkContext.setLogLevel("WARN")
        _session = session
        return session


def is_running(session: Any) -> bool:
    """Whether ``session``'s SparkContext is still up, judged without calling into the JVM.

    ``False`` once the context was stopped or the local JVM process exited.
    Pure Python (no py4j round trip), so a busy or hung JVM cannot block the
    caller: safe from a heartbeat thread.
    """
    try:
        sc = session.sparkContext
        if sc is None or sc._jsc is None:
            return False
        proc = getattr(getattr(sc, "_gateway", None), "proc", None)  # the JVM pyspark launched, if local
        return proc is None or proc.poll() is None
    except Exception:  # noqa: BLE001 - any doubt about a session means it does not run
        return False


def _is_stopped(session: Any) -> bool:
    try:
        sc = session.sparkContext
        return sc._jsc is None or sc._jsc.sc().isStopped()
    except Exception:
        return True


def stop_spark_session() -> None:
    """Stop the process's SparkSession if any (idempotent; never raises)."""
    global _session
    with _lock:
        session, _session = _session, None
        if session is not None:
            try:
                session.stop()
            except Exception:
                pass
