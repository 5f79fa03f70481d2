"""RaftNode: one pysyncobj ``SyncObj`` plus the cluster state machine.

Owns the Raft transport and its tuning (timeouts, journal, snapshots, password),
proposing commands and waiting for their result, and reporting Raft status.
Does not decide anything about connectors: callers (the coordinator, the Herder
and the Raft metadata store) compute every non-deterministic input first and
then propose.

Must not import Django or anything from ``webapp``.
"""
from __future__ import annotations

import contextlib
import contextvars
import logging
import os
import threading
import time
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator

from pysyncobj import FAIL_REASON, SyncObj, SyncObjConf
from pysyncobj.syncobj import _RAFT_STATE, SyncObjException

from . import durability
from .barrier import ReadBarriers
from .commands import ClusterCommands
from .groupcommit import GroupCommitter
from .osthreads import name_os_thread
from .state import BATCH_COMMAND, ClusterStateMachine
from .ticks import TickWatch

__all__ = ["RaftNode", "RaftConfig", "RaftUnavailable", "CommandRejected", "SingleAttempt", "without_leader_wait"]

log = logging.getLogger(__name__)

_RAFT_STATES = {0: "FOLLOWER", 1: "CANDIDATE", 2: "LEADER"}

# pysyncobj failures after which the command is known not to be in any log (or to have been
# overwritten there), so proposing it again cannot apply it twice.
_NOT_APPENDED = frozenset({FAIL_REASON.QUEUE_FULL, FAIL_REASON.MISSING_LEADER, FAIL_REASON.NOT_LEADER,
                           FAIL_REASON.DISCARDED})
_FAIL_NAMES = {v: k for k, v in vars(FAIL_REASON).items() if isinstance(v, int)}
_RETRY_PAUSE_S = 0.02
#: the ``errorCode`` of pysyncobj's (and the group committer's) ``SyncObjException`` on a timeout: a string,
#: pysyncobj 0.3.17 has no ``FAIL_REASON.TIMEOUT`` (its use raised AttributeError out of every timed-out proposal)
_TIMEOUT = "Timeout"
class SingleAttempt:
    """What one forwarded write is allowed, and what became of it (see :func:`without_leader_wait`).

    Attributes:
        deadline: ``time.monotonic()`` after which no command of the request may
            be proposed any more, or ``None`` for no limit beyond each
            proposal's own timeout.
        committed: commands of the request committed so far.
        not_leader: set when a command was refused because this member is not
            (or no longer) the leader, before anything of it reached a log: the
            forwarding member may then send the whole request to the leader.
    """

    def __init__(self, budget_s: float | None = None):
        self.deadline = None if budget_s is None else time.monotonic() + max(0.0, budget_s)
        self.committed = 0
        self.not_leader = False


_single_attempt: contextvars.ContextVar[SingleAttempt | None] = contextvars.ContextVar(
    "raftnode_single_attempt", default=None)


@contextlib.contextmanager
def without_leader_wait(budget_s: float | None = None) -> Iterator[SingleAttempt]:
    """Within this block (this thread or task), :meth:`RaftNode.propose` makes one attempt only.

    For work done on behalf of a caller that will retry elsewhere by itself, such
    as a write forwarded from another member:

    * only the leader proposes: a follower does not hand the command on to the
      leader (as pysyncobj would), because a forwarded request that arrives late
      (held in a TCP retransmit queue during a partition, say) must not land
      after the client's newer writes. It fails at once, with
      :attr:`SingleAttempt.not_leader` set, and the forwarding member (which is
      still waiting, or has given up and answered its client) decides;
    * ``budget_s`` (seconds, from the forwarding member's own deadline) bounds
      every proposal's timeout, so nothing is proposed after the forwarding
      member has given up.

    Yields the :class:`SingleAttempt` that records the outcome.
    """
    attempt = SingleAttempt(budget_s)
    token = _single_attempt.set(attempt)
    try:
        yield attempt
    finally:
        _single_attempt.reset(token)


class RaftUnavailable(Exception):
    """The command could not be committed in time (no leader, no quorum, timeout)."""


class CommandRejected(Exception):
    """The state machine refused the command (fencing, missing connector, ...).

    Attributes:
        reason: operator-readable text.
        code: the HTTP status that best describes it (404, 409, ...).
    """

    def __init__(self, reason: str, code: int = 409):
        super().__init__(reason)
        self.reason = reason
        self.code = code


