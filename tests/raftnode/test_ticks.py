"""Why a member elected, stepped down or went quiet, in its log and its status (``raftnode.ticks``).

An election with every member alive (a leader's Raft thread starved) looks, from the outside, like
any other: the term moves and the coordinator starts afresh. The members' logs must say which it
was: the held-up leader logs the gap between its ticks with its parts, the follower that elected
says how long it had heard nothing from the leader, and a leader that steps down says when its
followers last answered.
"""
from __future__ import annotations

import logging
import threading
import time

import pytest

from raftnode.ticks import KEEP_GAP_S, TickWatch
from tools.launcher import wait_for

from .members import MessageTap, destroy, raft_members, ready_leader


class _Clock:
    def __init__(self) -> None:
        self.now = 100.0
        self.cpu = 3.0  # the Raft thread's CPU seconds
        self.others = 10.0  # the process's other threads' CPU seconds

    def __call__(self) -> float:
        return self.now

    def thread_time(self) -> float:
        return self.cpu


def _ticks(watch: TickWatch, clock: _Clock, applied: int, *, work: float, poll: float, wait: float,
           pause=None, work_cpu: float = 0.0, events: list[str] | None = None) -> None:
    """One tick of ``work`` seconds (``work_cpu`` of them on the CPU) before its poll, ``poll`` seconds in it, then
    ``wait`` seconds before the next; ``pause()`` is called inside it (a collection during the tick)."""
    watch.tick_started(applied, "LEADER", 7)
    if pause is not None:
        pause()
    clock.now += work
    clock.cpu += work_cpu
    watch.poll_started()
    clock.now += poll
    watch.tick_ended(applied + 3, events)
    clock.now += wait


def test_a_long_gap_is_logged_with_its_parts_and_garbage_collection(caplog):
    clock, paused, written = _Clock(), [0.0], [2.0]
    watch = TickWatch(warn_after_s=0.5, pauses=lambda: paused[0], clock=clock, cpu_clock=clock.thread_time,
                      journal_writes=lambda: written[0], process_cpu=lambda: clock.cpu + clock.others)
    caplog.set_level(logging.WARNING, logger="raftnode.ticks")
    _ticks(watch, clock, 10, work=0.001, poll=0.004, wait=0.0)
    _ticks(watch, clock, 13, work=0.001, poll=0.004, wait=0.0)  # normal ticks: nothing said
    assert not caplog.records and watch.held_up == 0
    _ticks(watch, clock, 16, work=0.6, poll=0.2, wait=0.1, work_cpu=0.15,
           pause=lambda: (paused.__setitem__(0, 0.4), written.__setitem__(0, 2.25),
                          setattr(clock, "others", clock.others + 0.7)),
           events=["a log compaction started (its snapshot writer forked)"])
    watch.tick_started(19, "LEADER", 7)  # the gap ends here: 0.9 s
    (record,) = caplog.records
    text = record.getMessage()
    assert "0.90 s between two ticks" in text and "leader, term 7" in text
    assert "0.60 s in the tick before its poll (3 entries applied; 0.15 s of it on the CPU)" in text
    assert "0.20 s in the poll (reading and handling messages; 0.00 s on the CPU)" in text
    assert "0.10 s waiting to run again; in that tick a log compaction started (its snapshot writer forked)" in text
    assert "journal writes 0.25 s of it (waiting for the disk" in text
    assert "(garbage collection) 0.40 s; the process's other threads used 0.70 s of CPU meanwhile" in text
    assert watch.figures() == {"longest_gap_s": 0.9, "held_up": 1, "elections_started": 0, "step_downs": 0}


def test_a_gap_is_named_by_the_role_it_began_in_when_the_member_stepped_down_during_it(caplog):
    # a held-up leader reads the new term in the gap's own poll: by the next tick it is a follower
    clock = _Clock()
    watch = TickWatch(warn_after_s=0.5, clock=clock)
    caplog.set_level(logging.WARNING, logger="raftnode.ticks")
    _ticks(watch, clock, 0, work=0.001, poll=3.0, wait=0.0)  # starts as leader of term 7 (see _ticks)
    watch.tick_started(0, "FOLLOWER", 8)
    (record,) = caplog.records
    assert "(leader, term 7; follower of term 8 by its end)" in record.getMessage()


def test_gap_warnings_are_rate_limited_and_count_what_they_held_back(caplog):
    clock = _Clock()
    watch = TickWatch(warn_after_s=0.5, warn_interval_s=10.0, clock=clock)
    caplog.set_level(logging.WARNING, logger="raftnode.ticks")
    for _ in range(4):  # four 1 s gaps within 10 s: one warning
        _ticks(watch, clock, 0, work=0.0, poll=0.0, wait=1.0)
    clock.now += 10.0
    _ticks(watch, clock, 0, work=0.0, poll=0.0, wait=1.0)
    watch.tick_started(0, "FOLLOWER", 7)
    messages = [r.getMessage() for r in caplog.records]
    assert len(messages) == 2, messages
    # gaps end at each tick start: 1 s (warned), 1 s, 1 s (held back), 11 s (warned, 10 s later), 1 s (held back)
    assert "11.00 s between two ticks" in messages[1] and "2 more such gaps since the last warning" in messages[1]
    assert "(3 entries applied; " in messages[1]
    assert watch.held_up == 5


