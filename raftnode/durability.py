"""What a Raft member reads back from disk at start: a journal with checksums, a snapshot checked whole.

pysyncobj's ``FileJournal`` stores each entry as ``[size][idx, term, command][size]``
with no checksum, and loading its full dump (snapshot) swallows every error:
found by flipping 16 bytes in the middle of a journal (the member started and
served 49 of its 50 connectors, one write silently gone) and by a truncated
snapshot (the member would start from the journal alone, whose older entries
the snapshot had replaced). A member that serves wrong state is worse than one
that does not start, so here:

* :class:`ChecksummedFileJournal` prefixes every entry's command with a CRC-32
  over ``(idx, term, command)`` and verifies every entry when the journal is
  loaded; an entry that does not match, or a journal that cannot be parsed
  (truncated), raises :class:`JournalCorrupted` naming the entry and what to
  do. Journals made before this module (no ``raft.journal.format`` marker)
  load unverified, as before, with a warning.
* :func:`check_snapshot` reads the whole gzip snapshot before pysyncobj does
  (gzip's own CRC-32 and length catch flipped bytes and truncation) and raises
  :class:`SnapshotCorrupted`.

* :func:`prepare` also completes a log compaction that a stop interrupted.
  pysyncobj writes the snapshot in a forked child and trims the journal in
  the parent at its next tick; a member stopped in between restarts with a
  snapshot whose boundary entry is no longer the journal's first entry, and
  pysyncobj then *clears the whole journal*, dropping every acknowledged
  entry after the snapshot (seen as a single member restarted right after
  compactions holding 118 of 120 acknowledged configs). :func:`prepare` reads
  the snapshot once (handing the loaded data on to pysyncobj so it is not
  read twice) and, when the journal still holds the boundary entry, trims the
  entries before it, as the interrupted compaction would have.

Recovery is the operator's, stated in the error: replace the member as one
whose disk is lost (remove it from the cluster, move its Raft directory aside,
add it back), so it receives the leader's snapshot. Truncating the journal at
the first bad entry, or restarting with an empty directory under an address the
cluster still counts as a voter, would let it vote as if it had never
acknowledged the entries it lost, which can elect a leader without a committed
write.

:func:`install` points pysyncobj's journal factory and snapshot reader at this
module (pysyncobj has no option for either); :class:`raftnode.node.RaftNode`
calls it, then :func:`prepare` before it creates its ``SyncObj``. Imports no
Django and nothing of ``webapp``.
"""
from __future__ import annotations

import gzip
import logging
import os
import struct
import zlib
from typing import Any

import threading

from pysyncobj import journal as _journal
from pysyncobj import pickle as _pickle
from pysyncobj import serializer as _serializer
from pysyncobj import syncobj as _syncobj

__all__ = ["ChecksummedFileJournal", "JournalCorrupted", "SnapshotCorrupted", "check_snapshot", "install",
           "prepare", "FORMAT_MARKER_SUFFIX", "RECOVERY_HINT"]

log = logging.getLogger(__name__)

#: file beside the journal saying its entries carry checksums (content: :data:`_FORMAT`)
FORMAT_MARKER_SUFFIX = ".format"
_FORMAT = b"raftconnect-crc32-v1\n"
_CRC = struct.Struct("<I")
_IDX_TERM = struct.Struct("<QQ")
RECOVERY_HINT = ("Do not edit it. Replace this member as one whose disk is lost (docs/OPERATIONS.md, 'Replace a "
                 "node'): remove its address from the cluster on another member (DELETE "
                 "/raftconnect/v1/raft/members/<address>), move its Raft directory ({dir}) aside, start it and add it "
                 "back (POST /raftconnect/v1/raft/members); it receives the leader's snapshot and log. A single-member "
                 "cluster is restored from a backup instead (raftconnect backup restore).")


class JournalCorrupted(RuntimeError):
    """The Raft journal on disk does not read back as written; the member must not start from it."""


class SnapshotCorrupted(RuntimeError):
    """The Raft snapshot on disk is cut or damaged; the member must not start from it."""


