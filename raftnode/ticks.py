"""Why a Raft member elected, stepped down or went quiet: the timing of its Raft thread's ticks.

pysyncobj runs a member on one thread that ticks every few milliseconds: check the election
deadline (a follower) or the majority's answers (a leader), apply committed entries, send
append-entries, then poll the sockets and handle what arrived. A leader whose thread does not
tick sends nothing, and its followers elect after their 1-2 s timeout; a follower whose thread
does not tick cannot hear a leader that is sending. Either way the cluster changes term with
every member alive, and the coordinator starts afresh: that is what an operator sees, and not
why. :class:`TickWatch` keeps the figures that say why and writes them into the log where it
happens:

* a gap between two tick starts of at least ``warn_after_s`` (half the election timeout by
  default) is logged with its parts: the tick's work before its poll (applying entries, log
  compaction, sending), the poll (reading and handling messages: a follower's journal writes),
  the wait to run again (the interpreter lock held by other threads), and how much of the gap
  the process spent in stop-the-world pauses (garbage collections, when ``pauses`` is given);
* a member that starts an election says how long it had heard nothing from the leader and the
  longest gap between its own ticks just before;
* a leader that steps down (no answer from a majority within ``leaderFallbackTimeout``) says
  how long ago each follower last answered, and its own longest recent gap.

A leader's long gap and its followers' elections a moment later, read side by side from their
logs, tell a starved leader from a lost network. The figures also go to ``RaftNode.status()``
(``ticks``) and from there to ``/metrics``.

Must not import Django or anything from ``webapp``.
"""
from __future__ import annotations

import logging
import time
from collections import deque
from typing import Any, Callable

__all__ = ["TickWatch"]

log = logging.getLogger(__name__)

#: seconds over which "the longest recent gap" is taken (a few election timeouts)
RECENT_S = 10.0
#: gaps shorter than this are not kept for "the longest recent gap" (seconds)
KEEP_GAP_S = 0.05


