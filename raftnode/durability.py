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

A log compaction's trim of the journal (:meth:`ChecksummedFileJournal.deleteEntriesTo`) writes
the kept entries to a new file and renames it over the journal: pysyncobj's own trim empties the
journal and writes them back in place, so a member killed in between lost the acknowledged entries
after its snapshot from its copy of the log.

Writing, when the disk is full or fails (ENOSPC, EIO): pysyncobj writes the journal
through a memory map, so a page the filesystem cannot back kills the process with
SIGBUS (tmpfs, and any filesystem without space for a page it must allocate), and
its meta file (term, vote, commit index) raised from every tick. Here
:meth:`ChecksummedFileJournal.add` first reserves the entry's bytes in the file
(``posix_fallocate``); when that fails it raises :class:`JournalWriteFailed`
*before* the entry enters the in-memory log, so the entry is neither replicated
nor acknowledged (a leader's proposal then times out; a follower does not answer
that append, and the leader sends it again). A vote stays synchronous (a
member never votes or campaigns on a term it could not store: the failure aborts
that step), a newer term learnt from a message is kept in memory so the member
steps down; the commit index, saved once a second, is kept for the next
second; a leader that cannot write hands its leadership to a follower that has
every entry (:func:`yield_leadership_on_failure`), so writes go on elsewhere.
Every failure is logged as an error naming the file, the error and the free
space of its filesystem (then at most every 10 s), counted, and reported by
:func:`journal_health` (``RaftNode.status()["journal"]``, ``/health``,
``/metrics``) until a write succeeds again; nothing else changes, so the member
recovers by itself when space returns. A member whose journal's filesystem is
already full when it *starts* does not start (:func:`check_space_at_start`,
:class:`NoSpaceAtStart`, before anything is opened): it would load its journal,
fail to store any term or vote, neither lead nor follow, and serve its replica,
empty until something is applied.

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

import errno
import gzip
import logging
import os
import struct
import threading
import time
import zlib
from typing import Any

from pysyncobj import journal as _journal
from pysyncobj import pickle as _pickle
from pysyncobj import serializer as _serializer
from pysyncobj import syncobj as _syncobj

__all__ = ["ChecksummedFileJournal", "JournalCorrupted", "SnapshotCorrupted", "JournalWriteFailed", "NoSpaceAtStart",
           "DiskHealth", "check_space_at_start", "START_RESERVE_BYTES", "check_snapshot", "install", "prepare", "skip_initial_snapshot_load", "stop_snapshot_writer",
           "journal_health", "yield_leadership_on_failure",
           "FORMAT_MARKER_SUFFIX", "RECOVERY_HINT"]

log = logging.getLogger(__name__)

#: file beside the journal saying its entries carry checksums (content: :data:`_FORMAT`)
FORMAT_MARKER_SUFFIX = ".format"
_FORMAT = b"raftconnect-crc32-v1\n"
_CRC = struct.Struct("<I")
_IDX_TERM = struct.Struct("<QQ")
_SIZE = struct.Struct("<I")  # a record's size, before and after it (pysyncobj's FileJournal)
#: the trimmed journal being written by a log compaction, renamed over the journal once whole
_TRIM_SUFFIX = ".trim"
_PROBE_BYTES = 64  # reserved ahead while writes fail, to see space return
#: bytes a member must be able to reserve on its journal's filesystem to start (the journal's first
#: pages, its term and vote, the format marker, the first entries), checked by :func:`check_space_at_start`
START_RESERVE_BYTES = 64 << 10
_SPACE_PROBE = ".raftconnect-space-probe"
RECOVERY_HINT = ("Do not edit it. Replace this member as one whose disk is lost (docs/OPERATIONS.md, 'Replace a "
                 "node'): remove its address from the cluster on another member (DELETE "
                 "/raftconnect/v1/raft/members/<address>), move its Raft directory ({dir}) aside, start it and add it "
                 "back (POST /raftconnect/v1/raft/members); it receives the leader's snapshot and log. A single-member "
                 "cluster is restored from a backup instead (raftconnect backup restore).")


class JournalCorrupted(RuntimeError):
    """The Raft journal on disk does not read back as written; the member must not start from it."""


class SnapshotCorrupted(RuntimeError):
    """The Raft snapshot on disk is cut or damaged; the member must not start from it."""


