"""One contract for every metadata store: raft, postgresql and mariadb run the same tests.

Each test uses connector names of its own (the backends are shared per module).
Fencing follows a real Raft assignment (see ``conftest.py``).
"""
from __future__ import annotations

import dataclasses
import json
import uuid

import pytest

from webapp.plugin import ConnectorTaskId, SourceOffset, partition_key
from webapp.storage.base import (
    AlreadyExists, ConnectorRecord, ConnectorSummary, FencedWrite, NotFound, OffsetCommit, StatusReport,
    StoreUnavailable,
)
from webapp.storage.relational.offsets import key_hash


def unique(prefix: str = "c") -> str:
    return f"{prefix}-{uuid.uuid4().hex[:8]}"


def offsets_of(store, name: str) -> dict[str, dict]:
    return {partition_key(o.partition): dict(o.offset) for o in store.get_offsets(name)}


def key(partition: dict) -> str:
    return partition_key(partition)


def test_configs_create_get_list_update_with_target_states(backend):
    s = backend.store
    a, b = unique("a"), unique("b")
    assert s.get_connector(a) is None
    assert s.put_connector_config(a, {"connector.class": "X", "k": "1"}) is True
    assert s.put_connector_config(b, {"connector.class": "Y"}, target_state="PAUSED") is True
    rec = s.get_connector(a)
    assert (rec.name, rec.config, rec.target_state, rec.tasks) == (a, {"connector.class": "X", "k": "1"},
                                                                    "STARTED", [])
    assert s.get_connector(b).target_state == "PAUSED"
    names = s.connector_names()
    assert names == sorted(names) and {a, b} <= set(names)
    # update: config replaced; target state kept unless given
    assert s.put_connector_config(b, {"connector.class": "Y", "k": "2"}) is False
    assert s.get_connector(b).config == {"connector.class": "Y", "k": "2"}
    assert s.get_connector(b).target_state == "PAUSED"
    assert s.put_connector_config(b, {"connector.class": "Y"}, target_state="STOPPED") is False
    assert s.get_connector(b).target_state == "STOPPED"
    s.put_target_state(a, "PAUSED")
    assert s.get_connector(a).target_state == "PAUSED"


def test_create_only_clash_raises_already_exists_and_keeps_the_config(backend):
    s = backend.store
    c = unique()
    assert s.put_connector_config(c, {"k": "v"}, create_only=True) is True
    with pytest.raises(AlreadyExists):
        s.put_connector_config(c, {"k": "other"}, create_only=True)
    assert s.get_connector(c).config == {"k": "v"}


def test_target_state_of_missing_connector_is_not_found(backend):
    with pytest.raises(NotFound):
        backend.store.put_target_state(unique("missing"), "PAUSED")


def test_remove_deletes_config_tasks_and_statuses_but_keeps_offsets(backend):
    s = backend.store
    c = unique()
    s.put_connector_config(c, {"k": "v"})
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    s.put_task_configs(c, [{"t": "0"}], worker_id="w1", generation=gen)
    s.put_status(c, 0, {"state": "RUNNING", "trace": None}, worker_id="w1", generation=gen)
    s.commit_offsets(ConnectorTaskId(c, 0), [SourceOffset({"f": "a"}, {"pos": 3})], worker_id="w1", generation=gen)
    s.remove_connector_config(c)
    assert s.get_connector(c) is None
    assert c not in s.connector_names()
    assert s.get_statuses(c) == {"connector": None, "tasks": {}}
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 3}}
    with pytest.raises(NotFound):
        s.remove_connector_config(c)
    # a re-created connector starts without tasks but resumes from its offsets
    assert s.put_connector_config(c, {"k": "v"}) is True
    assert s.get_connector(c).tasks == []
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 3}}


def test_many_statuses_are_recorded_at_once_and_a_refused_one_fails_alone(backend):
    """put_statuses: what an agent starting many tasks reports together; each report is fenced on its own."""
    s = backend.store
    c, d = unique(), unique()
    for name in (c, d):
        s.put_connector_config(name, {"k": "v"})
    gen = backend.assign({c: "w1", d: "w2"}, {f"{c}-0": "w1", f"{c}-1": "w1", f"{d}-0": "w2"})
    running = {"state": "RUNNING", "trace": None}
    outcomes = s.put_statuses([
        StatusReport(c, None, running, gen),
        StatusReport(c, 0, running, gen),
        StatusReport(d, 0, running, gen),  # w2's task: fenced
        StatusReport(c, 1, {"state": "FAILED", "trace": "boom"}, gen),
        StatusReport(unique("missing"), 0, running, gen),  # no such connector
        StatusReport(c, 0, running, gen - 1),  # stale generation
    ], worker_id="w1")
    assert [type(o).__name__ if o else None for o in outcomes] == [None, None, "FencedWrite", None, "NotFound",
                                                                  "FencedWrite"]
    assert "stale generation" in str(outcomes[5])
    st = s.get_statuses(c)
    assert st["connector"]["state"] == "RUNNING" and st["connector"]["worker_id"] == "w1"
    assert st["tasks"]["0"]["state"] == "RUNNING" and st["tasks"]["0"]["generation"] == gen
    assert (st["tasks"]["1"]["state"], st["tasks"]["1"]["trace"]) == ("FAILED", "boom")
    assert s.get_statuses(d)["tasks"] == {}
    assert s.put_statuses([], worker_id="w1") == []


