#!/usr/bin/env python
"""Scale benchmark: the control plane with many connectors, tasks and workers (issue 16, item 1).

A 3-member Raft cluster on loopback (``tools.launcher.LocalCluster``, roles ``raft``
only: no agent, no Spark, no Kafka traffic) plus WORKERS simulated workers. A
simulated worker is a pair of threads in this process that speaks the real
internal protocol through the real client (``webapp.runtime.client.ControlPlaneClient``,
HMAC-signed with the cluster secret): it heartbeats every second (the first
heartbeat joins; reports are deltas after the first acknowledged one, and it sends
the digest of the view it runs and is answered with what changed since that view,
``webapp.coordinator.viewdelta``, as a real agent does), and on every new view it
"starts" what it was given — posts ``tasks.max`` task configs for each connector it
owns whose configs are missing, reports the connector RUNNING, starts each new task
(the start committed through Raft, then the offsets read) in the requests an agent's
client sends for them — its task pool of TASK_THREADS threads starts them together and
the client gathers the starts made at once, so one request in flight carrying up to
TASK_THREADS starts; sent here directly, since 100 workers' task threads in this one
process starved the benchmark's own REST clients of the GIL — reports the started tasks RUNNING
together (``ControlPlaneClient.report_statuses``, up to 500 per request) — and commits
one task's offsets every COMMIT_INTERVAL seconds. A worker that is "lost" simply
stops (no leave message), like a killed agent. The writes of all workers go
through one pool of CLIENT_THREADS threads.

CONNECTORS connectors (file sources, ``tasks.max`` = TASKS_PER_CONNECTOR) are
created through the public REST API (``POST /connectors``). Figures, each with its
goal where the issue sets one:

* **create** — creating the connectors with CREATE_CLIENTS concurrent clients:
  writes/s, p50/p99 latency of ``POST /connectors``.
* **full assignment** — from the first create until every connector and every task
  is assigned and RUNNING (checked through ``GET /connectors?expand=status`` on a
  follower, so the check does not load the leader). This row and the create row also give
  the leader's CPU seconds and the generations its coordinator committed over the same span
  (:class:`LeaderWork`): the work, which moves far less between runs than the wall time.
* **rebalance, 1 / 10 workers lost** — from the moment the workers stop until every
  task is assigned and RUNNING again; includes the session timeout (5 s) the
  coordinator waits before declaring a silent worker dead. Tasks moved against the
  minimum (the lost workers' tasks), from ``GET /raftconnect/v1/assignment`` before and after.
* **Raft data** — size of each member's ``raft/`` directory (journal + snapshot), after
  the load and after the restart.
* **restart of all three Raft members at once** (``kill -9`` of all, then started
  again): until the new coordinator has committed an assignment for its epoch, every
  simulated worker has rejoined (a heartbeat answered after the restart) and every
  task is assigned and RUNNING. Goal <= 60 s. (The simulated workers keep running,
  as real agents on worker nodes would; Kafka Connect users report 5-15 minutes at
  200 connectors.)
* **``GET /connectors?expand=status``** and **``?expand=info``** on the leader, READS
  sequential requests each by curl (a process of its own, as an operator's browser or script)
  and as many by this process's ``requests`` client, alternately: p50 (and p99, body size) of
  each. Goal p50 <= 300 ms at 10,000 connectors. This process also runs the simulated workers'
  threads, so its own client's figure includes waiting for this process's GIL.
* **``GET /metrics``** on the leader, 3 scrapes each way: time, size and samples of the answer. Each node
  exports the per-task series of its own agent's tasks, so the leader's answer holds the
  cluster's and connectors' series, not 100,000 tasks' (the simulated workers have no node).
* **RSS** of each Raft member (``VmRSS`` sampled every second, the maximum). Goal <= 1 GB.
* **garbage collection** — per member, its full collections since it started, the complete
  examinations among them (thaws, ``webapp.gcpolicy``) and the longest pause (``gc`` of
  ``GET /raftconnect/v1/raft``): a leader paused past the 1-2 s election timeout is voted out.
* **offset commits/s** — CLIENT_THREADS threads commit offsets as fast as they can,
  COMMIT_SECONDS long, twice: spread over all workers (about one thread each), then as
  COMMITTERS_PER_WORKER task threads of each of a few workers, the shape of an agent whose task
  pool is busy (its client gathers the commits made at the same time into one request),
  against the same shape with one request per commit (the client's batching off) just
  before it: commits/s and p50/p99, and the ratio.
* **task starts/s** — a few workers start every task they own again (an operator's restart of
  each, same generation), TASK_THREADS at a time each, as an agent's task pool starts a view's
  tasks after a rebalance: starts/s with the client gathering concurrent starts into one request,
  against one request per start just before it, and the ratio.

The issue's full scale is 10,000 connectors, 100,000 tasks, 100 workers (the
defaults); on a small machine run it smaller (``--connectors 500 --workers 10``)
and read the table's scale line. ``--py-spy FILE`` records the leader with py-spy
(raw format) from the first create to the end of the rebalances; with ``--py-spy-gil`` only its
samples that hold the interpreter lock (where the leader's Python CPU goes, not where its threads wait).

Usage: ``python benchmarks/scale/run.py [--connectors 10000] [--workers 100]
[--tasks-per-connector 10] [--no-record] [--keep]``; results are appended to ``RESULTS.md``
beside this script with the machine and the load average.
"""
from __future__ import annotations