class TickWatch:
    """Timing of one member's ticks (see the module docstring). Called only on the Raft thread,
    except :meth:`figures`, which reads plain attributes.

    Args:
        warn_after_s: a gap between two tick starts this long or longer is logged (seconds).
        pauses: returns the seconds this process has spent in stop-the-world pauses so far
            (cumulative, e.g. garbage collections); ``None`` when not known.
        warn_interval_s: at most one gap warning per this many seconds; the ones held back are
            counted in the next.
        clock: ``time.monotonic`` (seconds), replaceable in tests.
        cpu_clock: the calling (Raft) thread's CPU seconds, ``time.thread_time``: what of a slow tick was its
            own work and what was waiting for the interpreter lock or the CPU.
        journal_writes: returns the wall seconds the Raft thread has spent writing its journal so far
            (``ChecksummedFileJournal.write_seconds``): what of a slow tick was waiting for the disk.
        process_cpu: the process's CPU seconds, all threads (``time.process_time``): the other threads'
            share of a gap tells a thread holding the interpreter lock (their CPU near the gap) from a
            machine without CPU to give (near zero).

    Attributes (all since the watch was made): ``longest_gap_s``, ``held_up`` (gaps of at least
    ``warn_after_s``), ``elections_started``, ``step_downs``.
    """

    def __init__(self, warn_after_s: float, pauses: Callable[[], float] | None = None,
                 warn_interval_s: float = 10.0, clock: Callable[[], float] = time.monotonic,
                 cpu_clock: Callable[[], float] = time.thread_time,
                 journal_writes: Callable[[], float] | None = None,
                 process_cpu: Callable[[], float] = time.process_time) -> None:
        self.warn_after_s = warn_after_s
        self.warn_interval_s = warn_interval_s
        self._pauses = pauses or (lambda: 0.0)
        self._writes = journal_writes or (lambda: 0.0)
        self._writes_at_begin = 0.0
        self._process_cpu = process_cpu
        self._process_at_begin = 0.0
        self._clock = clock
        self._cpu = cpu_clock
        self._cpu_at = (0.0, 0.0, 0.0)  # the calling thread's CPU seconds at the last tick's start, poll, end
        self._events: list[str] | None = None  # what the last finished tick did besides its usual work
        self.longest_gap_s = 0.0
        self.held_up = 0
        self.elections_started = 0
        self.step_downs = 0
        self._begin: float | None = None  # start of the current (or last) tick
        self._polling: float | None = None  # when the current tick reached its poll
        self._end: float | None = None  # end of the last tick
        self._paused_at_begin = 0.0
        self._applied_at_begin = 0  # last applied index when the current (or last) tick started
        self._applied_in_tick = 0  # entries the last finished tick applied
        self._role_at_begin: tuple[str, int] | None = None  # (role, term) when the current (or last) tick started
        self._recent: deque[tuple[float, float]] = deque(maxlen=64)  # (tick start, gap before it), gaps >= KEEP_GAP_S
        self._last_warning = float("-inf")
        self._held_back = 0
        #: monotonic time of the last append-entries read from a leader (``None`` before the first)
        self.heard_leader: float | None = None

    def set_journal_writes(self, journal_writes: Callable[[], float]) -> None:
        """Name the member's journal once it exists (``journal_writes`` as in the constructor)."""
        self._writes = journal_writes
        self._writes_at_begin = journal_writes()

    # ----------------------------------------------------------- Raft thread
    def tick_started(self, applied: int, role: str, term: int) -> None:
        """At the start of a tick: measure the gap since the previous tick started (``applied``: the
        member's last applied index now; ``role``/``term``: now, for the warning, which names the role the
        gap began in: a leader held up learns of the new term in the gap's own poll, and is a follower by
        its end)."""
        now = self._clock()
        paused, written, process = self._pauses(), self._writes(), self._process_cpu()
        cpu = self._cpu()
        begin, self._begin = self._begin, now
        if begin is not None:
            gap = now - begin
            if gap > self.longest_gap_s:
                self.longest_gap_s = gap
            if gap >= KEEP_GAP_S:
                self._recent.append((now, gap))
            if gap >= self.warn_after_s:
                self.held_up += 1
                others = (process - self._process_at_begin) - (cpu - self._cpu_at[0])
                self._warn_gap(now, begin, gap, paused - self._paused_at_begin, written - self._writes_at_begin,
                               others, self._role_at_begin or (role, term), (role, term))
        self._role_at_begin = (role, term)
        self._paused_at_begin, self._applied_at_begin, self._writes_at_begin = paused, applied, written
        self._process_at_begin = process
        self._cpu_at = (cpu, 0.0, 0.0)

    def poll_started(self) -> None:
        """Just before the tick's poll (the last on-tick callback)."""
        self._polling = self._clock()
        self._cpu_at = (self._cpu_at[0], self._cpu(), 0.0)

    def tick_ended(self, applied: int, events: list[str] | None = None) -> None:
        """At the end of a tick (``applied``: the member's last applied index now; ``events``: what else the
        tick did that takes time, e.g. a log compaction's fork or journal trim, for the warning)."""
        self._end = self._clock()
        self._cpu_at = (self._cpu_at[0], self._cpu_at[1], self._cpu())
        self._applied_in_tick = applied - self._applied_at_begin
        self._events = events

    def leader_heard(self) -> None:
        """An append-entries from the leader was read."""
        self.heard_leader = self._clock()

    def election_started(self, term: int, leader: str | None, heard_at: float | None,
                         timeout_range: tuple[float, float]) -> None:
        """This member (a follower or a candidate) has just started an election for ``term``.

        ``leader``: the leader it knew before (address), if any; ``heard_at``: :attr:`heard_leader` as
        the election check found it (clock seconds); ``timeout_range``: the election timeout (seconds).
        """
        self.elections_started += 1
        now = self._clock()
        if heard_at is None:  # a cluster's first election, or a member started into one: nothing went wrong
            heard, level = "has not heard from any leader since it started", logging.INFO
        else:
            heard, level = (f"heard nothing from the leader{f' ({leader})' if leader else ''} for "
                            f"{now - heard_at:.2f} s", logging.WARNING)
        log.log(level, "raft: this member starts an election for term %d: it %s (election timeout %g-%g s); %s",
                term, heard, timeout_range[0], timeout_range[1], self._own_ticks(now))

    def stepped_down(self, term: int, answered_ago: dict[str, float], fallback_s: float) -> None:
        """This member has just stopped leading ``term``: no answer from a majority within ``fallback_s``.
        ``answered_ago``: seconds since each follower (its address) last answered."""
        self.step_downs += 1
        now = self._clock()
        answers = ", ".join(f"{node} {ago:.2f} s ago" for node, ago in sorted(answered_ago.items())) or "none"
        log.warning("raft: stepping down as leader of term %d: no answer from a majority within %g s (last "
                    "answers: %s); %s", term, fallback_s, answers, self._own_ticks(now))

    # ------------------------------------------------------------- readers
    def longest_recent(self, now: float | None = None) -> float:
        """The longest gap between two tick starts over the last :data:`RECENT_S` seconds (0 if none
        reached :data:`KEEP_GAP_S`), the current one (since the last tick started) included."""
        now = self._clock() if now is None else now
        current = now - self._begin if self._begin is not None else 0.0
        kept = [gap for at, gap in list(self._recent) if now - at <= RECENT_S]
        return max(kept + [current if current >= KEEP_GAP_S else 0.0])

    def figures(self) -> dict[str, Any]:
        """``{"longest_gap_s", "held_up", "elections_started", "step_downs"}`` (see the class docstring)."""
        return {"longest_gap_s": round(self.longest_gap_s, 4), "held_up": self.held_up,
                "elections_started": self.elections_started, "step_downs": self.step_downs}

    # ------------------------------------------------------------- internals
    def _own_ticks(self, now: float) -> str:
        """The longest recent gap between this member's ticks, as the election and step-down messages say it."""
        longest = self.longest_recent(now)
        if longest < KEEP_GAP_S:
            return f"this member's own ticks ran on time (no gap of {KEEP_GAP_S:g} s in the last {RECENT_S:g} s)"
        return f"the longest gap between this member's own ticks in the last {RECENT_S:g} s was {longest:.2f} s"

    def _warn_gap(self, now: float, begin: float, gap: float, paused: float, written: float, others: float,
                  began: tuple[str, int], ended: tuple[str, int]) -> None:
        """Log one long gap with its parts (rate-limited by ``warn_interval_s``); ``began``/``ended``: the
        member's ``(role, term)`` at the gap's start and end."""
        if now - self._last_warning < self.warn_interval_s:
            self._held_back += 1
            return
        held, self._held_back, self._last_warning = self._held_back, 0, now
        polling = self._polling if self._polling is not None and self._polling >= begin else None
        end = self._end if self._end is not None and self._end >= begin else None
        if polling is not None and end is not None:
            cpu_begin, cpu_polling, cpu_end = self._cpu_at
            parts = (f"{polling - begin:.2f} s in the tick before its poll ({self._applied_in_tick} entries "
                     f"applied; {cpu_polling - cpu_begin:.2f} s of it on the CPU), "
                     f"{end - polling:.2f} s in the poll (reading and handling messages; {cpu_end - cpu_polling:.2f} s "
                     f"on the CPU), {now - end:.2f} s waiting to run again")
            if self._events:
                parts += f"; in that tick {' and '.join(self._events)}"
        else:  # the tick did not reach its end (an exception inside pysyncobj): only the whole is known
            parts = "the tick did not finish normally"
        role, term = began
        became = "" if ended == began else f"; {ended[0].lower()} of term {ended[1]} by its end"
        log.warning("raft: %.2f s between two ticks of this member's Raft thread (%s, term %d%s): %s; "
                    "journal writes %.2f s of it (waiting for the disk, and for the interpreter lock after it), "
                    "stop-the-world pauses (garbage collection) %.2f s; the process's other threads used %.2f s of "
                    "CPU meanwhile (near the gap: they held the interpreter lock; near 0: the machine had no CPU "
                    "to give or the disk held it). A leader sends nothing meanwhile (its followers elect after "
                    "their timeout); a follower hears nothing%s",
                    gap, role.lower(), term, became, parts, written, paused, max(0.0, others),
                    f"; {held} more such gaps since the last warning" if held else "")
