"""Launching nodes as processes and talking to them over REST, for the demo, tests and benchmarks.

Owns :class:`NodeProcess` (``manage.py runnode`` as a child process: start,
wait until healthy, SIGTERM, kill -9, SIGSTOP) and :class:`ConnectClient`, a
small Kafka Connect REST client that uses only the public API, exactly as a
user with curl would.
"""
from __future__ import annotations

import collections
import itertools
import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import requests
from webapp.kafka.embedded import free_port
from webapp.states import State

__all__ = ["NodeProcess", "LocalCluster", "ConnectClient", "ConnectHTTPError", "wait_for", "REPO_ROOT",
           "started_nodes"]

REPO_ROOT = Path(__file__).resolve().parents[1]

#: The last NodeProcess objects started in this process as ``(serial, node)``, serials counting
#: starts from 1 (a node started again gets a new serial); read through :func:`started_nodes`.
#: Bounded: chaos campaigns start hundreds of nodes. The test suite's failure report attaches logs.
_STARTED: "collections.deque[tuple[int, NodeProcess]]" = collections.deque(maxlen=64)
_STARTS = itertools.count(1)


def started_nodes(since: int = 0, *, or_running: bool = False) -> tuple[int, list["NodeProcess"]]:
    """``(last serial, nodes)``: the nodes started in this process with a serial above ``since`` (with
    ``or_running``, also earlier ones whose process still runs), each once (by identity), in start
    order; only the last 64 starts are remembered. Pass the returned serial next time to get only
    later starts."""
    entries = list(_STARTED)
    nodes: list[NodeProcess] = []
    for serial, node in entries:
        alive = or_running and node.proc is not None and node.proc.poll() is None
        if (serial > since or alive) and not any(node is n for n in nodes):
            nodes.append(node)
    return (entries[-1][0] if entries else since), nodes


def wait_for(condition: Callable[[], Any], timeout: float, interval: float = 0.2, what: str = "condition") -> Any:
    """Poll ``condition`` until it returns a truthy value; return it.

    Raises ``TimeoutError`` naming ``what`` after ``timeout`` seconds. Exceptions
    from ``condition`` count as "not yet" and the last one is chained, except
    ``AssertionError``, which propagates at once (a condition that can no longer
    become true, e.g. a task FAILED).
    """
    deadline = time.monotonic() + timeout
    last: Exception | None = None
    while time.monotonic() < deadline:
        try:
            value = condition()
            if value:
                return value
        except AssertionError:
            raise
        except Exception as exc:  # noqa: BLE001 - polling treats errors as not-ready
            last = exc
        time.sleep(interval)
    raise TimeoutError(f"timed out after {timeout:.0f} s waiting for {what}") from last


class ConnectHTTPError(Exception):
    """A REST call answered with an error status; carries ``status`` and Connect's ``body``."""

    def __init__(self, status: int, body: Any):
        super().__init__(f"HTTP {status}: {body}")
        self.status = status
        self.body = body