def test_many_offset_commits_are_written_at_once_and_a_fenced_one_fails_alone(backend):
    """commit_offsets_many: what an agent's task threads commit together; each commit is fenced on its own
    and the fenced one writes nothing, while the others are all written."""
    s = backend.store
    c, d = unique(), unique()
    for name in (c, d):
        s.put_connector_config(name, {"k": "v"})
    gen = backend.assign({c: "w1", d: "w2"}, {f"{c}-0": "w1", f"{c}-1": "w1", f"{d}-0": "w2"})
    outcomes = s.commit_offsets_many([
        OffsetCommit(ConnectorTaskId(c, 0), [SourceOffset({"f": "a"}, {"pos": 1}), SourceOffset({"f": "a"}, {"pos": 2})],
                     gen),
        OffsetCommit(ConnectorTaskId(d, 0), [SourceOffset({"f": "d"}, {"pos": 9})], gen),  # w2's task: fenced
        OffsetCommit(ConnectorTaskId(c, 1), [SourceOffset({"f": "b"}, {"pos": 5})], gen),
        OffsetCommit(ConnectorTaskId(c, 1), [SourceOffset({"f": "b"}, {"pos": 7})], gen - 1),  # stale generation
    ], worker_id="w1")
    assert [type(o).__name__ if o else None for o in outcomes] == [None, "FencedWrite", None, "FencedWrite"]
    assert "stale generation" in str(outcomes[3])
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 2}, key({"f": "b"}): {"pos": 5}}  # last of a batch wins
    assert offsets_of(s, d) == {}
    assert s.commit_offsets_many([], worker_id="w1") == []


def _numbered(task: ConnectorTaskId, generation: int, seq: int, **positions: int) -> OffsetCommit:
    """A numbered commit of ``task``: partition ``{"f": name}`` at ``{"pos": value}`` for each keyword."""
    return OffsetCommit(task, [SourceOffset({"f": f}, {"pos": p}) for f, p in positions.items()], generation, seq)


def test_a_late_copy_of_a_commit_never_moves_a_partition_back(backend):
    """A commit numbered below one its task already committed at the same generation (a late copy) does
    not replace what the later one wrote: the Raft store refuses it whole (409), a relational store
    (and the example Redis plugin) keeps each partition's newest offset and still takes one only the
    late copy names. A newer
    generation's commit wins whatever its number (a new agent counts from 1); one without a number
    (an operator's, an agent's from before numbers) always applies."""
    s = backend.store
    c = unique("late")
    s.put_connector_config(c, {"k": "v"})
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    task = ConnectorTaskId(c, 0)
    relational = backend.kind != "raft"

    assert s.commit_offsets_many([_numbered(task, gen, 5, a=1)], worker_id="w1") == [None]
    assert s.commit_offsets_many([_numbered(task, gen, 6, a=2)], worker_id="w1") == [None]
    [late] = s.commit_offsets_many([_numbered(task, gen, 5, a=1, b=1)], worker_id="w1")
    assert late is None if relational else isinstance(late, FencedWrite)
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 2}, **({key({"f": "b"}): {"pos": 1}} if relational else {})}
    s.commit_offsets_many([_numbered(task, gen, 4, a=0)], worker_id="w1")  # late, names nothing newer
    assert offsets_of(s, c)[key({"f": "a"})] == {"pos": 2}
    assert s.commit_offsets_many([_numbered(task, gen, 6, a=2)], worker_id="w1") == [None]  # a retry that landed
    assert s.commit_offsets_many([_numbered(task, gen, 7, a=3)], worker_id="w1") == [None]
    assert offsets_of(s, c)[key({"f": "a"})] == {"pos": 3}

    gen2 = backend.assign({c: "w1"}, {f"{c}-0": "w1"})  # e.g. the agent granted anew: its counter starts again
    assert s.commit_offsets_many([_numbered(task, gen2, 1, a=4)], worker_id="w1") == [None]
    assert offsets_of(s, c)[key({"f": "a"})] == {"pos": 4}
    s.alter_offsets(c, [SourceOffset({"f": "a"}, {"pos": 10})])  # the operator's, numbered by nobody
    assert offsets_of(s, c)[key({"f": "a"})] == {"pos": 10}
    assert s.commit_offsets_many([_numbered(task, gen2, 2, a=11)], worker_id="w1") == [None]
    s.commit_offsets_many([_numbered(task, gen2, 1, a=4)], worker_id="w1")
    assert offsets_of(s, c)[key({"f": "a"})] == {"pos": 11}


def test_a_commit_of_an_earlier_instance_is_refused_after_the_task_started_again(backend):
    """A task started again in the same agent (same generation) raises its start floor first: a commit of
    the earlier instance numbered below it, still on its way, is refused and writes nothing."""
    s = backend.store
    c = unique("restart")
    s.put_connector_config(c, {"k": "v"})
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    task = ConnectorTaskId(c, 0)
    assert s.commit_offsets_many([_numbered(task, gen, 3, a=1)], worker_id="w1") == [None]
    assert backend.raft.propose("_zzzzzzz_start_task", c, 0, "w1", gen, 10) == {"ok": True}
    [refused] = s.commit_offsets_many([_numbered(task, gen, 9, a=5, b=5)], worker_id="w1")
    assert isinstance(refused, FencedWrite) and "late copy" in str(refused)
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 1}}
    assert s.commit_offsets_many([_numbered(task, gen, 11, a=6)], worker_id="w1") == [None]
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 6}}


