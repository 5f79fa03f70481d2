"""In-process Raft groups for the raftnode tests: members on loopback, their leader, a tap on what a member hears;
and a bare state machine to apply commands to, as a member does when they commit (:func:`apply`).

Every member of a group shares the password ``secret`` and has its own data directory under
``tmp_path``; ``overrides`` are :class:`~raftnode.RaftConfig` fields (election timeouts, compaction,
entry sizes) the test needs.
"""
from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from raftnode import RaftConfig, RaftNode
from raftnode.state import ClusterStateMachine
from tools.launcher import wait_for
from webapp.kafka.embedded import free_port

__all__ = ["raft_members", "raft_member", "ready_leader", "destroy", "MessageTap", "apply", "assigned_machine"]


def apply(sm: ClusterStateMachine, command: str, *args: Any) -> Any:
    """Apply one replicated command directly, as every member does when it commits (no Raft); its result."""
    return getattr(sm, command)(*args, _doApply=True)


def assigned_machine() -> ClusterStateMachine:
    """Connector ``c`` with two tasks: task 0 on worker w1, task 1 on w2, at generation 2."""
    sm = ClusterStateMachine()
    apply(sm, "_put_connector_config", "c", {"connector.class": "X"}, None, False)
    apply(sm, "_set_assignment", 1, 2, {"c": "w1"}, {"c-0": "w1", "c-1": "w2"})
    return sm


def raft_member(tmp_path, addrs: list[str], i: int, dirname: str, **overrides: Any) -> RaftNode:
    """Member ``i`` of the group at ``addrs``, its data in ``tmp_path / dirname``."""
    return RaftNode(RaftConfig(self_address=addrs[i], peers=[a for a in addrs if a != addrs[i]],
                               data_dir=str(tmp_path / dirname), password="secret", **overrides))


def raft_members(tmp_path, n: int = 3, **overrides: Any) -> tuple[list[str], list[RaftNode]]:
    """``(addresses, members)`` of a new group of ``n`` on free loopback ports, in ``tmp_path / m{i}``."""
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(n)]
    return addrs, [raft_member(tmp_path, addrs, i, f"m{i}", **overrides) for i in range(n)]


def ready_leader(nodes: list[RaftNode], timeout: float = 30.0) -> RaftNode:
    """The member of ``nodes`` that leads and is ready (its entries of earlier terms applied); waits up to
    ``timeout`` seconds. Raises ``TimeoutError`` from :func:`wait_for`."""
    return wait_for(lambda: next((n for n in nodes if n.is_leader and n.status()["ready"]), None), timeout,
                    interval=0.02, what="a leader")


def destroy(nodes: list[RaftNode]) -> None:
    """Destroy every member of ``nodes`` not stopped yet."""
    for n in nodes:
        if not n._stopped.is_set():
            n.destroy()


class MessageTap:
    """Puts ``hook(node, message, handle)`` between ``member``'s transport and its handling of what it hears.

    ``handle(node, message)`` is pysyncobj's own handling; the hook may call it, delay it or drop the
    message. While :attr:`armed` is clear, every message is handled at once.
    """

    def __init__(self, member: RaftNode, hook: Callable[[Any, Any, Callable[[Any, Any], None]], None]):
        transport = member.syncobj._SyncObj__transport
        self._handle = transport._onMessageReceivedCallback
        self._hook = hook
        self.armed = threading.Event()
        transport.setOnMessageReceivedCallback(self._on_message)

    def _on_message(self, node: Any, message: Any) -> None:
        if self.armed.is_set():
            self._hook(node, message, self._handle)
        else:
            self._handle(node, message)


def is_append_entries(message: Any) -> bool:
    """Whether ``message`` is a leader's append-entries (or heartbeat)."""
    return isinstance(message, dict) and message.get("type") == "append_entries"
