"""A rebalance that places only what changed commits what the whole assignment would have.

``GroupCoordinator.rebalance`` skips the walk of every task when the committed assignment is the last
one it made and the workers are the same (``_changes_since_placed``, ``place_added``). This drives a
state machine through random sequences of creates, deletes, task count and target state changes,
workers leaving and joining, and assignments the coordinator did not make, and after every
rebalance compares the committed assignment with ``WeightedRoundRobinAssignor.assign`` of the whole
item lists over the assignment before it. Deterministic for a seed.
"""
from __future__ import annotations

import random

import pytest

from raftnode.state import ClusterStateMachine
from webapp.coordinator.assignor import Assignment
from webapp.coordinator.coordinator import GroupCoordinator
from webapp.storage.raft import RaftMetadataStore

WORKERS = [f"w{i}" for i in range(1, 6)]


def _apply(state: ClusterStateMachine, command: str, *args):
    out = getattr(state, command)(*args, _doApply=True)
    assert not (isinstance(out, dict) and "rejected" in out), (command, args, out)
    return out


class Commands:
    """The coordinator's Raft commands, applied to the state at once (no Raft thread)."""

    def __init__(self, state: ClusterStateMachine) -> None:
        self.state = state

    def set_assignment(self, *, epoch, generation, connectors, tasks, base_generation=None, timeout=None):
        _apply(self.state, "_set_assignment", epoch, generation, connectors, tasks, base_generation)


class Replica:
    is_leader = True

    def __init__(self, state: ClusterStateMachine) -> None:
        self.state = state
        self.commands = Commands(state)


class World:
    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.state = ClusterStateMachine()
        for w in WORKERS:
            _apply(self.state, "_register_member", w, {"roles": ["worker"], "rest_address": f"{w}:8083"})
        self.replica = Replica(self.state)
        self.coordinator = GroupCoordinator(raft=self.replica, store=RaftMetadataStore(self.replica), node_id="w1")
        self.coordinator.epoch = self.state.assignment["epoch"]
        self.coordinator.dispatch = lambda force=False: None
        self.live = set(WORKERS[:3])
        self.count = 0
        for _ in range(8):
            self.create()

    def sync_sessions(self) -> None:
        self.coordinator.last_seen = {w: float("inf") for w in self.live}  # never expires: no clock here

    def names(self) -> list[str]:
        return sorted(self.state.connectors)

    def create(self) -> None:
        self.count += 1
        name = f"c{self.count}"
        n = self.rng.randint(0, 4)
        _apply(self.state, "_put_connector_config", name, {"connector.class": "X", "tasks.max": str(n)}, None, True)
        _apply(self.state, "_put_task_configs", name, None, 0, [{"task.index": str(i)} for i in range(n)])
        self.coordinator.poke(name)

    def delete(self) -> None:
        if len(self.state.connectors) > 2:
            name = self.rng.choice(self.names())
            _apply(self.state, "_delete_connector", name)
            self.coordinator.poke(name)

    def task_count(self) -> None:
        name = self.rng.choice(self.names())
        n = self.rng.randint(0, 5)
        _apply(self.state, "_put_task_configs", name, None, 0, [{"task.index": str(i)} for i in range(n)])
        self.coordinator.poke(name)

    def target(self) -> None:
        name = self.rng.choice(self.names())
        _apply(self.state, "_put_target_state", name, self.rng.choice(["PAUSED", "STOPPED", "STARTED"]))
        self.coordinator.poke(name)

    def leave(self) -> None:
        if len(self.live) > 1:
            self.live.discard(self.rng.choice(sorted(self.live)))

    def join(self) -> None:
        self.live.add(self.rng.choice(WORKERS))

    def foreign(self) -> None:
        """A generation this coordinator did not make (another leader's): a few keys moved."""
        a = self.state.assignment
        if a["tasks"]:
            key = self.rng.choice(sorted(a["tasks"]))
            _apply(self.state, "_set_assignment", a["epoch"], a["generation"] + 1, {},
                   {key: self.rng.choice(WORKERS)}, a["generation"])

    def grant_anew(self) -> None:
        a = self.state.assignment
        w = self.rng.choice(WORKERS)
        self.state._grant_anew([k for k, o in a["connectors"].items() if o == w],
                               [k for k, o in a["tasks"].items() if o == w])

    def expected(self, before: Assignment) -> Assignment:
        """The whole assignment of what is configured now, over ``before``."""
        c = self.coordinator
        desired = {n: (0 if r["target_state"] == "STOPPED" else len(r["tasks"]))
                   for n, r in sorted(self.state.connectors.items())}
        return c.assignor.assign(workers={w: 1.0 for w in self.live}, leader_worker=c._leader_worker(),
                                 connectors=list(desired), tasks=[f"{n}-{i}" for n, k in desired.items() for i in range(k)],
                                 previous=before)


CHANGES = ("create", "create", "delete", "task_count", "task_count", "target", "leave", "join", "foreign",
           "grant_anew")


@pytest.mark.parametrize("seed", range(12))
def test_a_rebalance_of_what_changed_commits_the_whole_assignment(seed):
    rng = random.Random(seed)
    world = World(rng)
    coordinator = world.coordinator
    shortcuts = []
    whole = coordinator._changes_since_placed

    def counted(*args):
        found = whole(*args)
        shortcuts.append(found is not None)
        return found

    coordinator._changes_since_placed = counted
    for step in range(150):
        for _ in range(rng.randint(1, 3)):
            change = rng.choice(CHANGES) if step else "create"
            getattr(world, change)()
        world.sync_sessions()
        a = world.state.assignment
        before = Assignment(dict(a["connectors"]), dict(a["tasks"]))
        want = world.expected(before)
        coordinator.rebalance()
        got = world.state.assignment
        assert (got["connectors"], got["tasks"]) == (want.connectors, want.tasks), (seed, step)
    # both ran: the shortcut (55-84 of the 150 rebalances for these seeds) and the whole path (workers
    # changed, generations made elsewhere, a worker above its new quota)
    taken = sum(shortcuts)
    assert taken >= 40 and 150 - taken >= 20, taken
