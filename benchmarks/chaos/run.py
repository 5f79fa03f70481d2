#!/usr/bin/env python
"""Fault campaign (``make chaos``): hundreds of randomized kill / pause / partition faults on one cluster.

One long-running cluster — 3 ``raft,worker`` members and 1 ``worker`` node, each
in its own network namespace (:class:`tools.netns.NetnsNetwork`; Kafka
on the bridge) — carries a continuous workload:

* config writers: threads that ``PUT /connectors/{name}/config`` their own
  (STOPPED) connectors through a random node, remembering every write that was
  acknowledged (2xx) and every one that was only tried;
* a file source pipeline (``tasks.max`` 3) reading a directory of CSV files that
  an appender thread keeps growing, so offsets keep being committed.

Each iteration injects one random fault, heals it, then checks the invariants,
each within a generous bound (the machine may be loaded; a bound passed is a
violation, reported with details):

0. at most one leader per term, ever (a watcher polls every member's own
   Raft status every 0.2 s during the whole campaign);
1. exactly one leader: every Raft member answers, one says LEADER, the others
   FOLLOWER in its term naming it (bound ``--leader-bound``, default 60 s);
2. every acknowledged write is served by every Raft member (its value, or a
   later write that was tried: an unacknowledged write may land) (60 s);
3. no task runs on two live workers, and every task is assigned to a live one
   (60 s: a fenced zombie needs a heartbeat to learn it lost its tasks);
4. the pipeline's connector and tasks converge to RUNNING (``--running-bound``,
   default 180 s: a moved task starts a Spark session);
5. committed source offsets never go backwards (read from the leader, compared
   with the highest seen per partition).

Faults (``--faults`` picks a subset; partitions need root and ``ip netns``):
``kill-leader``, ``kill-follower``, ``kill-worker`` (kill -9, then restart the
node), ``pause-leader``, ``pause-follower`` (SIGSTOP of the node and its agent,
SIGCONT after 3-10 s), ``partition-leader``, ``partition-follower`` (the member
cannot reach the other nodes; Kafka and clients still reach it),
``split-leader-minority`` (the leader and the worker node | the two followers),
``cut-leader`` (the leader's link down: it reaches nothing), ``oneway-leader``
(packets from the leader to the others dropped, the other direction flows).
Disk and clock faults (issue 19; every node runs with ``tools/faultshim``):
``clock-jump-leader`` (the leader's wall clock ±1 h for the duration, then back),
``slow-disk-leader``, ``slow-disk-follower`` (each Raft journal write of the
member sleeps 20-300 ms first), ``disk-full-leader``, ``disk-full-follower`` (the
member's ``raft`` directory is a 256 MiB tmpfs, filled to the last byte, then
freed; needs root and ``mount``, else skipped), ``damage-journal``,
``damage-snapshot`` (a follower killed, 16 bytes of its journal or snapshot
flipped or its end cut, restarted: it must refuse to start — it never answers
``/health`` — and is then replaced as docs/OPERATIONS.md says: out of the
cluster, its Raft files aside, started, added back; invariant ``damaged-refused``).

Failover time (leader faults): seconds from the fault to a survivor reporting
LEADER in a newer term. Recovery time: seconds from the heal until every
invariant holds.

Usage::

    python benchmarks/chaos/run.py [--iterations 300] [--minutes 60] [--seed N]
                                   [--faults kill-leader,partition-leader,...] [--no-results]

Prints one line per iteration and appends a summary (counts per fault, failover
and recovery p50/p99/max, violations with details) to
``benchmarks/chaos/RESULTS.md`` with the machine. Exit status 1 when an invariant
was violated. Everything (nodes, Kafka, namespaces, bridge) is torn down on exit,
SIGTERM and Ctrl-C included.
"""
from __future__ import annotations

import argparse
import errno
import json
import math
import os
import random
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import threading
import time
import traceback
from collections import Counter, defaultdict
from datetime import datetime, timezone
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))
os.environ.setdefault("DJANGO_SETTINGS_MODULE", "tools.settings")  # development mode, inherited by the nodes

from benchmarks._common import machine  # noqa: E402

from tools.launcher import ConnectClient, ConnectHTTPError, LocalCluster, NodeProcess, wait_for  # noqa: E402
from tools.netns import NetnsNetwork, netns_available  # noqa: E402
from webapp.kafka.embedded import EmbeddedKafka  # noqa: E402

