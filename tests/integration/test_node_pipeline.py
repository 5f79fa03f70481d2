"""A node as a real process with the embedded Kafka, Spark and the Celery agent.

Covers the main job on a slice of the real flights data: every row arrives with
its values, pause/resume stop and restart the flow, delete stops the tasks, a
restart keeps configs, target states and offsets, and a ``kill -9`` in the middle
of the pipeline loses nothing (duplicates bounded by the last uncommitted batch
of each task, and counted).
"""
from __future__ import annotations


import pyarrow.compute as pc
import pyarrow.csv as pacsv
import pyarrow.parquet as pq
import pytest

from tools.demo import SINK_CLASS, SOURCE_CLASS, flights_csv, read_csv_reference, verify_sink
from tools.launcher import NodeProcess, wait_for
from webapp.kafka.embedded import free_port
from tests.kafka_helpers import read_topic

pytestmark = pytest.mark.integration

BATCH = 4000


@pytest.fixture(scope="module")
def flights_slice(tmp_path_factory):
    """The first 60,000 flights with a unique ``row_id`` column, as CSV (NA kept)."""
    d = tmp_path_factory.mktemp("data")
    full = flights_csv(d)
    with open(full) as src:
        lines = [next(src) for _ in range(60_001)]
    out = d / "flights_slice.csv"
    with open(out, "w") as fh:
        fh.write("row_id," + lines[0])
        for i, line in enumerate(lines[1:]):
            fh.write(f"{i},{line}")
    return out


def start_node(tmp_path, kafka, name="n1", **kw) -> NodeProcess:
    node = NodeProcess(node_id=name, rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / name),
                       bootstrap_servers=kafka.bootstrap_servers, **kw)
    return node.start(timeout=90)


def source_cfg(path, topic, **extra):
    return {"connector.class": SOURCE_CLASS, "path": str(path), "format": "csv", "topic": topic, "tasks.max": "2",
            "batch.max.rows": str(BATCH), **extra}


def sink_cfg(path, topic, **extra):
    return {"connector.class": SINK_CLASS, "topics": topic, "path": str(path), "format": "parquet",
            "tasks.max": "2", "batch.max.rows": str(BATCH), **extra}


def no_failures(client, *names) -> None:
    """Fails at once (an AssertionError: ``wait_for`` stops polling) if any of the named connectors or
    their tasks FAILED, naming the traces."""
    for name in names:
        failures = client.failures(name)
        assert not failures, failures


def running(client, *names, tasks=2) -> bool:
    """All named connectors and their tasks RUNNING; fails at once if any FAILED."""
    no_failures(client, *names)
    return all(client.all_running(name, tasks) for name in names)


def committed(client, name) -> list:
    """The connector's committed offsets (``GET .../offsets``); fails at once if any of it FAILED."""
    no_failures(client, name)
    return client.offsets(name)["offsets"]


def wait_sink_total(client, name, total, timeout=240):
    def done():
        no_failures(client, name)
        return client.sink_offsets_total(name) >= total
    wait_for(done, timeout, interval=0.5, what=f"{name} to consume {total} records")


def assert_task_metrics(c, rows: int) -> None:
    """The leader's /metrics shows what the agent reported in heartbeats: records per task and the sinks' lag."""
    from prometheus_client.parser import text_string_to_metric_families

    def samples() -> dict[str, list]:
        text = c.session.get(c.url + "/metrics", timeout=10).text
        return {f.name: f.samples for f in text_string_to_metric_families(text)}

    def of(m, family, connector):
        return [s for s in m.get(family, []) if s.labels.get("connector") == connector]

    def reported() -> bool:
        m = samples()
        sink = of(m, "raftconnect_task_records", "sink")
        return (len(sink) == 2 and sum(s.value for s in sink) >= rows
                and sum(s.value for s in of(m, "raftconnect_task_records", "src")) >= rows
                and len(of(m, "raftconnect_task_lag_records", "sink")) == 2)
    wait_for(reported, 60, interval=1.0, what="per-task records and sink lag in /metrics")
    m = samples()
    assert all(s.value >= 0 for s in of(m, "raftconnect_task_lag_records", "sink"))
    assert not of(m, "raftconnect_task_lag_records", "src")  # lag is a sink figure