def test_a_late_copy_in_one_transaction_with_newer_commits_and_removals_moves_nothing_back(backend):
    """The group commit merges commits of many callers: of one partition's entries the newest wins in
    any order, and the checked transaction (taken when a partition is removed too; on Redis the same
    script) keeps newer rows."""
    if backend.kind == "raft":
        pytest.skip("the Raft store proposes each call's commits as they come (its log orders them)")
    s = backend.store
    c = unique("merged")
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    a, b = {"f": "a"}, {"f": "b"}
    if backend.kind != "redis":  # the relational stores' rows of a group commit (Redis writes entries in order)
        rows, _ = s._offset_rows({c: [(a, {"pos": 2}, gen, 6), (a, {"pos": 1}, gen, 5), (b, {"pos": 1}, None, None)]})
        assert [(r[3], r[4], r[6]) for r in rows] == sorted([(a, {"pos": 2}, 6), (b, {"pos": 1}, None)],
                                                           key=lambda r: key_hash(partition_key(r[0])))
    s._group.submit_many([(c, [(a, {"pos": 7}, gen, 7), (b, {"pos": 1}, gen, 7)])])
    s._group.submit_many([(c, [(a, {"pos": 5}, gen, 5), (b, None, None, None)])])  # late copy + a removal
    assert offsets_of(s, c) == {key(a): {"pos": 7}}


def test_task_configs_are_fenced_by_the_connector_assignment(backend):
    s = backend.store
    c = unique()
    s.put_connector_config(c, {"k": "v"})
    g1 = backend.assign({c: "w1"}, {})
    s.put_task_configs(c, [{"t": "0"}, {"t": "1"}], worker_id="w1", generation=g1)
    assert s.get_connector(c).tasks == [{"t": "0"}, {"t": "1"}]
    assert [str(t) for t in s.get_connector(c).task_ids] == [f"{c}-0", f"{c}-1"]
    with pytest.raises(FencedWrite):
        s.put_task_configs(c, [], worker_id="w2", generation=g1)
    # the connector moves to w2
    g2 = backend.assign({c: "w2"}, {})
    with pytest.raises(FencedWrite, match="not assigned"):
        s.put_task_configs(c, [], worker_id="w1", generation=g2)
    with pytest.raises(FencedWrite, match="stale generation"):
        s.put_task_configs(c, [], worker_id="w2", generation=g1)
    assert s.get_connector(c).tasks == [{"t": "0"}, {"t": "1"}]
    s.put_task_configs(c, [{"t": "0", "x": "y"}], worker_id="w2", generation=g2)
    assert s.get_connector(c).tasks == [{"t": "0", "x": "y"}]
    # the coordinator's own write (worker_id=None) is not fenced
    s.put_task_configs(c, [], worker_id=None, generation=0)
    assert s.get_connector(c).tasks == []
    with pytest.raises(NotFound):
        s.put_task_configs(unique("missing"), [], worker_id=None, generation=0)


def test_statuses_per_connector_and_task(backend):
    s = backend.store
    c = unique()
    s.put_connector_config(c, {"k": "v"})
    assert s.get_statuses(c) == {"connector": None, "tasks": {}}
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1", f"{c}-1": "w2"})
    s.put_task_configs(c, [{"t": "0"}, {"t": "1"}], worker_id="w1", generation=gen)
    s.put_status(c, None, {"state": "RUNNING", "trace": None}, worker_id="w1", generation=gen)
    s.put_status(c, 0, {"state": "RUNNING", "trace": None}, worker_id="w1", generation=gen)
    s.put_status(c, 1, {"state": "FAILED", "trace": "boom\n  at line 1"}, worker_id="w2", generation=gen)
    s.put_status(c, 0, {"state": "PAUSED", "trace": None}, worker_id="w1", generation=gen)  # latest wins
    assert s.get_statuses(c) == {
        "connector": {"state": "RUNNING", "trace": None, "worker_id": "w1", "generation": gen},
        "tasks": {"0": {"state": "PAUSED", "trace": None, "worker_id": "w1", "generation": gen},
                  "1": {"state": "FAILED", "trace": "boom\n  at line 1", "worker_id": "w2", "generation": gen}},
    }
    with pytest.raises(FencedWrite):
        s.put_status(c, 1, {"state": "RUNNING", "trace": None}, worker_id="w1", generation=gen)
    with pytest.raises(FencedWrite):
        s.put_status(c, None, {"state": "RUNNING", "trace": None}, worker_id="w2", generation=gen)
    assert s.get_statuses(c)["tasks"]["1"]["state"] == "FAILED"
    with pytest.raises(NotFound):
        s.put_status(unique("missing"), None, {"state": "RUNNING", "trace": None}, worker_id="w1", generation=gen)
    # shrinking the task list drops the statuses of tasks that no longer exist
    s.put_task_configs(c, [{"t": "0"}], worker_id="w1", generation=gen)
    assert set(s.get_statuses(c)["tasks"]) == {"0"}


def _mixed_connectors(backend) -> tuple[str, str, str]:
    """A running connector with a FAILED task (trace) and a task that never reported, a STOPPED
    connector, and one without any status; returns their names."""
    s = backend.store
    running, stopped, quiet = unique("bulk-run"), unique("bulk-stop"), unique("bulk-quiet")
    s.put_connector_config(running, {"connector.class": "X", "k": "1"})
    s.put_connector_config(stopped, {"connector.class": "Y"}, target_state="STOPPED")
    s.put_connector_config(quiet, {"connector.class": "Z"})
    gen = backend.assign({running: "w1", stopped: "w1", quiet: "w2"},
                         {f"{running}-0": "w1", f"{running}-1": "w2", f"{running}-2": "w1", f"{quiet}-0": "w2"})
    s.put_task_configs(running, [{"t": "0"}, {"t": "1"}, {"t": "2"}], worker_id="w1", generation=gen)
    s.put_task_configs(quiet, [{"t": "0"}], worker_id="w2", generation=gen)
    s.put_status(running, None, {"state": "RUNNING", "trace": None}, worker_id="w1", generation=gen)
    s.put_status(running, 0, {"state": "RUNNING", "trace": None}, worker_id="w1", generation=gen)
    s.put_status(running, 1, {"state": "FAILED", "trace": "boom\n  at line 1"}, worker_id="w2", generation=gen)
    s.put_status(stopped, None, {"state": "STOPPED", "trace": None}, worker_id="w1", generation=gen)
    return running, stopped, quiet


