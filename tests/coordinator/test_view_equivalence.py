"""A worker's cached view always equals one built from scratch, whatever changed in between.

The coordinator keeps each worker's view and skips work by several keys (the assignment object,
``view_version``, the logs of which connectors changes and pokes named, per-connector fragments and
records). A view that is stale for even one heartbeat makes a worker run an old config or miss a
restart, so this drives a state machine through random sequences of every kind of change a view
can show, or must ignore, and compares, for random workers at random moments, the coordinator's
view with the view a new coordinator builds from the same state. Applied directly to a
``ClusterStateMachine`` (no Raft thread, no coordinator loop): deterministic for a seed.
"""
from __future__ import annotations

import random

import pytest

from raftnode.state import ClusterStateMachine
from webapp.coordinator.coordinator import GroupCoordinator
from webapp.coordinator.viewdelta import DELTA_FROM, apply_view_delta, delta_answer
from webapp.storage.raft import RaftMetadataStore

WORKERS = ["w1", "w2", "w3", "w4"]


class Replica:
    """What the coordinator and the Raft store read of a member: its applied state."""

    is_leader = True

    def __init__(self, state: ClusterStateMachine) -> None:
        self.state = state


def _apply(state: ClusterStateMachine, command: str, *args):
    out = getattr(state, command)(*args, _doApply=True)
    assert not (isinstance(out, dict) and "rejected" in out), (command, args, out)
    return out


class World:
    """A state machine with workers and connectors, and the random changes made to it."""

    def __init__(self, rng: random.Random) -> None:
        self.rng = rng
        self.state = ClusterStateMachine()
        self.count = 0
        for w in WORKERS:
            _apply(self.state, "_register_member", w, {"roles": ["worker"], "rest_address": f"{w}:8083"})
        for _ in range(10):
            self.create()
        self.whole()

    # ------------------------------------------------------------------ helpers
    def names(self) -> list[str]:
        return sorted(self.state.connectors)

    def assignment(self) -> dict:
        return self.state.assignment

    def commit(self, connectors: dict, tasks: dict) -> None:
        a = self.assignment()
        _apply(self.state, "_set_assignment", a["epoch"], a["generation"] + 1, connectors, tasks, a["generation"])

    # ------------------------------------------------------------------ changes
    def create(self) -> None:
        self.count += 1
        name = f"c{self.count}"
        n = self.rng.randint(1, 3)
        _apply(self.state, "_put_connector_config", name, {"connector.class": "X", "tasks.max": str(n)}, None, True)
        _apply(self.state, "_put_task_configs", name, None, 0, [{"task.index": str(i)} for i in range(n)])

    def whole(self) -> None:
        """A whole assignment: every connector and task placed at random (a new coordinator's first)."""
        rng, a = self.rng, self.assignment()
        connectors = {n: rng.choice(WORKERS) for n in self.names()}
        tasks = {f"{n}-{i}": rng.choice(WORKERS) for n in self.names()
                 for i in range(len(self.state.connectors[n]["tasks"]))}
        _apply(self.state, "_set_assignment", a["epoch"], a["generation"] + 1, connectors, tasks)

    def move(self) -> None:
        """Incremental: a few instances to other workers, or assigned for the first time."""
        rng, a = self.rng, self.assignment()
        keys = list(a["tasks"]) + [f"{n}-{i}" for n in self.names()
                                   for i in range(len(self.state.connectors[n]["tasks"]))]
        tasks = {k: rng.choice(WORKERS) for k in rng.sample(keys, min(len(keys), rng.randint(1, 3)))}
        connectors = {n: rng.choice(WORKERS) for n in rng.sample(self.names(), 1)} if rng.random() < 0.5 else {}
        self.commit(connectors, tasks)

    def drop(self) -> None:
        a = self.assignment()
        if a["tasks"]:
            self.commit({}, {self.rng.choice(sorted(a["tasks"])): None})

    def config(self) -> None:
        name = self.rng.choice(self.names())
        config = dict(self.state.connectors[name]["config"], v=str(self.rng.random()))
        _apply(self.state, "_put_connector_config", name, config, None, False)

    def task_configs(self) -> None:
        name = self.rng.choice(self.names())
        n = self.rng.randint(1, 3)
        _apply(self.state, "_put_task_configs", name, None, 0,
               [{"task.index": str(i), "v": str(self.rng.random())} for i in range(n)])

    def target(self) -> None:
        _apply(self.state, "_put_target_state", self.rng.choice(self.names()),
               self.rng.choice(["PAUSED", "STOPPED", "STARTED"]))

    def restart(self) -> None:
        name = self.rng.choice(self.names())
        _apply(self.state, "_request_restart", name, self.rng.random() < 0.5,
               [i for i in range(len(self.state.connectors[name]["tasks"])) if self.rng.random() < 0.5])

    def delete(self) -> None:
        if len(self.state.connectors) > 3:
            _apply(self.state, "_delete_connector", self.rng.choice(self.names()))

    def member(self) -> None:
        w = self.rng.choice(WORKERS)
        _apply(self.state, "_register_member", w, {"roles": ["worker"], "rest_address": f"{w}:{self.rng.randint(1, 9)}"})

    def grant_anew(self) -> None:
        a = self.assignment()
        w = self.rng.choice(WORKERS)
        self.state._grant_anew([k for k, o in a["connectors"].items() if o == w],
                               [k for k, o in a["tasks"].items() if o == w])

    def everything(self) -> None:
        self.state._views_changed()  # imports, clears, the active store


