"""Group commit of Raft proposals on the leader: concurrent commands share one log entry.

Owns the leader-side queue of proposals and the rule of when they are proposed. Does not
decide what a command does (``raftnode.state``) or whether a failed proposal is retried
(``RaftNode.propose``). Must not import Django or anything from ``webapp``.

Why: every Raft proposal costs the leader a pickle, a journal write with its checksum, an
entry in each append-entries message, a commit and an apply callback, and with
``RaftConfig.append_entries_immediately`` one append-entries round of messages. Under 32 concurrent REST writes or agents' offset
commits that per-entry cost, not the network, is what a 2-core leader runs out of.

Algorithm — classic group commit (as databases do for their log flush; Raft
implementations such as etcd's batch proposals the same way): at most
``max_in_flight`` proposals are outstanding. A command arriving while a slot is free
is proposed at once, alone, as its own ordinary log entry (so an idle cluster pays no
delay and its log looks as before). Commands arriving while every slot is taken wait
in a FIFO queue; when an outstanding proposal is applied, its completion callback (on
the Raft thread) takes up to ``max_batch`` queued commands, in arrival order, and
proposes them as one ``_zzz_apply_batch`` entry. No timer, no fixed delay: the batch
is whatever arrived during one round trip.

Guarantees kept (``tests/raftnode/test_groupcommit.py``):

* a caller is answered with its own entry's result only after the entry holding its
  command was committed and applied, so an acknowledged write is committed;
* each command of a batch is applied on its own inside ``_zzz_apply_batch``, with its
  own fencing checks (generation, epoch, owner), so one fenced or refused write fails
  alone with its own :class:`~raftnode.state.Rejected` and the others apply;
* commands are applied in the order they were queued, and a caller's next command
  can only be queued after its previous one was answered, so one client's writes
  keep their order;
* a command still queued when its caller gives up (timeout) is taken out of the
  queue and never proposed; one already proposed has the usual unknown outcome of a
  timed-out write;
* a proposal that pysyncobj never answers does not hold its slot for ever: pysyncobj
  drops a command without calling its callback when the journal write of its entry
  fails (a full disk: ``raftnode.durability.JournalWriteFailed`` in the tick that
  appends it). Once every caller of an outstanding proposal has given up (each
  caller's own timeout), the proposal is abandoned: its slot is freed and the queue
  moves on (its callers got ``Timeout``, the usual unknown outcome; should pysyncobj
  answer it after all, the answer is ignored). Found by the chaos campaign: a leader
  whose disk filled and came back kept leading for minutes without committing anything;
* the queue is proposed only while this member is the leader; otherwise its commands
  fail with ``NOT_LEADER`` (nothing appended), which ``RaftNode.propose`` retries
  (pysyncobj then forwards each to the new leader) or, inside
  ``without_leader_wait``, reports to the forwarding member.
"""
from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from typing import Any

from pysyncobj import FAIL_REASON
from pysyncobj.syncobj import SyncObjException

from .state import BATCH_COMMAND

__all__ = ["GroupCommitter"]

log = logging.getLogger(__name__)


class _Proposal:
    """One caller's command waiting in (or taken from) the queue.

    The caller waits on ``answered``, a lock held from the start and released once, when the
    command's entry is resolved (``done`` is then set): two C calls, where an ``Event`` is a
    ``Condition`` in Python whose ``set`` ran for every command of a batch on the Raft thread.
    """

    __slots__ = ("answered", "args", "cancelled", "deadline", "done", "error", "name", "result", "taken")

    def __init__(self, name: str, args: tuple, deadline: float) -> None:
        self.name, self.args = name, args
        self.deadline = deadline  # time.monotonic() at which the caller gives up
        self.answered = threading.Lock()
        self.answered.acquire()
        self.result: Any = None
        self.error: int | str = FAIL_REASON.SUCCESS
        self.taken = self.cancelled = self.done = False


class _InFlight:
    """One proposal handed to pysyncobj: its commands, and whether its slot was given up waiting for it."""

    __slots__ = ("abandoned", "batch", "deadline")

    def __init__(self, batch: list[_Proposal]) -> None:
        self.batch = batch
        self.deadline = max(p.deadline for p in batch)  # when its last caller gives up
        self.abandoned = False


