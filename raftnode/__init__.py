"""Raft layer of RaftConnect: pysyncobj transport and the replicated cluster state.

Imports nothing from Django or ``webapp``.
"""
from .commands import ClusterCommands
from .durability import JournalCorrupted, NoSpaceAtStart, SnapshotCorrupted
from .node import CommandRejected, RaftConfig, RaftNode, RaftUnavailable, SingleAttempt, without_leader_wait
from .state import ClusterStateMachine

__all__ = ["RaftNode", "RaftConfig", "RaftUnavailable", "CommandRejected", "ClusterStateMachine", "SingleAttempt",
           "without_leader_wait", "ClusterCommands", "JournalCorrupted", "SnapshotCorrupted",
           "NoSpaceAtStart"]
