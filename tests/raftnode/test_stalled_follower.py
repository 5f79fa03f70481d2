"""A follower whose tick thread was held up reads the leader's messages before it starts an election.

pysyncobj checks a follower's election deadline at the start of its tick and reads the network at
the end: a follower held up for longer than the election timeout (GIL contention, a slow journal
write) started an election although the leader's append-entries waited in its socket, and the
leader stepped down, to be elected again a moment later (benchmarks/scale: a new term every
20-40 s at 10,000 connectors, none with a leader gone).
"""
from __future__ import annotations

import threading
import time

from tools.launcher import wait_for

from .members import MessageTap, destroy, is_append_entries, raft_members, ready_leader


def test_a_held_up_follower_does_not_depose_a_live_leader(tmp_path):
    _, nodes = raft_members(tmp_path, connection_timeout=10.0)  # connections live through the hold-up: only
    try:                                                        # the election deadline is under test
        leader = ready_leader(nodes)
        follower = next(n for n in nodes if n is not leader)
        wait_for(lambda: follower.leader is not None, 30, interval=0.02, what="the follower to know its leader")
        term = leader.term
        hold = 2 * follower.config.raft_max_timeout  # well past any election deadline drawn before it
        resumed = threading.Event()

        def on_message(node, message, handle):
            handle(node, message)  # an append-entries resets the deadline, then its handling is slow
            if is_append_entries(message):
                tap.armed.clear()
                time.sleep(hold)  # as a slow journal write or a starved thread would
                resumed.set()

        tap = MessageTap(follower, on_message)
        tap.armed.set()
        assert resumed.wait(30), "the follower never handled an append-entries"
        # the leader went on sending meanwhile: what waits in the socket must count before any election
        leader.commands.register_member(node_id="probe", info={"roles": ["worker"]}, timeout=15)
        wait_for(lambda: "probe" in follower.state.members, 15, interval=0.02, what="the follower to catch up")
        assert leader.is_leader and leader.term == term
        assert {n.term for n in nodes} == {term}, "the held-up follower started an election"
    finally:
        destroy(nodes)