def test_bulk_reads_say_what_the_per_name_reads_say(backend):
    """connector_summaries and connectors_with_statuses: every connector, in name order, each equal
    to its get_connector (less task configs) and get_statuses."""
    s = backend.store
    running, stopped, quiet = _mixed_connectors(backend)
    names = s.connector_names()
    summaries = list(s.connector_summaries())
    assert [x.name for x in summaries] == names
    assert all(x == ConnectorSummary.of(s.get_connector(x.name)) for x in summaries)
    pairs = list(s.connectors_with_statuses())
    assert [x.name for x, _ in pairs] == names
    assert all(x == ConnectorSummary.of(s.get_connector(x.name)) and st == s.get_statuses(x.name) for x, st in pairs)
    mine = {x.name: (x, st) for x, st in pairs if x.name in (running, stopped, quiet)}
    assert mine[running][0] == (running, {"connector.class": "X", "k": "1"}, "STARTED", 3)
    assert mine[running][1]["tasks"]["1"] == {"state": "FAILED", "trace": "boom\n  at line 1", "worker_id": "w2",
                                              "generation": mine[running][1]["connector"]["generation"]}
    assert set(mine[running][1]["tasks"]) == {"0", "1"}
    assert mine[stopped][0].target_state == "STOPPED" and mine[stopped][1]["connector"]["state"] == "STOPPED"
    assert mine[quiet] == ((quiet, {"connector.class": "Z"}, "STARTED", 1), {"connector": None, "tasks": {}})


def test_what_the_bulk_reads_return_is_the_callers_own(backend):
    s = backend.store
    running, _, _ = _mixed_connectors(backend)
    config, statuses = s.get_connector(running).config, s.get_statuses(running)
    summary, got = next((x, st) for x, st in s.connectors_with_statuses() if x.name == running)
    summary.config["k"] = "changed"
    summary.config["added"] = "x"
    got["connector"]["state"] = "FAILED"
    got["tasks"]["1"]["trace"] = None
    got["tasks"]["9"] = {"state": "RUNNING"}
    del got["tasks"]["0"]
    with pytest.raises(AttributeError):
        summary.task_count = 7  # immutable
    other = next(x for x in s.connector_summaries() if x.name == running)
    other.config.clear()
    assert s.get_connector(running).config == config
    assert s.get_statuses(running) == statuses
    again, got_again = next((x, st) for x, st in s.connectors_with_statuses() if x.name == running)
    assert again.config == config and got_again == statuses


def test_offset_commit_is_one_fenced_batch_and_the_latest_value_wins(backend):
    s = backend.store
    c = unique()
    task = ConnectorTaskId(c, 0)
    assert s.get_offsets(c) == []
    g1 = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    pa, pb = {"filename": "/data/a.csv"}, {"filename": "/data/b.csv", "part": 1}
    s.commit_offsets(task, [SourceOffset(pa, {"position": 10}), SourceOffset(pb, {"position": 5}),
                            SourceOffset(pa, {"position": 12})], worker_id="w1", generation=g1)
    assert offsets_of(s, c) == {key(pa): {"position": 12}, key(pb): {"position": 5}}
    assert {key(o.partition): dict(o.partition) for o in s.get_offsets(c)} == {key(pa): pa, key(pb): pb}
    s.commit_offsets(task, [SourceOffset(pa, {"position": 20})], worker_id="w1", generation=g1)
    assert offsets_of(s, c) == {key(pa): {"position": 20}, key(pb): {"position": 5}}
    # the task moves to w2: a late batch of w1 is refused as a whole, and so is a stale generation
    g2 = backend.assign({c: "w1"}, {f"{c}-0": "w2"})
    late = [SourceOffset(pa, {"position": 99}), SourceOffset({"filename": "/data/new"}, {"position": 1})]
    with pytest.raises(FencedWrite):
        s.commit_offsets(task, late, worker_id="w1", generation=g2)
    with pytest.raises(FencedWrite):
        s.commit_offsets(task, late, worker_id="w2", generation=g1)
    assert offsets_of(s, c) == {key(pa): {"position": 20}, key(pb): {"position": 5}}
    s.commit_offsets(task, [SourceOffset(pb, {"position": 6})], worker_id="w2", generation=g2)
    assert offsets_of(s, c) == {key(pa): {"position": 20}, key(pb): {"position": 6}}
    # offsets of another connector are separate
    assert s.get_offsets(unique("other")) == []


def test_offsets_with_quotes_backslashes_percent_signs_and_any_unicode_are_stored_as_given(backend):
    """What the MySQL fenced upsert writes into its statement (the rows' JSON, as hex) and every other
    backend's parameters carry any text: SQL quotes, escapes, ``%s``, control and 4-byte characters
    (NUL: the next test)."""
    s = backend.store
    c = unique("it's \\ 100%s")
    g = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    nasty = "'; DROP TABLE x; -- \" \\ \\' %s %(a)s \n\r\x1a \u00e9 \u4e2d \U0001f600"
    pa, pb = {"filename": nasty, "n": 1}, {nasty: [nasty, {"k": nasty}]}
    s.commit_offsets(ConnectorTaskId(c, 0), [SourceOffset(pa, {"position": nasty}), SourceOffset(pb, {"pos": 2})],
                     worker_id="w1", generation=g)
    assert offsets_of(s, c) == {key(pa): {"position": nasty}, key(pb): {"pos": 2}}
    assert sorted((json.dumps(dict(o.partition), sort_keys=True) for o in s.get_offsets(c))) == \
        sorted(json.dumps(p, sort_keys=True) for p in (pa, pb))