class ConnectClient:
    """Kafka Connect REST client over ``requests`` (basic auth).

    Args:
        url: base URL, e.g. ``http://127.0.0.1:8083``.
        auth: ``(user, password)`` or ``None``.
        timeout: seconds per request.
        retry_unavailable: seconds to keep retrying a 503 (no Raft leader, an election under way:
            what an automation client does with Connect's "retry the request"); 0 = never.
    """

    def __init__(self, url: str, auth: tuple[str, str] | None = None, timeout: float = 30.0,
                 retry_unavailable: float = 0.0):
        self.url = url.rstrip("/")
        self.session = requests.Session()
        self.session.auth = auth
        self.timeout = timeout
        self.retry_unavailable = retry_unavailable

    def request(self, method: str, path: str, json: Any = None, params: Any = None, ok: tuple = ()) -> Any:
        """One call; returns the decoded body (``None`` when empty). Raises :class:`ConnectHTTPError`.

        With ``retry_unavailable`` a 503 is retried every 0.2 s until that many seconds have passed.
        """
        deadline = time.monotonic() + self.retry_unavailable
        while True:
            resp = self.session.request(method, self.url + path, json=json, params=params, timeout=self.timeout)
            if resp.status_code != 503 or 503 in ok or time.monotonic() >= deadline:
                break
            time.sleep(0.2)  # back-off between retries, as a client would
        if resp.status_code >= 400 and resp.status_code not in ok:
            try:
                body = resp.json()
            except ValueError:
                body = resp.text
            raise ConnectHTTPError(resp.status_code, body)
        return resp.json() if resp.content else None

    def create_connector(self, name: str, config: dict[str, str]) -> dict:
        """``POST /connectors``; with ``retry_unavailable`` a retried create that finds exactly this
        connector already there (the first attempt committed) counts as created (see
        :meth:`create_connector_once`)."""
        if self.retry_unavailable:
            created = self.create_connector_once(name, config)
            if created is not None:
                return created
            # a retried create answered 409: read it back (from a follower, once it applied the write)
            return wait_for(lambda: self.request("GET", f"/connectors/{name}"), 30, interval=0.1,
                            what=f"connector {name} readable after its retried create")
        return self.request("POST", "/connectors", json={"name": name, "config": config})

    def create_connector_once(self, name: str, config: dict[str, str], initial_state: str | None = None) -> dict | None:
        """``POST /connectors``; a 409 for a connector that holds exactly ``config`` counts as created.

        Returns the created ConnectorInfo, or ``None`` when the answer was such a 409.

        A forwarding node retries a create when leadership moves while it waits
        (``forwarding.proxy_watching_leader``); if the first attempt had committed,
        the retry answers 409 although this very request created the connector.
        """
        body = {"name": name, "config": config, **({"initial_state": initial_state} if initial_state else {})}
        try:
            return self.request("POST", "/connectors", json=body)
        except ConnectHTTPError as exc:
            stored = self.request("GET", f"/connectors/{name}/config") if exc.status == 409 else {}
            if any(stored.get(k) != v for k, v in config.items()):
                raise
        return None

    def connectors(self, expand: list[str] | None = None) -> Any:
        return self.request("GET", "/connectors", params=[("expand", e) for e in expand or []])

    def status(self, name: str) -> dict:
        return self.request("GET", f"/connectors/{name}/status")

    def offsets(self, name: str) -> dict:
        return self.request("GET", f"/connectors/{name}/offsets")

    def pause(self, name: str) -> None:
        self.request("PUT", f"/connectors/{name}/pause")

    def resume(self, name: str) -> None:
        self.request("PUT", f"/connectors/{name}/resume")

    def delete(self, name: str) -> None:
        self.request("DELETE", f"/connectors/{name}")

    def sink_offsets_total(self, name: str) -> int:
        """Sum of a sink connector's committed ``kafka_offset`` over its partitions (= records consumed)."""
        return sum(int(o["offset"].get("kafka_offset", 0)) for o in self.offsets(name)["offsets"])

    def all_running(self, name: str, tasks: int | None = None) -> bool:
        """Whether the connector and all its (at least ``tasks``) tasks are RUNNING."""
        st = self.status(name)
        states = [t["state"] for t in st["tasks"]]
        return st["connector"]["state"] == State.RUNNING and bool(states) and all(s == State.RUNNING for s in states) \
            and (tasks is None or len(states) >= tasks)

    def failures(self, name: str) -> list[str]:
        """Traces of FAILED entities of the connector (empty when none failed)."""
        st = self.status(name)
        out = []
        if st["connector"]["state"] == State.FAILED:
            out.append(f"connector {name}: {st['connector'].get('trace', '')}")
        out += [f"task {name}-{t['id']}: {t.get('trace', '')}" for t in st["tasks"] if t["state"] == State.FAILED]
        return out