SOURCE = "raftconnect.connectors.file.FileSourceConnector"
RAFT = "/raftconnect/v1/raft"
PIPE = "chaos-pipe"
PIPE_TASKS = 3
KILLS = ("kill-leader", "kill-follower", "kill-worker")
PAUSES = ("pause-leader", "pause-follower")
PARTITIONS = ("partition-leader", "partition-follower", "split-leader-minority", "cut-leader", "oneway-leader")
LEADER_FAULTS = {"kill-leader", "pause-leader", "partition-leader", "split-leader-minority", "cut-leader",
                 "oneway-leader", "disk-full-leader"}
DISK_FULL = ("disk-full-leader", "disk-full-follower")
OTHER_FAULTS = ("clock-jump-leader", "slow-disk-leader", "slow-disk-follower", "damage-journal", "damage-snapshot")
SHIM = str(ROOT / "tools" / "faultshim")
TMPFS_SIZE = "256m"


def pct(values: list[float], p: float) -> float:
    """The ``p``-th percentile (nearest rank: the ceil(p/100 * n)-th smallest) of ``values``."""
    s = sorted(values)
    return s[min(len(s) - 1, max(0, math.ceil(p / 100 * len(s)) - 1))]


def source(path: str, topic: str, tasks: int = 1) -> dict[str, str]:
    return {"connector.class": SOURCE, "path": path, "format": "csv", "topic": topic, "tasks.max": str(tasks)}


# --------------------------------------------------------------------------- workload
class Writers:
    """Config writers: ``threads`` threads, each owning ``names`` connectors, each write through a random node.

    Per connector it keeps the ordered list of topics tried and the index of the
    last acknowledged one, so a check can tell "lost" (served value older than
    the last acknowledged) from "an unacknowledged later write landed".
    """

    def __init__(self, nodes: list[NodeProcess], data_path: str, threads: int = 3, names: int = 3):
        self.nodes = nodes
        self.data_path = data_path
        self.names = {k: [f"cw{k}-{i}" for i in range(names)] for k in range(threads)}
        self.history: dict[str, list[str]] = defaultdict(list)
        self.acked_idx: dict[str, int] = {}
        self.lock = threading.Lock()
        self.ok = 0
        self.failed = 0
        self.stop = threading.Event()
        self.threads = [threading.Thread(target=self._run, args=(k,), daemon=True, name=f"writer-{k}")
                        for k in range(threads)]

    def all_names(self) -> list[str]:
        return [n for names in self.names.values() for n in names]

    def start(self) -> None:
        for t in self.threads:
            t.start()

    def close(self) -> None:
        self.stop.set()
        for t in self.threads:
            t.join(30)

    def _run(self, k: int) -> None:
        rng = random.Random(k)
        clients: dict[str, ConnectClient] = {}
        i = 0
        while not self.stop.is_set():
            name = self.names[k][i % len(self.names[k])]
            node = rng.choice(self.nodes)
            client = clients.get(node.node_id)
            if client is None:
                client = clients[node.node_id] = ConnectClient(node.url, node.auth, timeout=20)
            topic = f"{name}-t{i}"
            with self.lock:
                self.history[name].append(topic)
                idx = len(self.history[name]) - 1
            try:
                client.request("PUT", f"/connectors/{name}/config", json=source(self.data_path, topic))
                with self.lock:
                    self.acked_idx[name] = max(idx, self.acked_idx.get(name, -1))
                    self.ok += 1
            except Exception:  # noqa: BLE001 - unacknowledged: it may or may not have landed
                with self.lock:
                    self.failed += 1
                self.stop.wait(0.2)
            i += 1

    def snapshot(self) -> dict[str, int]:
        """``{name: index of its last acknowledged write}`` right now, for :meth:`missing`."""
        with self.lock:
            return dict(self.acked_idx)

    def missing(self, client: ConnectClient, snap: dict[str, int]) -> list[str]:
        """Writes acknowledged by ``snap``'s time that ``client``'s node does not serve, as readable strings.

        A node may serve the acknowledged value or any later one that was tried
        (acknowledged or not, it may have landed); an earlier value means the
        acknowledged write was lost (or the node has not caught up yet).
        """
        out = []
        for name, idx in snap.items():
            got = client.request("GET", f"/connectors/{name}/config")["topic"]
            with self.lock:
                allowed = self.history[name][idx:]
                acked = self.history[name][idx]
            if got not in allowed:
                out.append(f"{name}: acknowledged {acked}, served {got}")
        return out


