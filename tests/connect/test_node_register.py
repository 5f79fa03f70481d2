"""A node's start commits its member entry even when one attempt's outcome became unknown.

Found by ``make chaos`` (damage-snapshot): a member replacing one whose disk was lost started
while the cluster changed its membership, its registration met one ``LEADER_CHANGED`` and the
node exited.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest

from raftnode import RaftUnavailable
from webapp.connect.node import ConnectNode, NodeOptions


class FlakyCommands:
    """``register_member`` that fails ``failures`` times with an unknown outcome, then commits."""

    def __init__(self, failures: int):
        self.failures, self.calls = failures, []

    def register_member(self, *, node_id, info, timeout):
        self.calls.append((node_id, info, timeout))
        if len(self.calls) <= self.failures:
            raise RaftUnavailable("Raft command _register_member not committed: LEADER_CHANGED")
        return {"ok": True}


def _node(commands: FlakyCommands) -> ConnectNode:
    node = ConnectNode.__new__(ConnectNode)  # only what _register reads: no Raft, no REST
    node.options = NodeOptions(node_id="n1", roles={"raft", "worker"}, rest_address="127.0.0.1:8083",
                               raft_address="127.0.0.1:9100")
    node.raft = SimpleNamespace(commands=commands)
    return node


def test_registration_is_made_again_after_an_unknown_outcome():
    commands = FlakyCommands(failures=2)
    _node(commands)._register(timeout=30)
    assert len(commands.calls) == 3
    assert {c[0] for c in commands.calls} == {"n1"} and commands.calls[-1][1]["rest_address"] == "127.0.0.1:8083"


def test_registration_gives_up_with_the_last_error_once_its_time_is_spent():
    commands = FlakyCommands(failures=10**6)
    with pytest.raises(RaftUnavailable, match="LEADER_CHANGED"):
        _node(commands)._register(timeout=0.5)
    assert len(commands.calls) >= 2