class JournalWriteFailed(OSError):
    """An entry (or the term and vote) could not be written to the Raft journal; nothing of it was kept."""


class NoSpaceAtStart(JournalWriteFailed):
    """The Raft journal's filesystem has no room for a member to start (see :func:`check_space_at_start`)."""


def _free_space(path: str) -> str:
    try:
        st = os.statvfs(os.path.dirname(path) or ".")
    except OSError as exc:
        return f"free space unknown ({exc.strerror})"
    return f"{st.f_bavail * st.f_frsize} bytes free of {st.f_blocks * st.f_frsize} on its filesystem"


class DiskHealth:
    """Write failures of one journal: what failed last and since when (``time.monotonic()``); thread-safe reads.

    Attributes:
        path: the journal file.
        error: the last failure's message while failing, else ``None``.
        since: when the current run of failures began (monotonic seconds), else ``None``.
        failures: failed writes since the member started (a counter).
    """

    LOG_EVERY_S = 10.0

    def __init__(self, path: str):
        self.path = path
        self.error: str | None = None
        self.since: float | None = None
        self.failures = 0
        self._logged_at = 0.0
        self._lock = threading.Lock()

    def failed(self, what: str, exc: OSError) -> None:
        """Record (and log, at most every :data:`LOG_EVERY_S` s) that writing ``what`` failed with ``exc``."""
        now = time.monotonic()
        name = errno.errorcode.get(exc.errno or 0, "error")
        message = (f"Raft journal {self.path}: cannot write {what} ({name}: {exc.strerror or exc}); "
                   f"{_free_space(self.path)}. Nothing unwritten is acknowledged; retrying until it succeeds")
        with self._lock:
            first = self.error is None
            self.error, self.failures = message, self.failures + 1
            if first:
                self.since = now
            if first or now - self._logged_at >= self.LOG_EVERY_S:
                self._logged_at = now
                log.error("%s (%d failed writes so far)", message, self.failures)

    def succeeded(self) -> None:
        """Record a successful write; logs once when it ends a run of failures."""
        if self.error is None:
            return
        with self._lock:
            if self.error is None:
                return
            took = time.monotonic() - (self.since or time.monotonic())
            self.error, self.since = None, None
        log.warning("Raft journal %s: writing again after %.1f s of failures (%d failed writes so far)",
                    self.path, took, self.failures)

    def report(self) -> dict[str, Any]:
        """``{"ok", "path", "error", "failing_for_s", "failures"}`` (``error``/``failing_for_s`` ``None`` when ok)."""
        with self._lock:
            error, since, failures = self.error, self.since, self.failures
        return {"ok": error is None, "path": self.path, "error": error,
                "failing_for_s": None if since is None else round(time.monotonic() - since, 1), "failures": failures}


