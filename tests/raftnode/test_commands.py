"""raftnode.commands: the typed facade proposes exactly the log entries the string calls did."""
import inspect
import re

import pytest

from raftnode.commands import ClusterCommands
from raftnode.state import BATCH_COMMAND, ClusterStateMachine


class _Recorder:
    def __init__(self):
        self.calls = []

    def propose(self, name, *args, timeout):
        self.calls.append((name, args, timeout))
        return {"ok": True}


_SAMPLES = {"node_id": "n1", "info": {"roles": ["raft"]}, "epoch": 3, "leader": "n1", "generation": 4, "base_generation": 3,
            "connectors": {"c": "w"}, "tasks": [0], "name": "c", "connector": True, "config": {"k": "v"},
            "target_state": "PAUSED", "create_only": False, "worker_id": "w", "task_configs": [{}], "task": 0,
            "status": {"state": "RUNNING"}, "entries": [], "topics": ["t"], "items": [], "switch_id": "s",
            "source": "raft", "target": "pg", "now": 1.5, "phase": "copy", "progress": {}, "digest": {},
            "reason": "r", "changes": {"role": "admin"}, "create": True, "user": "u", "expires": None,
            "spec": {"url": "postgresql://u@h/db", "password": None, "added_by": "u"}, "count": 2, "seq": 7}
_METHODS = [m for m in vars(ClusterCommands) if not m.startswith("_")]


@pytest.mark.parametrize("method", _METHODS)
def test_each_method_proposes_a_replicated_command_with_its_parameters_in_order(method):
    raft = _Recorder()
    params = [p for p in inspect.signature(getattr(ClusterCommands, method)).parameters if p not in ("self", "timeout")]
    kwargs = {p: _SAMPLES[p] for p in params}
    if method == "set_assignment":
        kwargs["tasks"] = {"c-0": "w"}
    getattr(ClusterCommands(raft), method)(**kwargs, timeout=2.5)
    [(name, args, timeout)] = raft.calls
    assert name == "_" + method
    target = getattr(ClusterStateMachine, name)
    assert getattr(target, "replicated", False), f"{name} is not a replicated command"
    replicated = [p for p in inspect.signature(target.__wrapped__).parameters if p != "self"]
    assert replicated == params
    assert list(args) == [kwargs[p] for p in params]
    assert timeout == 2.5


def test_every_replicated_command_but_internal_helpers_has_a_method():
    replicated = {n for n, f in vars(ClusterStateMachine).items()
                  if getattr(f, "replicated", False) and not re.fullmatch(r".+_v\d+", n)}  # pysyncobj's versioned aliases
    # the group-commit entry is made by RaftNode.propose itself, never by a caller
    assert replicated - {BATCH_COMMAND} == {"_" + m for m in _METHODS}


def test_a_str_enum_target_state_enters_the_log_as_a_plain_str():
    from enum import StrEnum

    class Target(StrEnum):
        PAUSED = "PAUSED"

    raft = _Recorder()
    ClusterCommands(raft).put_target_state(name="c", target_state=Target.PAUSED)
    ClusterCommands(raft).put_connector_config(name="c", config={}, target_state=Target.PAUSED, create_only=True)
    assert [type(call[1][-1 if call[0] == "_put_target_state" else 2]) for call in raft.calls] == [str, str]


def test_a_proposal_on_a_destroyed_member_is_refused_as_unavailable(tmp_path):
    """A background proposer racing the node's stop gets RaftUnavailable, not pysyncobj's AttributeError."""
    from raftnode import RaftConfig, RaftNode, RaftUnavailable
    from webapp.kafka.embedded import free_port

    raft = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "raft"),
                               password="test-secret"))
    try:
        assert raft.wait_ready(15), raft.status()
        raft.commands.register_member(node_id="n1", info={"roles": ["raft"]}, timeout=5)
    finally:
        raft.destroy()
    with pytest.raises(RaftUnavailable, match="has stopped"):
        raft.commands.register_member(node_id="n1", info={"roles": ["raft"]}, timeout=5)