def test_nul_and_the_escape_character_are_stored_as_given_everywhere(backend):
    """NUL (U+0000) in config keys and values, task configs, a status trace and offsets comes back as
    given from every backend, through every path that writes or reads them. PostgreSQL's ``text``
    and ``jsonb`` refuse NUL: before its fields escaped it (``webapp.storage.models``) each of these
    writes failed there with a ``DataError`` (a 500), and a switch to PostgreSQL could not copy the
    Raft store's data. Text that already looks escaped (U+FFFF, U+FFFF ``0``) must not be confused."""
    s = backend.store
    tricky = ["a\x00b", "\x00", "\uffff", "\uffff0", "\uffff1\x00", "\\u0000", "plain"]
    c = unique()
    config = {"connector.class": "X", **{f"k{i}\x00": v for i, v in enumerate(tricky)}}
    s.put_connector_config(c, config)
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1", f"{c}-1": "w1"})
    s.put_task_configs(c, [{"t": v} for v in tricky[:2]], worker_id=None, generation=gen)
    assert s.get_connector(c).config == config and s.get_connector(c).tasks == [{"t": v} for v in tricky[:2]]
    assert next(x for x in s.connector_summaries() if x.name == c).config == config

    s.put_status(c, None, {"state": "FAILED", "trace": "boom\x00 " + " ".join(tricky)}, worker_id="w1", generation=gen)
    assert s.put_statuses([StatusReport(c, 0, {"state": "FAILED", "trace": "\x00\uffff0"}, gen)], worker_id="w1") == [None]
    st = s.get_statuses(c)
    assert st["connector"]["trace"] == "boom\x00 " + " ".join(tricky) and st["tasks"]["0"]["trace"] == "\x00\uffff0"
    summary, statuses = next((x, y) for x, y in s.connectors_with_statuses() if x.name == c)
    assert statuses["tasks"]["0"]["trace"] == "\x00\uffff0"

    parts = [{"file": v, v: [v]} for v in tricky]
    s.commit_offsets(ConnectorTaskId(c, 0), [SourceOffset(p, {"pos": p["file"]}) for p in parts[:4]],
                     worker_id="w1", generation=gen)  # the fenced upsert's own statement
    assert s.commit_offsets_many([OffsetCommit(ConnectorTaskId(c, 1), [SourceOffset(p, {"pos": p["file"]})
                                                                       for p in parts[4:]], gen)],
                                 worker_id="w1") == [None]
    assert offsets_of(s, c) == {key(p): {"pos": p["file"]} for p in parts}
    assert sorted(json.dumps(dict(o.partition), sort_keys=True) for o in s.get_offsets(c)) == \
        sorted(json.dumps(p, sort_keys=True) for p in parts)
    s.alter_offsets(c, [SourceOffset(parts[0], {"pos": "\x00altered"}), (parts[1], None)])
    assert offsets_of(s, c)[key(parts[0])] == {"pos": "\x00altered"} and key(parts[1]) not in offsets_of(s, c)

    # what a store switch copies: exported and imported under another name, unchanged
    snap = s.export_name(c)
    other = unique("copy")
    s.import_name(dataclasses.replace(snap, name=other, record=dataclasses.replace(snap.record, name=other)))
    copy = s.export_name(other)
    assert copy.record.config == config and copy.statuses["connector"]["trace"] == st["connector"]["trace"]
    assert {partition_key(o.partition): dict(o.offset) for o in copy.offsets} == offsets_of(s, c)


def test_concurrent_offset_commits_keep_each_tasks_order_and_a_fenced_one_fails_alone(backend):
    """Group commit (Raft log entries, relational transactions) shares work, not outcomes."""
    import threading

    s = backend.store
    names = [unique("gc") for _ in range(6)]
    gen = backend.assign({n: "w1" for n in names}, {f"{n}-0": "w1" for n in names})
    acked: dict[str, int] = {}
    fenced: list[Exception] = []
    errors: list[Exception] = []
    part = {"filename": "/data/a.csv"}

    def writer(name: str, worker: str) -> None:
        from django.db import connections

        try:
            for pos in range(1, 26):
                try:
                    s.commit_offsets(ConnectorTaskId(name, 0), [SourceOffset(part, {"position": pos})],
                                     worker_id=worker, generation=gen)
                except FencedWrite as exc:
                    fenced.append(exc)
                    continue
                acked[name] = pos
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)
        finally:
            connections.close_all()  # this thread's connections of the relational stores

    threads = [threading.Thread(target=writer, args=(n, "w1")) for n in names]
    threads.append(threading.Thread(target=writer, args=(names[0], "intruder")))  # owns nothing
    for t in threads:
        t.start()
    for t in threads:
        t.join(120)
    assert not errors and not any(t.is_alive() for t in threads)
    assert len(fenced) == 25 and acked == {n: 25 for n in names}
    for n in names:  # the last acknowledged commit of each task is what the store holds
        assert offsets_of(s, n) == {key(part): {"position": 25}}


def test_alter_removes_partitions_with_none_and_reset_clears_all(backend):
    s = backend.store
    c = unique()
    pa, pb, pc = {"f": "a"}, {"f": "b"}, {"f": "c"}
    s.alter_offsets(c, [SourceOffset(pa, {"pos": 1}), SourceOffset(pb, {"pos": 2})])
    assert offsets_of(s, c) == {key(pa): {"pos": 1}, key(pb): {"pos": 2}}
    s.alter_offsets(c, [(pa, None), SourceOffset(pb, {"pos": 7}), SourceOffset(pc, {"pos": 3})])
    assert offsets_of(s, c) == {key(pb): {"pos": 7}, key(pc): {"pos": 3}}
    s.alter_offsets(c, [({"f": "never-committed"}, None)])  # removing nothing is fine
    other = unique("other")
    s.alter_offsets(other, [SourceOffset(pa, {"pos": 5})])
    s.reset_offsets(c)
    assert s.get_offsets(c) == []
    assert offsets_of(s, other) == {key(pa): {"pos": 5}}
    s.reset_offsets(unique("missing"))  # nothing to reset is not an error


