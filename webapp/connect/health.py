"""``GET /health``: the node's report on each dependency, and the rule that turns it into 200 or 503.

Owns the checks (Raft, metadata store, Kafka, Spark, the worker agent), the
words they answer with, the caching of the checks that need the network, and
the HTTP status rule. Selectors only: reads the node, changes nothing; the view
(``webapp.connect.api.views.HealthView``) just renders :func:`health_report`.

Every check is ``{"state": WORD, ...detail}``; the words a script can rely on:

* ``ok`` — works.
* ``unreachable`` — configured but does not answer (Kafka, the metadata store, a
  Raft leader or quorum, the coordinator for the agent's heartbeats); ``error``
  says what was tried, naming the address.
* ``down`` — this node's own part is not running (the agent process exited, the
  SparkSession stopped or could not start, the Raft member is stopped).
* ``starting`` — the agent process runs but has not been acknowledged a first
  heartbeat yet (or the SparkSession is starting).
* ``not_started`` — Spark only: the agent starts its SparkSession lazily, when a
  batch first needs it; until then this is normal.
* ``not_applicable`` — the node's roles do not include it (``agent`` and
  ``spark`` on a ``raft``-only node; ``raft`` and ``metadata_store`` on a
  ``worker``-only node, which holds no Raft state and forwards to its cluster).

The report's own ``state`` is ``ok`` when every check is ``ok``,
``not_started`` or ``not_applicable``; ``down`` when the node cannot serve
requests; ``degraded`` otherwise.

**HTTP status rule.** 503 only when the control plane is unusable from this
node: it has not finished starting, or it is a Raft member that knows no leader
(an election is running, or it is cut off). Anything else answers 200, even with
Kafka, the metadata store or the agent failing: those show in ``checks`` and
make the report ``degraded``, because the node still serves the REST API
(``launcher.NodeProcess`` and orchestrators take 200 as "serving"), and an
outage of a shared dependency would otherwise take every node out of service at
once, which no restart of a node can fix. A ``worker``-only node answers 200
once started; whether it reaches its cluster shows in its ``agent`` check.

**Cost.** Raft, agent and Spark are read from memory and one small local file
(see :mod:`webapp.runtime.agent_status`). Kafka (a metadata request on the
process's shared AdminClient) and an external metadata store (:meth:`ping`) are
checked on a thread of their own, at most once per :data:`CACHE_TTL_S` seconds
however often ``/health`` is polled; a request waits for a running check at
most :data:`WAIT_S` seconds from the check's start, then answers
``unreachable`` ("no answer within ..."). Answers may be up to
:data:`CACHE_TTL_S` old.
"""
from __future__ import annotations

import threading
import time
from typing import Any, Callable, Protocol

from webapp.runtime.agent_status import read_agent_status

__all__ = ["NodeHealth", "HealthSubject", "CachedProbe", "health_report", "CHECKS", "STATES", "OK_STATES", "CACHE_TTL_S", "WAIT_S",
           "KAFKA_TIMEOUT_S"]

#: the checks of a report, in this order
CHECKS = ("raft", "metadata_store", "kafka", "spark", "agent")
#: every word a check's ``state`` can take (see module docstring)
STATES = ("ok", "unreachable", "down", "starting", "not_started", "not_applicable")
#: states that do not make the report ``degraded``
OK_STATES = frozenset({"ok", "not_started", "not_applicable"})
#: seconds a network check's answer is reused
CACHE_TTL_S = 2.0
#: seconds, from a network check's start, that a request waits for its answer (the network checks run in
#: parallel, so /health answers within about this long: below the 2 s timeouts of the launcher and compose)
WAIT_S = 1.2
#: seconds librdkafka gets for the metadata request of the Kafka check (below WAIT_S)
KAFKA_TIMEOUT_S = 1.0

_READY_MESSAGE = "Worker has completed startup and is ready to handle requests."  # Kafka Connect's (KIP-1017)