def test_the_longest_recent_gap_forgets_old_gaps_and_counts_the_current_one():
    clock = _Clock()
    watch = TickWatch(warn_after_s=5.0, clock=clock)
    _ticks(watch, clock, 0, work=0.0, poll=0.0, wait=3.0)
    watch.tick_started(0, "FOLLOWER", 1)  # a 3 s gap, now
    assert watch.longest_recent() == 3.0
    clock.now += 11.0  # the 3 s gap is older than 10 s; the current tick started 11 s ago
    assert watch.longest_recent() == 11.0
    watch.tick_started(0, "FOLLOWER", 1)
    clock.now += KEEP_GAP_S / 2
    assert watch.longest_recent() == 11.0  # the 11 s gap just ended is kept
    clock.now += 10.0
    assert watch.longest_recent() == pytest.approx(10.0 + KEEP_GAP_S / 2)  # only the current one is left


def test_a_held_up_leader_and_the_election_it_causes_say_why_in_the_log(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="raftnode.ticks")
    _, nodes = raft_members(tmp_path, connection_timeout=10.0)  # connections live through the hold-up
    try:
        leader = ready_leader(nodes)
        followers = [n for n in nodes if n is not leader]
        wait_for(lambda: all(f.leader == leader.config.self_address for f in followers), 30, interval=0.02,
                 what="the followers to know the leader")
        term = leader.term
        hold = 2 * leader.config.raft_max_timeout  # past every follower's election timeout
        resumed = threading.Event()

        def on_message(node, message, handle):
            tap.armed.clear()
            time.sleep(hold)  # the leader's Raft thread held up, as a starved or collecting process holds it
            handle(node, message)
            resumed.set()

        leader.ticks.warn_interval_s = 0.0  # a gap of the loaded start-up must not hold this one's warning back
        tap = MessageTap(leader, on_message)
        tap.armed.set()
        assert resumed.wait(30), "the leader never handled a message"
        wait_for(lambda: any(n.term > term and n.is_leader for n in nodes), 30, interval=0.02,
                 what="a leader of a later term")
        wait_for(lambda: leader.ticks.held_up >= 1, 15, interval=0.02, what="the leader to count its held-up tick")
        assert leader.ticks.longest_gap_s >= hold
        assert leader.syncobj._SyncObj__raftLog.write_seconds > 0  # the journal's writes are timed for the watch
        electors = [f for f in followers if f.ticks.elections_started]
        assert electors, "no follower counted the election it started"
        assert sum(n.status()["ticks"]["elections_started"] for n in nodes) >= 1

        def said(*parts: str) -> list[str]:  # counted before logged: wait for the lines themselves
            return [m for m in (r.getMessage() for r in list(caplog.records)) if all(p in m for p in parts)]

        gaps = wait_for(lambda: said("between two ticks of this member's Raft thread (leader"), 15, interval=0.02,
                        what="the leader's gap in the log")
        # the term the gap began in; "; follower of term N by its end" follows when the new term arrived within it
        assert f"(leader, term {term})" in gaps[0] or f"(leader, term {term}; follower of term " in gaps[0], gaps
        elections = wait_for(lambda: said("this member starts an election for term",
                                          f"heard nothing from the leader ({leader.config.self_address}) for"),
                             15, interval=0.02, what="a follower's election in the log")
        silent = float(elections[0].split(") for ")[1].split(" s")[0])
        assert silent >= leader.config.raft_min_timeout  # it waited out its election timeout
    finally:
        destroy(nodes)


def test_a_leader_that_steps_down_names_its_followers_last_answers(tmp_path, caplog):
    caplog.set_level(logging.WARNING, logger="raftnode.ticks")
    _, nodes = raft_members(tmp_path)
    try:
        leader = ready_leader(nodes)
        term = leader.term
        for n in nodes:
            if n is not leader:
                n.destroy()  # nobody answers any more
        wait_for(lambda: leader.ticks.step_downs >= 1, 30, interval=0.02, what="the leader to step down")
        assert not leader.is_leader
        (message,) = wait_for(lambda: [r.getMessage() for r in list(caplog.records)
                                       if "stepping down as leader" in r.getMessage()], 15, interval=0.02,
                              what="the step-down in the log")  # counted before logged
        assert f"leader of term {term}: no answer from a majority within 2 s" in message
        answers = message.split("(last answers: ")[1].split(")")[0].split(", ")
        assert len(answers) == 2 and all(float(a.split()[1]) >= 2.0 for a in answers), message
    finally:
        destroy(nodes)


def test_a_log_compaction_is_named_in_the_gap_of_the_tick_that_made_it(tmp_path, caplog):
    """The member tells its own ticks' compaction events to the watch (pysyncobj's serializer, read in
    ``_SyncObj._onTick``): every gap is logged here, and a forced compaction must appear in them."""
    caplog.set_level(logging.WARNING, logger="raftnode.ticks")
    _, nodes = raft_members(tmp_path)
    try:
        leader = ready_leader(nodes)
        for i in range(5):
            leader.commands.register_member(node_id=f"m{i}", info={"roles": ["worker"]}, timeout=15)
        leader.ticks.warn_after_s, leader.ticks.warn_interval_s = 0.0, 0.0  # every gap said, none held back
        leader.syncobj.forceLogCompaction()

        def said(what: str) -> bool:
            return any(what in r.getMessage() for r in caplog.records)

        wait_for(lambda: said("a log compaction started (its snapshot writer forked)")
                 and said("a log compaction ended (the journal trimmed to the new snapshot)"), 30, interval=0.05,
                 what="the compaction's fork and trim in the leader's tick gaps")
    finally:
        destroy(nodes)
