"""The ``runnode`` command line: one definition shared by the command and ``manage.py``.

``manage.py`` and ``raftconnect node`` must know a node's data directory
before Django reads its settings (the node's own database lives there), so they
call :func:`prepare_runnode` first, which also expands a worker properties file
(``--config``) into flags.
"""
from __future__ import annotations

import argparse
import os

from webapp.connect.restserver import SERVERS

__all__ = ["add_node_arguments", "data_dir_from_argv", "prepare_runnode", "with_default_port"]

ROLES = ("raft", "worker")


def with_default_port(address: str, port: int) -> str:
    """``host`` → ``host:port``; ``host:p`` unchanged."""
    return address if ":" in address else f"{address}:{port}"


def _roles(value: str) -> tuple[str, ...]:
    roles = tuple(sorted({r.strip() for r in value.split(",") if r.strip()}))
    if not roles or any(r not in ROLES for r in roles):
        raise argparse.ArgumentTypeError(f"--roles must be raft, worker or raft,worker (got {value!r})")
    return roles


def add_node_arguments(parser: argparse.ArgumentParser) -> None:
    """Add runnode's flags to ``parser``."""
    env = os.environ.get
    parser.add_argument("--node-id", default=env("RAFTCONNECT_NODE_ID", "node-1"), help="unique node id (default node-1)")
    parser.add_argument("--roles", type=_roles, default=_roles(env("RAFTCONNECT_ROLES", "raft,worker")),
                        help="raft, worker or raft,worker (default raft,worker)")
    parser.add_argument("--rest-address", default=env("RAFTCONNECT_REST_ADDRESS", "127.0.0.1:8083"),
                        help="HOST:PORT of the REST API (default 127.0.0.1:8083)")
    parser.add_argument("--raft-address", default=env("RAFTCONNECT_RAFT_ADDRESS", "127.0.0.1:7001"),
                        help="HOST:PORT this Raft member binds, a private address (default 127.0.0.1:7001)")
    parser.add_argument("--raft-peers", default=env("RAFTCONNECT_RAFT_PEERS", ""),
                        help="comma-separated HOST:PORT of the other Raft members")
    parser.add_argument("--cluster", default=env("RAFTCONNECT_CLUSTER", ""),
                        help="comma-separated REST HOST:PORT of cluster nodes (worker-only nodes)")
    parser.add_argument("--data-dir", default=None, help="data directory (default var/<node-id>)")
    parser.add_argument("--bootstrap-servers", default=env("RAFTCONNECT_BOOTSTRAP_SERVERS", "127.0.0.1:9092"),
                        help="Kafka bootstrap servers for tasks")
    parser.add_argument("--weight", type=float, default=float(env("RAFTCONNECT_WEIGHT", "1.0")),
                        help="assignment weight of this worker (default 1.0)")
    parser.add_argument("--session-timeout-ms", type=int, default=int(env("RAFTCONNECT_SESSION_TIMEOUT_MS", "5000")))
    parser.add_argument("--heartbeat-interval-ms", type=int, default=int(env("RAFTCONNECT_HEARTBEAT_INTERVAL_MS", "1000")))
    parser.add_argument("--spark-master", default=env("RAFTCONNECT_SPARK_MASTER", "local[*]"))
    parser.add_argument("--metadata-store", default=env("RAFTCONNECT_METADATA_STORE", "raft"),
                        help="metadata store a new cluster starts on: raft (default) or a store configured as "
                             "RAFTCONNECT_STORE_<NAME>=<URL>; an existing cluster keeps its store")
    parser.add_argument("--switch-hold-seconds", type=float,
                        default=float(env("RAFTCONNECT_SWITCH_HOLD_SECONDS", "0")),
                        help="pause between metadata store switch phases, for drills (default 0)")
    parser.add_argument("--rest-server", choices=SERVERS, default=env("RAFTCONNECT_REST_SERVER", SERVERS[0]),
                        help="HTTP server of the REST API: granian (default; HTTP handled outside the GIL) or "
                             "waitress (pure Python, the fallback)")
    parser.add_argument("--rest-threads", type=int, default=int(env("RAFTCONNECT_REST_THREADS", "16")),
                        help="Python threads serving REST requests (default 16)")
    parser.add_argument("--rest-connection-limit", type=int,
                        default=int(env("RAFTCONNECT_REST_CONNECTION_LIMIT", "1000")),
                        help="client connections the REST server keeps open at once; beyond it it stops "
                             "accepting until one closes (a leader with 100 workers needs several hundred; "
                             "default 1000)")
    parser.add_argument("--rest-listen", default=env("RAFTCONNECT_REST_LISTEN", ""),
                        help="HOST:PORT the REST API binds when it differs from --rest-address, the address other "
                             "nodes and agents use (Connect's listeners vs rest.advertised.*; default: --rest-address)")
    parser.add_argument("--config", default=None, metavar="FILE",
                        help="Kafka Connect worker properties (bootstrap.servers, security.protocol, sasl.*, ssl.*, "
                             "producer./consumer./admin. client settings, listeners, rest.advertised.*, "
                             "raftconnect.* for these flags); flags and RAFTCONNECT_* variables override it")
    parser.add_argument("--file-allowed-paths", default=env("RAFTCONNECT_FILE_ALLOWED_PATHS", ""),
                        help="raftconnect.file.allowed.paths: comma-separated directories file connectors and "
                             "file config providers may use (RAFTCONNECT_FILE_ALLOWED_PATHS; default: the data "
                             "dir's files/ only; the data dir itself never)")
    parser.add_argument("--jdbc-allowed-hosts", default=env("RAFTCONNECT_JDBC_ALLOWED_HOSTS", ""),
                        help="raftconnect.jdbc.allowed.hosts: comma-separated hosts JDBC connectors may connect to "
                             "(host, host:port, *.domain, IP or CIDR; RAFTCONNECT_JDBC_ALLOWED_HOSTS; default: any)")


def data_dir_from_argv(argv: list[str]) -> str:
    """The data directory ``runnode`` will use for ``argv`` (its flags only, after
    :func:`webapp.connect.workerconfig.expand_config_argv` when ``--config`` is used)."""
    parser = argparse.ArgumentParser(add_help=False)
    add_node_arguments(parser)
    ns, _ = parser.parse_known_args(argv)
    return ns.data_dir or os.path.join("var", ns.node_id)


def prepare_runnode(argv: list[str]) -> list[str]:
    """Ready the process for ``runnode argv`` before Django loads; returns the argv to run.

    Expands ``--config FILE`` (:func:`webapp.connect.workerconfig.expand_config_argv`:
    the file's flags go first, so the command line's win), then sets
    ``RAFTCONNECT_DATA_DIR`` to the absolute data directory and creates it.
    Raises :class:`webapp.connect.workerconfig.PropertiesError` for an unusable file.
    """
    from webapp.connect.workerconfig import expand_config_argv

    argv = expand_config_argv(argv)
    os.environ["RAFTCONNECT_DATA_DIR"] = os.path.abspath(data_dir_from_argv(argv))
    os.makedirs(os.environ["RAFTCONNECT_DATA_DIR"], exist_ok=True)
    return argv