class Appender(threading.Thread):
    """Appends ``rows`` CSV lines per second to each file of the pipeline's directory."""

    def __init__(self, files: list[Path], rows: int = 50):
        super().__init__(daemon=True, name="appender")
        self.files, self.rows, self.stop = files, rows, threading.Event()
        self.next_id = 10_000_000

    def run(self) -> None:
        while not self.stop.wait(1.0):
            for f in self.files:
                with open(f, "a") as fh:
                    fh.write("".join(f"{self.next_id + j},appended {self.next_id + j}\n" for j in range(self.rows)))
                self.next_id += self.rows


class TermWatcher(threading.Thread):
    """Polls every Raft member's own status every 0.2 s and records which members said LEADER in which term.

    Two members saying LEADER in the same term would be a split brain (Raft's
    Election Safety property); :meth:`split_terms` lists such terms.
    """

    def __init__(self, nodes: list[NodeProcess]):
        super().__init__(daemon=True, name="term-watcher")
        self.nodes, self.stop = nodes, threading.Event()
        self.leaders: dict[int, set[str]] = defaultdict(set)
        self.clients = {n.node_id: ConnectClient(n.url, n.auth, timeout=2) for n in nodes}

    def run(self) -> None:
        while not self.stop.wait(0.2):
            for n in self.nodes:
                try:
                    st = self.clients[n.node_id].request("GET", RAFT)
                except Exception:  # noqa: BLE001 - unreachable / paused
                    continue
                if st["state"] == "LEADER":
                    self.leaders[st["term"]].add(n.node_id)

    def split_terms(self) -> dict[int, list[str]]:
        return {t: sorted(ids) for t, ids in list(self.leaders.items()) if len(ids) > 1}