import argparse
import os
import random
import shutil
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor, wait
from datetime import datetime, timezone
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes
os.environ.setdefault("RAFTCONNECT_DEVELOPMENT", "1")

from benchmarks._common import cpu_ticks, machine, quantile  # noqa: E402
from tools.launcher import ConnectClient, LocalCluster, wait_for  # noqa: E402
from webapp.coordinator.viewdelta import DELTA_FROM, apply_view_delta  # noqa: E402
from webapp.plugin import ConnectorTaskId, SourceOffset  # noqa: E402
from webapp.runtime.client import (  # noqa: E402
    OFFSETS_PATH, STARTS_PATH, ControlPlaneClient, ControlPlaneUnavailable, Fenced,
)

SOURCE = "raftconnect.connectors.file.FileSourceConnector"
SECRET = "scale-bench-secret"


class SimWorker:
    """One simulated worker: a heartbeat thread and a reconcile thread speaking the internal protocol.

    Args:
        worker_id: its id (registered in Raft on its first heartbeat).
        addresses: REST ``host:port`` of the Raft members, tried in order.
        pool: the shared executor its writes run on.
        commit_interval: seconds between two background offset commits (0: none).
        task_threads: tasks it starts at once (an agent's task pool, ``RAFTCONNECT_TASK_THREADS``).
    """

    def __init__(self, worker_id: str, addresses: list[str], pool: ThreadPoolExecutor, commit_interval: float,
                 task_threads: int = 16):
        self.worker_id = worker_id
        self.addresses = addresses
        self.pool = pool
        self.commit_interval = commit_interval
        self.member = {"rest_address": f"sim/{worker_id}", "weight": 1.0, "roles": ["worker"], "raft_address": None}
        self._client = ControlPlaneClient(addresses, SECRET, worker_id, timeout=30.0)
        self._stop = threading.Event()
        self._cv = threading.Condition()
        self._pending: dict[str, Any] | None = None
        self._lock = threading.Lock()
        self.view: dict[str, Any] | None = None  # the newest full view
        self.digest: str | None = None
        self.reported: dict[str, int] = {}  # task key -> generation it was reported RUNNING at
        self.connectors_reported: dict[str, int] = {}
        self.incomplete = False  # a write of the last reconcile failed: reconcile again on the next heartbeat
        self.acked: dict[str, Any] | None = None
        self.last_ok = 0.0  # time.monotonic() of the last answered heartbeat
        self.offset_seq = 0
        self.threads: list[threading.Thread] = []
        self.task_threads = task_threads
        self.starts = 0  # tasks started (each a start committed through Raft and its offsets read)

    def client(self) -> ControlPlaneClient:
        """The worker's one client, shared by its threads as a real agent shares its own (so a worker keeps
        at most the session's pool of connections to a member open, as an agent does)."""
        return self._client

    def start(self) -> None:
        """Start heartbeating (the first heartbeat joins), reconciling and committing offsets."""
        for target, name in ((self._heartbeat_loop, "hb"), (self._reconcile_loop, "rc"), (self._commit_loop, "oc")):
            t = threading.Thread(target=target, name=f"{self.worker_id}-{name}", daemon=True)
            t.start()
            self.threads.append(t)

    def stop(self) -> None:
        """Stop at once, without leaving the group (a lost worker)."""
        self._stop.set()
        with self._cv:
            self._cv.notify_all()

    # ----------------------------------------------------------------- heartbeat
    def _running(self) -> dict[str, Any]:
        with self._lock:
            view = self.view
            tasks = {k: {"state": "RUNNING", "connector": k.rpartition("-")[0], "task": int(k.rpartition("-")[2])}
                     for k, g in self.reported.items()}
            running: dict[str, Any] = {"generation": view["generation"] if view else -1,
                                       "connectors": sorted(self.connectors_reported), "tasks": tasks}
        if self.digest:
            running["view_digest"] = self.digest
        running["view_deltas"] = True  # as the agent: answered with what changed since the view named
        return running

    def _heartbeat_loop(self) -> None:
        while not self._stop.is_set():
            running = self._running()
            report = running
            if self.acked is not None:
                report = {**running, "tasks": {k: v for k, v in running["tasks"].items() if self.acked.get(k) != v},
                          "task_keys": list(running["tasks"]), "tasks_delta": True}
            self.acked = None
            try:
                answer = self.client().heartbeat(self.member, report, timeout=5.0)
            except (ControlPlaneUnavailable, Fenced, RuntimeError):
                self._stop.wait(0.2)
                continue
            self.last_ok = time.monotonic()
            self.acked = None if answer.get("report_full") else running["tasks"]
            if answer.get(DELTA_FROM) is not None:
                answer = apply_view_delta(self.view, answer)  # None: from another view; the next is whole
                if answer is None:
                    self._stop.wait(1.0)
                    continue
            if not answer.get("unchanged"):
                with self._lock:
                    self.view, self.digest = answer, answer.get("digest")
                self._offer(answer)
            elif self.incomplete and self.view is not None:
                self._offer(self.view)
            self._stop.wait(1.0)

    def _offer(self, view: dict[str, Any]) -> None:
        with self._cv:
            self._pending = view
            self._cv.notify()

    # ----------------------------------------------------------------- reconcile
    def _reconcile_loop(self) -> None:
        while not self._stop.is_set():
            with self._cv:
                while self._pending is None and not self._stop.is_set():
                    self._cv.wait(1.0)
                view, self._pending = self._pending, None
            if view is not None and not self._stop.is_set():
                self.reconcile(view)

    def reconcile(self, view: dict[str, Any]) -> None:
        """Post what ``view`` asks of a worker that started its connectors and tasks; wait for the writes."""
        futures = []
        for name, c in view["connectors"].items():
            if c["target_state"] == "STOPPED":
                continue
            n = int(c["config"].get("tasks.max", "1"))
            configs = [{"task.index": str(i)} for i in range(n)]
            if c["tasks"] != configs:
                futures.append(self.pool.submit(self._call, "tasks", name, None, c["generation"], configs))
            elif self.connectors_reported.get(name) != c["generation"]:
                futures.append(self.pool.submit(self._call, "status", name, None, c["generation"], None))
        with self._lock:
            self.reported = {k: g for k, g in self.reported.items() if k in view["tasks"]}
            self.connectors_reported = {k: g for k, g in self.connectors_reported.items() if k in view["connectors"]}
        # the view's new tasks started as an agent starts them (its task pool, each start committed), then
        # their statuses together, as an agent starting them reports them (one request per
        # MAX_STATUS_BATCH; reporting them one per pool thread tied every thread up in one client's batch)
        due = [(key, t) for key, t in view["tasks"].items() if self.reported.get(key) != t["generation"]]
        started = self.send_starts(due)
        step = ControlPlaneClient.MAX_STATUS_BATCH
        for i in range(0, len(started), step):
            futures.append(self.pool.submit(self._report_tasks, started[i:i + step]))
        results = [f.result() for f in futures]
        self.incomplete = len(started) < len(due) or not all(results)

    def send_starts(self, due: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
        """Start ``due`` (``[(task key, view entry)]``) in the requests the agent's client makes of its task
        pool's concurrent starts: one at a time, each with up to ``task_threads`` starts
        (``ControlPlaneClient._send_starts``); returns those whose start was recorded."""
        started = []
        for i in range(0, len(due), self.task_threads):
            if self._stop.is_set():
                break
            chunk = due[i:i + self.task_threads]
            items = [{"connector": t["connector"], "task": t["task"], "generation": t["generation"]} for _, t in chunk]
            try:
                outcomes = self.client()._send_starts(items)
            except (ControlPlaneUnavailable, RuntimeError):  # the request failed: started again next time
                break
            started += [item for item, outcome in zip(chunk, outcomes) if not isinstance(outcome, Exception)]
        self.starts += len(started)
        return started

    def start_tasks(self, due: list[tuple[str, dict[str, Any]]]) -> list[tuple[str, dict[str, Any]]]:
        """Start ``due`` as an agent's task pool does: ``task_threads`` threads, each task through
        ``ControlPlaneClient.start_task`` (which gathers the starts made at once); returns those whose
        start was recorded."""
        def one(item: tuple[str, dict[str, Any]]) -> bool:
            t = item[1]
            try:
                self.client().start_task(ConnectorTaskId(t["connector"], t["task"]), t["generation"])
            except (Fenced, ControlPlaneUnavailable, RuntimeError):
                return False
            return True

        with ThreadPoolExecutor(self.task_threads, thread_name_prefix=f"{self.worker_id}-task") as starter:
            return [item for item, ok in zip(due, starter.map(one, due)) if ok]

    def _call(self, what: str, name: str, task: int | None, generation: int, configs: Any) -> bool:
        if self._stop.is_set():
            return False
        try:
            # the connector's own RUNNING report as one direct request: report_status would park this pool
            # thread behind the client's batch in flight, and the pool's threads are shared by every worker
            item = {"connector": name, "task": task, "generation": generation, "state": "RUNNING"}
            if what == "tasks":
                self.client().put_task_configs(name, generation, configs)
            [outcome] = self.client().report_statuses([item])
            if outcome is not None:
                raise outcome
        except (Fenced, ControlPlaneUnavailable, RuntimeError):
            return False
        with self._lock:
            if task is None:
                self.connectors_reported[name] = generation
            else:
                self.reported[f"{name}-{task}"] = generation
        return True

    def _report_tasks(self, due: list[tuple[str, dict[str, Any]]]) -> bool:
        """Report ``due`` (``[(task key, view entry)]``) RUNNING in one request; whether all were recorded."""
        if self._stop.is_set():
            return False
        try:
            outcomes = self.client().report_statuses([
                {"connector": t["connector"], "task": t["task"], "generation": t["generation"], "state": "RUNNING"}
                for _, t in due])
        except (ControlPlaneUnavailable, RuntimeError):
            return False
        with self._lock:
            for (key, t), outcome in zip(due, outcomes):
                if outcome is None:
                    self.reported[key] = t["generation"]
        return all(o is None for o in outcomes)

    # ------------------------------------------------------------------- offsets
    def commit_one(self) -> bool:
        """Commit offsets for one of this worker's tasks (round robin); whether the leader took them."""
        view = self.view
        if not view or not view["tasks"]:
            return False
        keys = list(view["tasks"])
        self.offset_seq += 1
        t = view["tasks"][keys[self.offset_seq % len(keys)]]
        try:
            self.client().commit_offsets(ConnectorTaskId(t["connector"], t["task"]), t["generation"],
                                         [SourceOffset({"filename": f"/data/{t['connector']}-{t['task']}"},
                                                       {"position": self.offset_seq})])
            return True
        except (Fenced, ControlPlaneUnavailable, RuntimeError):
            return False

    def _commit_loop(self) -> None:
        if self.commit_interval <= 0:
            return
        self._stop.wait(random.random() * self.commit_interval)
        while not self._stop.wait(self.commit_interval):
            self.commit_one()


# ------------------------------------------------------------------------- helpers
class RssSampler:
    """Samples the RSS of some pids every second; keeps each name's peak, what it was made of
    (``RssAnon``: the heap; ``RssFile``: mapped files, e.g. pysyncobj's journal) and the phase
    of the run it was seen in (``phase``, set by the run as it goes), and whether the member led then
    (``roles``: ``{name: callable returning its Raft state}``, asked only when a new peak is seen)."""

    def __init__(self):
        self.pids: dict[str, int] = {}
        self.roles: dict[str, Any] = {}
        self.peak: dict[str, int] = {}
        self.detail: dict[str, str] = {}
        self.phase = "start"
        self._stop = threading.Event()
        threading.Thread(target=self._run, daemon=True).start()

    @staticmethod
    def rss(pid: int) -> dict[str, int]:
        """``{"VmRSS", "RssAnon", "RssFile"}`` of ``pid`` in bytes (empty when it is gone)."""
        from webapp.connect.census import proc_status

        return proc_status(pid)

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            for name, pid in list(self.pids.items()):
                now = self.rss(pid)
                if now.get("VmRSS", 0) > self.peak.get(name, 0):
                    self.peak[name] = now["VmRSS"]
                    try:
                        role = self.roles[name]().lower() if name in self.roles else "?"
                    except Exception:  # noqa: BLE001 - a busy member may not answer within the second
                        role = "no answer"
                    self.detail[name] = (f"heap {mib(now.get('RssAnon', 0))}, files {mib(now.get('RssFile', 0))}, "
                                         f"{role}, during {self.phase}")

    def stop(self) -> None:
        self._stop.set()


def baseline_then_gathered(workers: list[SimWorker], path: str, phase: Any) -> tuple[Any, Any]:
    """``phase(workers)`` twice: first the baseline, each worker's client sending one request per item
    instead of using the batch endpoint ``path`` (as the client sent them before it gathered them),
    then with the client gathering them. Returns ``(baseline result, gathered result)``."""
    for w in workers:
        w.client()._unbatched.add(path)
    baseline = phase(workers)
    for w in workers:
        w.client()._unbatched.discard(path)
    return baseline, phase(workers)


def dir_size(path: str) -> int:
    """Bytes of the files under ``path``."""
    total = 0
    for dirpath, _, files in os.walk(path):
        for f in files:
            try:
                total += os.path.getsize(os.path.join(dirpath, f))
            except OSError:
                pass
    return total


def all_running(client: ConnectClient, connectors: int, tasks_per_connector: int) -> bool:
    """Whether every connector and ``tasks_per_connector`` tasks of each are RUNNING (one expand=status read)."""
    body = client.request("GET", "/connectors", params=[("expand", "status")])
    if len(body) < connectors:
        return False
    for entry in body.values():
        st = entry["status"]
        if st["connector"]["state"] != "RUNNING" or len(st["tasks"]) != tasks_per_connector:
            return False
        if any(t["state"] != "RUNNING" for t in st["tasks"]):
            return False
    return True


def wait_all_running(follower: ConnectClient, args, timeout: float, what: str, extra=lambda: True) -> float | None:
    """Poll until every task is RUNNING (and ``extra()``); returns the monotonic time it was first seen, or
    ``None`` when it was not within ``timeout`` seconds (the row says so and the run goes on)."""
    try:
        wait_for(lambda: extra() and all_running(follower, args.connectors, args.tasks_per_connector), timeout,
                 interval=0.5, what=what)
    except TimeoutError:
        return None
    return time.monotonic()


def took(t_done: float | None, t0: float, timeout: float) -> str:
    """``"12.3 s"``, or that it did not happen within ``timeout``."""
    return f"not reached within {timeout:.0f} s" if t_done is None else f"{t_done - t0:.1f} s"


def raft_term(node) -> int:
    """The Raft term a member reports (0 when it does not answer)."""
    try:
        return int(node.client().request("GET", "/raftconnect/v1/raft")["term"])
    except Exception:  # noqa: BLE001 - a busy or stopped member
        return 0


def raft_figures(node, part: str) -> dict | str:
    """The ``part`` of the member's ``GET /raftconnect/v1/raft`` (``gc``, ``ticks``), ``"-"`` when it does not
    answer, ``"not timed"`` when it has no such figures."""
    try:
        figures = node.client().request("GET", "/raftconnect/v1/raft").get(part)
    except Exception:  # noqa: BLE001 - a busy or stopped member
        return "-"
    return figures or "not timed"


def full_collections(node) -> str:
    """``"N full collections (T thaws), longest P s"`` since the member started, from its ``gc`` figures
    (the histogram of ``/metrics`` has buckets, not the longest pause), or what :func:`raft_figures` says."""
    figures = raft_figures(node, "gc")
    if isinstance(figures, str):
        return figures
    freeze = figures.get("freeze") or {}
    return (f"{figures['collections'][2]:,} full collections ({freeze.get('thaws', 0)} thaws), longest "
            f"{figures['max_pause_s'][2]:.2f} s")


def tick_figures(node) -> str:
    """``"longest gap G s, H held-up ticks, E elections started, S step-downs"`` since the member started, from
    its ``ticks`` figures (``raftnode.ticks``), or what :func:`raft_figures` says."""
    t = raft_figures(node, "ticks")
    if isinstance(t, str):
        return t
    return (f"longest gap {t['longest_gap_s']:.2f} s, {t['held_up']} held-up ticks, {t['elections_started']} "
            f"elections started, {t['step_downs']} step-downs")


def why_elections(node, limit: int = 3) -> list[str]:
    """The first ``limit`` lines of ``node``'s log in which it said why it elected (a first election at start
    left out) or stepped down, or gave a long gap between its ticks (``raftnode.ticks``)."""
    wanted = (b"this member starts an election", b"stepping down as leader", b"between two ticks")
    out: list[str] = []
    try:
        with open(node.log_path, "rb") as fh:
            for line in fh:
                if any(w in line for w in wanted) and b"since it started" not in line:  # not a first election
                    out.append(line.decode("utf-8", "replace").strip())
                    if len(out) >= limit:
                        break
    except OSError:
        pass
    return out


def curl_get(url: str, auth: tuple[str, str] | None) -> tuple[float, int]:
    """``GET url`` with curl, a process of its own: ``(seconds from the request to the body's last byte,
    body bytes)``, as curl's ``time_total`` counts them (its own start-up left out).

    The list reads are timed this way beside this process's ``requests`` client because this process
    also runs the simulated workers' hundreds of threads: its client waits for its own GIL while
    it reads a body of several MiB, which is the benchmark's cost, not the leader's. Errors:
    ``RuntimeError`` unless the answer is 200."""
    config = f'user = "{auth[0]}:{auth[1]}"\n' if auth else ""  # on stdin, not in the process list
    out = subprocess.run(["curl", "-sS", "-K", "-", "-o", "/dev/null", "-w", "%{time_total} %{size_download} %{http_code}",
                          url], input=config, capture_output=True, text=True, timeout=300, check=True).stdout.split()
    if out[2] != "200":
        raise RuntimeError(f"GET {url}: HTTP {out[2]}")
    return float(out[0]), int(out[1])


class LeaderWork:
    """The leader's CPU and the generations its coordinator committed since this object was made (:meth:`since`).

    Wall time of the bring-up moves by 3-4x between runs on a shared 2-core host (the same tree: 24 and
    103 creates/s within the hour), so the work it took the leader is recorded beside it: CPU seconds
    of the process (user + system, ``/proc``) and the ``coordinator: generation N`` lines of its log.
    """

    def __init__(self, node) -> None:
        self.node = node
        self.ticks = os.sysconf("SC_CLK_TCK")
        self._cpu, self._generations = self._read()

    def _read(self) -> tuple[int, int]:
        user, system, _, _ = cpu_ticks(self.node.proc.pid)
        with open(self.node.log_path, "rb") as fh:
            generations = sum(1 for line in fh if b"coordinator: generation " in line)
        return user + system, generations

    def since(self) -> str:
        """``"leader CPU X s, G generations"`` since this object was made."""
        cpu, generations = self._read()
        return f"leader CPU {(cpu - self._cpu) / self.ticks:,.1f} s, {generations - self._generations:,} generations"


def fmt_ms(values: list[float]) -> str:
    """``"p50 x ms, p99 y ms"`` of latencies in seconds."""
    return f"p50 {quantile(values, 0.5) * 1000:.1f} ms, p99 {quantile(values, 0.99) * 1000:.1f} ms"


def mib(n: int) -> str:
    """Bytes as MiB, one decimal."""
    return f"{n / 2**20:,.1f} MiB"


# ---------------------------------------------------------------------------- main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--connectors", type=int, default=10_000)
    parser.add_argument("--workers", type=int, default=100)
    parser.add_argument("--tasks-per-connector", type=int, default=10)
    parser.add_argument("--create-clients", type=int, default=16, help="concurrent POST /connectors clients")
    parser.add_argument("--client-threads", type=int, default=32, help="threads carrying the workers' writes")
    parser.add_argument("--commit-interval", type=float, default=1.0,
                        help="seconds between background offset commits of each worker (0: none)")
    parser.add_argument("--commit-seconds", type=float, default=10.0, help="length of each offset commit phase")
    parser.add_argument("--committers-per-worker", type=int, default=8,
                        help="task threads of one worker committing at once, in the second offset commit phase")
    parser.add_argument("--task-threads", type=int, default=16,
                        help="tasks a simulated worker starts at once (an agent's task pool)")
    parser.add_argument("--reads", type=int, default=10, help="requests per expand=status / expand=info figure")
    parser.add_argument("--timeout", type=float, default=3600.0, help="seconds each phase may take")
    parser.add_argument("--py-spy", metavar="FILE", help="record the leader with py-spy (raw) during the load")
    parser.add_argument("--py-spy-gil", action="store_true",
                        help="with --py-spy: only samples holding the interpreter lock (py-spy --gil)")
    parser.add_argument("--no-record", action="store_true", help="do not append to RESULTS.md")
    parser.add_argument("--keep", action="store_true",
                        help="keep the work directory (each member's node.log and Raft data) and print its path")
    args = parser.parse_args()
    if args.workers < 11:
        print("note: fewer than 11 workers: the 10-worker loss is skipped", flush=True)

    load_start = os.getloadavg()
    work = Path(tempfile.mkdtemp(prefix="bench-scale-"))
    data = work / "files"
    data.mkdir()
    (data / "in.csv").write_text("a\n1\n")
    rows: list[tuple[str, str, str]] = []

    def row(what: str, result: str, goal: str = "") -> None:
        rows.append((what, result, goal))
        print(f"| {what} | {result} | {goal} |", flush=True)

    # Kafka is never reached: raft-only members run no tasks (their /health says kafka unreachable, 200)
    cluster = LocalCluster(data_dir=str(work / "cluster"), bootstrap_servers="127.0.0.1:9", raft_roles="raft",
                           secret=SECRET, file_allowed_paths=[str(data)]).start()
    rss = RssSampler()
    pool = ThreadPoolExecutor(args.client_threads, thread_name_prefix="sim-write")
    workers: list[SimWorker] = []
    spy = None
    try:
        for n in cluster.nodes:
            rss.pids[n.node_id] = n.proc.pid
            probe = n.client()
            probe.timeout = 1.0
            rss.roles[n.node_id] = lambda c=probe: c.request("GET", "/raftconnect/v1/raft")["state"]
        leader_node = cluster.leader()
        followers = [n for n in cluster.nodes if n is not leader_node]
        addresses = [leader_node.url.split("//")[1]] + [n.url.split("//")[1] for n in followers]
        leader = leader_node.client()
        term_start = raft_term(leader_node)
        follower = followers[0].client()
        follower.timeout = 300.0
        leader.timeout = 300.0
        if args.py_spy:
            spy = subprocess.Popen(["py-spy", "record", "--pid", str(leader_node.proc.pid), "--format", "raw",
                                    "-o", args.py_spy, "--rate", "20", "--nonblocking"]
                                   + (["--gil"] if args.py_spy_gil else []),
                                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        for i in range(args.workers):
            w = SimWorker(f"sim-{i:03d}", addresses, pool, args.commit_interval, args.task_threads)
            workers.append(w)
            w.start()
        wait_for(lambda: sum(1 for n in leader.request("GET", "/raftconnect/v1/cluster")["nodes"]
                             if n["alive"] and n["id"].startswith("sim-")) >= args.workers,
                 120, what="the simulated workers to join")

        # -------------------------------------------------------------- create
        local = threading.local()
        lat: list[float] = []

        def create(i: int) -> None:
            c = getattr(local, "c", None)
            if c is None:
                c = local.c = ConnectClient(leader_node.url, leader_node.auth, timeout=60)
            cfg = {"connector.class": SOURCE, "path": str(data / "in.csv"), "format": "csv", "topic": f"t{i % 100}",
                   "tasks.max": str(args.tasks_per_connector)}
            t0 = time.perf_counter()
            c.create_connector(f"c{i:05d}", cfg)
            lat.append(time.perf_counter() - t0)

        rss.phase = "create"
        leader_work = LeaderWork(leader_node)
        t_create = time.monotonic()
        with ThreadPoolExecutor(args.create_clients) as ex:
            list(ex.map(create, range(args.connectors)))
        created = time.monotonic() - t_create
        row(f"create {args.connectors:,} connectors via POST /connectors ({args.create_clients} clients)",
            f"{args.connectors / created:,.0f} writes/s, {fmt_ms(lat)}; {created:.1f} s in all; {leader_work.since()}")

        rss.phase = "full assignment"
        t_full = wait_all_running(follower, args, args.timeout, "every task RUNNING")
        row(f"full assignment: {args.connectors * args.tasks_per_connector:,} tasks over {args.workers} workers "
            f"assigned and RUNNING", f"{took(t_full, t_create, args.timeout)} from the first create; "
            f"{sum(w.starts for w in workers):,} task starts; from the first create, {leader_work.since()}")

        # ---------------------------------------------------------- rebalances
        alive = list(workers)
        for lost_n in (1, 10):
            if lost_n >= len(alive):
                continue
            rss.phase = f"the rebalance after {lost_n} lost"
            before = leader.request("GET", "/raftconnect/v1/assignment")
            lost = random.Random(lost_n).sample(alive, lost_n)
            lost_ids = {w.worker_id for w in lost}
            t0 = time.monotonic()
            for w in lost:
                w.stop()
            alive = [w for w in alive if w not in lost]

            def moved_away(lost_ids: set[str] = lost_ids) -> bool:
                a = leader.request("GET", "/raftconnect/v1/assignment")
                return not any(o in lost_ids for o in a["tasks"].values()) and not any(
                    o in lost_ids for o in a["connectors"].values())

            t_done = wait_all_running(follower, args, args.timeout, f"RUNNING after {lost_n} lost", extra=moved_away)
            after = leader.request("GET", "/raftconnect/v1/assignment")
            moved = sum(1 for k, o in after["tasks"].items() if before["tasks"].get(k) != o)
            minimum = sum(1 for o in before["tasks"].values() if o in lost_ids)
            row(f"rebalance after {lost_n} worker(s) lost (no leave; includes the 5 s session timeout)",
                f"{took(t_done, t0, args.timeout)} to every task RUNNING; {moved:,} tasks moved", f"minimum {minimum:,} "
                f"(ratio {moved / max(minimum, 1):.2f})")
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
            spy = None

        # ------------------------------------------------------------- reads
        rss.phase = "the expand reads"
        for expand in ("status", "info"):
            times, curled, size = [], [], 0
            for _ in range(args.reads):  # alternately: curl in a process of its own, then this process's client
                curled.append(curl_get(f"{leader.url}/connectors?expand={expand}", leader.session.auth)[0])
                t0 = time.perf_counter()
                resp = leader.session.get(leader.url + "/connectors", params=[("expand", expand)], timeout=300)
                times.append(time.perf_counter() - t0)
                resp.raise_for_status()
                size = len(resp.content)
            row(f"GET /connectors?expand={expand} on the leader ({args.connectors:,} connectors, {args.reads} reads)",
                f"curl: {fmt_ms(curled)}; this process's requests client: {fmt_ms(times)}; body {size / 1024:,.0f} KiB",
                "goal p50 <= 300 ms at 10,000 connectors")

        rss.phase = "the /metrics scrapes"
        times, curled, size, samples = [], [], 0, 0
        for _ in range(3):
            curled.append(curl_get(leader.url + "/metrics", leader.session.auth)[0])
            t0 = time.perf_counter()
            resp = leader.session.get(leader.url + "/metrics", timeout=300)
            times.append(time.perf_counter() - t0)
            resp.raise_for_status()
            size = len(resp.content)
            samples = sum(1 for line in resp.text.splitlines() if line and not line.startswith("#"))
        row(f"GET /metrics on the leader ({args.connectors:,} connectors, 3 + 3 scrapes)",
            f"curl: {fmt_ms(curled)}; this process's requests client: {fmt_ms(times)}; {size / 2**20:,.1f} MiB, "
            f"{samples:,} samples", "per-task series are exported by the node running the task")

        # ------------------------------------------------------------ offsets
        rss.phase = "offset commits"

        def commit_phase(workers: list[SimWorker]) -> tuple[float, list[float]]:
            """CLIENT_THREADS threads committing for ``workers`` (spread round robin) for COMMIT_SECONDS."""
            lat: list[float] = []
            stop_at = time.monotonic() + args.commit_seconds

            def committer(w: SimWorker) -> int:
                n = 0
                while time.monotonic() < stop_at:
                    t0 = time.perf_counter()
                    if w.commit_one():
                        lat.append(time.perf_counter() - t0)
                        n += 1
                return n

            t0 = time.monotonic()
            futures = [pool.submit(committer, workers[i % len(workers)]) for i in range(args.client_threads)]
            wait(futures)
            return sum(f.result() for f in futures) / (time.monotonic() - t0), lat

        rate, lat = commit_phase(alive)
        row(f"offset commits, {args.client_threads} concurrent committers from {len(alive)} workers (about one "
            f"each), {args.commit_seconds:.0f} s", f"{rate:,.0f} commits/s, {fmt_ms(lat) if lat else '-'}")
        per = max(1, args.committers_per_worker)
        busy = alive[:max(1, args.client_threads // per)]
        (one_rate, one_lat), (rate, lat) = baseline_then_gathered(busy, OFFSETS_PATH, commit_phase)
        row(f"offset commits, {args.client_threads} concurrent committers as {per} task threads on each of "
            f"{len(busy)} workers (an agent's busy task pool), {args.commit_seconds:.0f} s: the client gathers "
            f"concurrent commits into one request", f"{rate:,.0f} commits/s, {fmt_ms(lat) if lat else '-'}",
            f"one request per commit, same run: {one_rate:,.0f} commits/s, "
            f"{fmt_ms(one_lat) if one_lat else '-'}; ratio {rate / max(one_rate, 1e-9):.2f}")

        # ------------------------------------------------------------ task starts
        rss.phase = "task starts"

        def start_phase(workers: list[SimWorker]) -> tuple[float, int]:
            """Each of ``workers`` starts every task it owns again, on its task pool; starts/s in all."""
            t0 = time.monotonic()
            futures = [pool.submit(w.start_tasks, list((w.view or {"tasks": {}})["tasks"].items())) for w in workers]
            n = sum(len(f.result()) for f in futures)
            return n / (time.monotonic() - t0), n

        starters = alive[:max(1, args.client_threads // args.task_threads)]
        (one_rate, one_n), (rate, n) = baseline_then_gathered(starters, STARTS_PATH, start_phase)
        row(f"task starts: {len(starters)} workers each start all their tasks again ({n:,} starts), "
            f"{args.task_threads} at a time each (an agent's task pool): the client gathers concurrent starts "
            f"into one request", f"{rate:,.0f} starts/s",
            f"one request per start, same run: {one_rate:,.0f} starts/s ({one_n:,} starts); "
            f"ratio {rate / max(one_rate, 1e-9):.2f}")

        row("Raft elections under the load (term after the load - term at start; 0 = one leader throughout)",
            str(max(raft_term(n) for n in cluster.nodes) - term_start))
        row("Raft thread per member since it started: gaps between ticks, and elections or step-downs it started "
            "(raftnode.ticks)", "; ".join(f"{n.node_id} {tick_figures(n)}" for n in cluster.nodes),
            "a leader's gap past 1-2 s gets it voted out")
        for n in cluster.nodes:  # why the term moved, as each member said it (not in the table: long lines)
            for line in why_elections(n):
                print(f"  {n.node_id}: {line}", flush=True)
        row("garbage collection per Raft member since it started (full collections, the longest pause)",
            "; ".join(f"{n.node_id} {full_collections(n)}" for n in cluster.nodes),
            "a leader paused for 1-2 s is voted out")
        sizes = {n.node_id: dir_size(os.path.join(n.data_dir, "raft")) for n in cluster.nodes}
        row("Raft data dir (journal + snapshot) per member, after the load",
            ", ".join(f"{k} {mib(v)}" for k, v in sizes.items()))

        # ------------------------------------------------------------ restart
        rss.phase = "the restart"
        epoch_before = leader.request("GET", "/raftconnect/v1/assignment")["epoch"]
        for n in cluster.nodes:
            n.kill()
        t0 = time.monotonic()
        for n in cluster.nodes:
            n.start(wait=False)
        for n in cluster.nodes:
            rss.pids[n.node_id] = n.proc.pid

        def rejoined() -> bool:
            a = follower.request("GET", "/raftconnect/v1/assignment")
            return a["epoch"] > epoch_before and all(w.last_ok > t0 for w in alive)

        t_done = wait_all_running(follower, args, args.timeout, "RUNNING after the restart", extra=rejoined)
        row("restart of all 3 Raft members at once (kill -9) -> every task assigned and RUNNING",
            took(t_done, t0, args.timeout), "goal <= 60 s")
        sizes = {n.node_id: dir_size(os.path.join(n.data_dir, "raft")) for n in cluster.nodes}
        row("Raft data dir per member, after the restart", ", ".join(f"{k} {mib(v)}" for k, v in sizes.items()))
        time.sleep(1.5)  # one more RSS sample after the restart's catch-up
        row("RSS per Raft member (max of 1 s samples; after the restart: new processes)",
            ", ".join(f"{k} {mib(v)} ({rss.detail[k]})" for k, v in rss.peak.items()), "goal <= 1 GB each")
    finally:
        # the members first: they run in their own sessions and would outlive an interrupted run
        for w in workers:
            w.stop()
        cluster.stop(timeout=20)
        pool.shutdown(wait=False, cancel_futures=True)
        rss.stop()
        if spy is not None:
            spy.send_signal(signal.SIGINT)
            spy.wait(60)
    load_end = os.getloadavg()
    if not args.no_record:
        out = Path(__file__).with_name("RESULTS.md")
        if not out.exists():
            out.write_text("# Scale benchmark results\n\n`python benchmarks/scale/run.py` (its docstring says what "
                           "each row measures and its goal).\n")
        cmd = " ".join(["python benchmarks/scale/run.py", *sys.argv[1:]])
        with out.open("a") as fh:
            fh.write(f"\n## {datetime.now(timezone.utc):%Y-%m-%d %H:%M} UTC — {machine()}\n\n"
                     f"Command: `{cmd}` — {args.connectors:,} connectors, "
                     f"{args.connectors * args.tasks_per_connector:,} tasks, {args.workers} simulated workers. "
                     f"Load average (1 min) at start {load_start[0]:.2f}, at end {load_end[0]:.2f}.\n\n"
                     "| what | result | goal / baseline |\n|---|---|---|\n")
            fh.write("".join(f"| {a} | {b} | {c} |\n" for a, b, c in rows))
        print(f"recorded in {out}")
    if args.keep:
        print(f"work directory kept: {work} (members' logs: {work / 'cluster'}/*/node.log)")
    else:
        shutil.rmtree(work, ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
