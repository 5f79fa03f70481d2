"""The partition tool itself (tools/netns.py): real namespaces, real TCP, and a clean teardown."""
from __future__ import annotations

import socket
import subprocess
import sys

import pytest

from tools.netns import NetnsNetwork, netns_available

pytestmark = pytest.mark.integration

PROBE = ("import socket, sys\n"
         "s = socket.socket(); s.settimeout(float(sys.argv[3]))\n"
         "try:\n    s.connect((sys.argv[1], int(sys.argv[2]))); print('ok')\n"
         "except Exception as e:\n    print(type(e).__name__)\n")


@pytest.fixture
def net():
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    with NetnsNetwork(3) as n:
        yield n


def listen(net: NetnsNetwork, i: int, port: int = 7777) -> subprocess.Popen:
    """A TCP listener inside node ``i``'s namespace (accepts forever)."""
    code = ("import socket\ns = socket.socket(); s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)\n"
            f"s.bind(('0.0.0.0', {port})); s.listen(16); print('up', flush=True)\n"
            "while True:\n    s.accept()[0].close()\n")
    proc = subprocess.Popen([*net.command_prefix(i), sys.executable, "-c", code], stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "up"
    return proc


def connects(net: NetnsNetwork, src: int | None, dst: int, port: int = 7777, timeout: float = 1.0) -> bool:
    """Whether a TCP connect from node ``src`` (``None``: the root namespace) to node ``dst`` succeeds."""
    if src is None:
        try:
            socket.create_connection((net.node_ip(dst), port), timeout=timeout).close()
            return True
        except OSError:
            return False
    out = subprocess.run([*net.command_prefix(src), sys.executable, "-c", PROBE, net.node_ip(dst), str(port),
                          str(timeout)], capture_output=True, text=True, timeout=30).stdout.strip()
    return out == "ok"


def test_partition_block_cut_and_heal(net):
    listeners = [listen(net, i) for i in range(3)]
    try:
        assert all(connects(net, a, b) for a in range(3) for b in range(3) if a != b)
        net.partition([[0], [1, 2]])
        assert not connects(net, 0, 1) and not connects(net, 1, 0) and not connects(net, 2, 0)
        assert connects(net, 1, 2) and connects(net, None, 0)  # the majority talks; the root reaches all
        net.heal()
        assert connects(net, 0, 1) and connects(net, 1, 0)
        net.block(0, 1)  # one way: 0 cannot send to 1, so no TCP either way, but 2 is untouched
        assert not connects(net, 0, 1) and connects(net, 0, 2) and connects(net, 2, 1)
        net.heal()
        net.cut(2)
        assert not connects(net, None, 2) and not connects(net, 0, 2) and connects(net, 0, 1)
        net.heal()
        assert connects(net, None, 2) and connects(net, 0, 2)
    finally:
        for p in listeners:
            p.kill()
            p.wait()


def test_close_removes_namespaces_and_bridge():
    reason = netns_available()
    if reason:
        pytest.skip(reason)
    net = NetnsNetwork(2)
    names = [*net.namespaces]
    assert all(ns in subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout for ns in names)
    net.close()
    left = subprocess.run(["ip", "netns", "list"], capture_output=True, text=True).stdout
    assert not any(ns in left for ns in names)
    assert subprocess.run(["ip", "link", "show", net.bridge], capture_output=True).returncode != 0
