"""A Raft member never starts from a damaged journal or snapshot (raftnode/durability.py)."""
from __future__ import annotations

import os

import pytest

from raftnode import JournalCorrupted, RaftConfig, RaftNode, SnapshotCorrupted
from tools.launcher import wait_for
from webapp.kafka.embedded import free_port


def _member(data_dir, port, **extra) -> RaftNode:
    return RaftNode(RaftConfig(self_address=f"127.0.0.1:{port}", data_dir=str(data_dir), password="s", **extra))


def _write(data_dir, n: int, **extra) -> int:
    """A single member that commits ``n`` connector configs and stops; returns its port."""
    port = free_port()
    node = _member(data_dir, port, **extra)
    try:
        assert node.wait_ready(15)
        wait_for(lambda: node.is_leader, 15, interval=0.05, what="the single member to lead")
        for i in range(n):
            node.propose("_put_connector_config", f"c{i}", {"v": str(i)}, None, False)
    finally:
        node.destroy()
    return port


def _entries_region(path) -> tuple[int, int]:
    """(first, last) byte offsets of the journal's records (pysyncobj's header: 40 bytes, the end offset at 36)."""
    import struct

    with open(path, "rb") as fh:
        data = fh.read()
    last = struct.unpack("<I", data[36:40])[0]
    assert 40 < last <= len(data)
    return 40, last


def test_a_journal_written_here_reads_back_whole(tmp_path):
    port = _write(tmp_path, 40)
    node = _member(tmp_path, port)
    try:
        assert node.wait_ready(15)
        assert len(node.state.connectors) == 40 and node.state.connector("c39")["config"] == {"v": "39"}
    finally:
        node.destroy()


@pytest.mark.parametrize("damage", ["flip", "truncate"])
def test_a_damaged_journal_stops_the_member_with_what_to_do(tmp_path, damage):
    port = _write(tmp_path, 40)
    journal = tmp_path / "raft.journal"
    first, last = _entries_region(journal)
    data = bytearray(journal.read_bytes())
    if damage == "flip":
        for k in range((first + last) // 2, (first + last) // 2 + 8):
            data[k] ^= 0xFF
    else:
        data = data[: (first + last) // 2]
    journal.write_bytes(bytes(data))
    with pytest.raises(JournalCorrupted) as caught:
        _member(tmp_path, port)
    message = str(caught.value)
    assert str(journal) in message and "move its Raft directory" in message and "/raftconnect/v1/raft/members" in message
    if damage == "flip":
        assert "checksum does not match" in message


def test_log_compaction_keeps_entries_verifiable(tmp_path):
    """Compaction rewrites the journal (deleteEntriesTo); what it keeps must still carry valid checksums."""
    port = _write(tmp_path, 120, log_compaction_min_entries=50, log_compaction_min_time=0.1)
    assert (tmp_path / "raft.snapshot").exists()
    node = _member(tmp_path, port)
    try:
        assert node.wait_ready(15)
        wait_for(lambda: node.is_leader, 15, interval=0.05, what="the single member to lead again")
        # entries of the previous term commit with the first entry of this one (Raft; the node's
        # coordinator proposes one at once): then all 120 are applied
        node.propose("_put_connector_config", "marker", {"v": "1"}, None, False)
        assert len(node.state.connectors) == 121 and node.state.connector("c119")["config"] == {"v": "119"}
    finally:
        node.destroy()


def test_a_stop_between_snapshot_and_journal_trim_loses_nothing(tmp_path, monkeypatch):
    """pysyncobj writes a snapshot in a child and trims the journal at its parent's next tick.

    A stop in between left a snapshot whose boundary is not the journal's first entry; pysyncobj
    then cleared the whole journal on restart, dropping the acknowledged entries after the
    snapshot (CI saw 118 of 120). Here the trim never happens while writing: every compaction
    is "interrupted".
    """
    from raftnode.durability import ChecksummedFileJournal

    with monkeypatch.context() as patched:
        patched.setattr(ChecksummedFileJournal, "deleteEntriesTo", lambda self, entry_to: None)
        port = _write(tmp_path, 120, log_compaction_min_entries=20, log_compaction_min_time=0.05)
    assert (tmp_path / "raft.snapshot").exists()
    node = _member(tmp_path, port)
    try:
        assert node.wait_ready(15)
        wait_for(lambda: node.is_leader, 15, interval=0.05, what="the single member to lead again")
        node.propose("_put_connector_config", "marker", {"v": "1"}, None, False)
        assert len(node.state.connectors) == 121
        assert [node.state.connector(f"c{i}")["config"] for i in range(120)] == [{"v": str(i)} for i in range(120)]
    finally:
        node.destroy()


@pytest.mark.parametrize("damage", ["flip", "truncate", "empty"])
def test_a_damaged_snapshot_stops_the_member(tmp_path, damage):
    port = _write(tmp_path, 120, log_compaction_min_entries=50, log_compaction_min_time=0.1)
    snapshot = tmp_path / "raft.snapshot"
    data = bytearray(snapshot.read_bytes())
    if damage == "flip":
        for k in range(len(data) // 2, len(data) // 2 + 4):
            data[k] ^= 0xFF
    elif damage == "truncate":
        data = data[: len(data) - 12]
    else:
        data = bytearray()
    snapshot.write_bytes(bytes(data))
    with pytest.raises(SnapshotCorrupted, match="cut or damaged"):
        _member(tmp_path, port)


def test_a_journal_from_before_checksums_still_loads(tmp_path):
    """No format marker: the journal was written by pysyncobj's own FileJournal and loads unverified."""
    from pysyncobj.journal import FileJournal

    legacy = FileJournal(str(tmp_path / "raft.journal"))
    legacy.add(b"x", 1, 1)
    legacy._destroy()
    from raftnode.durability import ChecksummedFileJournal

    again = ChecksummedFileJournal(str(tmp_path / "raft.journal"))
    try:
        assert again[0] == (b"x", 1, 1) and not os.path.exists(tmp_path / "raft.journal.format")
    finally:
        again._destroy()