def _crc(idx: int, term: int, command: bytes) -> int:
    return zlib.crc32(command, zlib.crc32(_IDX_TERM.pack(idx, term)))


def _strip(entry: tuple[Any, int, int]) -> tuple[bytes, int, int]:
    command, idx, term = entry
    return bytes(command[_CRC.size:]), idx, term


class ChecksummedFileJournal(_journal.FileJournal):
    """pysyncobj's ``FileJournal`` whose entries carry a CRC-32, verified on load (see module docstring).

    Entries read through ``journal[i]`` / ``journal[a:b]`` are ``(command, idx, term)``
    exactly as pysyncobj added them. Errors: :class:`JournalCorrupted` from the
    constructor.
    """

    def __init__(self, journal_file: str):
        marker = journal_file + FORMAT_MARKER_SUFFIX
        fresh = not os.path.exists(journal_file)
        if fresh:
            with open(marker, "wb") as fh:
                fh.write(_FORMAT)
                fh.flush()
                os.fsync(fh.fileno())
        self._checksums = fresh or _read(marker) == _FORMAT
        where = os.path.dirname(journal_file) or "."
        try:
            super().__init__(journal_file)
        except (struct.error, ValueError, IndexError, OSError) as exc:
            raise JournalCorrupted(f"The Raft journal {journal_file} cannot be read ({exc}): it is cut or "
                                   f"damaged. {RECOVERY_HINT.format(dir=where)}") from exc
        if not self._checksums:
            log.warning("Raft journal %s has no checksums (written before they were added): loaded unverified",
                        journal_file)
            return
        for position in range(len(self)):
            stored, idx, term = _journal.FileJournal.__getitem__(self, position)
            if len(stored) < _CRC.size or _CRC.unpack_from(stored)[0] != _crc(idx, term, bytes(stored[_CRC.size:])):
                raise JournalCorrupted(
                    f"The Raft journal {journal_file} is damaged at entry {position} (log index {idx}, term "
                    f"{term}): its checksum does not match. {RECOVERY_HINT.format(dir=where)}")

    def add(self, command, idx, term):
        """Append ``(command, idx, term)``; the command is stored with its checksum in front."""
        if self._checksums:
            data = bytes(command)
            command = _CRC.pack(_crc(idx, term, data)) + data
        super().add(command, idx, term)

    def __getitem__(self, item):
        got = super().__getitem__(item)
        if not self._checksums:
            return got
        if isinstance(item, slice):
            return [_strip(e) for e in got]
        return _strip(got)

    def deleteEntriesTo(self, entryTo):  # noqa: N802 - pysyncobj's name
        """Drop entries before ``entryTo`` (log compaction): rewrite the rest as stored, checksums kept."""
        keep = [_journal.FileJournal.__getitem__(self, i) for i in range(entryTo, len(self))]
        self.clear()
        for entry in keep:
            _journal.FileJournal.add(self, *entry)

    def complete_compaction(self, boundary: tuple[Any, int, int]) -> int:
        """Trim the entries before ``boundary`` (a snapshot's first kept entry) if the journal holds it.

        ``boundary`` is ``(command, idx, term)`` as pysyncobj stored it in the
        snapshot. Returns how many entries were dropped (0 when the journal
        already starts there, or does not hold it: then pysyncobj's own rule
        applies and the snapshot replaces the journal).
        """
        if len(self) < 2:
            return 0
        first_idx = self[0][1]
        position = boundary[1] - first_idx
        if position <= 0 or position >= len(self):
            return 0
        command, idx, term = self[position]
        if (idx, term) != (boundary[1], boundary[2]) or bytes(command) != bytes(boundary[0]):
            return 0
        self.deleteEntriesTo(position)
        return position


def _read(path: str) -> bytes | None:
    try:
        with open(path, "rb") as fh:
            return fh.read()
    except OSError:
        return None


