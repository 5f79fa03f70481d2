"""Kernel thread names (``raftnode.osthreads``): the Raft thread and granian's REST threads name
themselves (granian's or waitress's), so ``top -H`` and ``benchmarks/cluster`` can tell them from the other threads."""
from __future__ import annotations

import sys
import threading

import pytest
import requests

from raftnode.osthreads import name_os_thread
from tools.launcher import wait_for

pytestmark = pytest.mark.skipif(not sys.platform.startswith("linux"), reason="prctl(PR_SET_NAME) is Linux's")


def _comm(tid: int) -> str:
    with open(f"/proc/self/task/{tid}/comm") as fh:
        return fh.read().strip()


def test_a_thread_gets_the_name_given_cut_to_the_kernel_s_15_bytes():
    seen = {}

    def run():
        seen["set"] = name_os_thread("a-rather-long-thread-name")
        seen["comm"] = _comm(threading.get_native_id())

    t = threading.Thread(target=run)
    t.start()
    t.join()
    assert seen == {"set": True, "comm": "a-rather-long-t"}
    assert _comm(threading.get_native_id()) != "a-rather-long-t"  # only the calling thread was renamed


def test_the_raft_thread_is_named_raft(tmp_path):
    from raftnode import RaftConfig, RaftNode
    from webapp.kafka.embedded import free_port

    raft = RaftNode(RaftConfig(self_address=f"127.0.0.1:{free_port()}", data_dir=str(tmp_path / "raft"),
                               password="test-secret"))
    try:
        assert raft.wait_ready(15), raft.status()
        tick_thread = raft.syncobj._SyncObj__thread  # pysyncobj's own (autoTick) thread
        wait_for(lambda: _comm(tick_thread.native_id) == RaftNode.RAFT_THREAD_NAME, 15, 0.02,
                 "the Raft thread's kernel name")
    finally:
        raft.destroy()


@pytest.mark.parametrize("kind", ["granian", "waitress"])
def test_the_rest_server_s_python_threads_name_themselves_rest_on_their_first_request(kind):
    from webapp.connect.restserver import REST_THREAD_NAME
    from tests.connect.test_rest_server import _app, serving

    named = {}

    def app_thread_name(environ, start_response):
        named["comm"] = _comm(threading.get_native_id())
        return _app(environ, start_response)

    with serving(app_thread_name, kind, threads=1) as (_, port):
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=10).status_code == 200
    assert named["comm"] == REST_THREAD_NAME