def check_space_at_start(raft_dir: str, reserve: int = START_RESERVE_BYTES) -> None:
    """Refuse to start a member whose journal's filesystem cannot hold ``reserve`` more bytes.

    A member started on a full disk would not fail: it loads its journal, cannot store a term or
    vote, never leads nor follows, and serves what its replica holds (nothing applied yet) while
    its log says "retrying". So the start reserves ``reserve`` bytes in a probe file in
    ``raft_dir`` (``posix_fallocate``, which allocates for real on every filesystem that has it;
    written zeros where it does not), removes it, and stops when that fails, before anything of the
    member is created or opened. Journal and snapshot are not touched.

    Raises:
        NoSpaceAtStart: ENOSPC, EDQUOT, EROFS or EIO on ``raft_dir``; the message names the
            directory, the error, the free space and what to do.
        OSError: any other failure to create the probe.
    """
    probe = os.path.join(raft_dir, _SPACE_PROBE)
    try:
        os.makedirs(raft_dir, exist_ok=True)
        fd = os.open(probe, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
        try:
            try:
                os.posix_fallocate(fd, 0, reserve)
            except OSError as exc:
                if exc.errno != errno.EOPNOTSUPP:
                    raise
                for _ in range(0, reserve, 4096):
                    os.write(fd, b"\0" * 4096)
                os.fsync(fd)
        finally:
            os.close(fd)
    except OSError as exc:
        if exc.errno not in (errno.ENOSPC, errno.EDQUOT, errno.EROFS, errno.EIO):
            raise
        name = errno.errorcode.get(exc.errno or 0, "error")
        raise NoSpaceAtStart(exc.errno, (
            f"This Raft member cannot start: the filesystem of its journal directory {raft_dir} has no room "
            f"for it ({name}: {exc.strerror or exc}; {_free_space(probe)}; a member needs {reserve} bytes to "
            f"start). Nothing was started and its journal and snapshot are untouched. Free space on that "
            f"filesystem (or move the data directory to a larger one) and start the member again.")) from exc
    finally:
        try:
            os.remove(probe)
        except OSError:
            pass


def _sync_directory(path: str) -> None:
    """fsync the directory holding ``path`` so a rename into it is on disk (errors ignored: not every
    filesystem lets a directory be synced, and the rename itself has already happened)."""
    try:
        fd = os.open(os.path.dirname(path) or ".", os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


def _unlink(path: str) -> None:
    try:
        os.unlink(path)
    except OSError:
        pass


def _records(entries: list) -> bytearray:
    """pysyncobj's on-disk records of stored entries ``(command with checksum, idx, term)``."""
    body = bytearray()
    for command, idx, term in entries:
        record = _IDX_TERM.pack(idx, term) + bytes(command)
        size = _SIZE.pack(len(record))
        body += size + record + size
    return body


def _write_records(path: str, header: bytes, entries: list) -> int:
    """Write a journal file at ``path``: ``header`` then the records of ``entries``, synced to disk. Returns
    where the records end. Errors: ``OSError``."""
    body = _records(entries)
    end = len(header) + len(body)
    head = bytearray(header)
    _SIZE.pack_into(head, _journal.LAST_RECORD_OFFSET_OFFSET, end)
    with open(path, "wb") as fh:
        fh.write(head)
        fh.write(body)
        fh.flush()
        os.fsync(fh.fileno())
    return end


def _release(old: "_MappedFile", fd: int | None, path: str) -> None:
    """Close a journal file that was renamed over (its map and the reserving descriptor ``fd``), then sync the
    directory holding ``path`` so the rename is on disk. The last close frees the old file's blocks."""
    old.discard()  # replaced: its dirty pages need no writing first
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass
    _sync_directory(path)


#: a trim's swap on the Raft thread taking this many seconds or more is logged with its steps
SLOW_SWAP_S = 0.1


class _Steps:
    """Seconds of consecutive steps into ``steps`` (``None``: not timed)."""

    def __init__(self, steps: dict[str, float] | None) -> None:
        self.steps = steps
        self.at = time.perf_counter()

    def lap(self, name: str) -> None:
        if self.steps is not None:
            now = time.perf_counter()
            self.steps[name] = self.steps.get(name, 0.0) + now - self.at
            self.at = now


class _Trim(threading.Thread):
    """The background half of a log compaction's trim: the kept entries written to ``<journal>.trim`` and
    synced (:meth:`ChecksummedFileJournal.deleteEntriesTo`); the Raft thread swaps it in.

    Attributes: ``entries`` (stored entries written), ``path``, ``end`` (where their records end),
    ``done`` (set when written or failed), ``error`` (what the write raised, an ``OSError`` for a full or
    failing disk, or ``None``), ``abandoned`` (set on the Raft thread when the log's end was truncated or
    the log emptied for a snapshot meanwhile, or the journal stopped).
    """

    def __init__(self, journal: "ChecksummedFileJournal", entries: list) -> None:
        super().__init__(name="raft-journal-trim", daemon=True)
        self.entries = entries
        self.path = journal.disk.path + _TRIM_SUFFIX
        self.header = bytes(journal._FileJournal__getDefaultHeader())
        self.end = 0
        self.error: BaseException | None = None
        self.abandoned = False
        self.done = threading.Event()

    def run(self) -> None:
        try:
            self.end = _write_records(self.path, self.header, self.entries)
        except BaseException as exc:  # noqa: BLE001 - handed to the Raft thread, which keeps the journal whole
            self.error = exc
        finally:
            self.done.set()


def _crc(idx: int, term: int, command: bytes) -> int:
    return zlib.crc32(command, zlib.crc32(_IDX_TERM.pack(idx, term)))


def _strip(entry: tuple[Any, int, int]) -> tuple[bytes, int, int]:
    command, idx, term = entry
    return bytes(command[_CRC.size:]), idx, term


class _MappedFile(_journal.ResizableFile):
    """pysyncobj's journal file (a growing memory map) that keeps its map's size instead of asking the kernel.

    pysyncobj's ``ResizableFile.write`` calls ``mmap.size()``, an ``fstat`` of the file, on every
    write, and a journal entry is two writes (the record, then the header's end offset), plus one
    more in :meth:`ChecksummedFileJournal._reserve`: three system calls per entry on the Raft
    thread, each of which hands the interpreter lock to another thread of a busy leader (where a
    REST write's system calls cost ~40 us each, issue 16). The map only ever changes size here, so
    its size is known: :meth:`write` stores within it directly and goes to pysyncobj's growing path
    (which asks the kernel again) only past its end.
    """

    def __init__(self, file_name: str) -> None:
        super().__init__(file_name)
        self.mapped = self._ResizableFile__mm.size()  # bytes the map covers (the file's size)

    def write(self, offset: int, values: bytes) -> None:
        """Store ``values`` at ``offset``, growing the file and its map first when they end before it."""
        end = offset + len(values)
        if end > self.mapped:
            super().write(offset, values)
            self.mapped = self._ResizableFile__mm.size()
        else:
            self._ResizableFile__mm[offset:end] = values

    def discard(self) -> None:
        """Unmap and close the file without writing its dirty pages first (pysyncobj's ``_destroy`` syncs the
        whole map, ``msync``): for a file already renamed over, whose pages nobody reads again. The sync
        held a leader's Raft thread 0.59 s at scale (``raftnode.ticks``: journal writes)."""
        self._ResizableFile__mm.close()
        self._ResizableFile__f.close()

    def cover(self, end: int) -> None:
        """Grow the map (and the file, sparse: no space taken) to at least ``end`` bytes, doubling as
        pysyncobj's write does. Errors: ``OSError`` of the resize."""
        mm = self._ResizableFile__mm
        while end > self.mapped:
            mm.resize(max(int(self.mapped * 2), end))
            self.mapped = mm.size()


class ChecksummedFileJournal(_journal.FileJournal):
    """pysyncobj's ``FileJournal`` whose entries carry a CRC-32, verified on load (see module docstring).

    Entries read through ``journal[i]`` / ``journal[a:b]`` are ``(command, idx, term)``
    exactly as pysyncobj added them. Errors: :class:`JournalCorrupted` from the
    constructor.
    """

    def __init__(self, journal_file: str):
        self.disk = DiskHealth(journal_file)
        self._fd: int | None = None
        #: a log compaction's trim being written in the background (:meth:`deleteEntriesTo`), or ``None``
        self._trim: _Trim | None = None
        #: wall seconds the Raft thread spent in this journal's writes (entries, term and vote, commit index, a
        #: trim's swap), the waits for the disk and for the interpreter lock after them included
        #: (``raftnode.ticks`` names them in a slow tick)
        self.write_seconds = 0.0
        #: called once a second on the Raft thread while writes fail (see :func:`yield_leadership_on_failure`)
        self.yield_leadership = None
        marker = journal_file + FORMAT_MARKER_SUFFIX
        fresh = not os.path.exists(journal_file)
        if fresh:
            with open(marker, "wb") as fh:
                fh.write(_FORMAT)
                fh.flush()
                os.fsync(fh.fileno())
        self._checksums = fresh or _read(marker) == _FORMAT
        try:  # a trim a stop cut short before its rename (see deleteEntriesTo): the journal is whole
            os.unlink(journal_file + _TRIM_SUFFIX)
        except FileNotFoundError:
            pass
        where = os.path.dirname(journal_file) or "."
        try:
            super().__init__(journal_file)
        except OSError as exc:
            if exc.errno in (errno.ENOSPC, errno.EDQUOT, errno.EIO, errno.EROFS):
                self.disk.failed("its header", exc)
                raise JournalWriteFailed(exc.errno, f"{self.disk.error}") from exc
            raise JournalCorrupted(f"The Raft journal {journal_file} cannot be read ({exc}): it is cut or "
                                   f"damaged. {RECOVERY_HINT.format(dir=where)}") from exc
        except (struct.error, ValueError, IndexError) as exc:
            raise JournalCorrupted(f"The Raft journal {journal_file} cannot be read ({exc}): it is cut or "
                                   f"damaged. {RECOVERY_HINT.format(dir=where)}") from exc
        # the same file, mapped again by one that knows its size (the entries are already in memory)
        self._FileJournal__journalFile._destroy()
        self._FileJournal__journalFile = _MappedFile(journal_file)
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
        """Append ``(command, idx, term)``; the command is stored with its checksum in front.

        Errors: :class:`JournalWriteFailed` when the entry's bytes cannot be reserved in the
        file (full disk, I/O error); the entry is then not in the log, in memory or on disk.
        """
        started = time.perf_counter()
        try:
            if self._checksums:
                data = bytes(command)
                command = _CRC.pack(_crc(idx, term, data)) + data
            self._reserve(4 + _IDX_TERM.size + len(command) + 4)
            super().add(command, idx, term)
            self.disk.succeeded()
        finally:
            self.write_seconds += time.perf_counter() - started

    def _reserve(self, size: int) -> None:
        """Allocate the file's next ``size`` bytes, where the next entry goes, before the memory map writes them."""
        offset = self._FileJournal__currentOffset  # pysyncobj's FileJournal keeps where the next entry goes
        try:
            # grow the file and its map first, as the write would (sparse: no space taken yet): fallocate
            # past the end would grow the file but not the map
            self._FileJournal__journalFile.cover(offset + size)
            if self._fd is None:
                self._fd = os.open(self.disk.path, os.O_RDWR)
            os.posix_fallocate(self._fd, offset, size)
        except OSError as exc:
            if exc.errno == errno.EOPNOTSUPP:  # a filesystem without fallocate: write as pysyncobj would
                return
            self.disk.failed(f"an entry of {size} bytes", exc)
            raise JournalWriteFailed(exc.errno, f"{self.disk.error}") from exc

    def setCurrentTerm(self, term, votedForNodeId):  # noqa: N802 - pysyncobj's name
        """Store the term and vote before anything reflecting them is sent (Raft).

        When the store fails: a vote (``votedForNodeId`` set: granting one, or campaigning) raises
        :class:`JournalWriteFailed`, which aborts it before any message says it. A newer term
        learnt from a message (no vote) is recorded as a failure but not raised: pysyncobj has
        already put it in memory, and must go on to step down to follower (a leader stuck as
        LEADER with the newer term would contend with that term's real leader). A member that
        restarts without it learns the term again; it cast no vote in it.
        """
        started = time.perf_counter()
        try:
            super().setCurrentTerm(term, votedForNodeId)
        except OSError as exc:
            self.write_seconds += time.perf_counter() - started
            self.disk.failed(f"the term and vote (term {term})", exc)
            if votedForNodeId is not None:
                raise JournalWriteFailed(exc.errno, f"{self.disk.error}") from exc
            return
        self.write_seconds += time.perf_counter() - started
        self.disk.succeeded()

    def onOneSecondTimer(self):  # noqa: N802 - pysyncobj's name
        """Swap in a log compaction's trim written since (:meth:`finish_trim`); save the commit index if it
        changed, a failure recorded and the save tried again next second.

        While writes fail, also probe: reserve the next entry's first bytes, so a member with nothing
        to write (an idle leader, a follower without appends) sees space return and reports it.
        """
        started = time.perf_counter()
        self.finish_trim()
        try:
            super().onOneSecondTimer()
            failing = False
        except OSError as exc:
            self._FileJournal__metaSaved = False
            self.disk.failed("the commit index", exc)
            failing = True
        if not failing and self.disk.error is not None:
            try:
                self._reserve(_PROBE_BYTES)
                self.disk.succeeded()
            except JournalWriteFailed:
                failing = True
        self.write_seconds += time.perf_counter() - started
        if failing and self.yield_leadership is not None:
            self.yield_leadership()  # a leader hands its leadership to a follower (nothing if not the leader)

    def _destroy(self):
        trim, self._trim = self._trim, None
        if trim is not None:  # a stop: the journal stays as it is (whole); the trim's file is not left behind
            trim.abandoned = True
            trim.done.wait(30.0)
            _unlink(trim.path)
        if self._fd is not None:
            try:
                os.close(self._fd)
            except OSError:
                pass
            self._fd = None
        super()._destroy()

    def __getitem__(self, item):
        got = super().__getitem__(item)
        if not self._checksums:
            return got
        if isinstance(item, slice):
            return [_strip(e) for e in got]
        return _strip(got)

    def deleteEntriesTo(self, entryTo):  # noqa: N802 - pysyncobj's name
        """Drop the entries before position ``entryTo`` (log compaction): at once from the log in memory,
        and from the file in the background (:class:`_Trim`), which the Raft thread swaps in a tick or
        two later (:meth:`finish_trim`, from :meth:`onOneSecondTimer`).

        The rewrite used to run whole on the Raft thread, its fsync included: at 10,000 connectors a
        leader's tick that ended a compaction took 0.86-0.95 s, 0.02-0.03 s of it on the CPU, the rest
        waiting for the disk (``raftnode.ticks``, benchmarks/scale), and followers elect after 1-2 s.
        Until the swap the file holds the log with the entries the snapshot already has in front of
        it, as after a stop between the snapshot and the trim: a start then trims them
        (:func:`prepare`), and pysyncobj's appends and truncations work on the file's end as before.
        A trim still being written when the next compaction ends is left to finish (its file keeps a
        few more leading entries, which the next trim drops); a truncation of the log's end
        (``deleteEntriesFrom``) abandons it.
        """
        self._FileJournal__journal = self._FileJournal__journal[entryTo:]
        if self._trim is None and len(self):
            self._trim = _Trim(self, list(self._FileJournal__journal))
            self._trim.start()

    def deleteEntriesFrom(self, entryFrom):  # noqa: N802 - pysyncobj's name
        """pysyncobj's truncation of the log's end (a follower's conflicting entries); abandons a trim being
        written, which may hold some of them."""
        if self._trim is not None:
            self._trim.abandoned = True
        super().deleteEntriesFrom(entryFrom)

    def clear(self):
        """pysyncobj's emptying of the log (a follower installing the leader's snapshot); abandons a trim
        being written, whose entries the log no longer holds."""
        if self._trim is not None:
            self._trim.abandoned = True
        super().clear()

    def finish_trim(self, wait: bool = False) -> bool:
        """On the Raft thread: swap in the trimmed file once its background write is done (``wait``: wait for
        it). Returns whether a trim was pending and is now over (swapped, abandoned or failed).

        The swap appends to the trimmed file the entries added since it was started (no fsync: pysyncobj
        syncs no append either), renames it over the journal and maps it. A trim that could not be
        written (full disk, I/O error) is recorded in :attr:`disk`: the journal stays as it is, whole,
        and the next compaction trims again.
        """
        trim = self._trim
        if trim is None or not (trim.done.wait() if wait else trim.done.is_set()):
            return False
        self._trim = None
        if trim.abandoned or trim.error is not None:
            if isinstance(trim.error, OSError):
                self.disk.failed(f"the trimmed journal ({len(trim.entries)} entries kept)", trim.error)
            elif trim.error is not None:
                log.error("Raft journal %s: the trimmed journal could not be written: %r; the journal stays whole",
                          self.disk.path, trim.error)
            _unlink(trim.path)
            return True
        log_now, written = self._FileJournal__journal, trim.entries[-1]
        # where the file's last entry is in the log now: the log goes on from it (or starts just after it)
        pos = written[1] - log_now[0][1] if log_now else -2
        if pos < -1 or pos >= len(log_now) or (pos >= 0 and log_now[pos] is not written):
            _unlink(trim.path)  # the log moved past the file's end, or changed: the next trim starts afresh
            return True
        tail = log_now[pos + 1:]
        steps: dict[str, float] = {}
        try:
            end = self._finish_file(trim.path, tail, trim.end, steps)
        except OSError as exc:
            self.disk.failed(f"the trimmed journal ({len(trim.entries) + len(tail)} entries kept)", exc)
            _unlink(trim.path)
            return True
        self._map(trim.path, end, sync=False, steps=steps)
        if sum(steps.values()) >= SLOW_SWAP_S:  # on the Raft thread: a leader sends nothing meanwhile
            log.warning("Raft journal %s: swapping in the trimmed journal took %.2f s on the Raft thread (%s)",
                        self.disk.path, sum(steps.values()),
                        ", ".join(f"{name} {seconds:.2f} s" for name, seconds in steps.items()))
        return True

    def trim_now(self, entryTo: int) -> None:
        """Drop the entries before position ``entryTo`` from memory and file at once, on the calling thread
        (the start's :meth:`complete_compaction`, before any tick): the whole rewrite of :meth:`deleteEntriesTo`
        in one step. A stop at any instant leaves on disk either the whole journal as it was or the
        trimmed one, never a part of either. Errors: none raised; a failure is recorded in :attr:`disk`
        and leaves the journal whole, in memory and on disk.
        """
        keep = [_journal.FileJournal.__getitem__(self, i) for i in range(entryTo, len(self))]
        path = self.disk.path + _TRIM_SUFFIX
        try:
            end = _write_records(path, self._FileJournal__getDefaultHeader(), keep)
            end = self._finish_file(path, [], end)
        except OSError as exc:
            self.disk.failed(f"the trimmed journal ({len(keep)} entries kept)", exc)
            _unlink(path)
            return
        self._FileJournal__journal = keep
        self._map(path, end, sync=True)

    def _finish_file(self, trimmed: str, tail: list, end: int, steps: dict[str, float] | None = None) -> int:
        """Append ``tail`` (stored entries) to ``trimmed``, whose records end at ``end``, set its header's end
        offset, and rename it over the journal. Returns the new end. ``steps`` collects each step's
        seconds. Errors: ``OSError``."""
        clock = _Steps(steps)
        with open(trimmed, "r+b") as fh:
            if tail:
                fh.seek(end)
                body = _records(tail)
                fh.write(body)
                end += len(body)
            fh.seek(_journal.LAST_RECORD_OFFSET_OFFSET)
            fh.write(_SIZE.pack(end))
            fh.flush()
        clock.lap("the entries since")
        os.replace(trimmed, self.disk.path)  # the old file stays mapped until closed in _map
        clock.lap("rename")
        return end

    def _map(self, renamed: str, end: int, sync: bool, steps: dict[str, float] | None = None) -> None:
        """Map the journal file renamed in from ``renamed`` (records up to ``end``) in place of the old one;
        ``steps`` collects each step's seconds."""
        path = self.disk.path
        clock = _Steps(steps)
        old, fd = self._FileJournal__journalFile, self._fd  # the reserving descriptor points at the old file too
        self._fd = None
        self._FileJournal__journalFile = _MappedFile(path)
        self._FileJournal__currentOffset = end
        clock.lap("mapping the new one")
        if sync:
            _release(old, fd, path)
        else:  # the last references to the renamed-over file: closing them frees its blocks, 0.13-0.94 s of the
            # Raft thread at scale (a filesystem mounted with discard), so another thread does it
            threading.Thread(target=_release, args=(old, fd, path), name="raft-journal-release", daemon=True).start()
        clock.lap("handing the old file over")
        self.disk.succeeded()

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
        self.trim_now(position)
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


def prepare(journal_file: str, snapshot_file: str) -> bool:
    """Check the snapshot and line the journal up with it, before pysyncobj opens either.

    Reads ``snapshot_file`` whole (raising :class:`SnapshotCorrupted` as
    :func:`check_snapshot`), keeps what it read for pysyncobj's own load, and
    tells the journal factory the snapshot's boundary entry so the journal
    opened at ``journal_file`` completes a compaction a stop interrupted (see
    the module docstring). Call it right before creating the ``SyncObj``.

    Returns whether there was a snapshot. Without one the journal is the whole
    log, and the caller must keep pysyncobj from loading a snapshot that appears
    later (:func:`skip_initial_snapshot_load`): the forked child of a compaction
    of the previous process (killed, or stopped while the child wrote) can rename
    its snapshot into place after this start read the directory, and loading it
    would make pysyncobj clear the journal whose first entry is not its boundary.
    For the same reason pysyncobj's first load returns exactly what was read here
    even if the file was replaced since.
    """
    if not os.path.exists(snapshot_file):
        with _prepared_lock:  # until skip_initial_snapshot_load: a load in between is refused
            _loaded[snapshot_file] = (None, None)
        return False
    signature = _signature(snapshot_file)
    data = _load_snapshot(snapshot_file)
    with _prepared_lock:
        _loaded[snapshot_file] = (signature, data)
        _boundaries[journal_file] = data[2]
    return True


def skip_initial_snapshot_load(syncobj: Any, snapshot_file: str) -> None:
    """Keep ``syncobj`` (created after :func:`prepare` found no snapshot) from loading one at its first tick.

    Touches pysyncobj's private start flag (``__needLoadDumpFile``): pysyncobj has no option for it.
    Its tick thread starts inside the ``SyncObj`` constructor, so a load that ran before the flag
    was cleared met :func:`prepare`'s marker and was refused (pysyncobj logs it and keeps its
    journal). Later snapshots sent by a leader load as usual.
    """
    syncobj._SyncObj__needLoadDumpFile = False
    with _prepared_lock:
        held = _loaded.get(snapshot_file)
        if held is not None and held[1] is None:
            del _loaded[snapshot_file]


def stop_snapshot_writer(syncobj: Any) -> None:
    """Kill and reap ``syncobj``'s forked snapshot writer, if one runs (call after the tick thread stopped).

    A writer outliving its member could rename a snapshot into place while the
    next start reads the directory. It writes to a temporary file and renames it
    whole, so killing it loses only that snapshot's work: the journal, not yet
    trimmed for it, still holds every entry.
    """
    serializer = getattr(syncobj, "_SyncObj__serializer", None)
    pid = getattr(serializer, "_Serializer__pid", 0) or 0
    if pid <= 0:
        return
    try:
        os.kill(pid, 9)
        os.waitpid(pid, 0)
    except (ProcessLookupError, ChildProcessError):
        pass
    serializer._Serializer__pid = 0


class _PreloadingSerializer(_serializer.Serializer):
    """pysyncobj's ``Serializer`` that hands over the snapshot :func:`prepare` already read (once).

    The first load after :func:`prepare` returns what it read even if the file was
    replaced since (a previous process's snapshot writer finishing late): that is
    the snapshot the journal was lined up with. The file, if newer, is a valid
    snapshot of committed entries and is lined up at the next start.
    """

    def deserialize(self):
        path = getattr(self, "_Serializer__fileName", None)
        if path is not None:
            with _prepared_lock:
                held = _loaded.pop(path, None)
            if held is not None and held[1] is None:
                raise RuntimeError(f"Raft snapshot {path} appeared after start (a previous process's snapshot "
                                   "writer finishing late); not loaded: the journal holds the whole log")
            if held is not None:
                if not os.path.exists(path) or _signature(path) != held[0]:
                    log.warning("Raft snapshot %s changed after start (a previous process's snapshot writer "
                                "finished late): loading the one this start read", path)
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


def journal_health(syncobj) -> dict[str, Any] | None:
    """:meth:`DiskHealth.report` of the journal of a ``pysyncobj.SyncObj``; ``None`` for a journal in memory."""
    disk = getattr(getattr(syncobj, "_SyncObj__raftLog", None), "disk", None)
    return disk.report() if disk is not None else None


def yield_leadership_on_failure(syncobj) -> None:
    """Make a leader whose journal cannot be written hand its leadership to a caught-up follower.

    Once a second while writes fail (on the Raft thread, in :meth:`ChecksummedFileJournal.onOneSecondTimer`)
    the journal calls pysyncobj's ``transferLeadership()`` (Raft's TimeoutNow; it does nothing on a
    follower, and is refused while no follower has every entry). A member that cannot store a term can
    neither vote nor campaign, so it does not take the leadership back until its disk recovers.
    """
    journal = getattr(syncobj, "_SyncObj__raftLog", None)
    if isinstance(journal, ChecksummedFileJournal):
        journal.yield_leadership = syncobj.transferLeadership


class _KnownWriteFailures(logging.Filter):
    """Drops pysyncobj's traceback of a tick that :class:`JournalWriteFailed` ended: the journal logs each
    failure itself, with the free space, at most every 10 s (pysyncobj's would repeat on every append)."""

    def filter(self, record: logging.LogRecord) -> bool:
        exc = record.exc_info[1] if record.exc_info else None
        return not isinstance(exc, JournalWriteFailed)


_FILTER = _KnownWriteFailures()


def install() -> None:
    """Make pysyncobj create :class:`ChecksummedFileJournal` journals and read snapshots :func:`prepare` loaded.

    Idempotent; affects every ``SyncObj`` created afterwards in this process.
    """
    _syncobj.createJournal = _create_journal
    _syncobj.Serializer = _PreloadingSerializer
    logging.getLogger("pysyncobj.syncobj").addFilter(_FILTER)
