"""``Herder.connectors_expanded`` (``GET /connectors?expand=...``) on a real single-member Raft group.

The list built from the store's bulk reads must say exactly what the per-connector selectors say,
and what Connect says, for every kind of status (the body below is the one the list gave before the
bulk reads, byte for byte), also through a store that only has the per-name reads (a plugin), and
leave out a connector deleted while the list is built instead of failing the whole list.
"""
from __future__ import annotations

import pytest

from raftnode import RaftNode
from webapp.connect.api.renderers import ConnectJSONRenderer
from webapp.connect.herder import Herder
from webapp.storage.base import MetadataStore
from webapp.storage.raft import RaftMetadataStore

SOURCE = "raftconnect.connectors.file.FileSourceConnector"


@pytest.fixture
def herder(lone_raft):
    raft = lone_raft
    store = RaftMetadataStore(raft)
    return Herder(store=store, members=lambda: raft.state.members, assignment=lambda: raft.state.assignment), raft


def _fill(raft: RaftNode) -> None:
    c = raft.commands
    c.become_coordinator(epoch=raft.term, leader="n1")
    c.register_member(node_id="w1", info={"roles": ["worker"], "rest_address": "h1:8083"})
    for name, target in (("running", None), ("failed", None), ("stopped", "STOPPED"), ("unassigned", None),
                         ("moved", None), ("odd", None)):
        cls = "no.such.Connector" if name == "odd" else SOURCE
        c.put_connector_config(name=name, config={"connector.class": cls, "tasks.max": "2"}, target_state=target,
                               create_only=True)
    owners = {"running": "w1", "failed": "w1", "stopped": "w1", "moved": "w2", "odd": "w1"}
    c.set_assignment(epoch=raft.term, generation=1, connectors=dict(owners),
                     tasks={f"{n}-{i}": w for n, w in owners.items() for i in range(2)})
    for name in owners:
        c.put_task_configs(name=name, worker_id=None, generation=1, task_configs=[{"i": "0"}, {"i": "1"}])
    for name in ("running", "failed", "stopped", "odd"):
        c.put_status(name=name, task=None, worker_id="w1", generation=1, status={"state": "RUNNING", "trace": None})
        c.put_status(name=name, task=0, worker_id="w1", generation=1, status={"state": "RUNNING", "trace": None})
    c.put_status(name="failed", task=1, worker_id="w1", generation=1, status={"state": "FAILED", "trace": "boom"})
    # "moved": a status reported by w1, whose task now belongs to w2 -> UNASSIGNED with w2's address
    before = dict(owners, moved="w1")
    c.set_assignment(epoch=raft.term, generation=2, connectors=before,
                     tasks={f"{n}-{i}": w for n, w in before.items() for i in range(2)})
    c.put_status(name="moved", task=0, worker_id="w1", generation=2, status={"state": "RUNNING", "trace": None})
    c.set_assignment(epoch=raft.term, generation=3, connectors=dict(owners),
                     tasks={f"{n}-{i}": w for n, w in owners.items() for i in range(2)})


def apply_change(raft: RaftNode, change: str) -> None:
    """Make one kind of change to what ``_fill`` wrote, by name, as the list caches' tests need it: a
    ``status`` or ``statuses`` report, a ``config``, a ``target_state``, ``task_configs``, an
    incremental (``assignment_changes``) or whole (``assignment_whole``) assignment, a ``create``,
    a ``delete`` or a ``member_address``."""
    c = raft.commands
    generation = raft.state.assignment["generation"]
    running = {"state": "RUNNING", "trace": None}
    if change == "status":
        c.put_status(name="running", task=1, worker_id="w1", generation=generation, status=running)
    elif change == "statuses":
        c.zzzz_put_statuses(worker_id="w1", items=[["running", 1, generation, running],
                                                    ["failed", 1, generation, running]])
    elif change == "config":
        c.put_connector_config(name="odd", config={"connector.class": "no.such.Connector", "tasks.max": "3"},
                               target_state=None, create_only=False)
    elif change == "target_state":
        c.put_target_state(name="stopped", target_state="STARTED")
    elif change == "task_configs":
        c.put_task_configs(name="failed", worker_id=None, generation=generation, task_configs=[{"i": "0"}])
    elif change == "assignment_changes":  # "moved" and its tasks go back to w1, whose reports then count
        c.set_assignment(epoch=raft.term, generation=generation + 1, connectors={"moved": "w1"},
                         tasks={"moved-0": "w1", "moved-1": None}, base_generation=generation)
    elif change == "assignment_whole":
        state = raft.state.assignment
        c.set_assignment(epoch=raft.term, generation=generation + 1, connectors=dict(state["connectors"]),
                         tasks=dict(state["tasks"]))
    elif change == "create":
        c.put_connector_config(name="new", config={"connector.class": "no.such.Connector"}, target_state=None,
                               create_only=True)
    elif change == "delete":
        c.delete_connector(name="running")
    elif change == "member_address":
        c.register_member(node_id="w1", info={"roles": ["worker"], "rest_address": "h9:8083"})
    else:
        raise ValueError(f"no change {change!r}")


