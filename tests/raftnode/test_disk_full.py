"""A Raft member whose journal's filesystem is full (ENOSPC) (issue 19 item 4).

Three in-process members; one has its data directory on a small tmpfs (root and
``mount`` needed; otherwise ``os.posix_fallocate`` fails with ENOSPC on demand,
the call the journal reserves each entry with). The disk is filled with a filler
file, writes go on, then the filler is removed.

Invariants: a member that cannot write reports it (``status()["journal"]``, with
the path and the free space in the error) and logs it; it acknowledges nothing
it did not journal (on the leader: every proposal fails and none of them is ever
applied anywhere, even after space returns) and hands its leadership to a
follower, where writes go on; the others go on committing when it is a
follower; when space returns it writes again, catches up, and every
acknowledged write is applied on every member. A member started on a disk that is
already full does not start (in-process and as ``runnode``), journal untouched, and
starts normally once space returns.
"""
from __future__ import annotations

import errno
import logging
import os
import subprocess

import pytest

from raftnode import NoSpaceAtStart, RaftConfig, RaftNode, RaftUnavailable
from tools.launcher import wait_for
from webapp.kafka.embedded import free_port

from .members import destroy, raft_members


class FullDisk:
    """A directory whose filesystem can be filled and freed: a 512 KiB tmpfs, or an injected ENOSPC."""

    def __init__(self, path, monkeypatch):
        self.path = str(path)
        os.makedirs(self.path, exist_ok=True)
        self.mounted = os.geteuid() == 0 and subprocess.run(
            ["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", self.path], capture_output=True).returncode == 0
        self.full = False
        if not self.mounted:
            real = os.posix_fallocate

            def fallocate(fd, offset, length):
                if self.full and os.path.realpath(f"/proc/self/fd/{fd}").startswith(os.path.realpath(self.path)):
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                return real(fd, offset, length)

            monkeypatch.setattr(os, "posix_fallocate", fallocate)

    def fill(self) -> None:
        """Leave no free byte (tmpfs) / make every reservation fail (injected)."""
        self.full = True
        if self.mounted:
            with open(os.path.join(self.path, "filler"), "wb", buffering=0) as fh:
                try:
                    while True:
                        fh.write(b"\0" * 4096)
                except OSError as exc:
                    assert exc.errno == errno.ENOSPC

    def free(self) -> None:
        self.full = False
        if self.mounted:
            os.remove(os.path.join(self.path, "filler"))

    def close(self) -> None:
        if self.mounted:
            subprocess.run(["umount", "-l", self.path], check=False)


def _cluster(tmp_path, monkeypatch, disk_leads: bool):
    """Three members, member 0 on a :class:`FullDisk`, restarted until member 0 leads (or not) as asked."""
    for attempt in range(8):
        disk = FullDisk(tmp_path / str(attempt) / "m0", monkeypatch)
        _, nodes = raft_members(tmp_path / str(attempt))
        if (_leader(nodes) is nodes[0]) == disk_leads:
            return nodes, disk
        destroy(nodes)
        disk.close()
    pytest.skip(f"member 0 {'never' if disk_leads else 'always'} led in 8 elections")


def _leader(nodes):
    return wait_for(lambda: next((n for n in nodes if n.is_leader), None), 30, interval=0.05, what="a leader")


def _put(node: RaftNode, name: str, timeout: float = 5.0) -> None:
    node.propose("_put_connector_config", name, {"v": name}, None, False, timeout=timeout)


def _converged(nodes, names):
    return all(all(n.state.connector(c) is not None for c in names) for n in nodes)


def test_a_follower_with_a_full_disk_reports_it_and_catches_up_when_space_returns(tmp_path, monkeypatch, caplog):
    nodes, disk = _cluster(tmp_path, monkeypatch, disk_leads=False)
    try:
        leader, full = next(n for n in nodes if n.is_leader), nodes[0]
        acked = [f"before-{i}" for i in range(5)]
        for name in acked:
            _put(leader, name)
        wait_for(lambda: _converged(nodes, acked), 15, what="the first writes everywhere")
        caplog.set_level(logging.ERROR, logger="raftnode.durability")
        disk.fill()
        for i in range(300):  # the two others are a majority: writes commit (the full one's last pages fill)
            _put(leader, f"full-{i}")
            acked.append(f"full-{i}")
        journal = wait_for(lambda: (lambda j: j if not j["ok"] else None)(full.status()["journal"]), 15,
                           what="the full member to report its journal")
        assert journal["path"].endswith("raft.journal") and "ENOSPC" in journal["error"]
        assert "free of" in journal["error"] and journal["failures"] >= 1
        assert any("cannot write" in r.getMessage() and "ENOSPC" in r.getMessage() for r in caplog.records)
        assert full.state.connector("full-299") is None  # nothing it could not journal was applied there
        disk.free()
        wait_for(lambda: full.status()["journal"]["ok"], 30, what="the member to write again")
        _put(leader, "after")
        acked.append("after")
        wait_for(lambda: _converged(nodes, acked), 30, what="every acknowledged write on every member")
        assert full.state.connector("full-299")["config"] == {"v": "full-299"}
    finally:
        destroy(nodes)
        disk.close()