class CachedProbe:
    """Runs a blocking check on its own daemon thread and reuses its answer for ``ttl`` seconds.

    One check runs at a time, however many callers ask; the thread (and so, for
    example, a Django database connection it opens) lives as long as the probe.

    Args:
        name: names the thread (``health-<name>``).
        probe: ``() -> dict`` with at least ``"state"``; may block on the network.
            An exception becomes ``{"state": "unreachable", "error": "<type>: <message>"}``.
        late: ``(seconds) -> dict``, the answer given while a check has been
            running for more than ``wait`` seconds.
        ttl: seconds an answer is reused.
        wait: seconds, counted from the start of the running check, a caller waits for it.
        clock: monotonic seconds (tests pass their own).
    """

    def __init__(self, name: str, probe: Callable[[], dict[str, Any]], late: Callable[[float], dict[str, Any]], *,
                 ttl: float = CACHE_TTL_S, wait: float = WAIT_S, clock: Callable[[], float] = time.monotonic):
        self.name = name
        self.ttl = ttl
        self.wait = wait
        self._probe = probe
        self._late = late
        self._clock = clock
        self._cv = threading.Condition()
        self._answer: dict[str, Any] | None = None
        self._answered_at: float | None = None
        self._running_since: float | None = None  # set while a check is wanted or runs
        self._thread: threading.Thread | None = None
        self._closed = False

    def kick(self) -> None:
        """Start a check now if the answer is older than ``ttl`` and none runs; returns at once.

        Lets a caller start several checks before waiting for any, so they run in parallel.
        """
        with self._cv:
            self._kick(self._clock())

    def _kick(self, now: float) -> bool:
        """Under the lock: whether the answer is fresh; otherwise make sure a check runs."""
        if self._answer is not None and now - self._answered_at < self.ttl:
            return True
        if self._running_since is None and not self._closed:
            self._running_since = now
            if self._thread is None:
                self._thread = threading.Thread(target=self._run, name=f"health-{self.name}", daemon=True)
                self._thread.start()
            self._cv.notify_all()
        return False

    def get(self) -> dict[str, Any]:
        """The latest answer if younger than ``ttl``; else a new one, waiting at most ``wait`` s from the check's start.

        Returns a copy. Never raises.
        """
        with self._cv:
            if self._kick(self._clock()):
                return dict(self._answer)
            if self._closed:
                return {"state": "down", "error": "the node is stopping"}
            started = self._running_since
            while self._answered_at is None or self._answered_at < started:
                remaining = started + self.wait - self._clock()
                if remaining <= 0 or self._closed:
                    return self._late(self._clock() - started)
                self._cv.wait(remaining)
            return dict(self._answer)

    def close(self) -> None:
        """Stop the thread after its running check (if any); later calls answer ``down``."""
        with self._cv:
            self._closed = True
            self._cv.notify_all()

    def _run(self) -> None:
        while True:
            with self._cv:
                while self._running_since is None and not self._closed:
                    self._cv.wait()
                if self._closed:
                    return
            try:
                answer = self._probe()
            except Exception as exc:  # noqa: BLE001 - a failing check is an answer, not an error
                answer = {"state": "unreachable", "error": f"{type(exc).__name__}: {exc}"[:500]}
            with self._cv:
                self._answer, self._answered_at, self._running_since = answer, self._clock(), None
                self._cv.notify_all()


class HealthSubject(Protocol):
    """What the checks read of a node (a :class:`~webapp.connect.node.ConnectNode`, which builds its
    :class:`NodeHealth` and so is not imported here): its options (``node_id``, ``roles``, ``cluster``,
    ``data_dir``, ``session_timeout_ms``, ``spark_master``, ``bootstrap_servers``), its Raft member
    (``None`` on a worker-only node), the active metadata store (``None`` before it is open), the store
    set, the agent process and the health checks themselves."""

    options: Any
    raft: Any
    store: Any
    stores: Any
    agent: Any
    health: "NodeHealth"


