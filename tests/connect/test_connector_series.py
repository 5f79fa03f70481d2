"""The leader's per-connector metric families (``webapp.connect_metrics.ConnectorSeries``), kept as
text between scrapes, on a real single-member Raft group.

After every kind of change, a scrape served from the kept lines must give the bytes a first scrape
gives, count each connector's tasks as its ConnectorStateInfo does, and read only the connectors
that changed. A store without listing revisions is read whole, at most once per
``STATUS_CACHE_SECONDS`` unless its names changed.
"""
from __future__ import annotations

from types import SimpleNamespace

import pytest
from prometheus_client.parser import text_string_to_metric_families

from webapp import connect_metrics
from webapp.connect.herder import Herder
from webapp.connect_metrics import STATUS_CACHE_SECONDS, ConnectMetricsCollector, ConnectorSeries
from webapp.storage.base import StoreUnavailable
from webapp.storage.raft import RaftMetadataStore

from .test_herder_expand import _fill, apply_change

STATES = ("running", "paused", "failed", "unassigned", "restarting", "destroyed")


class _Spy(Herder):
    """A Herder that records which connectors each ``connector_states`` call reads (None: all)."""

    def connector_states(self, names=None):
        names = None if names is None else list(names)
        self.asked.append(None if names is None else set(names))
        return super().connector_states(names)


@pytest.fixture
def herder(lone_raft):
    raft = lone_raft
    h = _Spy(store=RaftMetadataStore(raft), members=lambda: raft.state.members,
             assignment=lambda: raft.state.assignment)
    h.asked = []
    _fill(raft)
    return h, raft


def _families(text: bytes) -> dict[str, dict[tuple, float]]:
    return {f.name: {tuple(sorted(s.labels.items())): s.value for s in f.samples}
            for f in text_string_to_metric_families(text.decode())}


def _checked(h: Herder, series: ConnectorSeries) -> bytes:
    """Scrape ``series``; assert it equals a first scrape and says what the Herder says; return it."""
    text = series.exposition(h)
    assert text == ConnectorSeries().exposition(h)
    families = _families(text)
    g = "kafka_connect_connect_worker_metrics_connector_"
    names = h.connector_names()
    for name in names:
        status = h.connector_status(name)
        for s in STATES:
            counted = sum(1 for t in status["tasks"] if t["state"].lower() == s)
            assert families[f"{g}{s}_task_count"][(("connector", name),)] == counted, (name, s)
        assert families[f"{g}total_task_count"][(("connector", name),)] == len(status["tasks"])
        info = {dict(k)["connector"]: dict(k) for k in families["kafka_connect_connector_metrics"]}[name]
        assert info["status"] == status["connector"]["state"].lower()
        assert info["connector_type"] == status["type"]
        assert info["connector_class"] == h.store.connector_summary(name).config["connector.class"]
    assert {dict(k)["connector"] for k in families["kafka_connect_connector_metrics"]} == set(names)
    return text


def test_an_unchanged_store_is_served_without_a_read(herder):
    h, _ = herder
    series = ConnectorSeries()
    first = _checked(h, series)
    h.asked.clear()
    assert series.exposition(h) == first
    assert h.asked == [set()]


@pytest.mark.parametrize("change, read", [
    ("status", {"running"}),
    ("statuses", {"running", "failed"}),
    ("config", {"odd"}),
    ("target_state", {"stopped"}),
    ("task_configs", {"failed"}),
    ("assignment_changes", {"moved"}),
    ("create", {"new"}),
    ("delete", set()),
    ("member_address", set()),  # the families show no worker address
])
def test_a_change_reads_only_its_connectors(herder, change, read):
    h, raft = herder
    series = ConnectorSeries()
    before = _checked(h, series)
    if change == "status":  # a state count moves: RUNNING -> FAILED
        raft.commands.put_status(name="running", task=1, worker_id="w1",
                                 generation=raft.state.assignment["generation"],
                                 status={"state": "FAILED", "trace": "boom"})
    elif change == "config":  # the class label moves
        raft.commands.put_connector_config(name="odd", config={"connector.class": "FileSinkConnector", "topics": "t"},
                                           target_state=None, create_only=False)
    else:
        apply_change(raft, change)
    h.asked.clear()
    after = _checked(h, series)
    assert h.asked[0] == read  # the kept series' scrape; the second call is the fresh one's
    assert (after != before) == (change != "member_address")
    assert (b'connector="running"' in after) == (change != "delete")


def test_an_import_reads_everything(herder):
    """A store switch's imports raise the floor of every connector's revision."""
    h, raft = herder
    series = ConnectorSeries()
    _checked(h, series)
    raft.state._views_changed()  # what _import_names, _clear_metadata and the active store's changes call
    h.asked.clear()
    _checked(h, series)
    assert h.asked[0] == set(h.connector_names())


def test_a_store_without_revisions_is_read_whole_at_most_once_per_period(herder, monkeypatch):
    """Relational and plugin stores: one bulk read, reused while the names stay and the period lasts."""
    h, raft = herder
    monkeypatch.setattr(h.store, "listing_revisions", lambda: None)
    now = [0.0]
    series = ConnectorSeries(clock=lambda: now[0])
    first = series.exposition(h)
    assert h.asked == [None]
    raft.commands.put_status(name="running", task=1, worker_id="w1", generation=raft.state.assignment["generation"],
                             status={"state": "FAILED", "trace": "boom"})
    assert series.exposition(h) == first and h.asked == [None]  # within the period: the status change waits
    now[0] = STATUS_CACHE_SECONDS
    assert _families(series.exposition(h))[
        "kafka_connect_connect_worker_metrics_connector_failed_task_count"][(("connector", "running"),)] == 1
    assert h.asked == [None, None]
    raft.commands.put_connector_config(name="fresh", config={"connector.class": "no.such.Connector"},
                                       target_state=None, create_only=True)
    assert b'connector="fresh"' in series.exposition(h)  # a new name shows at once, period or not
    raft.commands.delete_connector(name="fresh")
    assert b'connector="fresh"' not in series.exposition(h)
    assert h.asked == [None, None, None, None]


def test_an_unreachable_store_gives_the_families_without_samples(herder, monkeypatch):
    h, _ = herder

    def down():
        raise StoreUnavailable("store down")

    series = ConnectorSeries()
    series.exposition(h)
    monkeypatch.setattr(h.store, "connector_names", down)
    families = _families(series.exposition(h))
    assert len(families) == len(STATES) + 2
    assert all(not samples for samples in families.values())


def test_only_the_leader_writes_the_families(herder):
    h, raft = herder
    coordinator = SimpleNamespace(active=True)
    node = SimpleNamespace(raft=raft, herder=h, coordinator=coordinator)
    collector = ConnectMetricsCollector(lambda: node)
    assert b'kafka_connect_connector_metrics{connector="running"' in collector.connector_exposition()
    coordinator.active = False
    assert collector.connector_exposition() == b""
    assert ConnectMetricsCollector(lambda: None).connector_exposition() == b""


def test_the_body_names_each_family_once(api, node):
    """``/metrics``: the default registry's families, then the per-connector ones, none twice."""
    node.store.put_connector_config("src", {"connector.class": "FileSourceConnector", "path": "/x", "topic": "t"})
    body = api.get("/metrics").content
    assert body.startswith(connect_metrics.exposition()[:20])
    types = [line.split()[2] for line in body.decode().splitlines() if line.startswith("# TYPE ")]
    assert len(types) == len(set(types))
    assert "kafka_connect_connector_metrics" in types and "raftconnect_raft_term" in types