CHANGES = ("create", "move", "move", "drop", "config", "task_configs", "target", "restart", "delete", "member",
           "grant_anew", "everything", "whole", "poke", "poke_all")


def _start(seed: int) -> tuple[random.Random, World, Replica, GroupCoordinator]:
    """A world of ``seed`` and a coordinator over it."""
    rng = random.Random(seed)
    world = World(rng)
    replica = Replica(world.state)
    coordinator = GroupCoordinator(raft=replica, store=RaftMetadataStore(replica), node_id="n1")
    coordinator.epoch = world.assignment()["epoch"]
    return rng, world, replica, coordinator


def _change(rng: random.Random, world: World, coordinator: GroupCoordinator) -> str:
    """Make one random change of :data:`CHANGES` (a poke goes to the coordinator); returns its name."""
    change = rng.choice(CHANGES)
    if change == "poke":
        coordinator.poke(rng.choice(world.names()))
    elif change == "poke_all":
        coordinator.poke()
    else:
        getattr(world, change)()
    return change


@pytest.mark.parametrize("seed", range(8))
def test_a_cached_view_equals_a_new_coordinators_after_any_changes(seed):
    rng, world, replica, coordinator = _start(seed)
    compared = 0
    for step in range(250):
        change = _change(rng, world, coordinator)
        for w in WORKERS:
            if rng.random() < 0.6:  # some workers miss heartbeats: their cached views age over several changes
                continue
            fresh = GroupCoordinator(raft=replica, store=RaftMetadataStore(replica), node_id="n1")
            expected = fresh._build_view(w)
            assert coordinator._cached_view(w) == expected, (seed, step, change, w)
            compared += 1
    assert compared > 250


@pytest.mark.parametrize("seed", range(4))
def test_a_view_kept_by_deltas_equals_the_coordinators_after_any_changes(seed):
    """A worker answered with deltas (``webapp.coordinator.viewdelta``, as ``GroupCoordinator.heartbeat``
    makes them from the view it last answered) holds, after each, exactly the coordinator's view."""
    rng, world, _, coordinator = _start(1000 + seed)
    held: dict[str, dict] = {}
    for w in WORKERS:
        view, digest = coordinator._cached_view(w)
        held[w] = {**view, "digest": digest}
    deltas = 0
    for step in range(250):
        change = _change(rng, world, coordinator)
        for w in WORKERS:
            if rng.random() < 0.6:  # some workers miss heartbeats: their deltas span several changes
                continue
            view, digest = coordinator._cached_view(w)
            answer = delta_answer(held[w], view, {"worker_id": w, "generation": view["generation"],
                                                   "epoch": view["epoch"], "digest": digest,
                                                   DELTA_FROM: held[w]["digest"]})
            held[w] = apply_view_delta(held[w], answer)
            assert held[w] == {**view, "digest": digest}, (seed, step, change, w)
            deltas += bool(answer["tasks"] or answer["connectors"] or answer["removed_tasks"]
                           or answer["removed_connectors"])
    assert deltas > 50


def _as_sets(index: dict) -> dict:
    """An owner index with its lists as sets: a patched index may list a worker's instances in another order."""
    return {w: (set(o.connectors), set(o.tasks), o.names, o.name_set, o.owns, {n: set(v) for n, v in o.nums.items()})
            for w, o in index.items()}


@pytest.mark.parametrize("seed", range(8))
def test_an_owner_index_made_from_the_last_one_equals_a_whole_walk(seed, monkeypatch):
    """The owner index of each new generation is made from the last one and the steps between them
    (``ClusterStateMachine.assignment_steps``) when it can: it must hold what a walk of the whole
    assignment gives, after any sequence of moves, drops, grants anew, whole assignments and steps
    skipped (the index is asked for only now and then, as heartbeats come)."""
    from webapp.coordinator import coordinator as module

    rng = random.Random(seed)
    world = World(rng)
    replica = Replica(world.state)
    coordinator = GroupCoordinator(raft=replica, store=RaftMetadataStore(replica), node_id="n1")
    patched = []
    real = module._patched_index
    monkeypatch.setattr(module, "_patched_index", lambda *a: patched.append(1) or real(*a))
    for step in range(300):
        getattr(world, rng.choice(("create", "move", "move", "move", "drop", "grant_anew", "delete", "whole"
                                   if rng.random() < 0.1 else "move")))()
        if rng.random() < 0.5:
            a = world.assignment()
            assert _as_sets(coordinator._owned(a)) == _as_sets(module._index_of(a)), (seed, step)
    assert len(patched) > 40
