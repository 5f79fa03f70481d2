"""Real network partitions between local nodes, for fault tests and ``make chaos`` (test support only).

Owns :class:`NetnsNetwork`: one Linux bridge in the root network namespace
(``10.203.<n>.1/24``) and one network namespace per node joined to it by a
veth pair (node ``i`` gets ``10.203.<n>.<11 + i>``). A node process runs
inside its namespace through a command prefix (``ip netns exec <ns>``, see
:class:`~tools.launcher.LocalCluster`'s ``hosts`` and
``command_prefixes``); the root namespace (the test, its REST clients and an
:class:`~webapp.kafka.embedded.EmbeddedKafka` started with ``host=`` the
bridge address) reaches every node at its namespace address.

Faults:

* :meth:`NetnsNetwork.partition` — nodes in different groups cannot exchange a
  packet (both directions dropped silently: each side's neighbour entry for the
  other is pinned to an unused MAC address, so the bridge floods the frames to
  nobody). The root namespace (Kafka, the test's clients) still reaches all.
* :meth:`NetnsNetwork.block` — one direction only (``a`` → ``b`` dropped).
* :meth:`NetnsNetwork.cut` — the node's link is down: it reaches nobody, not
  even Kafka or the test's clients.
* :meth:`NetnsNetwork.heal` — everything restored.

Neither ``iptables`` nor a ``tc`` action module is needed (the kernels this
runs on often lack both); only ``ip`` from iproute2, as root. Names carry a
random token (bridge ``rcb<token>``, namespaces ``rc<token>n<i>``) and the
subnet is the first free ``10.203.<n>.0/24``, chosen under a file lock, so
runs in parallel do not collide; :meth:`NetnsNetwork.close` (also on
``with`` exit and at interpreter exit) removes every namespace and the bridge,
and :func:`cleanup_stale` removes what a killed run left behind.

Never imported by production code: the node knows nothing of namespaces.
"""
from __future__ import annotations

import atexit
import fcntl
import ipaddress
import json
import os
import secrets
import shutil
import subprocess
import time
from typing import Iterable, Sequence

__all__ = ["NetnsNetwork", "NetnsError", "netns_available", "cleanup_stale"]

STATE_DIR = "/tmp/raftconnect-netns"
_DROP_MAC = "02:00:00:00:de:ad"  # locally administered, never assigned: frames to it reach nobody


class NetnsError(RuntimeError):
    """An ``ip`` command failed (message has the command and its stderr)."""


def _ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    proc = subprocess.run(["ip", *args], capture_output=True, text=True, timeout=30)
    if check and proc.returncode != 0:
        raise NetnsError(f"ip {' '.join(args)}: {proc.stderr.strip()}")
    return proc


def netns_available() -> str | None:
    """``None`` when namespaces can be made here, else the reason (not root, no ``ip``, kernel refuses)."""
    if os.geteuid() != 0:
        return "network namespaces need root"
    if shutil.which("ip") is None:
        return "iproute2 (ip) is not installed"
    probe = f"rcprobe{secrets.token_hex(3)}"
    try:
        _ip("netns", "add", probe)
    except (NetnsError, OSError) as exc:
        return f"cannot create a network namespace: {exc}"
    _ip("netns", "del", probe, check=False)
    return None


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    return True


def cleanup_stale() -> list[str]:
    """Remove networks whose owning process is gone (a run killed before its teardown); returns their tokens."""
    removed = []
    if not os.path.isdir(STATE_DIR):
        return removed
    for entry in os.listdir(STATE_DIR):
        path = os.path.join(STATE_DIR, entry)
        try:
            with open(path) as fh:
                info = json.load(fh)
        except (OSError, ValueError):
            continue
        if _pid_alive(int(info.get("pid", 0))):
            continue
        for ns in info.get("namespaces", []):
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", info.get("bridge", ""), check=False)
        os.unlink(path)
        removed.append(entry)
    return removed


