"""A connector's health as the console shows it, derived once on the server from Connect's statuses.

Owns the console's reading of Kafka Connect's ConnectorStateInfo: a health word
per connector from its own state and its tasks' states, counts of task states,
the root-cause line of a failed entity's trace, and one name per worker (the node
id, with its REST address as detail). Pure functions over plain dicts: nothing
here reads or writes cluster state (:mod:`webapp.console.api` feeds them).

Health (the worst that applies wins):

* ``failed`` — the connector itself is FAILED, or it has tasks and every one is FAILED;
* ``degraded`` — some but not all tasks FAILED, or some task is UNASSIGNED or
  RESTARTING while another runs;
* ``unassigned`` — the connector or every task is UNASSIGNED, or a started
  connector has no task yet;
* ``healthy`` — otherwise (RUNNING, or PAUSED/STOPPED as its target state asks).
"""
from __future__ import annotations

import re
from typing import Any, Iterable, Mapping

__all__ = ["HEALTH_WORDS", "TASK_STATES", "connector_health", "root_cause", "worker_names", "WorkerNames",
           "kafka_hint"]

#: the health words, best first
HEALTH_WORDS = ("healthy", "degraded", "unassigned", "failed")
#: Connect's observed states of a task (``State``)
TASK_STATES = ("UNASSIGNED", "RUNNING", "PAUSED", "STOPPED", "FAILED", "RESTARTING")

_EXCEPTION_LINE = re.compile(r"^([A-Za-z_][\w.]*(?:Error|Exception|Exceeded|Failure|Interrupt|Exit)\w*|"
                             r"[a-z_][\w]*\.[\w.]*[A-Z]\w*)(?::\s*(.*))?$")
_KAFKA_TRANSPORT = re.compile(r"Broker transport failure|_TRANSPORT|All broker connections are down|"
                              r"Failed to resolve|Connection refused|_ALL_BROKERS_DOWN|timed out", re.IGNORECASE)


def root_cause(trace: str | None) -> str | None:
    """The line that says why: the last exception line of a Python traceback (chained ones included).

    Connect's own traces put the exception first; a Python one puts it last,
    after the frames, and a chained traceback's last block is the one raised. A
    trace with no recognisable exception line gives its last non-empty line;
    ``None`` or an empty trace gives ``None``. At most 500 characters.
    """
    if not trace:
        return None
    lines = [ln.rstrip() for ln in trace.strip().splitlines() if ln.strip()]
    if not lines:
        return None
    for line in reversed(lines):
        if line.startswith((" ", "\t")) or line.startswith("Traceback ") or line.startswith("During handling") \
                or line.startswith("The above exception"):
            continue
        if _EXCEPTION_LINE.match(line.strip()):
            return line.strip()[:500]
    return lines[-1].strip()[:500]


def kafka_hint(line: str | None, bootstrap_servers: str | None) -> str | None:
    """``line`` with the Kafka address it tried to reach appended when it is a Kafka transport error.

    librdkafka's "Local: Broker transport failure" names no address; the console
    shows "… (Kafka bootstrap servers: host:port)". Lines that already name the
    address, or are about something else, come back unchanged.
    """
    if not line or not bootstrap_servers or bootstrap_servers in line or not _KAFKA_TRANSPORT.search(line):
        return line
    return f"{line} (Kafka bootstrap servers: {bootstrap_servers})"


class WorkerNames:
    """One name per worker: REST address or node id → ``{"node_id", "rest_address"}``.

    Built from the Raft members (``{node_id: {"rest_address", ...}}``). Status
    bodies name workers by REST address (Connect's ``worker_id``), the
    assignment and the heartbeats by node id; both resolve to the same pair.
    An unknown name is kept as the REST address with no node id.
    """

    def __init__(self, members: Mapping[str, Mapping[str, Any]]):
        self._by_address = {}
        self._by_id = {}
        for node_id, m in members.items():
            pair = {"node_id": node_id, "rest_address": (m or {}).get("rest_address")}
            self._by_id[node_id] = pair
            if pair["rest_address"]:
                self._by_address[pair["rest_address"]] = pair

    def __call__(self, name: str | None) -> dict[str, Any] | None:
        if name is None:
            return None
        return self._by_address.get(name) or self._by_id.get(name) or {"node_id": None, "rest_address": name}


def worker_names(members: Mapping[str, Mapping[str, Any]]) -> WorkerNames:
    """A :class:`WorkerNames` over the Raft members."""
    return WorkerNames(members)


def _counts(states: Iterable[str]) -> dict[str, int]:
    out = {s: 0 for s in TASK_STATES}
    for s in states:
        out[s] = out.get(s, 0) + 1
    return out


def connector_health(status: Mapping[str, Any], *, names: WorkerNames | None = None,
                     bootstrap_servers: str | None = None) -> dict[str, Any]:
    """The console's view of one Connect ConnectorStateInfo (``GET /connectors/{name}/status``'s body).

    Returns ``{"name", "type", "state", "health", "task_counts": {STATE: n}, "tasks_total",
    "worker": {"node_id", "rest_address"} | None, "root_cause": str | None,
    "tasks": [{"id", "state", "worker", "root_cause", "trace"?}]}``. ``root_cause`` of the
    connector is its own trace's line, else the first failed task's. Kafka transport
    errors name ``bootstrap_servers`` (see :func:`kafka_hint`).
    """
    names = names or WorkerNames({})
    connector = status.get("connector") or {}
    state = connector.get("state") or "UNASSIGNED"
    tasks = []
    for t in status.get("tasks") or []:
        entry = {"id": t.get("id"), "state": t.get("state") or "UNASSIGNED", "worker": names(t.get("worker_id")),
                 "root_cause": kafka_hint(root_cause(t.get("trace")), bootstrap_servers)}
        if t.get("trace"):
            entry["trace"] = t["trace"]
        tasks.append(entry)
    counts = _counts(t["state"] for t in tasks)
    total = len(tasks)
    failed = counts["FAILED"]
    waiting = counts["UNASSIGNED"] + counts["RESTARTING"]
    if state == "FAILED" or (total and failed == total):
        health = "failed"
    elif failed or (waiting and waiting < total):
        health = "degraded"
    elif state == "UNASSIGNED" or (total and counts["UNASSIGNED"] == total) or \
            (not total and state not in ("PAUSED", "STOPPED")):
        health = "unassigned"
    else:
        health = "healthy"
    cause = kafka_hint(root_cause(connector.get("trace")), bootstrap_servers)
    if cause is None:
        cause = next((t["root_cause"] for t in tasks if t["state"] == "FAILED" and t["root_cause"]), None)
    return {"name": status.get("name"), "type": status.get("type"), "state": state, "health": health,
            "task_counts": counts, "tasks_total": total, "worker": names(connector.get("worker_id")),
            "root_cause": cause, "trace": connector.get("trace"), "tasks": tasks}
