"""Assembly of one RaftConnect node: Raft member, metadata store, coordinator, Herder, agent.

Owns starting and stopping a node's parts in order; it installs itself as the
process's node (``webapp.connect.locator.set_current``), which Django-built entry
points read with ``locator.current()``. ``runnode`` builds a :class:`ConnectNode`
from its flags; tests build one in-process.

Start order: agent subprocess (it boots — imports, engine processes, producer —
while the rest starts, and joins through heartbeats that retry until REST
answers) → Raft (journal replay, election) → store → coordinator → REST (by the
caller). Stop order: agent first, so it can still commit its last offsets
through this node while it shuts down, then the rest in reverse.
"""
from __future__ import annotations

import contextlib
import json
import logging
import os
import secrets
import signal
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable

from tenacity import Retrying, retry_if_exception_type, stop_after_delay, wait_exponential

from raftnode import RaftConfig, RaftNode, RaftUnavailable
from webapp import environment, gcpolicy
from webapp.celery import app as celery_app, configure_broker, worker_queue
from webapp.coordinator.coordinator import GroupCoordinator
from webapp.metrics import LEADER_CHANGES
from webapp.runtime.agent_status import status_path
from webapp.runtime.file_access import default_root
from webapp.storage.raft import RaftMetadataStore
from webapp.storage.registry import store_urls_from_env
from webapp.storage.switch import StoreRouter, StoreSet, SwitchManager

from .health import NodeHealth
from .herder import Herder
from .locator import set_current
from .store_catalog import resolve_spec
from .workerconfig import KAFKA_CLIENT_CONFIG_ENV

__all__ = ["NodeOptions", "ConnectNode", "add_lifecycle_hook"]

log = logging.getLogger(__name__)

#: ``(on_start(node), on_stop(node))`` pairs called when a node of this process has started / is stopping
_lifecycle_hooks: list[tuple[Callable[["ConnectNode"], Any], Callable[["ConnectNode"], Any]]] = []


def add_lifecycle_hook(on_start: Callable[["ConnectNode"], Any], on_stop: Callable[["ConnectNode"], Any]) -> None:
    """Have ``on_start(node)`` run when a node of this process started (Raft member ready) and
    ``on_stop(node)`` when it stops. For layers above the node (the console's history sampler), so the
    node never imports them. Registering the same pair twice has no effect.
    """
    if (on_start, on_stop) not in _lifecycle_hooks:
        _lifecycle_hooks.append((on_start, on_stop))


@dataclass
class NodeOptions:
    """A node's settings (``runnode`` flags).

    Attributes:
        node_id: unique id of the node (also its worker id).
        roles: subset of ``{"raft", "worker"}``.
        rest_address: ``host:port`` the REST API listens on (default port 8083).
        raft_address: ``host:port`` of this Raft member (default port 7001).
        raft_peers: other Raft members' ``host:port``.
        cluster: REST ``host:port`` of cluster nodes; how a worker-only node (no
            Raft state) finds the cluster. Raft members may leave it empty.
        data_dir: journal, snapshot, node database, broker folder, and ``files/`` (created here), the
            default root of ``raftconnect.file.allowed.paths`` (``webapp.runtime.file_access``).
        bootstrap_servers: Kafka bootstrap servers for tasks.
        weight: the worker's assignment weight (> 0).
        cluster_secret: shared secret (Raft password, HMAC key); generated and
            kept in ``data_dir`` for a single-member cluster when not given.
        session_timeout_ms: group session timeout.
        heartbeat_interval_ms: agent heartbeat period.
        spark_master: Spark master URL for the agent.
        celery_broker: Celery broker URL (``None``: filesystem transport in data_dir).
        metadata_store: the store a new cluster starts on (``raft`` or a configured
            name); ignored, with a warning, by a cluster that already chose one.
        store_urls: ``{name: url}`` of configured metadata stores (``None``: read
            ``RAFTCONNECT_STORE_<NAME>`` from the environment).
        switch_hold_seconds: pause between store-switch phases (drills and tests; default 0).
        rest_listen: ``host:port`` the REST server binds when it differs from ``rest_address``
            (Connect's ``listeners``; ``rest_address`` is then the advertised address). ``None``: bind
            ``rest_address``.
        kafka_client_config: the tasks' librdkafka settings besides ``bootstrap.servers``
            (security, SASL, TLS, and ``producer.`` / ``consumer.`` / ``admin.`` prefixed ones for
            that client type only); from a worker properties file.
    """

    node_id: str
    roles: tuple[str, ...] = ("raft", "worker")
    rest_address: str = "127.0.0.1:8083"
    raft_address: str = "127.0.0.1:7001"
    raft_peers: list[str] = field(default_factory=list)
    cluster: list[str] = field(default_factory=list)
    data_dir: str = "var/default"
    bootstrap_servers: str = "127.0.0.1:9092"
    weight: float = 1.0
    cluster_secret: str | None = None
    session_timeout_ms: int = 5000
    heartbeat_interval_ms: int = 1000
    leader_weight_cap: float = 0.5
    spark_master: str = "local[*]"
    celery_broker: str | None = None
    agent_concurrency: int = 8
    metadata_store: str = "raft"
    store_urls: dict[str, str] | None = None
    switch_hold_seconds: float = 0.0
    rest_listen: str | None = None
    kafka_client_config: dict[str, str] = field(default_factory=dict)