def _load_snapshot(path: str) -> Any:
    """pysyncobj's snapshot tuple ``(state, entry_at_last_applied, boundary_entry, cluster)``, read whole.

    Errors: :class:`SnapshotCorrupted` when gzip's CRC-32 or length do not match,
    or the file is cut, empty (pysyncobj writes a snapshot whole, never empty),
    not gzip, or does not unpickle into that tuple.
    """
    where = os.path.dirname(path) or "."
    try:
        with open(path, "rb") as fh:
            raw = gzip.decompress(fh.read())
        if not raw:
            raise EOFError("it holds no data")
    except (OSError, EOFError, zlib.error) as exc:
        raise SnapshotCorrupted(f"The Raft snapshot {path} is cut or damaged ({exc}). "
                                f"{RECOVERY_HINT.format(dir=where)}") from exc
    try:
        data = _pickle.loads(raw)
    except Exception as exc:  # noqa: BLE001 - any unpickling failure means the same: unusable
        raise SnapshotCorrupted(f"The Raft snapshot {path} does not decode ({type(exc).__name__}: {exc}). "
                                f"{RECOVERY_HINT.format(dir=where)}") from exc
    if not (isinstance(data, tuple) and len(data) == 4):
        raise SnapshotCorrupted(f"The Raft snapshot {path} is not a pysyncobj snapshot. "
                                f"{RECOVERY_HINT.format(dir=where)}")
    return data


def check_snapshot(path: str) -> None:
    """Read the snapshot at ``path`` whole (nothing to check if there is none).

    Errors: :class:`SnapshotCorrupted` (see :func:`_load_snapshot`).
    """
    if os.path.exists(path):
        _load_snapshot(path)


_prepared_lock = threading.Lock()
#: journal path -> the boundary entry of the snapshot beside it (taken by the journal factory)
_boundaries: dict[str, tuple[Any, int, int]] = {}
#: snapshot path -> ((size, mtime_ns), loaded data) (taken by the snapshot reader)
_loaded: dict[str, tuple[tuple[int, int], Any]] = {}


def _signature(path: str) -> tuple[int, int]:
    st = os.stat(path)
    return st.st_size, st.st_mtime_ns


def prepare(journal_file: str, snapshot_file: str) -> None:
    """Check the snapshot and line the journal up with it, before pysyncobj opens either.

    Reads ``snapshot_file`` whole (raising :class:`SnapshotCorrupted` as
    :func:`check_snapshot`), keeps what it read for pysyncobj's own load, and
    tells the journal factory the snapshot's boundary entry so the journal
    opened at ``journal_file`` completes a compaction a stop interrupted (see
    the module docstring). Call it right before creating the ``SyncObj``.
    """
    if not os.path.exists(snapshot_file):
        return
    signature = _signature(snapshot_file)
    data = _load_snapshot(snapshot_file)
    with _prepared_lock:
        _loaded[snapshot_file] = (signature, data)
        _boundaries[journal_file] = data[2]


class _PreloadingSerializer(_serializer.Serializer):
    """pysyncobj's ``Serializer`` that hands over the snapshot :func:`prepare` already read (once)."""

    def deserialize(self):
        path = getattr(self, "_Serializer__fileName", None)
        if path is not None:
            with _prepared_lock:
                held = _loaded.pop(path, None)
            if held is not None and os.path.exists(path) and _signature(path) == held[0]:
                return held[1]
        return super().deserialize()


def _create_journal(journal_file: str | None = None):
    if journal_file is None:
        return _journal.MemoryJournal()
    journal = ChecksummedFileJournal(journal_file)
    with _prepared_lock:
        boundary = _boundaries.pop(journal_file, None)
    if boundary is not None:
        dropped = journal.complete_compaction(boundary)
        if dropped:
            log.warning("Raft journal %s: completed a log compaction interrupted by a stop (dropped %d entries "
                        "the snapshot holds; kept %d after it)", journal_file, dropped, len(journal))
    return journal


def install() -> None:
    """Make pysyncobj create :class:`ChecksummedFileJournal` journals and read snapshots :func:`prepare` loaded.

    Idempotent; affects every ``SyncObj`` created afterwards in this process.
    """
    _syncobj.createJournal = _create_journal
    _syncobj.Serializer = _PreloadingSerializer