class NodeHealth:
    """The health checks of one node (``node.health``); :meth:`report` is what ``GET /health`` shows.

    Args:
        node: the node (read only).
        kafka_timeout: seconds for Kafka's metadata request.
        ttl, wait: see :class:`CachedProbe`.
    """

    def __init__(self, node: HealthSubject, *, kafka_timeout: float = KAFKA_TIMEOUT_S, ttl: float = CACHE_TTL_S,
                 wait: float = WAIT_S):
        self.node = node
        self.kafka_timeout = kafka_timeout
        self._kafka = CachedProbe("kafka", self._probe_kafka, self._kafka_late, ttl=ttl, wait=wait)
        self._store = CachedProbe("metadata-store", self._store_check_now, self._store_late, ttl=ttl, wait=wait)

    def close(self) -> None:
        """Stop the check threads (the node is stopping)."""
        self._kafka.close()
        self._store.close()

    # ---------------------------------------------------------------- report
    def report(self) -> tuple[int, dict[str, Any]]:
        """``(http_status, body)`` of ``GET /health`` (see module docstring for the words and the rule).

        Body: ``{"status": "healthy" | "unhealthy", "message": str, "state": "ok" | "degraded" | "down",
        "node_id": str, "roles": [str], "checks": {name: {"state": word, ...}}}`` with the checks
        of :data:`CHECKS`. ``status`` and ``message`` are Kafka Connect's. Takes at most about
        :data:`WAIT_S` seconds; never raises.
        """
        node = self.node
        self._kafka.kick()  # both network checks run while the local ones are read
        if node.store is not None and node.store.active_name != "raft":
            self._store.kick()
        agent, status = self._agent()
        checks = {"raft": self.raft_check(), "metadata_store": self.metadata_store_check(),
                  "kafka": self.kafka_check(), "spark": self._spark(agent, status), "agent": agent}
        who = {"node_id": node.options.node_id, "roles": sorted(node.options.roles), "checks": checks}
        if node.raft is not None and checks["raft"].get("leader") is None:
            return 503, {"status": "unhealthy", "state": "down", **who,
                         "message": "No Raft leader is known; the control plane is electing one."}
        failing = [f"{name} {c['state']}" for name, c in checks.items() if c["state"] not in OK_STATES]
        if failing:
            return 200, {"status": "healthy", "message": f"{_READY_MESSAGE[:-1]}; not ok: {', '.join(failing)}.",
                         "state": "degraded", **who}
        return 200, {"status": "healthy", "message": _READY_MESSAGE, "state": "ok", **who}

    # ---------------------------------------------------------------- checks
    def raft_check(self) -> dict[str, Any]:
        """This member's Raft view: ``{"state", "role", "term", "leader", "members", "reachable_members",
        "has_quorum", "commit_index", "applied_index", "journal"}``; ``unreachable`` without a leader or a
        quorum, ``down`` while its journal cannot be written (``journal``: ``{"ok", "path", "error",
        "failing_for_s", "failures"}``)."""
        node = self.node
        if node.raft is None:
            return {"state": "not_applicable", "reason": "worker-only node: not a Raft member, requests go to its "
                                                         "cluster", "cluster": list(node.options.cluster)}
        try:
            st = node.raft.status()
        except Exception as exc:  # noqa: BLE001 - a destroyed member (node stopping)
            return {"state": "down", "leader": None, "error": f"the Raft member does not run: {exc}"}
        try:
            peers = node.raft.peer_connections()
            members, reachable = 1 + len(peers), 1 + sum(peers.values())
        except RuntimeError:  # the member set changed while it was read (a membership change): count next time
            members = reachable = None
        out = {"state": "ok", "role": st["state"], "term": st["term"], "leader": st["leader"], "members": members,
               "reachable_members": reachable, "has_quorum": st["has_quorum"],
               "commit_index": st["commit_index"], "applied_index": st["applied_index"]}
        if st["leader"] is None:
            out.update(state="unreachable", error=f"no Raft leader is known; this member reaches {reachable} of "
                                                  f"{members} members")
        elif not st["has_quorum"]:
            out.update(state="unreachable", error=f"this member reaches {reachable} of {members} members, "
                                                  "no majority")
        journal = st.get("journal")
        if journal is not None:
            out["journal"] = journal
            if not journal["ok"]:  # full disk, I/O errors: it stores (and so acknowledges) nothing new
                out.update(state="down", error=journal["error"])
        return out

    def metadata_store_check(self) -> dict[str, Any]:
        """The active store: ``{"state", "name", "backend", "error"?, "switch"?}``.

        The ``raft`` store is checked inline (its data is the local replica; writes need a leader);
        an external store by :meth:`MetadataStore.ping` on a cached probe.
        """
        node = self.node
        if node.store is None:
            return {"state": "not_applicable", "reason": "worker-only node: holds no metadata"}
        if node.store.active_name == "raft":
            return self._store_check_now()
        return self._store.get()

    def kafka_check(self) -> dict[str, Any]:
        """Kafka at the node's bootstrap servers: ``{"state", "bootstrap_servers", "cluster_id"?, "brokers"?,
        "error"?}`` (cached probe; the error names the address)."""
        return self._kafka.get()

    def agent_check(self) -> dict[str, Any]:
        """This node's worker agent: ``{"state", "pid", "last_heartbeat_s_ago", "session_timeout_s",
        "generation", "connectors", "tasks", "error"?}``; seconds as floats (0.1 s).

        ``down``: no agent process, or it exited. ``starting``: it runs but no heartbeat was
        acknowledged yet, for up to a session timeout after it started. ``unreachable``: no
        heartbeat acknowledged for longer than the session timeout.
        """
        return self._agent()[0]

    def spark_check(self) -> dict[str, Any]:
        """The agent's SparkSession: ``{"state", "master", "error"?}``, as the agent last recorded it.

        ``not_started`` until a batch needs Spark; ``down`` with the agent.
        """
        return self._spark(*self._agent())

    def _agent(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        """:meth:`agent_check`'s answer and the agent's status file (``None`` when absent or stale).

        ``restarts`` (when not 0): how often the node started its agent again after it exited.
        """
        check, status = self._agent_state()
        restarts = getattr(self.node, "agent_restarts", 0)
        if restarts and check["state"] != "not_applicable":
            check["restarts"] = restarts
        return check, status

    def _agent_state(self) -> tuple[dict[str, Any], dict[str, Any] | None]:
        node = self.node
        if "worker" not in node.options.roles:
            return {"state": "not_applicable", "reason": "raft-only node: runs no agent"}, None
        proc = node.agent
        if proc is None:
            return {"state": "down", "error": "this node has not started its agent process"}, None
        code = proc.poll()
        if code is not None:
            return {"state": "down", "pid": proc.pid, "exit_code": code,
                    "error": f"the agent process exited with code {code} (see agent.log in the node's data dir); "
                             "the node starts it again"}, None
        now = time.monotonic()  # the agent writes its times with the host's monotonic clock (agent_status)
        status = read_agent_status(node.options.data_dir)
        if status is None or status.get("pid") != proc.pid:  # the Celery worker is still booting
            return {"state": "starting", "pid": proc.pid}, None
        timeout = float(status.get("session_timeout_s") or node.options.session_timeout_ms / 1000.0)
        out: dict[str, Any] = {"state": "ok", "pid": proc.pid, "last_heartbeat_s_ago": None,
                               "session_timeout_s": timeout, "generation": status.get("generation"),
                               "connectors": status.get("connectors"), "tasks": status.get("tasks")}
        last = status.get("last_heartbeat_at")
        if last is None:
            waited = now - float(status.get("started_at") or now)
            if waited > timeout:
                out.update(state="unreachable", error=f"no heartbeat acknowledged in the {waited:.1f} s since the "
                                                      f"agent started: {status.get('last_error') or 'no answer'}")
            else:
                out["state"] = "starting"
            return out, status
        age = max(0.0, now - float(last))
        out["last_heartbeat_s_ago"] = round(age, 1)
        if age > timeout:
            out.update(state="unreachable", error=f"no heartbeat acknowledged for {age:.1f} s (session timeout "
                                                  f"{timeout:g} s): {status.get('last_error') or 'no answer'}")
        return out, status

    def _spark(self, agent: dict[str, Any], status: dict[str, Any] | None) -> dict[str, Any]:
        node = self.node
        if "worker" not in node.options.roles:
            return {"state": "not_applicable", "reason": "raft-only node: runs no agent"}
        master = node.options.spark_master
        if agent["state"] == "down":
            return {"state": "down", "master": master,
                    "error": "the agent, which holds the SparkSession, is not running"}
        spark = (status or {}).get("spark")
        if not isinstance(spark, dict) or spark.get("state") not in STATES:
            return {"state": "not_started", "master": master}
        return {**spark, "master": master}

    # ---------------------------------------------------------------- probes
    def _probe_kafka(self) -> dict[str, Any]:
        from confluent_kafka import KafkaException

        from webapp.kafka.topics import shared_admin_client

        servers = self.node.options.bootstrap_servers
        try:
            md = shared_admin_client({"bootstrap.servers": servers}).list_topics(timeout=self.kafka_timeout)
        except KafkaException as exc:
            err = exc.args[0] if exc.args else exc
            reason = err.str() if hasattr(err, "str") else str(err)
            return {"state": "unreachable", "bootstrap_servers": servers,
                    "error": f"Kafka at {servers} did not answer a metadata request within "
                             f"{self.kafka_timeout:g} s: {reason}"}
        except Exception as exc:  # noqa: BLE001 - a bad config is as unreachable as a dead broker
            return {"state": "unreachable", "bootstrap_servers": servers,
                    "error": f"cannot ask Kafka at {servers}: {type(exc).__name__}: {exc}"}
        return {"state": "ok", "bootstrap_servers": servers, "cluster_id": md.cluster_id,
                "brokers": len(md.brokers)}

    def _kafka_late(self, seconds: float) -> dict[str, Any]:
        servers = self.node.options.bootstrap_servers
        return {"state": "unreachable", "bootstrap_servers": servers,
                "error": f"Kafka at {servers} did not answer a metadata request within {seconds:.1f} s"}

    def _store_identity(self) -> dict[str, Any]:
        node = self.node
        name = node.store.active_name
        backend = next((s["backend"] for s in node.stores.describe() if s["name"] == name), None)
        out: dict[str, Any] = {"name": name, "backend": backend}
        sw = node.raft.state.switch
        if sw is not None and node.raft.state.switch_in_progress():
            out["switch"] = {"source": sw.get("source"), "target": sw.get("target"), "phase": sw.get("phase")}
        return out

    def _store_check_now(self) -> dict[str, Any]:
        from webapp.storage.base import StoreError

        out = {"state": "ok", **self._store_identity()}
        try:
            self.node.store.active.ping()
        except StoreError as exc:
            out.update(state="unreachable", error=str(exc))
        except Exception as exc:  # noqa: BLE001 - a plugin's own error type still means "does not answer"
            out.update(state="unreachable", error=f"metadata store {out['name']!r}: {type(exc).__name__}: {exc}"[:500])
        return out

    def _store_late(self, seconds: float) -> dict[str, Any]:
        out = {"state": "unreachable", **self._store_identity()}
        out["error"] = f"metadata store {out['name']!r} did not answer within {seconds:.1f} s"
        return out


def health_report(node: HealthSubject | None) -> tuple[int, dict[str, Any]]:
    """``(http_status, body)`` of ``GET /health`` for ``node`` (``None``: no node has finished starting here).

    See :meth:`NodeHealth.report` for the body; a node still starting answers 503 with
    Kafka Connect's ``starting`` status and every check ``starting``.
    """
    if node is None:
        return 503, {"status": "starting", "message": "Worker is still starting up.", "state": "down",
                     "node_id": None, "roles": [], "checks": {name: {"state": "starting"} for name in CHECKS}}
    return node.health.report()