@dataclass
class NodeProcess:
    """``python manage.py runnode`` as a child process.

    Attributes:
        node_id, rest_port, raft_port, data_dir, bootstrap_servers: runnode flags.
        roles: runnode ``--roles``.
        extra_args: more runnode flags.
        env: extra environment (admin credentials are set from ``auth``).
        auth: admin user and password created at start.
        host: address the REST API and Raft bind (default loopback; a namespace
            address with :mod:`tools.netns`).
        command_prefix: argv run in front of the node's command, e.g.
            ``["ip", "netns", "exec", ns]`` (``ip`` execs in place, so signals
            still reach the node itself). Default none.
        file_allowed_paths: directories file connectors may use on this node
            (``--file-allowed-paths``, i.e. ``raftconnect.file.allowed.paths``);
            ``None``: whatever the environment says, else the data dir's ``files/``.
    """

    node_id: str
    rest_port: int
    raft_port: int
    data_dir: str
    bootstrap_servers: str
    roles: str = "raft,worker"
    extra_args: list[str] = field(default_factory=list)
    env: dict[str, str] = field(default_factory=dict)
    auth: tuple[str, str] = ("admin", "admin-secret")
    host: str = "127.0.0.1"
    command_prefix: list[str] = field(default_factory=list)
    file_allowed_paths: list[str] | None = None
    proc: subprocess.Popen | None = None

    @property
    def url(self) -> str:
        return f"http://{self.host}:{self.rest_port}"

    @property
    def log_path(self) -> str:
        return os.path.join(self.data_dir, "node.log")

    def client(self) -> ConnectClient:
        """A REST client for this node with the admin credentials; it retries 503s for up to 60 s
        (elections on a loaded machine), as an automation client would."""
        return ConnectClient(self.url, self.auth, retry_unavailable=60.0)

    def create_user(self, name: str, role: str, password: str = "pw") -> dict:
        """Create a replicated REST user through this node as the admin (``POST /raftconnect/v1/users``).

        Returns the user; raises :class:`ConnectHTTPError` on an error answer.
        """
        return self.client().request("POST", "/raftconnect/v1/users",
                                     json={"name": name, "password": password, "role": role})

    def start(self, wait: bool = True, timeout: float = 60.0) -> "NodeProcess":
        """Start the process; with ``wait``, block until ``/health`` is 200. Raises ``RuntimeError``."""
        os.makedirs(self.data_dir, exist_ok=True)
        env = dict(os.environ)
        env.update({"RAFTCONNECT_ADMIN_USER": self.auth[0], "RAFTCONNECT_ADMIN_PASSWORD": self.auth[1],
                    "PYTHONUNBUFFERED": "1"})
        env.update(self.env)
        cmd = [*self.command_prefix, sys.executable, str(REPO_ROOT / "manage.py"), "runnode", "--node-id", self.node_id,
               "--roles", self.roles, "--rest-address", f"{self.host}:{self.rest_port}",
               "--data-dir", self.data_dir, "--bootstrap-servers", self.bootstrap_servers, *self.extra_args]
        if "raft" in self.roles:
            cmd += ["--raft-address", f"{self.host}:{self.raft_port}"]
        if self.file_allowed_paths is not None:
            cmd += ["--file-allowed-paths", ",".join(os.path.abspath(p) for p in self.file_allowed_paths)]
        _STARTED.append((next(_STARTS), self))
        log = open(self.log_path, "ab")
        # Own process group: signals reach the node and its agent together (SIGSTOP pauses both).
        self.proc = subprocess.Popen(cmd, cwd=str(REPO_ROOT), env=env, stdout=log, stderr=subprocess.STDOUT,
                                     start_new_session=True)
        log.close()
        if wait:
            self.wait_healthy(timeout)
        return self

    def wait_healthy(self, timeout: float = 60.0) -> None:
        """Block until ``GET /health`` answers 200; raises ``RuntimeError`` with the log tail, at once
        when the process exits (a node that died cannot become healthy: waiting out the timeout made
        each failed chaos iteration cost minutes)."""
        def healthy():
            if self.proc is not None and self.proc.poll() is not None:
                # AssertionError: wait_for stops polling at once
                raise AssertionError(f"node {self.node_id} exited with {self.proc.returncode}:\n{self.log_tail()}")
            return requests.get(self.url + "/health", timeout=2).status_code == 200

        try:
            wait_for(healthy, timeout, what=f"node {self.node_id} to become healthy")
        except AssertionError as exc:
            raise RuntimeError(str(exc)) from None
        except TimeoutError as exc:
            raise RuntimeError(f"{exc}\n{self.log_tail()}") from None

    @property
    def agent_log_path(self) -> str:
        """The log of the node's Celery agent (a worker role's child process)."""
        return os.path.join(self.data_dir, "agent.log")

    def log_tail(self, max_bytes: int = 4000, path: str | None = None) -> str:
        """The last ``max_bytes`` of the node's log (or of ``path``, e.g. :attr:`agent_log_path`);
        empty if there is none."""
        try:
            with open(path or self.log_path, "rb") as fh:
                fh.seek(0, 2)
                fh.seek(max(0, fh.tell() - max_bytes))
                return fh.read().decode(errors="replace")
        except OSError:
            return ""

    def stop(self, timeout: float = 60.0) -> int | None:
        """SIGTERM and wait (kill after ``timeout`` s); returns the exit code."""
        if self.proc is None or self.proc.poll() is not None:
            return self.proc.returncode if self.proc else None
        self.proc.send_signal(signal.SIGTERM)
        try:
            return self.proc.wait(timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(10)

    def kill(self) -> None:
        """kill -9 (the agent child dies with it)."""
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)

    def signal(self, sig: int) -> None:
        """Send ``sig`` (e.g. SIGSTOP/SIGCONT) to the node and its agent (the process group)."""
        if self.proc is not None and self.proc.poll() is None:
            os.killpg(self.proc.pid, sig)