def _load_or_create_secret(data_dir: str) -> str:
    path = os.path.join(data_dir, "cluster.secret")
    if os.path.exists(path):
        with open(path) as fh:
            return fh.read().strip()
    value = secrets.token_urlsafe(32)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(fd, "w") as fh:
        fh.write(value)
    return value


def _unknown_store_message(wanted: str, urls: dict[str, str]) -> str:
    return (f"--metadata-store {wanted}: no such store is configured (configured: "
            f"{', '.join(['raft'] + sorted(urls))}; add RAFTCONNECT_STORE_{wanted.upper()}=<URL>, or start on raft "
            "and add the store at run time)")


class ConnectNode:
    """One running node (see module docstring)."""

    def __init__(self, options: NodeOptions):
        self.options = options
        os.makedirs(options.data_dir, exist_ok=True)
        # the default root of raftconnect.file.allowed.paths, so a fresh node has a place for connector files
        os.makedirs(default_root(options.data_dir), exist_ok=True)
        if (options.raft_peers or "raft" not in options.roles) and not options.cluster_secret:
            raise ValueError("A multi-member cluster (and any worker-only node) needs RAFTCONNECT_CLUSTER_SECRET, "
                             "the same on every node")
        self.secret = options.cluster_secret or _load_or_create_secret(options.data_dir)
        self.raft: RaftNode | None = None
        self.store: StoreRouter | None = None
        self.stores: StoreSet | None = None
        self.switches: SwitchManager | None = None
        self.coordinator: GroupCoordinator | None = None
        self.herder: Herder | None = None
        self.agent: subprocess.Popen | None = None
        #: how many times the watchdog started the agent again after it exited
        self.agent_restarts = 0
        self._agent_stopping = threading.Event()  # set by stop_agent: the watchdog must not start it again
        self._stopped = threading.Event()  # set by stop: background work of the node ends
        self._agent_watchdog: threading.Thread | None = None
        #: the checks of GET /health (webapp.connect.health)
        self.health = NodeHealth(self)
        celery_app.conf.update(**configure_broker(options.celery_broker, options.data_dir))

    # ------------------------------------------------------------- lifecycle
    def start_control_plane(self, ready_timeout: float = 30.0) -> None:
        """Start Raft, the store, the coordinator and the Herder; wait for a leader."""
        o = self.options
        if "raft" not in o.roles:
            if not o.cluster:
                raise ValueError("a worker-only node needs --cluster HOST:PORT,... (REST addresses of cluster nodes)")
            set_current(self)  # serves REST by forwarding everything to the cluster
            return
        urls = store_urls_from_env() if o.store_urls is None else dict(o.store_urls)
        wanted = o.metadata_store.strip().lower()
        raft_dir = os.path.join(o.data_dir, "raft")
        restarting = os.path.isdir(raft_dir) and bool(os.listdir(raft_dir))
        if wanted != "raft" and wanted not in urls and not restarting:  # a restarted member may know it from Raft
            raise ValueError(_unknown_store_message(wanted, urls))
        self.raft = RaftNode(
            RaftConfig(self_address=o.raft_address, peers=list(o.raft_peers),
                       data_dir=os.path.join(o.data_dir, "raft"), password=self.secret,
                       pause_seconds=gcpolicy.pause_seconds),
            on_leader_change=self._on_leader_change,
        )
        self.stores = StoreSet(RaftMetadataStore(self.raft), urls, fence=self.raft.state.check_fence,
                               specs=lambda: self.raft.state.store_specs, resolve=resolve_spec)
        self.store = StoreRouter(self.raft, self.stores)
        self.switches = SwitchManager(self.raft, self.store, hold_seconds=o.switch_hold_seconds)
        self.coordinator = GroupCoordinator(raft=self.raft, store=self.store, node_id=o.node_id,
                                            dispatcher=CeleryDispatcher(
                                                local_worker_id=o.node_id if "worker" in o.roles else None,
                                                shared_broker=_shared_broker(environment.celery_broker())),
                                            session_timeout_ms=o.session_timeout_ms,
                                            leader_weight_cap=o.leader_weight_cap,
                                            scheduled_rebalance_max_delay_ms=(
                                                environment.scheduled_rebalance_max_delay_ms()))
        self.herder = Herder(store=self.store, members=lambda: self.raft.state.members,
                             assignment=lambda: self.raft.state.assignment, poke=self.coordinator.poke,
                             restarts=lambda name, connector, tasks: self.raft.commands.request_restart(
                                 name=name, connector=connector, tasks=list(tasks)))
        self._await_leader(ready_timeout)
        self._init_metadata_store(wanted, ready_timeout)
        if self.raft.is_leader:
            self.coordinator.on_leader_change(True, self.raft.term)
        self.coordinator.start()
        for on_start, _ in list(_lifecycle_hooks):  # e.g. the console's task history starts sampling
            on_start(self)
        self.switches.start()
        self._register(ready_timeout)
        set_current(self)

    def _await_leader(self, timeout: float) -> None:
        """Wait up to ``timeout`` seconds for a Raft leader; without one, start anyway if this member
        has state, else raise ``RuntimeError``.

        A member restarted while no quorum is up (all three after a power cut, a minority side of a
        partition) exited after 30 s, so its cluster could come back only if a quorum was started
        within 30 s of each other, and every supervisor restart of it replayed its journal again.
        Now it serves from the state its journal holds: ``/health`` answers 503 and writes wait for
        a leader (``StoreUnavailable``: Connect's 503 with "retry") until the election succeeds,
        which the coordinator and the member entry follow by themselves. A member without state
        (a new cluster, or a new member) cannot know the metadata store yet and still refuses to
        start.
        """
        if self.raft.wait_ready(timeout):
            return
        if not self.raft.state.store_initialized:
            raise RuntimeError(f"Raft did not elect a leader within {timeout:.0f} s, and this member holds no "
                               "cluster state yet: a new cluster needs a majority of its members running")
        log.warning("Raft did not elect a leader within %.0f s: serving from this member's journal meanwhile "
                    "(/health answers 503 and writes wait until a majority of %d members is up)",
                    timeout, len(self.options.raft_peers) + 1)

    def _register(self, timeout: float) -> None:
        """Commit this node's member entry (roles, addresses, weight): tried for up to ``timeout`` seconds,
        then in the background until it commits or the node stops.

        The entry is idempotent, so an attempt whose outcome became unknown (the leader changed
        between append and commit, no leader for a moment, a commit slower than the attempt) is
        simply made again. A member replacing one whose disk was lost starts while the cluster
        changes its membership and sends it a snapshot; one ``LEADER_CHANGED``, and under a load
        of 16 on 2 cores one 30 s timeout, made such a node exit (``make chaos``, damage-journal
        and damage-snapshot). Workers also register with every heartbeat; what this entry adds is
        a Raft-only member's REST address, which can come late without harm.
        """
        deadline = time.monotonic() + timeout
        try:
            self._register_attempts(stop_after_delay(timeout), lambda: max(1.0, min(10.0, deadline - time.monotonic())))
        except RaftUnavailable as exc:
            log.warning("this node's member entry is not committed yet (%s); trying again in the background", exc)
            threading.Thread(target=self._register_in_background, name="member-registration", daemon=True).start()

    def _register_in_background(self) -> None:
        try:
            self._register_attempts(lambda state: self._stopped.is_set(), lambda: 10.0)
            if not self._stopped.is_set():
                log.info("this node's member entry is committed")
        except RaftUnavailable:  # only when the node stops
            pass

    def _register_attempts(self, stop: Any, attempt_timeout: Callable[[], float]) -> None:
        for attempt in Retrying(retry=retry_if_exception_type(RaftUnavailable), stop=stop,
                                wait=wait_exponential(multiplier=0.1, max=2.0), reraise=True):
            with attempt:
                if attempt.retry_state.attempt_number > 1:
                    log.info("registering this node in Raft again (attempt %d)", attempt.retry_state.attempt_number)
                self.raft.commands.register_member(node_id=self.options.node_id, info=self.member_info(),
                                                   timeout=attempt_timeout())

    def _init_metadata_store(self, wanted: str, timeout: float) -> None:
        """Make a new cluster start on ``wanted``; warn when the cluster already uses another store."""
        if not self.raft.state.store_initialized:
            if self.stores.source(wanted) is None:
                raise ValueError(_unknown_store_message(wanted, self.stores.urls))
            self.stores.get(wanted)  # reachable and migrated before the cluster commits to it
            self.raft.commands.init_store(name=wanted, timeout=timeout)
        active = self.raft.state.active_store
        if active != wanted:
            log.warning("this cluster's metadata store is %s; --metadata-store %s applies only to a new cluster "
                        "(switch stores with POST /raftconnect/v1/metadata-store/switch)", active, wanted)

    def member_info(self) -> dict[str, Any]:
        """What this node registers in Raft: roles, REST and Raft addresses, weight."""
        o = self.options
        return {"roles": sorted(o.roles), "rest_address": o.rest_address,
                "raft_address": o.raft_address if "raft" in o.roles else None, "weight": float(o.weight)}

    def cluster_leader(self, refresh: bool = False) -> str | None:
        """For a worker-only node: the leader's REST address, asked of ``--cluster`` nodes and cached.

        Falls back to the first cluster node (which forwards writes) when no node
        names a leader. ``refresh`` drops the cached answer.
        """
        if refresh or getattr(self, "_cluster_leader", None) is None:
            import urllib3

            from webapp.coordinator.connections import OCCASIONAL

            found = None
            for address in self.options.cluster:
                try:
                    answer = OCCASIONAL.signed_get_json(address, "/raftconnect/v1/internal/leader",
                                                        secret=self.secret, timeout=2)
                except (urllib3.exceptions.HTTPError, ValueError):
                    continue
                if isinstance(answer, dict) and answer.get("leader_rest_address"):
                    found = answer["leader_rest_address"]
                    break
            self._cluster_leader = found
        return self._cluster_leader or (self.options.cluster[0] if self.options.cluster else None)

    def leader_rest_address(self) -> str | None:
        """REST address of the current Raft leader, or ``None`` while unknown."""
        if self.raft is None:
            return None
        leader = self.raft.leader
        if leader is None:
            return None
        for m in self.raft.state.members.values():
            if m.get("raft_address") == leader:
                return m.get("rest_address")
        return None

    def _on_leader_change(self, is_leader: bool, term: int) -> None:
        LEADER_CHANGES.inc()
        if self.coordinator is not None:
            self.coordinator.on_leader_change(is_leader, term)

    def agent_env(self) -> dict[str, str]:
        """Environment of the agent subprocess (who it is and where the cluster is)."""
        o = self.options
        env = dict(os.environ)
        cluster = [o.rest_address] + [c for c in o.cluster if c != o.rest_address] if "raft" in o.roles else o.cluster
        env.update({
            "RAFTCONNECT_NODE_ID": o.node_id,
            "RAFTCONNECT_DATA_DIR": os.path.abspath(o.data_dir),
            "RAFTCONNECT_REST_ADDRESS": o.rest_address,
            "RAFTCONNECT_CLUSTER": ",".join(cluster),
            "RAFTCONNECT_CLUSTER_SECRET": self.secret,
            "RAFTCONNECT_BOOTSTRAP_SERVERS": o.bootstrap_servers,
            "RAFTCONNECT_WEIGHT": str(o.weight),
            "RAFTCONNECT_ROLES": ",".join(sorted(o.roles)),
            "RAFTCONNECT_RAFT_ADDRESS": o.raft_address if "raft" in o.roles else "",
            "RAFTCONNECT_HEARTBEAT_INTERVAL_MS": str(o.heartbeat_interval_ms),
            "RAFTCONNECT_SPARK_MASTER": o.spark_master,
            "DJANGO_SETTINGS_MODULE": "webapp.settings",
        })
        env.pop(KAFKA_CLIENT_CONFIG_ENV, None)
        if o.kafka_client_config:
            env[KAFKA_CLIENT_CONFIG_ENV] = json.dumps(o.kafka_client_config, sort_keys=True)
        if o.celery_broker:
            env["RAFTCONNECT_CELERY_BROKER"] = o.celery_broker
        return env

    #: seconds between agent restarts after it exits: doubling from the first
    #: (``RAFTCONNECT_AGENT_RESTART_BACKOFF_MS``, default 1000) to the last, back to the first once an
    #: agent has run for AGENT_STABLE_SECONDS
    AGENT_BACKOFF = (environment.agent_restart_backoff_s(), 30.0)
    AGENT_STABLE_SECONDS = 60.0

    def start_agent(self) -> None:
        """Start the Celery worker agent as a child process (dies with this process), and keep it running.

        A watchdog thread starts the agent again when it exits (crash, OOM kill, ``kill -9``)
        until :meth:`stop_agent`, with a backoff of :data:`AGENT_BACKOFF` seconds; its tasks
        come back when the new agent's heartbeats rejoin the group (``agent_restarts`` counts
        the restarts, ``/health`` shows the agent ``down`` in between).
        """
        if "worker" not in self.options.roles:
            return
        self._spawn_agent()
        if self._agent_watchdog is None:
            self._agent_watchdog = threading.Thread(target=self._watch_agent, name="agent-watchdog", daemon=True)
            self._agent_watchdog.start()

    def _watch_agent(self) -> None:
        delay = self.AGENT_BACKOFF[0]
        started = time.monotonic()
        while not self._agent_stopping.wait(0.5):
            proc = self.agent
            if proc is None or proc.poll() is None:
                continue
            ran = time.monotonic() - started
            if ran >= self.AGENT_STABLE_SECONDS:
                delay = self.AGENT_BACKOFF[0]
            log.warning("agent (pid %s) exited with code %s after %.0f s; starting it again in %.0f s",
                        proc.pid, proc.returncode, ran, delay)
            if self._agent_stopping.wait(delay):
                return
            try:
                self._spawn_agent()
                self.agent_restarts += 1
            except OSError:
                log.exception("could not start the agent again")
            started = time.monotonic()
            delay = min(max(self.AGENT_BACKOFF), delay * 2)

    def _spawn_agent(self) -> None:
        cmd = [sys.executable, "-m", "celery", "-A", "webapp", "worker",
               "-Q", worker_queue(self.options.node_id), "-P", "threads",
               "-c", str(self.options.agent_concurrency), "-n", f"{self.options.node_id}@raftconnect",
               "--without-heartbeat", "--without-gossip", "--without-mingle",
               "-l", environment.agent_log_level()]
        log_path = os.path.join(self.options.data_dir, "agent.log")
        with contextlib.suppress(FileNotFoundError):  # a previous agent's: /health waits for this one's
            os.remove(status_path(self.options.data_dir))
        self._agent_log = open(log_path, "ab")
        self.agent = subprocess.Popen(cmd, env=self.agent_env(), stdout=self._agent_log, stderr=subprocess.STDOUT,
                                      preexec_fn=_die_with_parent)
        log.info("agent started (pid %s), log: %s", self.agent.pid, log_path)

    def stop_agent(self, graceful_timeout: float = 30.0) -> None:
        """Stop the agent: SIGTERM (its tasks stop and it leaves the group), SIGKILL after ``graceful_timeout`` s."""
        self._agent_stopping.set()
        if self.agent and self.agent.poll() is None:
            self.agent.send_signal(signal.SIGTERM)
            try:
                self.agent.wait(graceful_timeout)
            except subprocess.TimeoutExpired:
                self.agent.kill()
                self.agent.wait(5)

    def stop(self, graceful_timeout: float = 30.0) -> None:
        """Stop the agent (waiting for its tasks to stop), then the coordinator and Raft."""
        self._stopped.set()
        self.health.close()
        for _, on_stop in list(_lifecycle_hooks):
            on_stop(self)
        self.stop_agent(graceful_timeout)
        if self.coordinator:
            self.coordinator.stop()
        if self.switches:
            self.switches.stop()
        if self.raft:
            self.raft.destroy()
        if self.stores:
            self.stores.close()
        set_current(None)

    # ------------------------------------------------------------ selectors
    def member_raft_status(self, members: dict[str, dict[str, Any]], timeout: float = 1.0) -> dict[str, Any]:
        """``{node_id: raft status | {"state": "UNREACHABLE"}}`` of every Raft member, asked in parallel."""
        from concurrent.futures import ThreadPoolExecutor

        import urllib3

        from webapp.coordinator.connections import OCCASIONAL

        def ask(item):
            node_id, m = item
            if node_id == self.options.node_id:
                return node_id, self.raft.status()
            try:
                return node_id, OCCASIONAL.signed_get_json(m["rest_address"], "/raftconnect/v1/internal/raft",
                                                           secret=self.secret, timeout=timeout)
            except (urllib3.exceptions.HTTPError, ValueError):
                return node_id, {"state": "UNREACHABLE"}

        voters = [(i, m) for i, m in members.items() if m.get("raft_address")]
        if not voters:
            return {}
        with ThreadPoolExecutor(max_workers=min(16, len(voters))) as pool:
            return dict(pool.map(ask, voters))

    def cluster_view(self) -> dict[str, Any]:
        """``GET /raftconnect/v1/cluster``: nodes, Raft status, assignment per worker."""
        st = self.raft.state
        raft_status = self.raft.status()
        assignment = st.assignment
        active = self.coordinator is not None and self.coordinator.active
        live = self.coordinator.live_workers() if active else {}
        held = self.coordinator.held_for() if active else {}
        reported = dict(self.coordinator.reported) if active else {}
        nodes = []
        members = dict(st.members)
        raft_of = self.member_raft_status(members)
        for node_id, m in sorted(members.items()):
            r = raft_of.get(node_id)
            nodes.append({
                "id": node_id, "roles": m.get("roles"), "rest_address": m.get("rest_address"),
                "raft_address": m.get("raft_address"), "weight": m.get("weight"),
                "alive": node_id in live,
                "reassign_in_s": round(held[node_id], 1) if node_id in held else None,
                "raft": None if r is None else {k: r.get(k) for k in
                                                ("state", "term", "leader", "commit_index", "applied_index")},
                "raft_lag": None if r is None or r.get("applied_index") is None
                else max(0, raft_status["commit_index"] - r["applied_index"]),
                "connectors": sorted(c for c, w in assignment["connectors"].items() if w == node_id),
                "tasks": sorted(t for t, w in assignment["tasks"].items() if w == node_id),
                # what the agent said in its last heartbeat it actually runs (may lag the assignment)
                "running_tasks": sorted((reported.get(node_id) or {}).get("tasks", {})),
            })
        return {"node_id": self.options.node_id, "raft": raft_status, "leader": raft_status["leader"],
                "generation": assignment["generation"], "epoch": assignment["epoch"],
                "metadata_store": st.active_store, "nodes": nodes}


