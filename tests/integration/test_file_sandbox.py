"""File connectors confined to raftconnect.file.allowed.paths on a real node, driven as an operator over REST.

One ``manage.py runnode`` process (raft,worker, its agent, the embedded Kafka)
with the setting unset, as a fresh node: only ``<data dir>/files`` is allowed.
Each way out is tried the way a user with the operator role would: ``POST
/connectors``, ``PUT /connectors/{name}/config`` and ``PUT
/connector-plugins/{plugin}/config/validate``; then the happy path, a config
provider reference to ``cluster.secret``, and a symbolic link swapped in under
a running task.
"""
from __future__ import annotations

import os
from pathlib import Path

import pyarrow.parquet as pq
import pytest

from tools.demo import SINK_CLASS, SOURCE_CLASS
from tools.launcher import ConnectClient, ConnectHTTPError, NodeProcess, wait_for
from webapp.kafka.embedded import free_port
from tests.kafka_helpers import read_topic

pytestmark = pytest.mark.integration

SETTING = "raftconnect.file.allowed.paths"


@pytest.fixture(scope="module")
def sandbox(tmp_path_factory, kafka_broker):
    """``(node, operator client, files root, outside dir)``; the outside dir holds ``secret.csv``."""
    base = tmp_path_factory.mktemp("sandbox")
    outside = base / "elsewhere"
    outside.mkdir()
    (outside / "secret.csv").write_text("id,note\n" + "".join(f"{i},TOP-SECRET-{i}\n" for i in range(200)))
    # "" = the setting unset (the session's test-wide value is not inherited): the default root only
    node = NodeProcess(node_id="sandbox", rest_port=free_port(), raft_port=free_port(), data_dir=str(base / "node"),
                       bootstrap_servers=kafka_broker.bootstrap_servers, env={"RAFTCONNECT_FILE_ALLOWED_PATHS": ""})
    node.start(timeout=120)
    try:
        node.create_user("otto", "operator")
        files = Path(node.data_dir) / "files"
        assert files.is_dir()  # created by the node at start
        yield node, ConnectClient(node.url, ("otto", "pw")), files, outside
    finally:
        node.stop()


def source(path, topic="sandbox", **extra) -> dict[str, str]:
    return {"connector.class": SOURCE_CLASS, "path": str(path), "format": "csv", "topic": topic, "tasks.max": "1",
            **extra}


def sink(path, topic="sandbox") -> dict[str, str]:
    return {"connector.class": SINK_CLASS, "topics": topic, "path": str(path), "format": "parquet", "tasks.max": "1"}


def refused(c: ConnectClient, name: str, config: dict[str, str]) -> str:
    """The 400 message of both POST /connectors and PUT /connectors/{name}/config, and the path field error of
    the validate endpoint; all three must name the setting. Nothing is created."""
    with pytest.raises(ConnectHTTPError) as post:
        c.create_connector(name, config)
    with pytest.raises(ConnectHTTPError) as put:
        c.request("PUT", f"/connectors/{name}/config", json=config)
    for err in (post.value, put.value):
        assert err.status == 400 and err.body["error_code"] == 400, err
        assert SETTING in err.body["message"], err.body
    plugin = config["connector.class"].rsplit(".", 1)[-1]
    infos = c.request("PUT", f"/connector-plugins/{plugin}/config/validate", json=config)
    path_errors = next(x["value"]["errors"] for x in infos["configs"] if x["value"]["name"] == "path")
    assert path_errors and SETTING in path_errors[0], path_errors
    assert name not in c.connectors()
    return post.value.body["message"]


def test_an_absolute_path_outside_the_allowed_roots_is_a_400(sandbox):
    _, c, files, outside = sandbox
    message = refused(c, "abs-src", source(outside / "secret.csv"))
    assert "not under" in message and str(files) in message  # says what is allowed
    refused(c, "shadow-src", source("/etc/shadow"))
    refused(c, "abs-sink", sink(outside / "out"))