class NetnsNetwork:
    """A bridge plus ``size`` namespaces, one per node; see the module docstring.

    Args:
        size: number of namespaces (nodes), at most 200.
        subnet_base: the ``/16`` the ``/24`` is taken from (default ``10.203``).

    Node indexes are 0-based (``node_ip(0) == "10.203.<n>.11"``).

    Raises:
        NetnsError: when an ``ip`` command fails (partial setup is torn down).
    """

    def __init__(self, size: int, subnet_base: str = "10.203"):
        if not 1 <= size <= 200:
            raise ValueError("size must be 1..200")
        self.size = size
        self.token = secrets.token_hex(3)
        self.bridge = f"rcb{self.token}"
        self.namespaces = [f"rc{self.token}n{i}" for i in range(size)]
        self.veths = [f"rcv{self.token}{i}" for i in range(size)]
        self._subnet_base = subnet_base
        self.subnet: ipaddress.IPv4Network | None = None
        self._macs: list[str] = []
        self._closed = False
        self._setup()
        atexit.register(self.close)

    # ------------------------------------------------------------- addresses
    @property
    def host_ip(self) -> str:
        """The bridge's address in the root namespace (start Kafka here)."""
        return str(self.subnet.network_address + 1)

    def node_ip(self, i: int) -> str:
        """Node ``i``'s address inside its namespace."""
        return str(self.subnet.network_address + 11 + i)

    def command_prefix(self, i: int) -> list[str]:
        """Argv prefix that runs a command inside node ``i``'s namespace."""
        return ["ip", "netns", "exec", self.namespaces[i]]

    # ------------------------------------------------------------- lifecycle
    def _pick_subnet(self) -> None:
        used = _ip("-4", "-o", "addr", "show").stdout
        for n in range(256):
            net = ipaddress.ip_network(f"{self._subnet_base}.{n}.0/24")
            if f" {net.network_address + 1}/" not in used:
                self.subnet = net
                return
        raise NetnsError(f"no free {self._subnet_base}.N.0/24 subnet")

    def _setup(self) -> None:
        os.makedirs(STATE_DIR, exist_ok=True)
        cleanup_stale()
        with open(os.path.join(STATE_DIR, ".lock"), "w") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)  # subnet choice + bridge address atomically across runs
            self._pick_subnet()
            self._record()
            try:
                _ip("link", "add", self.bridge, "type", "bridge")
                _ip("addr", "add", f"{self.host_ip}/24", "dev", self.bridge)
            except Exception:
                self.close()
                raise
        try:
            _ip("link", "set", self.bridge, "up")
            for i, (ns, veth) in enumerate(zip(self.namespaces, self.veths)):
                _ip("netns", "add", ns)
                _ip("link", "add", veth, "type", "veth", "peer", "name", "eth0", "netns", ns)
                _ip("link", "set", veth, "master", self.bridge, "up")
                _ip("-n", ns, "addr", "add", f"{self.node_ip(i)}/24", "dev", "eth0")
                _ip("-n", ns, "link", "set", "eth0", "up")
                _ip("-n", ns, "link", "set", "lo", "up")
                info = json.loads(_ip("-n", ns, "-j", "link", "show", "eth0").stdout)
                self._macs.append(info[0]["address"])
        except Exception:
            self.close()
            raise

    def _record(self) -> None:
        with open(os.path.join(STATE_DIR, self.token), "w") as fh:
            json.dump({"pid": os.getpid(), "bridge": self.bridge, "namespaces": self.namespaces}, fh)

    def close(self) -> None:
        """Delete every namespace and the bridge (idempotent; run the nodes' teardown first)."""
        if self._closed:
            return
        self._closed = True
        for ns in self.namespaces:
            _ip("netns", "del", ns, check=False)
        _ip("link", "del", self.bridge, check=False)
        try:
            os.unlink(os.path.join(STATE_DIR, self.token))
        except OSError:
            pass

    def __enter__(self) -> "NetnsNetwork":
        return self

    def __exit__(self, *exc) -> None:
        self.close()

    # ------------------------------------------------------------- faults
    def block(self, a: int, b: int) -> None:
        """Drop every packet node ``a`` sends to node ``b`` (one direction)."""
        _ip("-n", self.namespaces[a], "neigh", "replace", self.node_ip(b), "lladdr", _DROP_MAC,
            "nud", "permanent", "dev", "eth0")

    def unblock(self, a: int, b: int) -> None:
        """Undo :meth:`block` (``a`` → ``b`` flows again)."""
        _ip("-n", self.namespaces[a], "neigh", "replace", self.node_ip(b), "lladdr", self._macs[b],
            "nud", "reachable", "dev", "eth0")

    def partition(self, groups: Sequence[Iterable[int]]) -> None:
        """Split the nodes into ``groups``: no packet crosses between groups, either way.

        Nodes named in no group form one more group. The root namespace (Kafka,
        the test's clients) still reaches every node.
        """
        group_of: dict[int, int] = {}
        for g, members in enumerate(groups):
            for i in members:
                group_of[i] = g
        for i in range(self.size):
            group_of.setdefault(i, len(groups))
        for a in range(self.size):
            for b in range(self.size):
                if a != b and group_of[a] != group_of[b]:
                    self.block(a, b)

    def isolate(self, i: int) -> None:
        """Partition node ``i`` from every other node (it still reaches Kafka and the clients)."""
        self.partition([[i]])

    def cut(self, i: int) -> None:
        """Take node ``i``'s link down: it reaches nothing, the root namespace included."""
        _ip("link", "set", self.veths[i], "down")

    def heal(self, timeout: float = 10.0) -> None:
        """Undo every :meth:`block`, :meth:`partition` and :meth:`cut`; returns once every link is up again.

        The kernel reports a link's carrier asynchronously (its link-watch work
        may run up to a second later), so a cut link is waited for until both
        ends are operationally up and the bridge forwards on it.

        Errors: :class:`NetnsError` when a link is not up after ``timeout`` seconds.
        """
        for i in range(self.size):
            _ip("link", "set", self.veths[i], "up")
            # forget what the cut left: the root namespace's FAILED entry for the node (re-resolving
            # one waits for the kernel's ARP retry) and the pinned entries of blocks and partitions
            _ip("neigh", "del", self.node_ip(i), "dev", self.bridge, check=False)
            for b in range(self.size):
                if b != i:
                    _ip("-n", self.namespaces[i], "neigh", "del", self.node_ip(b), "dev", "eth0", check=False)
        deadline = time.monotonic() + timeout
        while not all(self._link_up(i) for i in range(self.size)):
            if time.monotonic() >= deadline:
                raise NetnsError(f"links still down {timeout:.0f} s after heal")
            time.sleep(0.05)

    def _link_up(self, i: int) -> bool:
        outer = json.loads(_ip("-j", "-d", "link", "show", self.veths[i]).stdout)[0]
        inner = json.loads(_ip("-n", self.namespaces[i], "-j", "link", "show", "eth0").stdout)[0]
        port = (outer.get("linkinfo") or {}).get("info_slave_data") or {}
        return (outer.get("operstate") == "UP" and inner.get("operstate") == "UP"
                and port.get("state", "forwarding") == "forwarding")