@dataclass
class LocalCluster:
    """Several :class:`NodeProcess` forming one cluster on loopback.

    Args:
        data_dir: parent of the nodes' data dirs.
        bootstrap_servers: Kafka for the tasks.
        raft_nodes: how many ``raft,worker`` nodes (Raft voting members).
        worker_nodes: how many ``worker`` nodes (no Raft state).
        raft_roles: roles of the Raft members (``raft,worker`` or ``raft``).
        rest_ports, raft_ports: explicit ports (default: free ports).
        secret: the cluster secret.
        auth: admin user and password on every node.
        extra_args: more runnode flags for every node.
        hosts: per-node bind address (default loopback for all), e.g. namespace
            addresses from :class:`tools.netns.NetnsNetwork`.
        command_prefixes: per-node argv prefix (default none), e.g.
            ``NetnsNetwork.command_prefix(i)``.
        file_allowed_paths: ``raftconnect.file.allowed.paths`` of every node
            (see :class:`NodeProcess`); give every node the same, as in a real cluster.
    """

    data_dir: str
    bootstrap_servers: str
    raft_nodes: int = 3
    worker_nodes: int = 0
    raft_roles: str = "raft,worker"
    rest_ports: list[int] | None = None
    raft_ports: list[int] | None = None
    secret: str = "local-cluster-secret"
    auth: tuple[str, str] = ("admin", "admin-secret")
    extra_args: list[str] = field(default_factory=list)
    hosts: list[str] | None = None
    command_prefixes: list[list[str]] | None = None
    file_allowed_paths: list[str] | None = None
    nodes: list[NodeProcess] = field(default_factory=list)

    def __post_init__(self) -> None:
        total = self.raft_nodes + self.worker_nodes
        hosts = self.hosts or ["127.0.0.1"] * total
        prefixes = self.command_prefixes or [[] for _ in range(total)]
        rest = self.rest_ports or [free_port() for _ in range(total)]
        raft = self.raft_ports or [free_port() for _ in range(self.raft_nodes)]
        raft_addrs = [f"{hosts[i]}:{p}" for i, p in enumerate(raft)]
        rest_addrs = [f"{hosts[i]}:{p}" for i, p in enumerate(rest[: self.raft_nodes])]
        for i in range(total):
            is_raft = i < self.raft_nodes
            extra = (["--raft-peers", ",".join(a for j, a in enumerate(raft_addrs) if j != i)] if is_raft
                     else ["--cluster", ",".join(rest_addrs)])
            self.nodes.append(NodeProcess(
                node_id=f"node-{i + 1}", rest_port=rest[i], raft_port=raft[i] if is_raft else 0,
                data_dir=os.path.join(self.data_dir, f"node-{i + 1}"), bootstrap_servers=self.bootstrap_servers,
                roles=self.raft_roles if is_raft else "worker", extra_args=[*extra, *self.extra_args],
                env={"RAFTCONNECT_CLUSTER_SECRET": self.secret}, auth=self.auth,
                host=hosts[i], command_prefix=list(prefixes[i]),
                file_allowed_paths=None if self.file_allowed_paths is None else list(self.file_allowed_paths)))

    def start(self, timeout: float = 120.0) -> "LocalCluster":
        """Start every node and wait until all are healthy."""
        for node in self.nodes:
            node.start(wait=False)
        for node in self.nodes:
            node.wait_healthy(timeout)
        return self

    def stop(self, timeout: float = 60.0) -> None:
        """SIGTERM every node still running, all at once, and wait for them (kill after ``timeout`` s)."""
        running = self.running()
        for node in running:
            node.proc.send_signal(signal.SIGTERM)
        for node in running:
            node.stop(timeout)

    def running(self) -> list[NodeProcess]:
        """Nodes whose process is alive."""
        return [n for n in self.nodes if n.proc is not None and n.proc.poll() is None]

    def leader(self, timeout: float = 30.0) -> NodeProcess:
        """The node whose own Raft status says LEADER (waits up to ``timeout`` s)."""
        def find():
            for node in self.running():
                if "raft" not in node.roles:
                    continue
                try:
                    if node.client().request("GET", "/raftconnect/v1/raft")["state"] == "LEADER":
                        return node
                except Exception:  # noqa: BLE001 - a stopped node does not answer
                    continue
            return None
        return wait_for(find, timeout, interval=0.05, what="a Raft leader")