@dataclass
class RaftConfig:
    """Settings of a Raft member.

    Attributes:
        self_address: ``host:port`` this member binds and is known by.
        peers: the other voting members' ``host:port``.
        data_dir: directory for the journal and the snapshot (created).
        password: shared secret; pysyncobj encrypts and authenticates its
            pickle wire format with it. Required when there are peers.
        leader_fallback_timeout: seconds after which a leader that cannot reach a
            quorum steps down (pysyncobj's default of 30 s is far too long for
            a 99.95% target).
        raft_min_timeout, raft_max_timeout: election timeout range, seconds. 1-2 s (pysyncobj's
            default is 0.4-1.4 s; etcd's is 1 s, Consul's 1-2 s in development and 5 s in
            production): a leader process busy with many REST threads can leave its Raft thread
            without the GIL for several hundred ms (``benchmarks/scale/gil_ticks.py``), and at
            0.4 s followers called an election against a live leader every few minutes at 10,000
            connectors, each one making the coordinator start afresh. A lone member (no peers)
            has nobody to disagree with and keeps pysyncobj's 0.4-1.2 s (:data:`LONE_MEMBER_TIMEOUTS`),
            which only delays its start.
        append_entries_period: leader heartbeat period, seconds.
        connection_timeout: seconds before a silent peer connection is dropped (pysyncobj requires at
            least ``raft_max_timeout``).
        tick_period: seconds the Raft thread waits for socket events per tick. A single
            member with ``append_entries_immediately`` does not wait for it: it commits an
            entry in the tick after the one that appended it, which :meth:`RaftNode._send_proposed`
            starts at once (otherwise every write on a lone member waited one tick period).
        append_entries_immediately: a group-commit proposal wakes the Raft thread and is sent
            to the followers as soon as it is appended, instead of waiting for the next tick
            and the next ``append_entries_period`` (saves ~10 ms per write; see
            :meth:`RaftNode._send_proposed`). Not pysyncobj's own ``appendEntriesUseBatch``
            off: that sends one message per command, and its leader moves a follower's next
            index back whenever an older message's acknowledgement arrives after a newer
            message left, so under load followers were sent entries they had (and had
            applied) again, truncating and rewriting their journals ("truncating
            already-applied log entries", seen in benchmarks/cluster).
            On by default since the durability fixes of ``raftnode.durability``: it was off for
            a while because a single member taking 120 fast writes with frequent log
            compactions and then stopped came back without its last acknowledged writes in 2 of
            30 trials. Those losses were pysyncobj's (a stop between the forked snapshot write
            and the journal trim; a snapshot writer outliving its member renaming a newer
            snapshot in after the restart read the directory); the faster writes only made a
            stop land right after a compaction more often. 0 losses in 60 + 50 trials since
            (``tests/raftnode/test_durability.py``,
            ``test_fast_writes_with_frequent_compactions_then_a_stop_lose_nothing``).
        append_entries_max_bytes: pysyncobj's ``appendEntriesBatchSizeBytes``: the command bytes
            one append-entries message gathers before it is sent. pysyncobj sends a single entry
            at least this large in chunks, and marks the last chunk by comparing the offset with
            the command's length rather than with the length of the pickled entry it cuts up;
            its pickle protocol 2 writes bytes as latin-1 text, so a command with many bytes
            above 0x7f pickles up to twice as large and the follower is told "finish" long before
            the end. It then unpickles the partial entry (pickle's pure-Python fallback, for
            every chunk that follows), logs a "failed _onTick" trace each time and takes the
            entry only with its real last chunk. At 10,000 connectors every assignment
            (~1 MB) did that on both followers (benchmarks/scale). pysyncobj's default is
            64 KiB; 16 MiB keeps every entry RaftConnect writes in one message, and a
            catching-up follower's messages bounded by it.
        group_commit: on the leader, concurrent proposals share log entries
            (:mod:`raftnode.groupcommit`); ``group_commit_max_batch`` commands at most
            per entry, ``group_commit_max_in_flight`` entries outstanding at once (1: one
            append-entries round of ours in flight, so acknowledgements arrive in order).
        pause_seconds: returns the seconds this process has spent in stop-the-world pauses so
            far (garbage collections: ``webapp.gcpolicy.pause_seconds``); only used to explain
            long gaps between the Raft thread's ticks in the log (:mod:`raftnode.ticks`).
    """

    self_address: str
    peers: list[str] = field(default_factory=list)
    data_dir: str = "var/raft"
    password: str | None = None
    leader_fallback_timeout: float = 2.0
    raft_min_timeout: float = 1.0
    raft_max_timeout: float = 2.0
    append_entries_period: float = 0.01
    connection_timeout: float = 2.5
    tick_period: float = 0.005
    log_compaction_min_entries: int = 20000
    log_compaction_min_time: float = 120.0
    append_entries_immediately: bool = True
    append_entries_max_bytes: int = 16 * 2**20
    group_commit: bool = True
    group_commit_max_batch: int = 256
    group_commit_max_in_flight: int = 1
    pause_seconds: Callable[[], float] | None = None


