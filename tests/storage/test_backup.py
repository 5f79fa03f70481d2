"""The backup document: what it refuses and how users are restored (the round trip is tests/integration/test_backup.py)."""
from __future__ import annotations

import pytest

from webapp.storage.backup import BackupError, FORMAT, digest, parse_backup


def _doc(**overrides):
    doc = {"format": FORMAT, "version": 1, "created_at": "2026-11-25T12:00:00.000Z", "store": "raft",
           "connectors": [{"name": "a", "config": {"connector.class": "X"}, "target_state": "STOPPED",
                           "tasks": [{"k": "v"}], "offsets": [{"partition": {"p": 1}, "offset": {"o": 5}}]},
                          {"name": "gone", "config": None, "target_state": None, "tasks": [],
                           "offsets": [{"partition": {"p": 2}, "offset": {"o": 9}}]}],
           "users": []}
    doc.update(overrides)
    doc["sha256"] = digest(doc)
    return doc


def test_a_valid_document_parses_into_one_snapshot_per_name():
    a, gone = parse_backup(_doc())
    assert (a.name, a.record.config, a.record.target_state, a.record.tasks) == ("a", {"connector.class": "X"},
                                                                                "STOPPED", [{"k": "v"}])
    assert [(o.partition, o.offset) for o in a.offsets] == [({"p": 1}, {"o": 5})]
    assert gone.record is None and [o.offset for o in gone.offsets] == [{"o": 9}]  # a deleted connector's offsets


@pytest.mark.parametrize("change, message", [
    (lambda d: d.update(format="other"), "Not a RaftConnect backup"),
    (lambda d: d.update(version=2, sha256=digest({**d, "version": 2})), "version 2 is not supported"),
    (lambda d: d["connectors"][0]["config"].update(topic="changed"), "sha256 does not match"),
    (lambda d: d.update(connectors=d["connectors"] + [d["connectors"][0]], sha256=digest(
        {**d, "connectors": d["connectors"] + [d["connectors"][0]]})), "appears twice"),
    (lambda d: d.update(connectors=[{"name": "a", "config": {"n": 1}}], sha256=digest(
        {**d, "connectors": [{"name": "a", "config": {"n": 1}}]})), "config must be an object of strings"),
])
def test_a_bad_document_is_refused_with_the_reason(change, message):
    doc = _doc()
    change(doc)
    with pytest.raises(BackupError, match=message) as caught:
        parse_backup(doc)
    assert caught.value.status == 400