# --------------------------------------------------------------------------- campaign
class Campaign:
    """The cluster, the workload, the faults and the invariant checks; see the module docstring."""

    def __init__(self, args: argparse.Namespace, workdir: str):
        self.args = args
        self.rng = random.Random(args.seed)
        self.workdir = Path(workdir)
        self.net: NetnsNetwork | None = None
        self.kafka: EmbeddedKafka | None = None
        self.cluster: LocalCluster | None = None
        self.writers: Writers | None = None
        self.appender: Appender | None = None
        self.watcher: TermWatcher | None = None
        self.reported_splits: set[int] = set()
        self.max_offsets: dict[str, int] = {}
        self.violations: list[dict] = []
        self.iterations: list[dict] = []
        self.tmpfs: list[str] = []
        self.current_iteration = 0

    # -- set-up / tear-down
    def start(self) -> None:
        use_netns = not self.args.no_netns
        if use_netns:
            reason = netns_available()
            if reason:
                print(f"network namespaces unavailable ({reason}): partitions are skipped", flush=True)
                use_netns = False
        total = 4
        if use_netns:
            self.net = NetnsNetwork(total)
            host, hosts = self.net.host_ip, [self.net.node_ip(i) for i in range(total)]
            prefixes = [self.net.command_prefix(i) for i in range(total)]
        else:
            host, hosts, prefixes = "127.0.0.1", None, None
        self.kafka = EmbeddedKafka(log_dir=self.workdir / "kafka", host=host).start()
        self.cluster = LocalCluster(data_dir=str(self.workdir / "cluster"), bootstrap_servers=self.kafka.bootstrap_servers,
                                    raft_nodes=3, worker_nodes=1, hosts=hosts, command_prefixes=prefixes,
                                    file_allowed_paths=[str(self.workdir / "pipe")])  # the pipeline's files
        faults = self.workdir / "faults"
        faults.mkdir(parents=True, exist_ok=True)
        for node in self.cluster.nodes:  # the clock and disk of each node's processes, from outside
            (faults / f"{node.node_id}.clock").write_text("0")
            (faults / f"{node.node_id}.disk").write_text("0")
            node.env.update({"PYTHONPATH": os.pathsep.join(p for p in (SHIM, os.environ.get("PYTHONPATH")) if p),
                             "RAFTCONNECT_TEST_CLOCK_OFFSET_FILE": str(faults / f"{node.node_id}.clock"),
                             "RAFTCONNECT_TEST_DISK_DELAY_FILE": str(faults / f"{node.node_id}.disk"),
                             # agents log each task's start with its generation and offsets: what a
                             # violation of offsets-monotonic is traced back with
                             "RAFTCONNECT_AGENT_LOG_LEVEL": "INFO"})
        self.tmpfs = []
        if os.geteuid() == 0:  # each member's Raft directory on its own small filesystem, for disk-full faults
            for node in self.raft_nodes:
                raft_dir = os.path.join(node.data_dir, "raft")
                os.makedirs(raft_dir, exist_ok=True)
                done = subprocess.run(["mount", "-t", "tmpfs", "-o", f"size={TMPFS_SIZE}", "tmpfs", raft_dir],
                                      capture_output=True, text=True)
                if done.returncode != 0:
                    print(f"cannot mount a tmpfs ({done.stderr.strip()}): disk-full faults are skipped", flush=True)
                    break
                self.tmpfs.append(raft_dir)
        print(f"starting 3 raft,worker + 1 worker node{' in network namespaces' if self.net else ''} "
              f"(work dir {self.workdir})", flush=True)
        self.cluster.start(timeout=180)
        leader = self.cluster.leader(60)
        c = leader.client()
        data = self.workdir / "pipe"
        data.mkdir()
        files = [data / f"part-{i}.csv" for i in range(PIPE_TASKS)]
        for i, f in enumerate(files):
            f.write_text("id,name\n" + "".join(f"{i * 100_000 + j},row {j}\n" for j in range(2000)))
        c.create_connector_once(PIPE, {**source(str(data), "chaos-pipe", PIPE_TASKS), "batch.max.rows": "1000"})
        self.writers = Writers(self.cluster.nodes, str(files[0]))
        for name in self.writers.all_names():  # STOPPED: config writes only, no tasks
            c.create_connector_once(name, source(str(files[0]), "init"), initial_state="STOPPED")
        wait_for(lambda: c.all_running(PIPE, PIPE_TASKS), 300, what="the pipeline RUNNING")
        wait_for(lambda: c.offsets(PIPE)["offsets"], 300, what="the pipeline to commit offsets")
        self.appender = Appender(files)
        self.appender.start()
        self.writers.start()
        self.watcher = TermWatcher(self.raft_nodes)
        self.watcher.start()
        print("workload running", flush=True)

    def close(self) -> None:
        for part in (self.writers, self.appender, self.watcher):
            if part is not None:
                part.stop.set()
        if self.net is not None:
            self.net.heal()
        if self.cluster is not None:
            for n in self.cluster.running():
                n.signal(signal.SIGCONT)
            self.cluster.stop(30)
        if self.kafka is not None:
            self.kafka.stop()
        if self.net is not None:
            self.net.close()
        for raft_dir in getattr(self, "tmpfs", []):
            subprocess.run(["umount", "-l", raft_dir], capture_output=True)

    # -- helpers
    @property
    def raft_nodes(self) -> list[NodeProcess]:
        return [n for n in self.cluster.nodes if "raft" in n.roles]

    def raft_status(self, node: NodeProcess) -> dict | None:
        try:
            return ConnectClient(node.url, node.auth, timeout=3).request("GET", RAFT)
        except Exception:  # noqa: BLE001 - unreachable / paused
            return None

    def new_leader_after(self, old: NodeProcess, old_term: int, timeout: float) -> float | None:
        """Seconds until a member other than ``old`` reports LEADER in a term > ``old_term`` (None: not seen)."""
        t0 = time.monotonic()
        while time.monotonic() - t0 < timeout:
            for n in self.raft_nodes:
                if n is old:
                    continue
                st = self.raft_status(n)
                if st and st["state"] == "LEADER" and st["term"] > old_term:
                    return time.monotonic() - t0
            time.sleep(0.05)
        return None

    def violation(self, it: int, kind: str, invariant: str, detail: str) -> None:
        v = {"iteration": it, "fault": kind, "invariant": invariant, "detail": detail}
        self.violations.append(v)
        print(f"  VIOLATION [{invariant}] {detail}", flush=True)

    # -- one iteration
    def inject(self, kind: str) -> dict:
        """Inject ``kind``, wait its duration, heal. Returns ``{"target", "failover", ...}``."""
        leader = self.cluster.leader(60)
        li = self.cluster.nodes.index(leader)
        old_term = (self.raft_status(leader) or {}).get("term", 0)
        followers = [n for n in self.raft_nodes if n is not leader]
        worker = self.cluster.nodes[-1]
        duration = self.rng.uniform(3.0, 10.0)
        on_leader = kind in LEADER_FAULTS or kind.endswith("-leader")
        target = leader if on_leader else (worker if kind == "kill-worker" else self.rng.choice(followers))
        ti = self.cluster.nodes.index(target)
        out = {"target": target.node_id, "duration": round(duration, 1), "failover": None}
        t0 = time.monotonic()
        if kind in OTHER_FAULTS or kind in DISK_FULL:
            return self.inject_disk_or_clock(kind, target, duration, out, old_term)
        if kind.startswith("kill-"):
            target.kill()
            if kind == "kill-leader":
                out["failover"] = self.new_leader_after(leader, old_term, 60)
            else:
                time.sleep(duration)
            target.start(wait=True, timeout=180)
            return out
        if kind.startswith("pause-"):
            target.signal(signal.SIGSTOP)
        elif kind in ("partition-leader", "partition-follower"):
            self.net.isolate(ti)
        elif kind == "split-leader-minority":
            self.net.partition([[li, len(self.cluster.nodes) - 1], [self.cluster.nodes.index(f) for f in followers]])
        elif kind == "cut-leader":
            self.net.cut(li)
        elif kind == "oneway-leader":
            for j in range(len(self.cluster.nodes)):
                if j != li:
                    self.net.block(li, j)
        try:
            if kind in LEADER_FAULTS:
                out["failover"] = self.new_leader_after(leader, old_term, max(duration, 30))
            left = duration - (time.monotonic() - t0)
            if left > 0:
                time.sleep(left)
        finally:
            if kind.startswith("pause-"):
                target.signal(signal.SIGCONT)
            else:
                self.net.heal()
        return out

    def inject_disk_or_clock(self, kind: str, target: NodeProcess, duration: float, out: dict,
                             old_term: int) -> dict:
        """The disk and clock faults (see the module docstring); returns ``out`` with what was done.

        ``disk-full-leader`` also measures its failover: the full leader hands its leadership over."""
        faults = self.workdir / "faults"

        def shim_fault(suffix: str, setting: str) -> dict:
            """Hold one faultshim setting (``<node>.<suffix>``, see tools/faultshim) for ``duration`` s, then clear it."""
            (faults / f"{target.node_id}.{suffix}").write_text(setting)
            try:
                time.sleep(duration)
            finally:
                (faults / f"{target.node_id}.{suffix}").write_text("0")
            return out

        if kind == "clock-jump-leader":
            jump = self.rng.choice((3600, -3600))
            out["detail"] = f"clock {jump:+d} s"
            return shim_fault("clock", str(jump))
        if kind.startswith("slow-disk-"):
            delay = self.rng.uniform(0.02, 0.3)
            out["detail"] = f"{delay * 1000:.0f} ms per journal write"
            return shim_fault("disk", f"{delay:.3f}")
        if kind.startswith("disk-full-"):
            filler = os.path.join(target.data_dir, "raft", "chaos-filler")
            try:
                with open(filler, "wb", buffering=0) as fh:
                    chunk = b"\0" * (1 << 20)
                    while True:
                        try:
                            fh.write(chunk)
                        except OSError as exc:
                            if exc.errno != errno.ENOSPC:
                                raise
                            if len(chunk) == 4096:
                                break
                            chunk = chunk[: max(4096, len(chunk) // 16)]
                t0 = time.monotonic()
                if kind == "disk-full-leader":
                    out["failover"] = self.new_leader_after(target, old_term, duration)
                time.sleep(max(0.0, duration - (time.monotonic() - t0)))
            finally:
                if os.path.exists(filler):
                    os.remove(filler)
            return out
        return self.damage(kind, target, out)

    def damage(self, kind: str, target: NodeProcess, out: dict) -> dict:
        """Kill ``target`` (a follower), damage its journal or snapshot, restart it: it must refuse to start
        (never answer ``/health``); then replace it as a member whose disk is lost."""
        raft_dir = os.path.join(target.data_dir, "raft")
        name = "raft.snapshot" if kind == "damage-snapshot" else "raft.journal"
        path = os.path.join(raft_dir, name)
        journal = os.path.join(raft_dir, "raft.journal")

        def records_end() -> int:  # pysyncobj's header: records from byte 40 to this offset
            with open(journal, "rb") as fh:
                return struct.unpack("<I", fh.read(40)[36:40])[0]
        target.kill()
        if name == "raft.journal" and records_end() - 40 < 64 and os.path.exists(journal.replace("journal", "snapshot")):
            name, path = "raft.snapshot", journal.replace("journal", "snapshot")  # just compacted: little to damage
        if not os.path.exists(path) or (name == "raft.journal" and records_end() - 40 < 64):
            name, path = "raft.journal", journal  # no snapshot yet (no compaction) / nothing to damage
            if records_end() - 40 < 64:
                out["detail"] = "nothing to damage"
                target.start(wait=True, timeout=180)
                return out
        with open(path, "r+b") as fh:
            data = bytearray(fh.read())
            start, end = (40, records_end()) if name == "raft.journal" else (0, len(data))
            how = self.rng.choice(("flip", "cut"))
            if how == "flip" and end - start > 64:
                at = self.rng.randrange(start + 16, end - 16)
                fh.seek(at)
                fh.write(bytes(b ^ 0xFF for b in data[at:at + 16]))
            else:
                how = "cut"  # a journal cut mid-record (its header still names the old end), a snapshot short
                fh.truncate(start + int((end - start) * self.rng.uniform(0.3, 0.95)))
        out["detail"] = f"{name} {how}"
        target.start(wait=False)
        answered = None
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and target.proc.poll() is None:
            try:
                answered = ConnectClient(target.url, target.auth, timeout=2).request("GET", "/health")
                break
            except Exception:  # noqa: BLE001 - expected: it never serves
                time.sleep(0.2)
        with open(target.log_path, errors="replace") as fh:
            log_text = fh.read()[-20000:]
        if answered is not None or target.proc.poll() in (None, 0) or "move its Raft directory" not in log_text:
            self.violation(self.current_iteration, kind, "damaged-refused",
                           f"{target.node_id} with a damaged {name} ({how}): exit {target.proc.poll()}, "
                           f"health {answered}, refusal message {'found' if 'move its Raft' in log_text else 'missing'}")
            if target.proc.poll() is None:
                target.kill()
        address = f"{target.host}:{target.raft_port}"
        leader = self.cluster.leader(60)
        leader.client().request("DELETE", f"/raftconnect/v1/raft/members/{address}")
        aside = os.path.join(target.data_dir, f"raft.damaged-{self.current_iteration}")
        os.makedirs(aside)
        for entry in os.listdir(raft_dir):  # the directory may be a mount point: move its files
            shutil.move(os.path.join(raft_dir, entry), aside)
        target.start(wait=False)
        wait_for(lambda: self.try_add_member(address), 60, what=f"{address} added back")
        target.wait_healthy(180)
        return out

    def try_add_member(self, address: str) -> bool:
        try:
            self.cluster.leader(30).client().request("POST", "/raftconnect/v1/raft/members", json={"address": address})
            return True
        except ConnectHTTPError as exc:
            return exc.status == 409 and "already" in json.dumps(exc.body)

    def check(self, it: int, kind: str) -> float:
        """Wait for every invariant (each within its bound); record violations. Returns seconds until all held."""
        t0 = time.monotonic()
        a = self.args
        members = self.raft_nodes

        def one_leader():
            sts = [self.raft_status(n) for n in members]
            if any(s is None for s in sts):
                return False
            leaders = [(n, s) for n, s in zip(members, sts) if s["state"] == "LEADER"]
            if len(leaders) != 1:
                return False
            ln, ls = leaders[0]
            return all(s["state"] == "FOLLOWER" and s["term"] == ls["term"] and s["leader"] == ls["leader"]
                       for n, s in zip(members, sts) if n is not ln) and ls
        try:
            wait_for(one_leader, a.leader_bound, what="exactly one leader")
        except TimeoutError:
            self.violation(it, kind, "one-leader", f"no single agreed leader within {a.leader_bound:.0f} s: "
                           + json.dumps({n.node_id: self.raft_status(n) for n in members}))
        leader = self.cluster.leader(60)
        lc = ConnectClient(leader.url, leader.auth, timeout=20)

        snap = self.writers.snapshot()
        for n in members:
            nc = ConnectClient(n.url, n.auth, timeout=20)
            try:
                wait_for(lambda: not self.writers.missing(nc, snap), 60, interval=0.5,
                         what=f"{n.node_id} to serve every acknowledged write")
            except TimeoutError:
                try:
                    detail = self.writers.missing(nc, snap)
                except Exception as exc:  # noqa: BLE001
                    detail = [f"unreadable: {exc}"]
                self.violation(it, kind, "acknowledged-writes", f"{n.node_id}: {detail}")

        def single_owner():
            view = lc.request("GET", "/raftconnect/v1/cluster")
            alive = {n["id"] for n in view["nodes"] if n["alive"]}
            runs: dict[str, list[str]] = defaultdict(list)
            for n in view["nodes"]:
                if n["id"] in alive:
                    for t in n["running_tasks"]:
                        runs[t].append(n["id"])
            assignment = lc.request("GET", "/raftconnect/v1/assignment")["tasks"]
            doubled = {t: ws for t, ws in runs.items() if len(ws) > 1}
            orphaned = {t: w for t, w in assignment.items() if w not in alive}
            self._owner_detail = f"running on several live workers: {doubled}; assigned to dead workers: {orphaned}"
            return not doubled and not orphaned
        self._owner_detail = ""
        try:
            wait_for(single_owner, 60, interval=0.5, what="one live owner per task")
        except TimeoutError:
            self.violation(it, kind, "single-owner", self._owner_detail)

        try:
            def running():
                assert not lc.failures(PIPE), lc.failures(PIPE)
                return lc.all_running(PIPE, PIPE_TASKS)
            wait_for(running, a.running_bound, interval=0.5, what="the pipeline RUNNING")
        except AssertionError as exc:
            self.violation(it, kind, "tasks-running", f"FAILED: {exc}")
            self.restart_failed(lc)
        except TimeoutError:
            self.violation(it, kind, "tasks-running", f"not RUNNING within {a.running_bound:.0f} s: "
                           + json.dumps(lc.status(PIPE)))

        for term, ids in self.watcher.split_terms().items():
            if term not in self.reported_splits:
                self.reported_splits.add(term)
                self.violation(it, kind, "one-leader-per-term", f"term {term}: LEADER reported by {ids}")

        for entry in lc.offsets(PIPE)["offsets"]:
            key = json.dumps(entry["partition"], sort_keys=True)
            pos = int(next(iter(entry["offset"].values())))
            if pos < self.max_offsets.get(key, -1):
                self.violation(it, kind, "offsets-monotonic",
                               f"{key}: committed offset {pos} < {self.max_offsets[key]} seen before")
            self.max_offsets[key] = max(pos, self.max_offsets.get(key, -1))
        return time.monotonic() - t0

    def restart_failed(self, c: ConnectClient) -> None:
        """After a recorded FAILED task, write the config again (new task configs) so the campaign can go on."""
        try:
            config = c.request("GET", f"/connectors/{PIPE}/config")
            config["chaos.restarts"] = str(int(config.get("chaos.restarts", "0")) + 1)
            c.request("PUT", f"/connectors/{PIPE}/config", json=config)
        except Exception:  # noqa: BLE001
            traceback.print_exc()

    def run(self) -> None:
        a = self.args
        kinds = [k.strip() for k in a.faults.split(",")] if a.faults else [*KILLS, *PAUSES, *PARTITIONS,
                                                                           *DISK_FULL, *OTHER_FAULTS]
        if self.net is None:
            kinds = [k for k in kinds if k not in PARTITIONS]
        if len(self.tmpfs) < len(self.raft_nodes):
            kinds = [k for k in kinds if k not in DISK_FULL]
        deadline = time.monotonic() + a.minutes * 60 if a.minutes else None
        for it in range(1, a.iterations + 1):
            if deadline and time.monotonic() > deadline:
                print(f"time budget of {a.minutes:g} min used: stopping after {it - 1} iterations", flush=True)
                break
            kind = self.rng.choice(kinds)
            self.current_iteration = it
            before = len(self.violations)
            t0 = time.monotonic()
            try:
                info = self.inject(kind)
                info["recovery"] = self.check(it, kind)
            except Exception as exc:  # noqa: BLE001 - the harness itself failed: report, go on if possible
                self.violation(it, kind, "harness", f"{type(exc).__name__}: {exc}")
                traceback.print_exc()
                info = {"target": "?", "failover": None, "recovery": None}
                self.revive()
            info.update(iteration=it, fault=kind, violations=len(self.violations) - before,
                        seconds=time.monotonic() - t0)
            self.iterations.append(info)
            fo = f"{info['failover']:.2f} s" if info.get("failover") is not None else "-"
            rec = f"{info['recovery']:.1f} s" if info.get("recovery") is not None else "-"
            print(f"[{it}/{a.iterations}] {kind:<22} target {info['target']:<7} {info.get('detail', ''):<26} "
                  f"failover {fo:<8} recovered {rec:<8}"
                  f" writes ok {self.writers.ok} failed {self.writers.failed}  violations {len(self.violations)}",
                  flush=True)

    def revive(self) -> None:
        """Best effort after a harness error: heal the network, resume and restart every node."""
        if self.net is not None:
            self.net.heal()
        for n in self.cluster.nodes:
            if n.proc is not None and n.proc.poll() is None:
                n.signal(signal.SIGCONT)
            else:
                try:
                    n.start(wait=True, timeout=180)
                except Exception:  # noqa: BLE001
                    traceback.print_exc()

    # -- report
    def summary(self, started: datetime) -> str:
        a = self.args
        lines = [f"## {started:%Y-%m-%d %H:%M} UTC — {machine()}", "",
                 f"`python benchmarks/chaos/run.py --iterations {a.iterations} --minutes {a.minutes:g} "
                 f"--seed {a.seed}`: {len(self.iterations)} iterations in "
                 f"{(datetime.now(timezone.utc) - started).total_seconds() / 60:.0f} min, "
                 f"{'nodes in network namespaces' if self.net else 'loopback (no partitions)'}, "
                 f"{len(self.watcher.leaders) if self.watcher else 0} Raft terms with a leader observed; "
                 f"load average at the end {os.getloadavg()[0]:.1f}.", "",
                 f"Workload: {self.writers.ok:,} acknowledged config writes ({self.writers.failed:,} failed or "
                 f"timed out, most of them through a node that was down or cut off), file pipeline with {PIPE_TASKS} tasks committing offsets.", "",
                 "| fault | count | failover p50 / p99 / max (s) | recovery p50 / p99 / max (s) | violations |",
                 "|---|---|---|---|---|"]
        by_kind: dict[str, list[dict]] = defaultdict(list)
        for i in self.iterations:
            by_kind[i["fault"]].append(i)

        def stats(values):
            v = [x for x in values if x is not None]
            return f"{pct(v, 50):.2f} / {pct(v, 99):.2f} / {max(v):.2f}" if v else "-"
        for kind in sorted(by_kind):
            its = by_kind[kind]
            fo = stats([i["failover"] for i in its]) if kind in LEADER_FAULTS else "n/a"
            missed = sum(1 for i in its if kind in LEADER_FAULTS and i["failover"] is None)
            if missed:
                fo += f" ({missed} without a new leader during the fault)"
            lines.append(f"| {kind} | {len(its)} | {fo} | {stats([i['recovery'] for i in its])} | "
                         f"{sum(i['violations'] for i in its)} |")
        all_fo = [i["failover"] for i in self.iterations if i["failover"] is not None]
        lines += ["", f"All leader faults: failover p50 {pct(all_fo, 50):.2f} s, p99 {pct(all_fo, 99):.2f} s, "
                  f"max {max(all_fo):.2f} s ({len(all_fo)} elections)." if all_fo else "", ""]
        counts = Counter(v["invariant"] for v in self.violations)
        lines.append(f"Invariant violations: {len(self.violations)}" +
                     (f" ({', '.join(f'{k}: {n}' for k, n in counts.items())})" if counts else "") + ".")
        for v in self.violations[:50]:
            lines.append(f"- iteration {v['iteration']} ({v['fault']}), {v['invariant']}: {v['detail'][:1000]}")
        return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--iterations", type=int, default=300)
    p.add_argument("--minutes", type=float, default=60.0, help="time budget; 0 = none (default 60)")
    p.add_argument("--seed", type=int, default=None, help="random seed (default: time-based, printed)")
    p.add_argument("--faults", default="", help="comma-separated subset of fault kinds (default all)")
    p.add_argument("--leader-bound", type=float, default=60.0)
    p.add_argument("--running-bound", type=float, default=180.0)
    p.add_argument("--no-netns", action="store_true", help="run on loopback; partitions are skipped")
    p.add_argument("--no-results", action="store_true", help="do not append to RESULTS.md")
    p.add_argument("--workdir", default=None, help="keep data and logs here (default: a temp dir)")
    args = p.parse_args(argv)
    if args.seed is None:
        args.seed = int(time.time()) % 100_000
    print(f"seed {args.seed}", flush=True)

    def on_term(signum, frame):
        raise KeyboardInterrupt(f"signal {signum}")
    signal.signal(signal.SIGTERM, on_term)
    started = datetime.now(timezone.utc)
    workdir = args.workdir or tempfile.mkdtemp(prefix="raftconnect-chaos-")
    os.makedirs(workdir, exist_ok=True)
    campaign = Campaign(args, workdir)
    try:
        campaign.start()
        campaign.run()
    except KeyboardInterrupt:
        print("interrupted: writing what was measured", flush=True)
    finally:
        if campaign.writers is not None:
            campaign.writers.close()
        if campaign.appender is not None:
            campaign.appender.stop.set()
        text = campaign.summary(started) if campaign.iterations else None
        with open(os.path.join(workdir, "iterations.json"), "w") as fh:
            json.dump({"iterations": campaign.iterations, "violations": campaign.violations}, fh, indent=1)
        campaign.close()
    if text:
        print("\n" + text)
        if not args.no_results:
            out = Path(__file__).with_name("RESULTS.md")
            if not out.exists():
                out.write_text("# Fault campaign results\n\n`make chaos` runs `python benchmarks/chaos/run.py` "
                               "(see its docstring for the cluster, workload, faults and invariants).\n\n")
            with open(out, "a") as fh:
                fh.write(text + "\n")
            print(f"appended to {out}")
    print(f"node logs: {workdir}/cluster/node-*/", flush=True)
    return 1 if campaign.violations else 0


if __name__ == "__main__":
    sys.exit(main())