def process_tree_commands(node) -> list[str]:
    """Command names of the node's process and all its descendants (from /proc)."""
    import os

    children: dict[int, list[int]] = {}
    comm: dict[int, str] = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat = f.read()
        except OSError:
            continue
        name = stat[stat.index("(") + 1:stat.rindex(")")]
        ppid = int(stat[stat.rindex(")") + 2:].split()[1])
        comm[int(entry)] = name
        children.setdefault(ppid, []).append(int(entry))
    out, todo = [], [node.proc.pid]
    while todo:
        pid = todo.pop()
        out.append(comm.get(pid, "?"))
        todo.extend(children.get(pid, []))
    return out


def test_pipeline_values_pause_resume_delete(tmp_path, kafka, flights_slice):
    node = start_node(tmp_path, kafka)
    try:
        c = node.client()
        source = read_csv_reference(flights_slice)
        c.create_connector("src", source_cfg(flights_slice, "pipe", **{"value.converter.schemas.enable": "false"}))
        c.create_connector("sink", sink_cfg(tmp_path / "out", "pipe", **{"value.converter.schemas.enable": "false"}))
        wait_for(lambda: running(c, "src", "sink"), 120, what="connectors RUNNING")
        wait_sink_total(c, "sink", source.num_rows)
        report = verify_sink(source, tmp_path / "out")
        assert report.ok, report.problems
        assert_task_metrics(c, source.num_rows)
        # batches of 4,000 rows run in the agent (raftconnect.task.engine=auto): no JVM was started,
        # and the tasks report where their time went
        assert "java" not in process_tree_commands(node), process_tree_commands(node)
        phases = {t["connector"]: t["phases"] for t in c.request("GET", "/raftconnect/v1/task-metrics")["tasks"]}
        assert {"read", "encode", "produce"} <= set(phases["src"]), phases
        assert {"consume", "decode", "write", "commit"} <= set(phases["sink"]), phases

        # pause: the sink stops consuming while more records arrive; resume catches up
        c.pause("sink")
        wait_for(lambda: [t["state"] for t in c.status("sink")["tasks"]] == ["PAUSED", "PAUSED"]
                 and c.status("sink")["connector"]["state"] == "PAUSED", 30, what="sink PAUSED")
        before = c.sink_offsets_total("sink")
        c.create_connector("src2", source_cfg(flights_slice, "pipe", **{"value.converter.schemas.enable": "false"}))
        # while the second source produces every row again, the paused sink must not move
        wait_for(lambda: len(read_topic(kafka.bootstrap_servers, "pipe")) >= 2 * source.num_rows, 180,
                 interval=1.0, what="the second source to produce every row")
        assert c.sink_offsets_total("sink") == before
        c.resume("sink")
        wait_sink_total(c, "sink", 2 * source.num_rows)
        assert c.all_running("sink", 2)

        # delete: gone from the API and its tasks leave the worker
        c.delete("src")
        assert "src" not in c.connectors()
        wait_for(lambda: not any(t.startswith("src-") for t in c.request("GET", "/raftconnect/v1/cluster")["nodes"][0]["tasks"]),
                 30, what="deleted connector's tasks to be unassigned")
    finally:
        node.stop()


def test_restart_keeps_configs_target_states_and_offsets(tmp_path, kafka, flights_slice):
    node = start_node(tmp_path, kafka)
    c = node.client()
    c.create_connector("src", source_cfg(flights_slice, "restart"))
    wait_for(lambda: committed(c, "src"), 120, what="first committed offsets")
    c.pause("src")
    # tasks finish and commit their in-flight batch before they report PAUSED
    wait_for(lambda: _all_paused(c, "src"), 30, what="connector and tasks PAUSED")
    offsets, config = c.offsets("src"), c.request("GET", "/connectors/src/config")
    assert node.stop() == 0
    node = start_node(tmp_path, kafka, name="n1")
    try:
        c = node.client()
        assert c.connectors() == ["src"]
        assert c.request("GET", "/connectors/src/config") == config
        assert c.offsets("src") == offsets
        wait_for(lambda: _all_paused(c, "src"), 60, what="PAUSED after restart")
        assert c.offsets("src") == offsets  # paused tasks did not move
    finally:
        node.stop()