def _keep_next_index_monotonic(syncobj: SyncObj, heard: Callable[[], None] | None = None) -> None:
    """A follower's acknowledgement never moves the leader's next index for it backwards.

    pysyncobj 0.3.17's leader, on a successful ``next_node_idx`` answer, sets the
    follower's next index to the answer's, even when messages with later entries have
    already left (its sends advance the next index optimistically). Whenever two
    append-entries with new entries are in flight (a proposal sent at once and a
    periodic one, or any two under CPU starvation), the older acknowledgement moves the
    index back and the next message re-sends entries the follower has, and has applied:
    the follower then deletes them from its journal and writes them again ("truncating
    already-applied log entries ... may have diverged", CRITICAL), which costs both
    members and leaves a window in which the follower's journal lacks entries it
    acknowledged. Seen in benchmarks/cluster with the code before issue 16 too.

    Here the transport's message callback is wrapped: after pysyncobj handled a
    successful, non-reset ``next_node_idx``, the next index is put back to what it was
    if it went down. Safety does not depend on the next index (a follower checks the
    previous index and term of every append-entries), and a follower that lacks entries
    still answers with ``reset``, which sets the index as before (the way etcd's
    replication handles its optimistic next index).

    The same wrapper calls ``heard`` for every append-entries of the current term or later (a
    leader's), before pysyncobj handles it: :meth:`TickWatch.leader_heard`, one wrapper for both.
    """
    transport = syncobj._SyncObj__transport
    handle = syncobj._SyncObj__onMessageReceived
    next_index = syncobj._SyncObj__raftNextIndex

    def on_message(node, message):
        if not isinstance(message, dict):
            handle(node, message)
            return
        kind = message.get("type")
        if kind == "append_entries":
            if heard is not None and message.get("term", -1) >= syncobj.raftCurrentTerm:
                heard()
        elif kind == "next_node_idx" and message.get("success") and not message.get("reset"):
            before = next_index.get(node)
            handle(node, message)
            if before is not None and next_index.get(node, before) < before:
                next_index[node] = before
            return
        handle(node, message)

    transport.setOnMessageReceivedCallback(on_message)


#: election timeout range (seconds) of a member without peers: it waits it out once at start
LONE_MEMBER_TIMEOUTS = (0.4, 1.2)
#: pysyncobj's states that wait for a leader's messages
_FOLLOWING = (_RAFT_STATE.FOLLOWER, _RAFT_STATE.CANDIDATE)