def test_dot_dot_traversal_is_a_400(sandbox):
    node, c, files, _ = sandbox
    refused(c, "dots-src", source(f"{files}/../../elsewhere/secret.csv"))
    assert "data directory" in refused(c, "dots-secret", source(f"{files}/../cluster.secret"))
    refused(c, "dots-sink", sink(f"{files}/../raft"))


def test_a_symlink_inside_the_root_pointing_outside_is_a_400(sandbox):
    _, c, files, outside = sandbox
    (files / "looks-local.csv").symlink_to(outside / "secret.csv")
    message = refused(c, "link-src", source(files / "looks-local.csv"))
    assert "symbolic link" in message and str(outside) not in message
    (files / "out-link").symlink_to(outside, target_is_directory=True)
    refused(c, "link-sink", sink(files / "out-link"))


def test_the_data_dir_and_cluster_secret_are_a_400(sandbox):
    node, c, _, _ = sandbox
    data = Path(node.data_dir)
    assert (data / "cluster.secret").exists()
    assert "data directory" in refused(c, "secret-src", source(data / "cluster.secret"))
    refused(c, "datadir-src", source(data))
    refused(c, "datadir-sink", sink(data))


def test_a_provider_reference_to_cluster_secret_fails_the_connector_on_the_worker(sandbox):
    node, c, _, _ = sandbox
    ref = f"${{file:{Path(node.data_dir) / 'cluster.secret'}:x}}"
    c.create_connector("provider-secret", source(ref))  # references are resolved (and checked) by the worker only
    status = wait_for(lambda: (s := c.status("provider-secret"))["connector"]["state"] == "FAILED" and s, 60,
                      what="the connector referencing cluster.secret to fail")
    trace = status["connector"]["trace"]
    assert SETTING in trace and "data directory" in trace
    assert (Path(node.data_dir) / "cluster.secret").read_text().strip() not in trace
    c.delete("provider-secret")


def test_files_under_the_default_root_flow_end_to_end(sandbox, kafka_broker):
    _, c, files, _ = sandbox
    (files / "in.csv").write_text("id,name\n" + "".join(f"{i},row-{i}\n" for i in range(500)))
    c.create_connector("happy-src", source(files / "in.csv", topic="sandbox-happy"))
    c.create_connector("happy-sink", sink(files / "out", topic="sandbox-happy"))
    def landed():
        failures = c.failures("happy-src") + c.failures("happy-sink")
        assert not failures, failures
        return c.sink_offsets_total("happy-sink") >= 500
    wait_for(landed, 180, what="500 rows through Kafka into files/out")
    assert pq.read_table(str(files / "out")).num_rows == 500
    for name in ("happy-src", "happy-sink"):
        c.delete(name)


def test_a_symlink_swapped_in_under_a_running_task_fails_it_and_reads_nothing(sandbox, kafka_broker):
    _, c, files, outside = sandbox
    feed = files / "feed.csv"
    feed.write_text("id,note\n" + "".join(f"{i},public-{i}\n" for i in range(20)))
    size = feed.stat().st_size
    c.create_connector("swap-src", source(feed, topic="sandbox-swap"))

    def read_all():
        assert not c.failures("swap-src"), c.failures("swap-src")
        return any(o["offset"].get("position") == size for o in c.offsets("swap-src")["offsets"])
    wait_for(read_all, 120, what="the source to commit the whole legitimate file")
    link = files / ".feed.swap"
    link.symlink_to(outside / "secret.csv")  # bigger: a task that followed it would read past `size`
    os.replace(link, feed)
    status = wait_for(lambda: (s := c.status("swap-src"))["tasks"] and s["tasks"][0]["state"] == "FAILED" and s,
                      90, what="the task to fail when its file became a link out of the root")
    trace = status["tasks"][0]["trace"]
    assert "PathNotAllowed" in trace and SETTING in trace
    values = read_topic(kafka_broker.bootstrap_servers, "sandbox-swap")
    assert len(values) == 20 and not any(b"TOP-SECRET" in v for v in values)
    assert [o["offset"]["position"] for o in c.offsets("swap-src")["offsets"]] == [size]
    c.delete("swap-src")