class CeleryDispatcher:
    """Sends assignment views to agents as Celery messages on their own queues (the fast path).

    Args:
        local_worker_id: the worker of this node's own agent, or None.
        shared_broker: whether every node's agent consumes the same broker
            (``RAFTCONNECT_CELERY_BROKER`` names a Redis or RabbitMQ server). The
            embedded filesystem broker lives in this node's data directory: only
            this node's agent reads it, so a message for another node's worker
            would never be delivered. Then only the local worker gets messages and
            remote workers learn their views from heartbeat replies (within one
            heartbeat interval, 1 s by default); :attr:`skipped` counts the views
            not sent.
    """

    def __init__(self, local_worker_id: str | None = None, shared_broker: bool = False):
        self.local_worker_id = local_worker_id
        self.shared_broker = shared_broker
        self.skipped = 0

    def reaches(self, worker_id: str) -> bool:
        """Whether a Celery message to ``worker_id`` can be delivered through this node's broker."""
        return self.shared_broker or worker_id == self.local_worker_id

    def send(self, worker_id: str, view: dict[str, Any]) -> None:
        """Queue ``raftconnect.apply_assignment(view)`` for ``worker_id`` (expires after 30 s), if it can arrive."""
        if not self.reaches(worker_id):
            self.skipped += 1
            return
        celery_app.send_task("raftconnect.apply_assignment", args=[view], queue=worker_queue(worker_id),
                             expires=30)


def _shared_broker(url: str | None) -> bool:
    """Whether ``RAFTCONNECT_CELERY_BROKER`` names a broker every node reaches (not the embedded filesystem one)."""
    return bool(url) and not url.startswith("filesystem")


def _die_with_parent() -> None:  # pragma: no cover - runs in the child before exec
    """Ask Linux to SIGKILL the agent when the node process dies (even by kill -9)."""
    try:
        import ctypes

        libc = ctypes.CDLL("libc.so.6", use_errno=True)
        libc.prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG
    except OSError:
        pass