class _SyncObj(SyncObj):
    """pysyncobj's ``SyncObj`` whose followers read the messages waiting for them before electing.

    pysyncobj 0.3.17's tick checks the election deadline first and reads the network last
    (``_onTick`` ends in ``poll``). A follower whose tick thread was held up for longer than the
    election timeout (GIL contention with its REST threads, a slow journal write, applying a large
    batch) therefore started an election although the leader's append-entries were waiting in its
    socket: the leader stepped down and, its log being the longest, was elected again a few ms
    later. Every such term made the coordinator start afresh (benchmarks/scale at 10,000
    connectors: a new term every 20-40 s, none of them with a leader actually gone). Reading the
    socket first (a zero-wait poll, as the end of the previous tick would have done a moment
    later) resets the deadline when the leader is alive; an election follows only when nothing
    came from it. A leader's step-down check (no answer from a majority within
    ``leaderFallbackTimeout``) gets the same treatment. Safety is pysyncobj's: only when messages
    are read moves.

    A subclass, not an attribute set on the instance: pysyncobj's snapshot pickles every
    attribute added to the instance after its ``__init__`` (``tick_watch`` is set before it).

    Each tick also feeds ``tick_watch`` (:class:`~raftnode.ticks.TickWatch`): the gaps between
    ticks, and why this member starts an election or steps down, go to the log.
    """

    def __init__(self, *args: Any, tick_watch: TickWatch, **kwargs: Any) -> None:
        self._tick_watch = tick_watch  # before SyncObj.__init__, which lists the attributes its snapshots leave out
        super().__init__(*args, **kwargs)
        self.addOnTickCallback(tick_watch.poll_started)  # on-tick callbacks run just before the tick's poll

    def _onTick(self, timeToWait: float = 0.0) -> None:
        watch = self._tick_watch
        state, term = self._SyncObj__raftState, self._SyncObj__raftCurrentTerm
        watch.tick_started(self._SyncObj__raftLastApplied, _RAFT_STATES.get(state, str(state)), term)
        if self._SyncObj__transport.ready and self._timeout_due(time.monotonic()):
            self._poller.poll(0)
        heard, leader = watch.heard_leader, self._SyncObj__raftLeader  # as the election check will find them
        serializer = self._SyncObj__serializer
        writer, snapshot = serializer._Serializer__pid, self._SyncObj__lastSerializedEntry
        super()._onTick(timeToWait)
        events = None
        if serializer._Serializer__pid != writer and not writer:
            events = ["a log compaction started (its snapshot writer forked)"]
        if self._SyncObj__lastSerializedEntry != snapshot:  # a snapshot was written: the journal was trimmed to it
            events = (events or []) + ["a log compaction ended (the journal trimmed to the new snapshot)"]
        watch.tick_ended(self._SyncObj__raftLastApplied, events)
        new_state, new_term = self._SyncObj__raftState, self._SyncObj__raftCurrentTerm
        if new_term > term and new_state != _RAFT_STATE.FOLLOWER:
            # a higher term heard from others makes a member a follower; a candidate (or, votes read in the
            # same tick, a leader) of a higher term started the election itself
            conf = self._SyncObj__conf
            watch.election_started(new_term, getattr(leader, "address", None), heard,
                                   (conf.raftMinTimeout, conf.raftMaxTimeout))
        elif state == _RAFT_STATE.LEADER and new_state == _RAFT_STATE.FOLLOWER and new_term == term:
            conf, now = self._SyncObj__conf, time.monotonic()
            answered = {getattr(n, "address", str(n)): now - t for n, t in self._SyncObj__lastResponseTime.items()}
            if sum(ago < conf.leaderFallbackTimeout for ago in answered.values()) + 1 \
                    <= (len(answered) + 1) / 2:  # pysyncobj's step-down rule (another cause logs itself)
                watch.stepped_down(term, answered, conf.leaderFallbackTimeout)

    def _timeout_due(self, now: float) -> bool:
        """Whether this tick may act on a timeout: a follower's election deadline passed, or a
        leader last heard from some follower longer ago than ``leaderFallbackTimeout`` (its step-down
        check, also made before the sockets are read: a leader held up that long stepped down with
        its followers' answers unread)."""
        if self._SyncObj__raftState in _FOLLOWING:
            return self._SyncObj__raftElectionDeadline < now
        oldest = min(self._SyncObj__lastResponseTime.values(), default=now)
        return oldest <= now - self._SyncObj__conf.leaderFallbackTimeout


def _stopped_error(name: str) -> RaftUnavailable:
    """The error of a proposal of ``name`` on a member that :meth:`RaftNode.destroy` stopped."""
    return RaftUnavailable(f"Raft command {name} not proposed: this Raft member has stopped")


