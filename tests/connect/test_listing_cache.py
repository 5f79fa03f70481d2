"""``Herder.connectors_listed``: the connector list's entries kept encoded between lists
(``webapp.connect.listing``), on a real single-member Raft group.

After every kind of change the cached list must give the bytes the uncached one gives
(``connectors_expanded``), and only the entries of connectors that changed are rebuilt.
"""
from __future__ import annotations

import pytest

from raftnode.state import ClusterStateMachine
from webapp.connect.api.renderers import ConnectJSONRenderer
from webapp.connect.herder import Herder
from webapp.storage.base import MetadataStore
from webapp.storage.raft import RaftMetadataStore

from .test_herder_expand import _fill, apply_change

EXPANSIONS = (["status"], ["info"], ["status", "info"])
RUNNING = {"state": "RUNNING", "trace": None}


@pytest.fixture
def herder(lone_raft):
    raft = lone_raft
    store = RaftMetadataStore(raft)
    h = Herder(store=store, members=lambda: raft.state.members, assignment=lambda: raft.state.assignment)
    _fill(raft)
    return h, raft


def _render(data) -> bytes:
    return ConnectJSONRenderer().render(data)


def _same_as_uncached(h: Herder) -> dict:
    """Assert the cached list renders as the uncached one for every expansion; return the both-kinds list."""
    for expand in EXPANSIONS:
        assert _render(h.connectors_listed(expand)) == _render(h.connectors_expanded(expand)), expand
    return h.connectors_listed(["status", "info"])


def _rebuilt(before: dict, after: dict) -> set[str]:
    """Names whose entries are new objects in ``after`` (rebuilt), or new names."""
    return {name for name, entry in after.items()
            if name not in before or any(entry[k] is not before[name][k] for k in entry)}


def test_an_unchanged_list_is_served_from_the_cache(herder):
    h, _ = herder
    first = _same_as_uncached(h)
    assert _rebuilt(first, h.connectors_listed(["status", "info"])) == set()


@pytest.mark.parametrize("change, rebuilt", [
    ("status", {"running"}),
    ("statuses", {"running", "failed"}),
    ("config", {"odd"}),
    ("target_state", {"stopped"}),
    ("task_configs", {"failed"}),
    ("assignment_changes", {"moved"}),
    ("assignment_whole", {"failed", "moved", "odd", "running", "stopped", "unassigned"}),
    ("create", {"new"}),
    ("delete", set()),
])
def test_a_change_rebuilds_only_its_connectors(herder, change, rebuilt):
    h, raft = herder
    before = _same_as_uncached(h)
    apply_change(raft, change)
    after = _same_as_uncached(h)
    assert _rebuilt(before, after) == rebuilt
    assert ("running" in after) == (change != "delete")


def test_a_member_address_change_rebuilds_every_status_and_no_info(herder):
    h, raft = herder
    before = _same_as_uncached(h)
    raft.commands.register_member(node_id="w1", info={"roles": ["worker"], "rest_address": "h9:8083"})
    after = _same_as_uncached(h)
    assert after["running"]["status"] is not before["running"]["status"]
    assert b"h9:8083" in _render(after) and b"h1:8083" not in _render(after)
    assert all(after[n]["info"] is before[n]["info"] for n in after)


def test_an_import_rebuilds_everything(herder):
    """A store switch's imports raise the floor of every connector's revision."""
    h, raft = herder
    state: ClusterStateMachine = raft.state
    before = _same_as_uncached(h)
    floor, _ = state.listing_revisions()
    state._views_changed()  # what _import_names, _clear_metadata and the active store's changes call
    assert state.listing_revisions()[0] > floor
    assert _rebuilt(before, _same_as_uncached(h)) == set(before)


def test_revisions_stay_out_of_snapshots_and_a_restore_raises_the_floor(herder):
    _, raft = herder
    state: ClusterStateMachine = raft.state
    raft.commands.put_target_state(name="running", target_state="PAUSED")
    floor, revisions = state.listing_revisions()
    assert list(revisions) == ["running"] and revisions["running"] > floor  # _fill ended with a whole assignment
    data = state._serialize()
    assert not any(key.startswith("_listing") for key in data)
    restored = ClusterStateMachine()
    restored._deserialize(state._serialize())
    assert restored.digest() == state.digest()
    assert "snapshots_loaded" not in data and state.snapshots_loaded == 0
    state._deserialize(data)  # as pysyncobj does when this member installs a snapshot
    assert state.snapshots_loaded == 1
    assert state.listing_revisions() == (revisions["running"] + 1, {})


class NoRevisions(RaftMetadataStore):
    """A store that keeps no listing revisions, as a database's (the interface's default)."""

    listing_revisions = MetadataStore.listing_revisions


def test_a_store_without_revisions_lists_uncached(herder):
    h, raft = herder
    h.connectors_listed(["status"])
    h.store = NoRevisions(raft)
    listed = h.connectors_listed(["status", "info"])
    assert listed == h.connectors_expanded(["status", "info"])  # plain values: nothing was encoded
    raft.commands.put_status(name="running", task=1, worker_id="w1", generation=raft.state.assignment["generation"],
                             status=RUNNING)
    assert listed != h.connectors_listed(["status", "info"])


def test_the_indented_form_decodes_the_cached_entries(herder):
    h, _ = herder
    listed = h.connectors_listed(["status", "info"])
    indented = ConnectJSONRenderer().render(listed, "application/json; indent=2", {})
    assert indented == ConnectJSONRenderer().render(h.connectors_expanded(["status", "info"]),
                                                    "application/json; indent=2", {})
    assert b'\n  "failed": {' in indented