UNREACHABLE = {
    "postgresql": "postgresql://postgres:Sup3r-Secret-PW@127.0.0.1:1/raftconnect",
    "mariadb": "mysql://root:Sup3r-Secret-PW@127.0.0.1:1/raftconnect",
}


def test_ping_answers_while_the_store_is_reachable(backend):
    backend.store.ping()  # GET /health's metadata_store check; raises StoreUnavailable otherwise


@pytest.mark.parametrize("kind", ["raft", "postgresql", "mariadb"])
def test_unreachable_store_is_unavailable_and_never_shows_the_password(kind, tmp_path):
    if kind == "raft":
        from raftnode import RaftConfig, RaftNode
        from webapp.storage.raft import RaftMetadataStore

        from .conftest import free_port

        # a member whose only peer is down never gets a quorum
        node = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", peers=["127.0.0.1:1"],
                                   data_dir=str(tmp_path / "raft"), password="Sup3r-Secret-PW"))
        store, close = RaftMetadataStore(node, write_timeout=1.0), node.destroy
    else:
        from webapp.storage.relational import RelationalMetadataStore

        store = RelationalMetadataStore(kind, UNREACHABLE[kind], fence=None)
        close = store.close
    try:
        calls = [lambda: store.put_connector_config("c", {"k": "v"}), store.ping]
        if kind != "raft":
            calls += [store.prepare, store.connector_names, lambda: store.get_offsets("c")]
        for call in calls:
            with pytest.raises(StoreUnavailable) as exc:
                call()
            assert "Sup3r-Secret-PW" not in str(exc.value) and "Sup3r-Secret-PW" not in repr(exc.value)
            assert exc.value.http_status == 503
        assert "Sup3r-Secret-PW" not in repr(store)
        if kind != "raft":
            assert "127.0.0.1:1" in str(exc.value) and "***" in str(exc.value)
    finally:
        close()


def test_active_topics_are_added_reset_and_removed_with_the_connector(backend):
    s, c, ghost = backend.store, unique("top"), unique("ghost")
    s.put_connector_config(c, {"connector.class": "X"})
    assert s.get_topics(c) == []
    s.put_topics(c, ["t2", "t1"])
    s.put_topics(c, ["t1", "t3"])  # idempotent union
    assert s.get_topics(c) == ["t1", "t2", "t3"]
    s.put_topics(ghost, ["t1"])  # no such connector: ignored, not an error
    assert s.get_topics(ghost) == []
    s.reset_topics(c)
    assert s.get_topics(c) == []
    s.put_topics(c, ["t4"])
    s.remove_connector_config(c)
    assert s.get_topics(c) == []
    s.put_connector_config(c, {"connector.class": "X"})  # a re-created connector starts without topics
    assert s.get_topics(c) == []


# ---------------------------------------------------------------- switch support
def test_import_then_export_gives_the_snapshot_back(backend):
    from webapp.storage.base import NameSnapshot
    from webapp.storage.switch import canonical

    s, name = backend.store, unique("imp")
    snap = NameSnapshot(name, ConnectorRecord(name, {"connector.class": "X", "k": "ü"}, "PAUSED", [{"t": "0"}, {"t": "1"}]),
                        {"connector": {"state": "RUNNING", "trace": None, "worker_id": "w1", "generation": 3},
                         "tasks": {"1": {"state": "FAILED", "trace": "boom", "worker_id": "w2", "generation": 4}}},
                        [SourceOffset({"file": "a"}, {"position": 10}), SourceOffset({"file": "b"}, {"position": 2})],
                        ["orders", "audit"])
    s.import_name(snap)
    assert s.get_topics(name) == ["audit", "orders"]
    assert canonical(s.export_name(name)) == canonical(snap)
    assert name in s.connector_names() and name in s.offset_names() and name in s.all_names()


def test_a_late_copy_moves_nothing_back_after_the_offsets_were_exported_and_imported(backend):
    """What a store switch does to a name (export from one store, import into the next) keeps commit order:
    a late copy of a commit older than the one that wrote the copied offset leaves it as it is, while the
    task's next commit and an unnumbered (operator's) write apply. Without the commit numbers in the
    snapshot, the imported rows would take any commit."""
    s = backend.store
    c = unique("carry")
    s.put_connector_config(c, {"k": "v"})
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    task = ConnectorTaskId(c, 0)
    assert s.commit_offsets_many([_numbered(task, gen, 5, a=1, b=1)], worker_id="w1") == [None]
    assert s.commit_offsets_many([_numbered(task, gen, 6, a=2)], worker_id="w1") == [None]
    snap = s.export_name(c)
    if backend.kind != "raft":  # the Raft store keeps order per task in the cluster state, not per partition
        assert snap.offset_commits == {key({"f": "a"}): (gen, 6), key({"f": "b"}): (gen, 5)}
    s.reset_offsets(c)
    s.import_name(snap, ("offsets",))
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 2}, key({"f": "b"}): {"pos": 1}}

    s.commit_offsets_many([_numbered(task, gen, 5, a=1)], worker_id="w1")  # a late copy, landing after the copy
    assert offsets_of(s, c)[key({"f": "a"})] == {"pos": 2}
    assert s.commit_offsets_many([_numbered(task, gen, 7, a=3, b=3)], worker_id="w1") == [None]
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 3}, key({"f": "b"}): {"pos": 3}}
    s.alter_offsets(c, [SourceOffset({"f": "a"}, {"pos": 0})])
    assert offsets_of(s, c)[key({"f": "a"})] == {"pos": 0}