@pytest.mark.chaos
def test_a_leader_with_a_full_disk_acknowledges_nothing_and_recovers(tmp_path, monkeypatch):
    nodes, disk = _cluster(tmp_path, monkeypatch, disk_leads=True)
    try:
        leader = nodes[0]
        acked = [f"before-{i}" for i in range(5)]
        for name in acked:
            _put(leader, name)
        disk.fill()
        term = leader.term
        refused: list[str] = []  # refused while it led, in its term: those can never land
        for i in range(400):  # the pages already allocated take a few more entries; then writes fail
            if not leader.is_leader:
                break
            name = f"w{i}"
            try:
                _put(leader, name, timeout=1.0)
                acked.append(name)
            except RaftUnavailable:
                if leader.is_leader and leader.term == term:
                    refused.append(name)
        wait_for(lambda: not leader.status()["journal"]["ok"], 15, what="the full leader to report its journal")
        # it hands the leadership to a follower that has every entry; writes go on there, disk still full
        other = wait_for(lambda: next((n for n in nodes[1:] if n.is_leader), None), 30, interval=0.05,
                         what="the leadership to move off the full disk")
        wait_for(lambda: (_put(other, "moved") or True), 30, what="a write through the new leader")
        acked.append("moved")
        assert not leader.is_leader and leader.state.connector("moved") is None
        disk.free()
        wait_for(lambda: leader.status()["journal"]["ok"], 30, what="the old leader to write again")
        wait_for(lambda: (_put(_leader(nodes), "after") or True), 30, what="a write after space returned")
        acked.append("after")
        wait_for(lambda: _converged(nodes, acked), 30, what="every acknowledged write on every member")
        for n in nodes:  # never journalled by the leader of their term: never applied anywhere
            assert all(n.state.connector(name) is None for name in refused), refused
    finally:
        destroy(nodes)
        disk.close()


def _contents(directory: str) -> dict[str, bytes]:
    out = {}
    for name in sorted(os.listdir(directory)):
        with open(os.path.join(directory, name), "rb") as fh:
            out[name] = fh.read()
    return out


def _port_refuses(port: int) -> bool:
    import socket

    with socket.socket() as sock:
        return sock.connect_ex(("127.0.0.1", port)) != 0


def test_a_member_started_on_a_full_disk_refuses_to_start_and_starts_once_space_returns(tmp_path, monkeypatch):
    disk = FullDisk(tmp_path / "disk", monkeypatch)
    raft_dir = os.path.join(disk.path, "raft")
    port = free_port()
    config = RaftConfig(self_address=f"127.0.0.1:{port}", peers=[], data_dir=raft_dir, password="secret")
    try:
        node = RaftNode(config)
        try:
            _leader([node])
            for i in range(3):
                _put(node, f"c{i}")
        finally:
            node.destroy()
        before = _contents(raft_dir)
        assert "raft.journal" in before
        disk.fill()
        with pytest.raises(NoSpaceAtStart) as caught:
            RaftNode(config)
        message = str(caught.value)
        assert raft_dir in message and "ENOSPC" in message and "Nothing was started" in message
        assert "Free space" in message and ("free of" in message or not disk.mounted)
        assert _port_refuses(port)  # nothing listens: it neither votes nor serves its replica
        assert _contents(raft_dir) == before
        fresh = os.path.join(disk.path, "fresh")  # a first start on the full disk: refused, nothing left behind
        with pytest.raises(NoSpaceAtStart):
            RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", peers=[], data_dir=fresh, password="s"))
        assert os.listdir(fresh) == []
        disk.free()
        node = RaftNode(config)
        try:
            _leader([node])
            wait_for(lambda: _converged([node], [f"c{i}" for i in range(3)]), 15, what="the journal applied")
            assert node.state.connector("c2")["config"] == {"v": "c2"}
            _put(node, "after")
        finally:
            node.destroy()
    finally:
        disk.close()


@pytest.mark.skipif(os.geteuid() != 0, reason="mounts a full tmpfs under the node's data directory (root)")
def test_runnode_on_a_full_disk_exits_saying_so_before_anything_starts(tmp_path, monkeypatch):
    from tools.launcher import NodeProcess

    node = NodeProcess(node_id="full", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "n"),
                       bootstrap_servers="127.0.0.1:9", roles="raft,worker")
    disk = FullDisk(os.path.join(node.data_dir, "raft"), monkeypatch)
    try:
        assert disk.mounted
        disk.fill()
        node.start(wait=False)
        wait_for(lambda: node.proc.poll() is not None, 120, what="the node on a full disk to exit")
        assert node.proc.returncode != 0
        with open(node.log_path) as fh:
            log_text = fh.read()
        assert "This Raft member cannot start" in log_text and "ENOSPC" in log_text, log_text[-2000:]
        assert not os.path.exists(os.path.join(node.data_dir, "node.sqlite3"))  # stopped before the database
        assert "agent" not in log_text.lower() and _port_refuses(node.rest_port)
    finally:
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()
        disk.close()