def _all_paused(c, name) -> bool:
    st = c.status(name)
    return st["connector"]["state"] == "PAUSED" and bool(st["tasks"]) and all(t["state"] == "PAUSED" for t in st["tasks"])


@pytest.mark.chaos  # make test's data-path kill is test_jdbc_pipeline's (filter and DLQ); this file case runs in make chaos
def test_kill_9_mid_pipeline_loses_nothing(tmp_path, kafka, flights_slice):
    node = start_node(tmp_path, kafka)
    c = node.client()
    total = pacsv.read_csv(flights_slice, convert_options=pacsv.ConvertOptions(include_columns=["row_id"])).num_rows
    c.create_connector("src", source_cfg(flights_slice, "crash", **{"batch.max.rows": "2000"}))
    c.create_connector("sink", sink_cfg(tmp_path / "out", "crash", **{"batch.max.rows": "2000"}))
    wait_for(lambda: 0 < c.sink_offsets_total("sink") < total // 2, 180, interval=0.1,
             what="the sink to be in the middle of the data")
    node.kill()
    node = start_node(tmp_path, kafka, name="n1")
    try:
        c = node.client()

        def sink_ids():
            return pq.read_table(tmp_path / "out", columns=["row_id"]).column("row_id")

        def complete():
            assert not c.failures("src") and not c.failures("sink")
            # every source row is in the sink, and the sink has consumed the whole topic
            return pc.count_distinct(sink_ids()).as_py() == total and \
                c.sink_offsets_total("sink") == len(read_topic(kafka.bootstrap_servers, "crash"))

        wait_for(complete, 300, interval=1.0, what="every row to reach the sink after the crash")
        ids = sink_ids()
        duplicates = len(ids) - total
        # each of 2 source and 2 sink tasks may replay at most its one uncommitted batch of 2000
        assert 0 <= duplicates <= 4 * 2000, duplicates
        print(f"kill -9 test: {total} rows, {duplicates} duplicates from replayed batches")
    finally:
        node.stop()


def test_failed_task_shows_its_trace_and_runs_again_after_a_restart(tmp_path, kafka):
    bad = tmp_path / "bad.csv"
    # a well-formed start (the schema is inferred from it), then a row with the wrong number of columns
    bad.write_text("a,b\n" + "".join(f"{i},x{i}\n" for i in range(2000)) + "1,2,3,4\n")
    node = start_node(tmp_path, kafka)
    try:
        c = node.client()
        c.create_connector("bad", source_cfg(bad, "bad", **{"tasks.max": "1", "batch.max.rows": "500"}))
        st = wait_for(lambda: next((t for t in c.status("bad")["tasks"] if t["state"] == "FAILED"), None), 120,
                      what="the task to fail")
        assert st["trace"] and "Traceback" in st["trace"], st
        assert st["worker_id"] == f"127.0.0.1:{node.rest_port}"
        # a failed task is not restarted silently
        assert c.status("bad")["tasks"][0]["state"] == "FAILED"

        # the operator fixes the row (same length: the task's byte range stays valid) and restarts failed tasks
        bad.write_text(bad.read_text().replace("1,2,3,4\n", "1,x2345\n"))
        info = c.request("POST", "/connectors/bad/restart", params={"includeTasks": "true", "onlyFailed": "true"})
        assert info["connector"]["state"] == "RUNNING" and info["tasks"][0]["state"] == "RESTARTING", info
        size = bad.stat().st_size

        left_failed = []

        def caught_up():
            task = c.status("bad")["tasks"][0]
            if task["state"] != "FAILED":
                left_failed.append(task["state"])  # the old FAILED stays until the worker reacts
            assert not (left_failed and task["state"] == "FAILED"), task  # failing again would be a bug
            positions = [o["offset"].get("position", 0) for o in c.offsets("bad")["offsets"]]
            return task["state"] == "RUNNING" and positions and max(positions) == size

        wait_for(caught_up, 120, what="the restarted task to read the rest of the file")
        assert len(set(read_topic(kafka.bootstrap_servers, "bad"))) == 2001
        assert c.request("GET", "/connectors/bad/topics") == {"bad": {"topics": ["bad"]}}  # recorded with commits
    finally:
        node.stop()
