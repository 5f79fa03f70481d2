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

from raftnode import RaftConfig, RaftNode
from tools.launcher import wait_for
from webapp.kafka.embedded import free_port


def _cluster(tmp_path) -> list[RaftNode]:
    addrs = [f"127.0.0.1:{free_port()}" for _ in range(3)]
    # connections live through the hold-up: only the election deadline is under test
    return [RaftNode(RaftConfig(self_address=addrs[i], peers=[a for a in addrs if a != addrs[i]],
                                data_dir=str(tmp_path / f"m{i}"), password="secret", connection_timeout=10.0))
            for i in range(3)]


def test_a_held_up_follower_does_not_depose_a_live_leader(tmp_path):
    nodes = _cluster(tmp_path)
    try:
        leader = wait_for(lambda: next((n for n in nodes if n.is_leader and n.status()["ready"]), None), 30,
                          interval=0.02, what="a leader")
        follower = next(n for n in nodes if n is not leader)
        wait_for(lambda: follower.leader is not None, 30, interval=0.02, what="the follower to know its leader")
        term = leader.term
        hold = 2 * follower.config.raft_max_timeout  # well past any election deadline drawn before it
        transport = follower.syncobj._SyncObj__transport
        handle = transport._onMessageReceivedCallback
        armed, resumed = threading.Event(), threading.Event()

        def on_message(node, message):
            handle(node, message)  # an append-entries resets the deadline, then its handling is slow
            if armed.is_set() and isinstance(message, dict) and message.get("type") == "append_entries":
                armed.clear()
                time.sleep(hold)  # as a slow journal write or a starved thread would
                resumed.set()

        transport.setOnMessageReceivedCallback(on_message)
        armed.set()
        assert resumed.wait(30), "the follower never handled an append-entries"
        # the leader went on sending meanwhile: what waits in the socket must count before any election
        leader.commands.register_member(node_id="probe", info={"roles": ["worker"]}, timeout=15)
        wait_for(lambda: "probe" in follower.state.members, 15, interval=0.02, what="the follower to catch up")
        assert leader.is_leader and leader.term == term
        assert {n.term for n in nodes} == {term}, "the held-up follower started an election"
    finally:
        for n in nodes:
            n.destroy()