class GroupCommitter:
    """Leader-side group commit for one :class:`~raftnode.state.ClusterStateMachine` (see module docstring).

    Args:
        state: the state machine whose replicated methods are called with ``callback=``
            (never blocking).
        is_leader: whether this member leads now (read on the Raft thread and callers' threads).
        max_batch: most commands in one batch entry.
        max_in_flight: most proposals outstanding at once (1 gives the largest batches and
            keeps one append-entries round in flight; 2 lets a batch be appended while the
            previous one is on its round trip).
        on_proposed: called after each proposal was handed to pysyncobj (``RaftNode`` uses it
            to have the entry sent at once).
    """

    def __init__(self, state: Any, is_leader: Callable[[], bool], *, max_batch: int = 256,
                 max_in_flight: int = 1, on_proposed: Callable[[], None] | None = None) -> None:
        self._state = state
        self._is_leader = is_leader
        self._on_proposed = on_proposed
        self.max_batch = max_batch
        self.max_in_flight = max_in_flight
        self._lock = threading.Lock()
        self._queue: deque[_Proposal] = deque()
        self._in_flight = 0
        self._outstanding: list[_InFlight] = []
        #: proposals abandoned because pysyncobj never answered them (see module docstring)
        self.abandoned = 0
        #: counters for tests and status: proposals made, of which batches, and commands in batches
        self.proposals = 0
        self.batches = 0
        self.batched_commands = 0
        #: seconds from proposal to answer, summed over the answered proposals (written on the Raft thread)
        self.proposal_seconds = 0.0

    def stats(self) -> dict[str, int | float]:
        """Counters since start: ``{"proposals": log entries proposed, "commands": commands they carried,
        "abandoned": entries pysyncobj never answered, "seconds": proposal-to-answer time of the answered
        entries, summed}``. ``commands / proposals`` is the batching factor and ``seconds / proposals`` the
        mean round (append, replication to a majority, commit, apply): a command queued behind an
        outstanding entry waits for up to two of them."""
        proposals, batches, batched = self.proposals, self.batches, self.batched_commands
        return {"proposals": proposals, "commands": proposals - batches + batched, "abandoned": self.abandoned,
                "seconds": self.proposal_seconds}

    def submit(self, name: str, args: tuple, timeout: float) -> Any:
        """Commit ``name(*args)`` (a replicated command of the state machine) and return its apply result.

        Waits up to ``timeout`` seconds. Raises ``SyncObjException`` exactly as pysyncobj's
        synchronous call does: ``errorCode`` a ``FAIL_REASON`` number when the entry holding
        the command failed (``NOT_LEADER``, ``MISSING_LEADER``, ``QUEUE_FULL`` and
        ``DISCARDED``: not applied), or ``'Timeout'``.
        """
        p = _Proposal(name, args, time.monotonic() + max(0.0, timeout))
        with self._lock:
            self._abandon_unanswered_locked()
            self._queue.append(p)
            batch = self._take_locked() if self._in_flight < self.max_in_flight else None
        if batch:
            self._propose(batch)
        if not p.answered.acquire(timeout=max(0.0, timeout)):
            with self._lock:
                if not p.taken:  # never proposed: it must not be proposed after its caller gave up
                    p.cancelled = True
                    try:
                        self._queue.remove(p)
                    except ValueError:
                        pass
                self._abandon_unanswered_locked()
                nxt = self._take_locked() if self._in_flight < self.max_in_flight else None
            if nxt:
                self._propose(nxt)
            if not p.done:
                raise SyncObjException("Timeout")
        if p.error != FAIL_REASON.SUCCESS:
            raise SyncObjException(p.error)
        return p.result

    def pending(self) -> int:
        """Commands queued and not yet proposed."""
        return len(self._queue)

    # ------------------------------------------------------------------ internals
    def _abandon_unanswered_locked(self) -> None:
        """Free the slots of outstanding proposals whose every caller has given up (under ``_lock``)."""
        now = time.monotonic()
        for entry in [e for e in self._outstanding if e.deadline <= now]:
            entry.abandoned = True
            self._outstanding.remove(entry)
            self._in_flight -= 1
            self.abandoned += 1
            log.warning("raft: a proposal of %d command(s) (%s) was never answered (its entry was not "
                        "appended, e.g. a journal write failed); its callers gave up, the queue moves on",
                        len(entry.batch), entry.batch[0].name)

    def _take_locked(self) -> _InFlight | None:
        """Up to ``max_batch`` queued commands (under ``_lock``); takes a slot when it returns any."""
        batch: list[_Proposal] = []
        while self._queue and len(batch) < self.max_batch:
            p = self._queue.popleft()
            if not p.cancelled:
                p.taken = True
                batch.append(p)
        if not batch:
            return None
        self._in_flight += 1
        entry = _InFlight(batch)
        self._outstanding.append(entry)
        return entry

    def _propose(self, entry: _InFlight) -> None:
        """Hand ``entry``'s commands to pysyncobj (one log entry); its callback resolves every caller and
        proposes the next batch."""
        batch = entry.batch
        if not self._is_leader():
            self._finish(entry, None, FAIL_REASON.NOT_LEADER)
            return

        proposed_at = time.monotonic()

        def done(result: Any, error: int) -> None:
            self.proposal_seconds += time.monotonic() - proposed_at  # the Raft thread's own counter
            self._finish(entry, result, error)

        self.proposals += 1
        try:
            if len(batch) == 1:
                p = batch[0]
                getattr(self._state, p.name)(*p.args, callback=done)
            else:
                self.batches += 1
                self.batched_commands += len(batch)
                getattr(self._state, BATCH_COMMAND)([[p.name, list(p.args)] for p in batch], callback=done)
        except Exception:  # e.g. an argument that does not pickle: fail these callers, keep the queue moving
            log.exception("raft: could not propose %d command(s) (%s)", len(batch), batch[0].name)
            self._finish(entry, None, FAIL_REASON.REQUEST_DENIED)
            return
        if self._on_proposed is not None:
            self._on_proposed()

    def _finish(self, entry: _InFlight, result: Any, error: int) -> None:
        """Resolve ``entry``'s commands with the log entry's outcome, free its slot and propose what queued
        meanwhile. An abandoned entry's late answer resolves nobody (its callers are gone) and frees nothing."""
        batch = entry.batch
        with self._lock:
            if entry.abandoned:
                return
            self._outstanding.remove(entry)
        if error == FAIL_REASON.SUCCESS and len(batch) > 1:
            results = result if isinstance(result, list) and len(result) == len(batch) else None
            for i, p in enumerate(batch):
                if results is None:
                    p.error = FAIL_REASON.UNKNOWN_OUTCOME
                else:
                    p.result = results[i]
        else:
            for p in batch:
                p.result, p.error = result, error
        for p in batch:  # resolved once: an entry is finished once, and a command is in one entry
            p.done = True
            p.answered.release()
        with self._lock:
            self._in_flight -= 1
            nxt = self._take_locked() if self._in_flight < self.max_in_flight else None
        if nxt:
            self._propose(nxt)
