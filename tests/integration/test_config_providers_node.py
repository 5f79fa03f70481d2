"""Config providers on a real node: the worker resolves ${env:...} that only its process can see; REST never does."""
from __future__ import annotations

import pytest

from tools.demo import SOURCE_CLASS
from tools.launcher import NodeProcess, wait_for
from webapp.kafka.embedded import free_port

pytestmark = pytest.mark.integration


def test_the_worker_resolves_references_that_rest_only_stores(tmp_path, kafka_broker):
    data = tmp_path / "in.csv"
    data.write_text("a,b\n1,x\n2,y\n")
    # the variable exists only in the node's environment, not in this test process
    node = NodeProcess(node_id="cp", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "cp"),
                       bootstrap_servers=kafka_broker.bootstrap_servers, env={"RC_TEST_IN_FILE": str(data)})
    node.start(timeout=120)
    try:
        c = node.client()
        base = {"connector.class": SOURCE_CLASS, "format": "csv", "topic": "cp-topic", "tasks.max": "1"}
        c.create_connector("missing", {**base, "path": "${env:RC_TEST_NOT_SET}"})
        failed = wait_for(lambda: (s := c.status("missing"))["connector"]["state"] == "FAILED" and s, 60,
                          what="the connector with an unresolvable reference to fail")
        assert "config path: cannot resolve ${env:RC_TEST_NOT_SET}" in failed["connector"]["trace"]

        c.create_connector("resolved", {**base, "path": "${env:RC_TEST_IN_FILE}"})
        tasks = wait_for(lambda: c.request("GET", "/connectors/resolved/tasks") or None, 60,
                         what="the worker to derive task configs from the resolved path")
        assert tasks[0]["config"]["path"] == "${env:RC_TEST_IN_FILE}"  # stored as the reference
        assert str(data) in tasks[0]["config"]["task.splits"]  # derived from the resolved value
        assert c.request("GET", "/connectors/resolved/config")["path"] == "${env:RC_TEST_IN_FILE}"
        c.delete("resolved")
    finally:
        node.stop()
