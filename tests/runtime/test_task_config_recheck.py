"""A connector whose work can change while it runs (the JDBC source's tables) has its task configs rechecked.

The worker's reconcile loop with a recording control-plane client and an in-process plugin: no Spark, no
Kafka, no leader.
"""
from __future__ import annotations

import threading

import pytest

from tools.launcher import wait_for
from webapp.connectors.jdbc.connectors import JdbcSourceConnector
from webapp.plugin import SourceConnector, Task
from webapp.runtime import worker as worker_mod
from webapp.runtime.worker import Worker

TABLES: list[str] = []  # what the simulated source holds now
FAIL = threading.Event()  # set: listing the tables fails


class TablesTask(Task):
    def run_batch(self):
        return None


class TablesConnector(SourceConnector):
    """One task per table; rechecked every ``recheck`` seconds when that key is set."""

    task_class = TablesTask
    version = "test"

    def task_configs(self, max_tasks):
        if FAIL.is_set():
            raise ConnectionError("the database is unreachable")
        return [dict(self.config, table=t) for t in sorted(TABLES)[:max_tasks]]

    def task_configs_recheck_s(self):
        return float(self.config["recheck"]) if "recheck" in self.config else None


class Client:
    def __init__(self):
        self.lock = threading.Lock()
        self.puts: list[tuple[str, int, list[str]]] = []

    def report_status(self, connector, task, generation, state, trace=None):
        pass

    def put_task_configs(self, name, generation, configs):
        with self.lock:
            self.puts.append((name, generation, [c["table"] for c in configs]))


@pytest.fixture
def worker(tmp_path, monkeypatch):
    from webapp.runtime import registry

    desc = registry.PluginDesc("TablesConnector", "source", "test", TablesConnector)
    monkeypatch.setattr(worker_mod.registry, "resolve", lambda name: desc)
    TABLES.clear()
    FAIL.clear()
    client = Client()
    w = Worker(worker_id="w1", client=client, member={}, kafka_config={"bootstrap.servers": "127.0.0.1:1"},
               data_dir=str(tmp_path), spark_factory=lambda: pytest.fail("no batch here needs Spark"))
    loop = threading.Thread(target=w._reconcile_loop, daemon=True)  # the agent's reconcile thread alone
    loop.start()
    yield w, client
    w._stop.set()
    with w._pending_cv:
        w._pending_cv.notify_all()
    loop.join(10)
    w.executor.shutdown()


def view(tasks, **config):
    cfg = {"connector.class": "TablesConnector", "tasks.max": "8", **config}
    return {"generation": 1, "tasks": {},
            "connectors": {"src": {"config": cfg, "generation": 3, "target_state": "STARTED",
                                   "tasks": [dict(cfg, table=t) for t in tasks], "restart": 0}}}


def test_a_table_created_later_reaches_the_task_configs(worker):
    w, client = worker
    w.reconcile(view([], recheck="0.05"))
    assert client.puts == [] and "src" in w._rechecks  # no tables yet: no tasks, nothing to store
    TABLES.append("orders")
    wait_for(lambda: client.puts, 10, interval=0.02, what="the recheck to store the new task configs")
    assert client.puts[0] == ("src", 3, ["orders"])  # with the connector's generation (fenced)
    # the leader's next view holds them: nothing more is stored while nothing changes
    w.reconcile(view(["orders"], recheck="0.05"))
    TABLES.append("customers")
    wait_for(lambda: client.puts[-1][2] == ["customers", "orders"], 10, interval=0.02,
             what="the second table")


def test_a_failed_recheck_is_tried_again(worker):
    w, client = worker
    w.reconcile(view([], recheck="0.05"))
    FAIL.set()
    TABLES.append("orders")
    start = w._rechecks["src"][0]
    wait_for(lambda: w._rechecks["src"][0] > start + 0.1, 10, interval=0.02, what="failed rechecks")
    assert client.puts == [] and "src" in w._rechecks  # the connector keeps its tasks and its recheck
    FAIL.clear()
    wait_for(lambda: client.puts, 10, interval=0.02, what="the recheck after the database came back")
    assert client.puts[0][2] == ["orders"]


def test_no_recheck_unless_the_plugin_asks_and_none_after_the_connector_left(worker):
    w, _ = worker
    w.reconcile(view([]))
    assert w._rechecks == {}
    w.reconcile(view([], recheck="0.05"))  # a config change starts the connector anew
    assert "src" in w._rechecks
    w.reconcile({"generation": 2, "tasks": {}, "connectors": {}})
    assert w._rechecks == {}


def test_jdbc_source_rechecks_its_tables_only_when_it_lists_them():
    base = {"connector.class": "JdbcSourceConnector", "connection.url": "jdbc:postgresql://127.0.0.1:5432/test",
            "mode": "bulk", "topic.prefix": "t-"}

    def recheck(**extra):
        c = JdbcSourceConnector()
        c.start({**base, **extra})
        return c.task_configs_recheck_s()

    assert recheck() == 60.0  # Confluent's default table.poll.interval.ms
    assert recheck(**{"table.poll.interval.ms": "5000"}) == 5.0
    assert recheck(**{"table.poll.interval.ms": "0"}) is None
    assert recheck(**{"table.whitelist": "a,b"}) is None  # the tables are named: nothing to find
    assert recheck(query="SELECT 1 AS id") is None
    errors = JdbcSourceConnector().validate({**base, "table.poll.interval.ms": "-1"})
    assert any("at least 0" in e for e in errors["table.poll.interval.ms"])