class RaftNode:
    """A Raft member holding a :class:`ClusterStateMachine`.

    ``propose(name, *args)`` calls the replicated method ``name`` of the state
    machine, waits for it to be committed and applied, and returns its result;
    it raises :class:`CommandRejected` when apply refused it and
    :class:`RaftUnavailable` on timeout or when no leader could take it.
    pysyncobj forwards a follower's proposal to the leader itself.
    """

    def __init__(self, config: RaftConfig, on_leader_change: Callable[[bool, int], None] | None = None):
        if config.peers and not config.password:
            raise ValueError(
                "A multi-member Raft cluster needs a cluster secret (RAFTCONNECT_CLUSTER_SECRET): "
                "pysyncobj's wire format is pickle and must never run unauthenticated."
            )
        os.makedirs(config.data_dir, exist_ok=True)
        durability.check_space_at_start(config.data_dir)  # a full disk: stop here (NoSpaceAtStart), never half-start
        self.config = config
        self.state = ClusterStateMachine()
        #: the typed replicated writes (use these rather than :meth:`propose` with a command name)
        self.commands = ClusterCommands(self)
        self._on_leader_change = on_leader_change
        self._was_leader = False
        self._leader_term: int | None = None  # the term this member leads, set by _state_changed
        self._membership_lock = threading.Lock()
        host = config.self_address.rsplit(":", 1)[0]
        # a member never starts from a damaged journal or snapshot (raftnode/durability.py)
        durability.install()
        snapshot_file = os.path.join(config.data_dir, "raft.snapshot")
        had_snapshot = durability.prepare(os.path.join(config.data_dir, "raft.journal"), snapshot_file)
        conf = SyncObjConf(
            password=config.password,
            journalFile=os.path.join(config.data_dir, "raft.journal"),
            fullDumpFile=snapshot_file,
            bindAddress=config.self_address if host else None,
            dynamicMembershipChange=True,
            leaderFallbackTimeout=config.leader_fallback_timeout,
            raftMinTimeout=config.raft_min_timeout if config.peers else LONE_MEMBER_TIMEOUTS[0],
            raftMaxTimeout=config.raft_max_timeout if config.peers else LONE_MEMBER_TIMEOUTS[1],
            appendEntriesPeriod=config.append_entries_period,
            appendEntriesBatchSizeBytes=config.append_entries_max_bytes,
            connectionTimeout=config.connection_timeout,
            connectionRetryTime=1.0,
            logCompactionMinEntries=config.log_compaction_min_entries,
            logCompactionMinTime=config.log_compaction_min_time,
            # Never park a command until some leader appears: pysyncobj would keep it in its queue
            # after the proposer's timeout and apply it whenever a leader shows up, possibly long
            # after newer, acknowledged writes (found by tests/integration/test_partition.py).
            # propose() waits for a leader itself, within the caller's timeout.
            commandsWaitLeader=False,
            autoTickPeriod=config.tick_period,
            onStateChanged=self._state_changed,
        )
        #: the timing of the Raft thread's ticks, and why this member elects or steps down (:mod:`raftnode.ticks`)
        self.ticks = TickWatch(warn_after_s=conf.raftMinTimeout / 2, pauses=config.pause_seconds)
        self.syncobj = _SyncObj(config.self_address, list(config.peers), conf=conf, consumers=[self.state],
                                tick_watch=self.ticks)
        journal = self.syncobj._SyncObj__raftLog
        if hasattr(journal, "write_seconds"):  # a journal on disk (durability.ChecksummedFileJournal)
            self.ticks.set_journal_writes(lambda: journal.write_seconds)
        if not had_snapshot:
            # the journal is the whole log: never the snapshot a previous process's writer renames in late
            durability.skip_initial_snapshot_load(self.syncobj, snapshot_file)
        durability.yield_leadership_on_failure(self.syncobj)  # a leader on a full disk steps aside
        #: leader-side group commit of :meth:`propose` (``None`` when ``config.group_commit`` is off)
        self.group_commit = GroupCommitter(
            self.state, self.syncobj._isLeader, max_batch=config.group_commit_max_batch,
            max_in_flight=config.group_commit_max_in_flight,
            on_proposed=self._proposed if config.append_entries_immediately else None,
        ) if config.group_commit else None
        _keep_next_index_monotonic(self.syncobj, heard=self.ticks.leader_heard)
        self._raft_thread_named = False
        self.syncobj.addOnTickCallback(self._name_raft_thread)
        self._send_wanted = False
        self._wake: Callable[[], None] | None = None
        if self.group_commit is not None and config.append_entries_immediately:
            self.syncobj.addOnTickCallback(self._send_proposed)
        self._stopped = threading.Event()
        #: concurrent read barriers share their entries (:meth:`read_barrier`)
        self.read_barriers = ReadBarriers(lambda timeout: self.propose(BATCH_COMMAND, [], timeout=timeout),
                                          RaftUnavailable)
        if config.peers:
            threading.Thread(target=self._catch_up_loop, name="raft-catch-up", daemon=True).start()

    #: the kernel's name for the Raft thread (``top -H``, ``/proc/<pid>/task/*/comm``; see ``raftnode.osthreads``)
    RAFT_THREAD_NAME = "raft"

    def _name_raft_thread(self) -> None:
        """On the Raft thread's first tick: name it for the kernel (:data:`RAFT_THREAD_NAME`)."""
        if not self._raft_thread_named:
            self._raft_thread_named = True
            name_os_thread(self.RAFT_THREAD_NAME)

    # ------------------------------------------------------- immediate append-entries
    def _proposed(self) -> None:
        """The group committer handed pysyncobj a proposal: have it sent at the end of the Raft thread's next tick."""
        self._send_wanted = True
        wake = self._wake
        if wake is not None and threading.current_thread() is not self._raft_thread:
            wake()

    def _send_proposed(self) -> None:
        """On the Raft thread, after the tick appended queued commands: send append-entries now if one was proposed.

        pysyncobj (``appendEntriesUseBatch``, its default) sends append-entries once per
        ``append_entries_period`` and takes queued commands only at the end of a tick that
        a socket event or the tick period ends; a proposal waited up to a tick to be
        appended and up to a period to be sent. Here the proposer wakes the Raft thread
        through a pipe in its poller, and this on-tick callback, which runs after the
        tick appended the command, sends it. Uses pysyncobj 0.3.17's private
        ``__sendAppendEntries`` (the version is pinned).

        A lone member (no other voters) waits for no answer: its entry is committed by the
        next tick, whose first step counts the votes for the new entries, and that tick began
        only when the poll of this one ended, ``tick_period`` later with no socket to wake it.
        Every write on a single-node cluster (the embedded default) waited that 5 ms: a REST
        config write took ~7 ms on an idle member instead of under 1 ms (in process, one
        client). Here it wakes its own poller instead, so the next tick follows at once.
        """
        if self._wake is None:  # first tick: the pipe is made on the thread that polls it
            from pysyncobj.pipe_notifier import PipeNotifier

            self._raft_thread = threading.current_thread()
            self._wake = PipeNotifier(self.syncobj._poller).notify
        if self._send_wanted:
            self._send_wanted = False
            if self.syncobj._isLeader():
                self.syncobj._SyncObj__sendAppendEntries()
                if not self.syncobj.otherNodes:  # a lone voter: commit in the next tick, now
                    self._wake()

    # ------------------------------------------------------------------ status
    @property
    def is_leader(self) -> bool:
        """Whether this member believes it is the leader (may be briefly stale)."""
        return bool(self.syncobj._isLeader())

    @property
    def leader(self) -> str | None:
        """Raft address of the last known leader, or ``None``."""
        node = self.syncobj._getLeader()
        return getattr(node, "address", None) if node is not None else None

    @property
    def term(self) -> int:
        """Current Raft term."""
        return int(self.syncobj.raftCurrentTerm)

    def status(self) -> dict[str, Any]:
        """Raft status: ``{"state", "term", "leader", "commit_index", "applied_index", "log_size", "has_quorum",
        "ready", "journal", "ticks"}`` (``journal``: :func:`durability.journal_health`, ``None`` in memory;
        ``ticks``: :meth:`TickWatch.figures`, the Raft thread's longest gap between ticks and the
        elections and step-downs this member started).

        ``state`` is LEADER only together with the term this member leads.
        pysyncobj's ``getStatus`` runs on the caller's thread and reads the state
        before the term, while its Raft thread, on seeing a newer term, stores
        the term, writes its journal and only then leaves LEADER: without this
        check a deposed leader could be reported as LEADER of the new term, a
        term another member leads (seen by ``make chaos`` as two leaders in one
        term). Such a torn read is reported as FOLLOWER, which the member is
        about to be.
        """
        s = self.syncobj.getStatus()
        state = _RAFT_STATES.get(s["state"], str(s["state"]))
        if state == "LEADER" and s["raft_term"] != self._leader_term:
            state = "FOLLOWER"
        return {
            "state": state,
            "term": s["raft_term"],
            "leader": getattr(s["leader"], "address", None) if s["leader"] is not None else None,
            "commit_index": s["commit_idx"],
            "applied_index": s["last_applied"],
            "log_size": s["log_len"],
            "has_quorum": bool(s["has_quorum"]),
            "ready": bool(self.syncobj.isReady()),
            # write failures of the journal (full disk, I/O errors): raftnode/durability.py
            "journal": durability.journal_health(self.syncobj),
            "ticks": self.ticks.figures(),
        }

    def peer_connections(self) -> dict[str, bool]:
        """``{raft address: connected}`` for every other voting member, as this member's transport sees it now.

        Cheap (no network I/O); with this member, a majority of connected members
        is what ``has_quorum`` of :meth:`status` counts.
        """
        return {node.address: bool(self.syncobj.isNodeConnected(node)) for node in list(self.syncobj.otherNodes)}

    def wait_ready(self, timeout: float = 30.0) -> bool:
        """Wait until this member has applied the log it found at start and a leader exists.

        Returns ``True`` when ready, ``False`` on timeout (seconds).
        """
        ev = threading.Event()
        deadline_step = 0.02
        waited = 0.0
        while waited < timeout:
            if self.syncobj.isReady() and self.leader is not None:
                return True
            ev.wait(deadline_step)
            waited += deadline_step
        return False

    # ---------------------------------------------------------------- commands
    def propose(self, name: str, *args: Any, timeout: float = 10.0) -> dict[str, Any]:
        """Commit the replicated command ``name(*args)`` and return its result.

        Waits up to ``timeout`` seconds in all, for a leader as well as for the
        commit. While no leader is known (an election, a partition) the command
        is proposed again every 20 ms; it is re-proposed only after failures that
        prove it was not appended to any log (no leader, not the leader, queue
        full, or overwritten by a new leader), so it applies at most once. After
        the timeout nothing of it is left queued on this member: pysyncobj's
        ``commandsWaitLeader`` is off, so a command cannot apply long after its
        caller gave up. A command the leader did append may still commit after a
        timeout (the usual unknown outcome of a timed-out write). Inside
        :func:`without_leader_wait` there is a single attempt, made only on the
        leader and within the block's time budget.

        Errors: :class:`CommandRejected` (apply refused; has ``code``),
        :class:`RaftUnavailable` (not committed within ``timeout`` seconds, its
        outcome became unknown when the leader changed, or this member was
        destroyed).
        """
        method = getattr(self.state, name)
        attempt = _single_attempt.get()
        if attempt is not None:
            if attempt.deadline is not None:
                timeout = min(timeout, attempt.deadline - time.monotonic())
                if timeout <= 0:
                    raise RaftUnavailable(f"Raft command {name} not proposed: the forwarding member's time budget "
                                          "ran out")
            if not self.is_leader:
                attempt.not_leader = attempt.committed == 0
                raise RaftUnavailable(f"Raft command {name} not proposed: this member is not the Raft leader")
        deadline = time.monotonic() + timeout
        while True:
            remaining = deadline - time.monotonic()
            if remaining <= 0:
                raise RaftUnavailable(f"Raft command {name} not committed: no leader accepted it within "
                                      f"{timeout:g} s")
            if self._stopped.is_set():
                raise _stopped_error(name)
            try:
                if self.group_commit is not None and name != BATCH_COMMAND and self.is_leader:
                    result = self.group_commit.submit(name, args, remaining)
                else:
                    result = method(*args, sync=True, timeout=remaining)
                break
            except AttributeError as exc:
                # destroy() ran meanwhile: pysyncobj's replicated wrapper lost its SyncObj
                # (a background proposer racing the node's stop, seen in tests/connect/test_health.py)
                if not self._stopped.is_set():
                    raise
                raise _stopped_error(name) from exc
            except SyncObjException as exc:
                code = exc.errorCode
                reason = _FAIL_NAMES.get(code, code) if isinstance(code, int) else code
                if code not in _NOT_APPENDED or attempt is not None:
                    if attempt is not None and code in _NOT_APPENDED:
                        attempt.not_leader = attempt.committed == 0
                    if code == _TIMEOUT and self.leader is None:
                        # still in this member's queue when the time ran out (a starved tick loop) with
                        # no leader known: its outcome is unknown like any timeout, but say why
                        raise RaftUnavailable(f"Raft command {name} not committed: no leader accepted it within "
                                              f"{timeout:g} s (no leader is known; outcome unknown)") from exc
                    raise RaftUnavailable(f"Raft command {name} not committed: {reason}") from exc
                if time.monotonic() + _RETRY_PAUSE_S >= deadline:
                    raise RaftUnavailable(f"Raft command {name} not committed: no leader accepted it within "
                                          f"{timeout:g} s (last answer: {reason})") from exc
                time.sleep(_RETRY_PAUSE_S)
        if attempt is not None:
            attempt.committed += 1
        if isinstance(result, dict) and "rejected" in result:
            raise CommandRejected(result["rejected"], int(result.get("code", 409)))
        return result

    def read_barrier(self, timeout: float = 5.0) -> None:
        """Return once this member has applied every entry committed before the call.

        After it, a read of :attr:`state` on this member sees every write acknowledged before the
        call: a linearizable read, where a plain read of a follower (or of a deposed leader that
        does not know it yet) may be seconds behind. Raft's simplest form of it: the read goes
        through the log (Ongaro, *Consensus: Bridging Theory and Practice*, 2014, §6.4). A no-op
        entry (an empty group-commit batch, which changes nothing on any member) is committed
        through the leader (pysyncobj forwards it from a follower) and awaited here; a member
        applies entries in log order, so everything committed before it is applied first. Costs one
        commit round; for reads that must not go back in time, such as a task's offsets at start.
        Concurrent callers share entries (:class:`raftnode.barrier.ReadBarriers`): a burst of reads
        costs about two entries.

        Errors: :class:`RaftUnavailable` when it is not applied here within ``timeout`` seconds (no
        leader, this member cut off or not catching up): the caller should read elsewhere or later.
        """
        self.read_barriers.wait(timeout)

    def propose_async(self, name: str, *args: Any, callback: Callable[[Any, Any], None]) -> None:
        """Propose without waiting; ``callback(result, error)`` runs on the Raft thread."""
        getattr(self.state, name)(*args, callback=callback)

    def raft_members(self) -> list[str]:
        """Raft addresses of all voting members as this member knows them (self first)."""
        return [self.config.self_address] + sorted(n.address for n in self.syncobj.otherNodes)

    def _change_membership(self, action: str, address: str, timeout: float) -> None:
        if not self._membership_lock.acquire(blocking=False):
            raise CommandRejected("another Raft membership change is in progress; retry when it is done", 409)
        try:
            done = threading.Event()
            outcome: list = []

            def callback(result, error):
                outcome.append(error)
                done.set()

            if action == "add":
                self.syncobj.addNodeToCluster(address, callback=callback)
            else:
                self.syncobj.removeNodeFromCluster(address, callback=callback)
            if not done.wait(timeout):
                raise RaftUnavailable(f"Raft membership change ({action} {address}) not committed in {timeout:.0f} s")
            if outcome[0] != 0:
                raise CommandRejected(f"Raft refused to {action} member {address} (pysyncobj reason {outcome[0]})", 409)
        finally:
            self._membership_lock.release()

    def add_member(self, address: str, timeout: float = 10.0) -> None:
        """Add the voting member ``address`` (``host:port``); one change at a time.

        Start the new member first with ``peers`` = the current members. Errors:
        :class:`CommandRejected` (a change is in progress, already a member),
        :class:`RaftUnavailable`.
        """
        if address in self.raft_members():
            raise CommandRejected(f"{address} is already a Raft member", 409)
        self._change_membership("add", address, timeout)

    def remove_member(self, address: str, timeout: float = 10.0) -> None:
        """Remove the voting member ``address``; one change at a time. Errors as :meth:`add_member`."""
        if address not in self.raft_members():
            raise CommandRejected(f"{address} is not a Raft member", 404)
        if address == self.config.self_address:
            raise CommandRejected("a member cannot remove itself; ask another member", 409)
        self._change_membership("remove", address, timeout)

    def destroy(self) -> None:
        """Stop the Raft thread and close the journal; returns when both are done."""
        self._stopped.set()
        self.syncobj.destroy_synchronous()
        durability.stop_snapshot_writer(self.syncobj)  # no snapshot renamed into place after the stop

    #: a connected follower this many entries behind the commit index whose match index has not
    #: moved for LAG_SECONDS is sent a snapshot (see :meth:`_catch_up_loop`)
    LAG_ENTRIES = 200
    LAG_SECONDS = 5.0

    def _catch_up_loop(self) -> None:
        """On the leader: give a follower that log replication cannot bring back a snapshot instead.

        Found by ``tests/integration/test_partition.py``: a leader cut off under load appends
        entries of its own term that are never committed; after the heal, pysyncobj's
        replication walks the new leader's next index back one entry per reply while replies to
        the batches already in flight set it forward again to the follower's log end, so a
        follower far behind with a divergent tail can stay stuck (and serve stale reads) until
        the next log compaction, minutes later. A compaction forced now moves the leader's log
        start past the follower's next index, and pysyncobj then sends it the snapshot, which
        replaces its log. Reads only ``getStatus()``; acts at most every 30 s.
        """
        stuck: dict[str, tuple[float, int]] = {}
        last_forced = 0.0
        while not self._stopped.wait(1.0):
            try:
                s = self.syncobj.getStatus()
            except Exception:  # stopping
                continue
            if s.get("state") != 2:
                stuck.clear()
                continue
            now, commit = time.monotonic(), int(s.get("commit_idx") or 0)
            for key, match in list(s.items()):
                if not key.startswith("match_idx_server_"):
                    continue
                node = key[len("match_idx_server_"):]
                if s.get("partner_node_status_server_" + node) != 2 or commit - int(match) < self.LAG_ENTRIES:
                    stuck.pop(node, None)
                    continue
                since, seen = stuck.setdefault(node, (now, int(match)))
                if int(match) > seen:  # moving: replication works
                    stuck[node] = (now, int(match))
                elif now - since >= self.LAG_SECONDS and now - last_forced >= 30.0:
                    log.warning("raft: follower %s is stuck %d entries behind (match index %s); sending it a "
                                "snapshot (forced log compaction)", node, commit - int(match), match)
                    self.syncobj.forceLogCompaction()
                    last_forced = now
                    stuck.pop(node)

    def _state_changed(self, old: int, new: int) -> None:
        is_leader = new == 2
        # Runs on the Raft thread right after the state changed; a new leader's term is already set.
        self._leader_term = self.term if is_leader else None
        if is_leader != self._was_leader:
            self._was_leader = is_leader
            log.info("raft: %s (term %s)", "became leader" if is_leader else "lost leadership", self.term)
            if self._on_leader_change:
                try:
                    self._on_leader_change(is_leader, self.term)
                except Exception:  # a callback must never kill the Raft thread
                    log.exception("leader change callback failed")