def test_imported_commit_numbers_order_the_first_commits_after_an_import(backend):
    """Offsets imported with the numbers of the commits that wrote them (a switch from a store that keeps
    them) order the commits that follow on every store: a late copy of an older commit leaves the
    partition it is late for, and writes the others (on the Raft store too, whose own order is per task:
    the imported numbers are kept per partition until its next write); the store exports the numbers of
    offsets no commit wrote since."""
    from webapp.storage.base import NameSnapshot

    s = backend.store
    c = unique("order")
    s.put_connector_config(c, {"k": "v"})
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    task = ConnectorTaskId(c, 0)
    a, b = key({"f": "a"}), key({"f": "b"})
    s.import_name(NameSnapshot(c, None, {}, [SourceOffset({"f": "a"}, {"pos": 2}), SourceOffset({"f": "b"}, {"pos": 1})],
                               offset_commits={a: (gen, 6), b: (gen, 5)}), ("offsets",))
    assert s.export_name(c).offset_commits == {a: (gen, 6), b: (gen, 5)}

    assert s.commit_offsets_many([_numbered(task, gen, 5, a=1, b=1, n=1)], worker_id="w1") == [None]  # late for a
    assert offsets_of(s, c) == {a: {"pos": 2}, b: {"pos": 1}, key({"f": "n"}): {"pos": 1}}
    assert s.commit_offsets_many([_numbered(task, gen, 7, a=3)], worker_id="w1") == [None]
    s.commit_offsets_many([_numbered(task, gen, 6, a=9)], worker_id="w1")  # late after the next commit too
    assert offsets_of(s, c)[a] == {"pos": 3}


def test_import_of_one_kind_leaves_the_others(backend):
    from webapp.storage.base import NameSnapshot

    s, name = backend.store, unique("kind")
    s.put_connector_config(name, {"connector.class": "X"})
    s.alter_offsets(name, [SourceOffset({"p": 0}, {"o": 1}), SourceOffset({"p": 1}, {"o": 1})])
    s.import_name(NameSnapshot(name, None, {}, [SourceOffset({"p": 0}, {"o": 9})]), ("offsets",))
    assert offsets_of(s, name) == {key({"p": 0}): {"o": 9}}
    assert s.get_connector(name).config == {"connector.class": "X"}
    s.import_name(NameSnapshot(name, None, {}, []), ("config",))  # removes the connector, keeps offsets
    assert s.get_connector(name) is None and name not in s.connector_names()
    assert name in s.offset_names() and offsets_of(s, name) == {key({"p": 0}): {"o": 9}}


def test_clear_empties_the_store(backend):
    s = backend.store
    s.put_connector_config(unique("clr"), {"connector.class": "X"})
    s.alter_offsets(unique("clr"), [SourceOffset({"p": 0}, {"o": 1})])
    if backend.kind == "raft":  # the raft store may only be cleared as a switch target, never while active
        from webapp.storage.base import StoreError

        with pytest.raises(StoreError, match="cannot be cleared"):
            s.clear()
        return
    s.clear()
    assert s.connector_names() == [] and s.offset_names() == []


def test_writer_lease_fences_an_older_term_and_read_only_blocks_all(backend):
    if not backend.store.external:
        pytest.skip("the raft store needs no lease: a deposed leader cannot commit to the Raft log")
    from webapp.storage.base import LeaseLost

    a, b = backend.store, backend.reopen()
    try:
        b.prepare()
        name = unique("lease")
        a.claim(5)
        a.put_connector_config(name, {"connector.class": "X"})
        b.claim(6)  # a newer leader
        with pytest.raises(LeaseLost, match="term"):
            a.put_target_state(name, "PAUSED")
        with pytest.raises(LeaseLost):
            a.claim(5)
        b.put_target_state(name, "PAUSED")
        b.claim(6, read_only=True)
        with pytest.raises(LeaseLost, match="read-only"):
            b.alter_offsets(name, [SourceOffset({"p": 0}, {"o": 1})])
        assert b.get_connector(name).target_state == "PAUSED"  # reads still work
        a.claim(7)  # a later switch back makes it writable again
        a.put_target_state(name, "STARTED")
        assert b.get_connector(name).target_state == "STARTED"
    finally:
        b.close()


def test_a_relational_offset_commit_is_one_statement_and_refused_under_a_stale_lease(backend):
    """The group commit's fenced upsert checks the writer lease in the statement that writes.

    One statement per commit (no BEGIN, lease SELECT and COMMIT round trips); after a newer
    leader claimed the store, or while it is read-only, that statement itself writes nothing
    (checked without the transactional fallback) and the commit fails with ``LeaseLost``.
    """
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from webapp.storage.base import LeaseLost
    from webapp.storage.models import WriterLease
    from webapp.storage.relational import RelationalMetadataStore

    if not isinstance(backend.store, RelationalMetadataStore):
        pytest.skip("relational stores only: the lease is a row of their database")
    a, b = backend.store, backend.reopen()
    try:
        b.prepare()
        lease = WriterLease.objects.using(a.alias).first()
        term = (lease.term if lease is not None else 0) + 10
        a.claim(term)
        c = unique("stale")
        gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
        task, part = ConnectorTaskId(c, 0), {"filename": "/data/a.csv"}
        with CaptureQueriesContext(connections[a.alias]) as ran:
            a.commit_offsets(task, [SourceOffset(part, {"position": 1})], worker_id="w1", generation=gen)
        assert len(ran.captured_queries) == 1, [q["sql"][:80] for q in ran.captured_queries]
        a.commit_offsets(task, [SourceOffset(part, {"position": 1})], worker_id="w1", generation=gen)  # unchanged row
        assert offsets_of(b, c) == {key(part): {"position": 1}}

        b.claim(term + 1)  # a newer leader: the old one's commits are refused
        rows, _ = a._offset_rows({c: [(part, {"position": 2}, gen, None)]})
        assert a._fenced_upsert(rows) is False
        with pytest.raises(LeaseLost, match="term"):
            a.commit_offsets(task, [SourceOffset(part, {"position": 3})], worker_id="w1", generation=gen)
        assert offsets_of(b, c) == {key(part): {"position": 1}}

        b.claim(term + 1, read_only=True)  # switched away: nobody writes
        assert b._fenced_upsert(rows) is False
        with pytest.raises(LeaseLost, match="read-only"):
            b.commit_offsets(task, [SourceOffset(part, {"position": 4})], worker_id="w1", generation=gen)
        assert offsets_of(a, c) == {key(part): {"position": 1}}
        a.claim(term + 2)  # the module's store writes again for the tests after this one
        a.commit_offsets(task, [SourceOffset(part, {"position": 5})], worker_id="w1", generation=gen)
        assert offsets_of(b, c) == {key(part): {"position": 5}}
    finally:
        b.close()


