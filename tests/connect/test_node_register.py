"""A node's start commits its member entry even when attempts fail: never an exit for it.

Found by ``make chaos``: a member replacing one whose disk was lost started while the cluster
changed its membership and sent it a snapshot; its registration met one ``LEADER_CHANGED``
(damage-snapshot), or under heavy load one 30 s timeout (damage-journal), and the node exited.
"""
from __future__ import annotations

import threading
from types import SimpleNamespace

from raftnode import RaftUnavailable
from webapp.connect.node import ConnectNode, NodeOptions


class FlakyCommands:
    """``register_member`` that fails ``failures`` times with an unknown outcome, then commits."""

    def __init__(self, failures: int):
        self.failures, self.calls = failures, []
        self.committed = threading.Event()

    def register_member(self, *, node_id, info, timeout):
        self.calls.append((node_id, info, timeout))
        if len(self.calls) <= self.failures:
            raise RaftUnavailable("Raft command _register_member not committed: LEADER_CHANGED")
        self.committed.set()
        return {"ok": True}


def _node(commands: FlakyCommands) -> ConnectNode:
    node = ConnectNode.__new__(ConnectNode)  # only what _register reads: no Raft, no REST
    node.options = NodeOptions(node_id="n1", roles={"raft", "worker"}, rest_address="127.0.0.1:8083",
                               raft_address="127.0.0.1:9100")
    node.raft = SimpleNamespace(commands=commands)
    node._stopped = threading.Event()
    return node


def test_registration_is_made_again_after_an_unknown_outcome():
    commands = FlakyCommands(failures=2)
    _node(commands)._register(timeout=30)
    assert len(commands.calls) == 3
    assert {c[0] for c in commands.calls} == {"n1"} and commands.calls[-1][1]["rest_address"] == "127.0.0.1:8083"


def test_registration_not_committed_in_time_goes_on_in_the_background_until_it_commits(caplog):
    commands = FlakyCommands(failures=6)  # more than fit in the start's time budget
    node = _node(commands)
    node._register(timeout=0.3)  # returns: the node starts
    assert not commands.committed.is_set()
    assert commands.committed.wait(60), "the background registration never committed"
    assert len(commands.calls) == 7


def test_background_registration_ends_when_the_node_stops():
    commands = FlakyCommands(failures=10**6)
    node = _node(commands)
    node._register(timeout=0.2)
    worker = next(t for t in threading.enumerate() if t.name == "member-registration")
    node._stopped.set()
    worker.join(30)
    assert not worker.is_alive() and not commands.committed.is_set()
