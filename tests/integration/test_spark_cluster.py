"""A pipeline on a real Spark standalone cluster: master and worker from pyspark's own ``bin/spark-class``.

The worker runs with a clean environment (no ``PYTHONPATH``, no ``PYSPARK_*``):
its executors get the interpreter and the project only through the node's Spark
configuration (``webapp.runtime.spark.cluster_conf``). The connectors force the
Spark path (``raftconnect.task.engine=spark``); the node's application must show
on the master.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import urllib.request

import pyarrow.parquet as pq
import pytest

from tools.demo import SINK_CLASS, SOURCE_CLASS
from tools.launcher import NodeProcess, wait_for
from webapp.kafka.embedded import EmbeddedKafka, free_port

pytestmark = pytest.mark.integration


def _spark_home() -> str:
    import pyspark

    return os.path.dirname(pyspark.__file__)


def _clean_env() -> dict[str, str]:
    keep = ("PATH", "HOME", "JAVA_HOME", "LANG", "TMPDIR")
    env = {k: v for k, v in os.environ.items() if k in keep}
    env.update({"SPARK_HOME": _spark_home(), "SPARK_LOCAL_IP": "127.0.0.1", "SPARK_NO_DAEMONIZE": "1"})
    return env


def _json(url: str) -> dict:
    with urllib.request.urlopen(url, timeout=5) as r:
        return json.loads(r.read())


@pytest.fixture
def spark_cluster(tmp_path):
    """``(master URL, master web UI URL)`` of a standalone master with one 2-core worker."""
    port, ui, worker_ui = free_port(), free_port(), free_port()
    spark_class = os.path.join(_spark_home(), "bin", "spark-class")
    env = _clean_env()
    env["SPARK_WORKER_DIR"] = str(tmp_path / "work")
    logs = []
    procs = []
    try:
        for name, args in (("master", ["org.apache.spark.deploy.master.Master", "--host", "127.0.0.1",
                                       "--port", str(port), "--webui-port", str(ui)]),
                           ("worker", ["org.apache.spark.deploy.worker.Worker", "--host", "127.0.0.1",
                                       "--cores", "2", "--memory", "2g", "--webui-port", str(worker_ui),
                                       f"spark://127.0.0.1:{port}"])):
            log = open(tmp_path / f"{name}.log", "wb")
            logs.append(log)
            procs.append(subprocess.Popen(["bash", spark_class, *args], env=env, stdout=log,
                                          stderr=subprocess.STDOUT, start_new_session=True))

        def worker_alive() -> bool:
            try:
                return any(w.get("state") == "ALIVE" for w in _json(f"http://127.0.0.1:{ui}/json/").get("workers", []))
            except OSError:
                return False
        wait_for(worker_alive, 120, interval=0.5, what="the Spark worker to register ALIVE with the master")
        yield f"spark://127.0.0.1:{port}", f"http://127.0.0.1:{ui}"
    finally:
        for p in procs:
            if p.poll() is None:
                os.killpg(p.pid, 15)
        for p in procs:
            try:
                p.wait(30)
            except subprocess.TimeoutExpired:
                os.killpg(p.pid, 9)
        for log in logs:
            log.close()


def test_a_pipeline_runs_on_a_standalone_cluster(tmp_path, spark_cluster, flights_csv):
    master, ui = spark_cluster
    rows = 3000
    src = tmp_path / "in.csv"
    with open(flights_csv) as f, open(src, "w") as out:
        out.writelines(next(f) for _ in range(rows + 1))
    with EmbeddedKafka(log_dir=tmp_path / "kafka") as kafka:
        node = NodeProcess(node_id="sparky", rest_port=free_port(), raft_port=free_port(),
                           data_dir=str(tmp_path / "node"), bootstrap_servers=kafka.bootstrap_servers,
                           extra_args=["--spark-master", master],
                           env={"RAFTCONNECT_SPARK_DRIVER_HOST": "127.0.0.1"})
        node.start(timeout=120)
        try:
            c = node.client()
            spark = {"raftconnect.task.engine": "spark", "tasks.max": "1"}
            c.create_connector("cl-src", {"connector.class": SOURCE_CLASS, "path": str(src), "format": "csv",
                                          "topic": "cluster", **spark})
            c.create_connector("cl-sink", {"connector.class": SINK_CLASS, "topics": "cluster",
                                           "path": str(tmp_path / "out"), "format": "parquet", **spark})

            def moved() -> bool:
                failures = c.failures("cl-src") + c.failures("cl-sink")
                assert not failures, failures
                return c.sink_offsets_total("cl-sink") >= rows
            wait_for(moved, 300, interval=1.0, what="every row through the Spark cluster")
            assert pq.read_table(tmp_path / "out").num_rows == rows
            state = _json(ui + "/json/")
            apps = state.get("activeapps", []) + state.get("completedapps", [])
            assert any(a.get("name") == "raftconnect-sparky" for a in apps), apps
        finally:
            node.stop()
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