def test_the_one_statement_itself_keeps_a_late_copy_from_moving_a_partition_back(backend):
    """Under a held lease a commit is the fenced upsert alone: its guard keeps each row of a newer commit
    (same generation, higher number) and takes the others, in that one statement. A late copy that
    names only newer rows changes nothing (PostgreSQL's statement then counts no row and the checked
    transaction confirms it)."""
    from django.db import connections
    from django.test.utils import CaptureQueriesContext

    from webapp.storage.models import WriterLease
    from webapp.storage.relational import RelationalMetadataStore

    if not isinstance(backend.store, RelationalMetadataStore):
        pytest.skip("relational stores only: their fenced upsert")
    s = backend.store
    lease = WriterLease.objects.using(s.alias).first()
    s.claim((lease.term if lease is not None else 0) + 1)
    c = unique("guard")
    gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
    task = ConnectorTaskId(c, 0)
    s.commit_offsets_many([_numbered(task, gen, 6, a=2)], worker_id="w1")
    with CaptureQueriesContext(connections[s.alias]) as ran:
        assert s.commit_offsets_many([_numbered(task, gen, 5, a=1, b=1)], worker_id="w1") == [None]
    assert len(ran.captured_queries) == 1, [q["sql"][:80] for q in ran.captured_queries]
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 2}, key({"f": "b"}): {"pos": 1}}
    assert s.commit_offsets_many([_numbered(task, gen, 4, a=0, b=0)], worker_id="w1") == [None]
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 2}, key({"f": "b"}): {"pos": 1}}
    with CaptureQueriesContext(connections[s.alias]) as ran:
        assert s.commit_offsets_many([_numbered(task, gen, 7, a=3, b=3)], worker_id="w1") == [None]
    assert len(ran.captured_queries) == 1
    assert offsets_of(s, c) == {key({"f": "a"}): {"pos": 3}, key({"f": "b"}): {"pos": 3}}
    gen2 = backend.assign({c: "w1"}, {f"{c}-0": "w1"})  # a new generation's counter may start lower
    s.commit_offsets_many([_numbered(task, gen2, 1, a=4)], worker_id="w1")
    s.commit_offsets_many([_numbered(task, gen2, 2, a=5)], worker_id="w1")  # the row holds (gen2, 1) now
    assert offsets_of(s, c)[key({"f": "a"})] == {"pos": 5}


def test_a_relational_offset_commit_waits_for_a_claim_in_progress_and_is_then_refused(backend):
    """The fenced upsert holds the lease row shared: a new leader's claim (the row held exclusively)
    makes it wait, and once the claim commits a newer term the waiting commit writes nothing."""
    import threading

    from django.db import connections, transaction

    from webapp.storage.base import LeaseLost
    from webapp.storage.models import LEASE_ID, WriterLease
    from webapp.storage.relational import RelationalMetadataStore

    if not isinstance(backend.store, RelationalMetadataStore):
        pytest.skip("relational stores only: the lease is a row of their database")
    a, b = backend.store, backend.reopen()
    try:
        b.prepare()
        term = WriterLease.objects.using(a.alias).get(id=LEASE_ID).term + 10
        a.claim(term)
        c = unique("claiming")
        gen = backend.assign({c: "w1"}, {f"{c}-0": "w1"})
        task, part = ConnectorTaskId(c, 0), {"filename": "/data/a.csv"}
        a.commit_offsets(task, [SourceOffset(part, {"position": 1})], worker_id="w1", generation=gen)
        outcome: list[BaseException | None] = []

        def late_commit() -> None:
            try:
                a.commit_offsets(task, [SourceOffset(part, {"position": 2})], worker_id="w1", generation=gen)
                outcome.append(None)
            except BaseException as exc:  # noqa: BLE001 - asserted below
                outcome.append(exc)
            finally:
                connections.close_all()

        with transaction.atomic(using=b.alias):  # a new leader's claim, in progress
            WriterLease.objects.using(b.alias).select_for_update().get(id=LEASE_ID)
            writer = threading.Thread(target=late_commit)
            writer.start()
            writer.join(0.5)
            assert writer.is_alive() and not outcome, "the commit did not wait for the claim holding the lease"
            WriterLease.objects.using(b.alias).filter(id=LEASE_ID).update(term=term + 1)
        writer.join(30)
        assert len(outcome) == 1 and isinstance(outcome[0], LeaseLost), outcome
        assert offsets_of(b, c) == {key(part): {"position": 1}}
        a.claim(term + 2)  # the module's store writes again for the tests after this one
    finally:
        b.close()