@pytest.mark.parametrize("expand", [["status"], ["info"], ["status", "info"], ["nonsense"]])
def test_one_pass_list_equals_the_per_connector_selectors(herder, expand):
    h, raft = herder
    _fill(raft)
    listed = h.connectors_expanded(expand)
    assert list(listed) == h.connector_names()
    for name, entry in listed.items():
        expected = {}
        if "status" in expand:
            expected["status"] = h.connector_status(name)
        if "info" in expand:
            expected["info"] = h.connector_info(name)
        assert entry == expected
    if "status" in expand:  # the cases the comparison covers
        failed = listed["failed"]["status"]["tasks"][1]
        assert failed == {"id": 1, "state": "FAILED", "worker_id": "h1:8083", "trace": "boom"}
        assert listed["stopped"]["status"]["connector"]["state"] == "STOPPED"
        assert listed["stopped"]["status"]["tasks"] == []
        assert listed["moved"]["status"]["tasks"][0] == {"id": 0, "state": "UNASSIGNED", "worker_id": "w2"}
        assert listed["odd"]["status"]["type"] == "unknown"


def _expected() -> dict:
    """What Connect says for :func:`_fill`'s connectors (``expand=status&expand=info``)."""
    def task(i, state, worker, **extra):
        return {"id": i, "state": state, "worker_id": worker, **extra}

    def entry(name, connector, tasks, type_="source", cls=SOURCE, task_count=2):
        return {"status": {"name": name, "connector": connector, "tasks": tasks, "type": type_},
                "info": {"name": name, "config": {"connector.class": cls, "tasks.max": "2"},
                         "tasks": [{"connector": name, "task": i} for i in range(task_count)], "type": type_}}

    running = {"state": "RUNNING", "worker_id": "h1:8083"}
    return {
        "failed": entry("failed", running, [task(0, "RUNNING", "h1:8083"), task(1, "FAILED", "h1:8083", trace="boom")]),
        # reported by w1, now owned by w2 (no member, so shown by id): UNASSIGNED with the owner
        "moved": entry("moved", {"state": "UNASSIGNED", "worker_id": "w2"},
                       [task(0, "UNASSIGNED", "w2"), task(1, "UNASSIGNED", "w2")]),
        "odd": entry("odd", running, [task(0, "RUNNING", "h1:8083"), task(1, "UNASSIGNED", "h1:8083")],
                     type_="unknown", cls="no.such.Connector"),
        "running": entry("running", running, [task(0, "RUNNING", "h1:8083"), task(1, "UNASSIGNED", "h1:8083")]),
        "stopped": entry("stopped", {"state": "STOPPED", "worker_id": "h1:8083"}, [], task_count=0),
        "unassigned": entry("unassigned", {"state": "UNASSIGNED", "worker_id": None}, [], task_count=0),
    }


class PerNameStore(RaftMetadataStore):
    """A store with the interface's default bulk reads only (per-name reads in a loop), as a plugin has."""

    connector_summaries = MetadataStore.connector_summaries
    connectors_with_statuses = MetadataStore.connectors_with_statuses


@pytest.mark.parametrize("store", ["raft", "per-name"])
def test_the_list_is_the_body_connect_gives(herder, store):
    h, raft = herder
    _fill(raft)
    if store == "per-name":
        h.store = PerNameStore(raft)
    body = ConnectJSONRenderer().render(h.connectors_expanded(["status", "info"]))
    assert body == ConnectJSONRenderer().render(_expected())
    assert list(h.connectors_expanded(["status"])) == sorted(_expected())
    assert h.connectors_expanded(["info"]) == {n: {"info": e["info"]} for n, e in _expected().items()}


@pytest.mark.parametrize("store", ["raft", "per-name"])
def test_a_connector_deleted_while_the_list_is_built_is_left_out(herder, store):
    h, raft = herder
    _fill(raft)
    base = RaftMetadataStore if store == "raft" else PerNameStore

    class Racing(base):
        def connector_summaries(self):  # "running" is deleted once the list has begun
            for i, summary in enumerate(super().connector_summaries()):
                if i == 0:
                    raft.commands.delete_connector(name="running")
                yield summary

    h.store = Racing(raft)
    listed = h.connectors_expanded(["status", "info"])
    expected = _expected()
    del expected["running"]
    assert listed == expected
