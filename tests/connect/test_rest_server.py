"""The node's REST server (granian by default, waitress as the fallback): connection limits, descriptors
past ``select()``'s reach, whole bodies under concurrency, and granian's embedding (its socket, its environ,
its idle timeout, its stop)."""
from __future__ import annotations

import argparse
import contextlib
import socket
import sys
import threading
import time

import pytest
import requests

from webapp.connect.restserver import SERVER_IDENT, SERVERS, GranianRESTServer, rest_server, waitress_server
from webapp.connect.nodeargs import add_node_arguments
from webapp.kafka.embedded import free_port


def _app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


@contextlib.contextmanager
def serving(app, kind="granian", **kw):
    """``(server, port)`` of a ``kind`` server for ``app`` running on a thread; closed after, and its thread
    must then end (``close()`` from another thread ends ``run()``)."""
    kw.setdefault("threads", 2)
    kw.setdefault("connection_limit", 100)
    port = kw.pop("port", None) or free_port()
    server = rest_server(app, kind=kind, host="127.0.0.1", port=port, **kw)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        yield server, port
    finally:
        server.close()
        thread.join(10)
        assert not thread.is_alive(), "close() did not end run()"


def test_default_server_is_granian_and_either_can_be_chosen(monkeypatch):
    monkeypatch.delenv("RAFTCONNECT_REST_SERVER", raising=False)
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    assert parser.parse_args([]).rest_server == "granian"
    assert parser.parse_args(["--rest-server", "waitress"]).rest_server == "waitress"
    with pytest.raises(SystemExit):
        parser.parse_args(["--rest-server", "gunicorn"])
    with pytest.raises(ValueError, match="unknown REST server"):
        rest_server(_app, kind="gunicorn", host="127.0.0.1", port=free_port(), threads=1, connection_limit=1)


def test_default_connection_limit_is_above_waitress_own(monkeypatch):
    monkeypatch.delenv("RAFTCONNECT_REST_CONNECTION_LIMIT", raising=False)
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    assert parser.parse_args([]).rest_connection_limit == 1000
    monkeypatch.setenv("RAFTCONNECT_REST_CONNECTION_LIMIT", "300")
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    assert parser.parse_args([]).rest_connection_limit == 300


@pytest.mark.parametrize("kind", SERVERS)
@pytest.mark.parametrize("limit, answers", [(1000, True), (100, False)])
def test_a_request_is_served_while_150_idle_connections_are_open(kind, limit, answers):
    """150 kept-alive connections (workers, forwarding members) and one more client: a limit of 100
    (waitress' default) stops accepting it; the node's limit does not. Once the idle ones close, it is served."""
    with serving(_app, kind, connection_limit=limit) as (server, port):
        idle = [socket.create_connection(("127.0.0.1", port)) for _ in range(150)]
        try:
            try:
                ok = requests.get(f"http://127.0.0.1:{port}/", timeout=3).text == "ok"
            except requests.RequestException:
                ok = False
            assert ok is answers
        finally:
            for s in idle:
                s.close()
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=10).text == "ok"


@pytest.mark.parametrize("kind", SERVERS)
def test_a_request_is_served_when_its_socket_is_numbered_past_select_s_limit(kind):
    """With ~1,000 connections open, the next socket's descriptor is 1024 or more, which ``select()`` cannot
    watch: waitress' default loop raised and the node stopped (benchmarks/scale, a leader at 100
    workers). The node's server waits with ``poll``."""
    import os
    import resource

    from webapp.connect.management.commands.runnode import raise_open_files_limit

    soft, _ = raise_open_files_limit(1200)
    assert soft == resource.RLIM_INFINITY or soft >= 1200, "this machine allows fewer than 1,200 open files"
    filler = []
    try:
        while True:  # take the low descriptors, so the server's sockets are numbered past 1024
            fd = os.open(os.devnull, os.O_RDONLY)
            filler.append(fd)
            if fd >= 1030:
                break
        with serving(_app, kind) as (server, port):
            assert server.socket.fileno() >= 1024
            assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).text == "ok"
    finally:
        for fd in filler:
            os.close(fd)


def _channel(server):
    a, b = socket.socketpair()
    return server.channel_class(server, a, ("127.0.0.1", 0), server.adj, map={}), (a, b)


def test_the_loop_does_not_watch_a_channel_for_writing_while_its_request_is_served():
    """waitress watches a channel for writing whenever its output buffer is not empty; while a task
    thread held it, ``poll`` returned at once, turn after turn (~100 turns per request under 32
    clients, benchmarks/cluster). The node's channel is watched only once the request is done, or
    when the buffer is over the high watermark (the task thread then waits for the loop), or to close."""
    server = waitress_server(_app, host="127.0.0.1", port=free_port(), threads=1, connection_limit=100)
    channel, sockets = _channel(server)
    try:
        channel.requests = [object()]  # a request a task thread is serving
        channel.total_outbufs_len = 100
        assert not channel.writable()
        channel.total_outbufs_len = server.adj.outbuf_high_watermark
        assert channel.writable()
        channel.total_outbufs_len = 0
        assert not channel.writable()
        channel.requests = []  # served: what is left goes out through the loop
        channel.total_outbufs_len = 100
        assert channel.writable()
        channel.total_outbufs_len = 0
        assert not channel.writable()
        channel.close_when_flushed = True
        assert channel.writable()
    finally:
        channel.requests, channel.total_outbufs_len = [], 0
        for s in sockets:
            s.close()
        server.close()


#: past waitress's ``outbuf_high_watermark`` (16 MiB): its task thread then waits for the loop to drain it
_BIG = b"x" * (17 * 1024 * 1024)


def _big_or_small(environ, start_response):
    """``/big`` answers :data:`_BIG`, anything else ``ok``."""
    body = _BIG if environ["PATH_INFO"] == "/big" else b"ok"
    start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
    return [body]


def _fetch_large_and_small(port: int) -> list[str]:
    """6 clients at once, 40 requests each on one connection (client 0 asks ``/big`` every 10th time):
    the answers that did not arrive whole. Fails if a client is still waiting after 120 s."""
    errors: list[str] = []

    def client(n: int) -> None:
        with requests.Session() as session:
            for i in range(40):
                path = "/big" if n == 0 and i % 10 == 0 else "/small"
                r = session.get(f"http://127.0.0.1:{port}{path}", timeout=30)
                if r.status_code != 200 or r.content != (_BIG if path == "/big" else b"ok"):
                    errors.append(f"{path}: {r.status_code}, {len(r.content)} bytes")

    clients = [threading.Thread(target=client, args=(n,)) for n in range(6)]
    for c in clients:
        c.start()
    for c in clients:
        c.join(120)
    assert not any(c.is_alive() for c in clients), "a client is still waiting for its response"
    return errors


def test_waitress_concurrent_large_and_small_responses_arrive_whole_with_few_loop_turns(monkeypatch):
    """Responses past the output buffer's high watermark (the task thread waits for the loop to drain
    it) and small ones, from 6 clients at once: every body arrives whole, and the loop turns a few
    times per request, not once per GIL hand-over."""
    import waitress.wasyncore as wasyncore

    turns = [0]
    poll2 = wasyncore.poll2

    def counted(timeout=0.0, map=None):
        turns[0] += 1
        return poll2(timeout, map)

    monkeypatch.setattr(wasyncore, "poll2", counted)
    port = free_port()
    server = waitress_server(_big_or_small, host="127.0.0.1", port=port, threads=4, connection_limit=100)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        errors = _fetch_large_and_small(port)
        assert not errors, errors[:5]
        assert turns[0] / 240 < 20, f"{turns[0]} loop turns for 240 requests"
    finally:
        server.close()


# ------------------------------------------------------------------ granian, embedded
def _echo(environ, start_response):
    """Answers with what the server gave: the body's length and some environ keys, as JSON."""
    import json

    size = int(environ.get("CONTENT_LENGTH") or 0)
    body = environ["wsgi.input"].read(size) if size else b""
    out = json.dumps({"length": len(body), "sha": __import__("hashlib").sha256(body).hexdigest(),
                      "path": environ["PATH_INFO"], "query": environ["QUERY_STRING"],
                      "method": environ["REQUEST_METHOD"], "host": environ.get("HTTP_HOST"),
                      "server_port": environ["SERVER_PORT"], "scheme": environ["wsgi.url_scheme"],
                      "secret_in_environ": "RAFTCONNECT_TEST_SECRET" in environ}).encode()
    start_response("200 OK", [("Content-Type", "application/json")])
    return [out]


@pytest.mark.parametrize("kind", SERVERS)
def test_request_bodies_and_environ_arrive_as_sent_and_answers_name_raftconnect(kind, monkeypatch):
    """A 5 MB body arrives whole, the path and query as WSGI wants them (path decoded, query not), and
    the process environment (the cluster secret, the admin password) is not copied into the environ
    (granian's own wrapper copies all of it into every request's ``request.META``)."""
    import hashlib

    monkeypatch.setenv("RAFTCONNECT_TEST_SECRET", "s3cret")
    body = bytes(range(256)) * 20_000
    with serving(_echo, kind) as (server, port):
        r = requests.post(f"http://127.0.0.1:{port}/connectors/a%20b/config?expand=status&x=%20", data=body,
                          timeout=30)
    assert r.status_code == 200 and r.headers["Server"] == SERVER_IDENT
    got = r.json()
    assert got["length"] == len(body) and got["sha"] == hashlib.sha256(body).hexdigest()
    assert (got["path"], got["query"], got["method"]) == ("/connectors/a b/config", "expand=status&x=%20", "POST")
    assert (got["host"], got["server_port"], got["scheme"]) == (f"127.0.0.1:{port}", str(port), "http")
    assert got["secret_in_environ"] is False


class _Closing:
    """A WSGI body that records its ``close()``; ``streaming`` as Django's responses say it."""

    def __init__(self, chunks, streaming, closed):
        self.chunks, self.streaming, self.closed = chunks, streaming, closed

    @property
    def content(self):
        return b"".join(self.chunks)

    def __iter__(self):
        return iter(self.chunks)

    def close(self):
        self.closed.set()


@pytest.mark.parametrize("streaming", [False, True])
def test_granian_sends_a_response_object_whole_and_closes_it(streaming):
    """Django returns its ``HttpResponse`` (``streaming`` False: sent as one ``bytes``) or a streamed
    response (iterated chunk by chunk); either way the body arrives whole and ``close()`` is called,
    which is what sends Django's ``request_finished`` (connections, ``ReleaseRequestMiddleware``)."""
    closed = threading.Event()
    chunks = [b"a" * 70_000, b"b" * 3, b"c" * 200_000]

    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return _Closing(chunks, streaming, closed)

    with serving(app) as (server, port):
        r = requests.get(f"http://127.0.0.1:{port}/", timeout=10)
        assert r.status_code == 200 and r.content == b"".join(chunks)
        assert closed.wait(10)


def test_granian_concurrent_large_and_small_responses_arrive_whole():
    with serving(_big_or_small, threads=4) as (server, port):
        errors = _fetch_large_and_small(port)
    assert not errors, errors[:5]


@pytest.mark.parametrize("first", SERVERS)
def test_a_second_server_on_a_taken_port_fails_instead_of_sharing_it(first):
    """granian binds its own sockets with ``SO_REUSEPORT``: a second node started on the same port would
    have shared the first's connections without a word. The node's socket is its own: the second fails."""
    with serving(_app, first) as (server, port):
        with pytest.raises(OSError) as exc:
            GranianRESTServer(_app, host="127.0.0.1", port=port, threads=1, connection_limit=10)
        assert exc.value.errno == __import__("errno").EADDRINUSE
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).text == "ok"


def _closed_by_server(sock: socket.socket, within: float) -> bool:
    """Whether the peer closes ``sock`` within ``within`` seconds (a read gives EOF or a reset)."""
    sock.settimeout(within)
    try:
        return sock.recv(1) == b""
    except socket.timeout:
        return False
    except ConnectionResetError:
        return True


def test_granian_keeps_an_idle_connection_for_its_idle_timeout_then_closes_it():
    """Agents and forwarding members keep connections between calls; granian's own 30 s closed them
    and the next POST failed with a broken pipe. The node's idle timeout (waitress's 120 s) is the
    server's ``idle_timeout_ms``; here 2 s: open before it, closed by the server after it."""
    with serving(_app, idle_timeout_ms=2000) as (server, port):
        s = socket.create_connection(("127.0.0.1", port))
        try:
            t0 = time.monotonic()
            s.sendall(b"GET / HTTP/1.1\r\nHost: x\r\n\r\n")
            assert b"ok" in s.recv(4096)
            assert not _closed_by_server(s, 1.0), "closed before its idle timeout"
            assert _closed_by_server(s, 10.0), "still open well past its idle timeout"
            assert time.monotonic() - t0 >= 1.9
        finally:
            s.close()


def test_granian_idle_timeout_default_is_waitress_channel_timeout():
    from waitress.adjustments import Adjustments

    from webapp.connect.restserver import IDLE_TIMEOUT_MS

    assert IDLE_TIMEOUT_MS == Adjustments.channel_timeout * 1000


def test_granian_of_another_series_is_refused_with_a_clear_message(monkeypatch):
    import granian

    monkeypatch.setattr(granian, "__version__", "3.0.0")
    with pytest.raises(RuntimeError, match="--rest-server waitress"):
        GranianRESTServer(_app, host="127.0.0.1", port=free_port(), threads=1, connection_limit=10)


@pytest.mark.parametrize("kind", SERVERS)
def test_close_before_run_makes_run_return_at_once(kind):
    server = rest_server(_app, kind=kind, host="127.0.0.1", port=free_port(), threads=1, connection_limit=10)
    server.close()
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    thread.join(5)
    assert not thread.is_alive()


def test_waitress_close_while_its_loop_is_woken_by_an_earlier_pull_keeps_the_trigger_open_until_written():
    """The interleaving of a CI flake, forced: the loop is already awake (a channel with output left
    pulled the trigger) when ``close()`` hands it the closing. waitress's ``pull_trigger`` let the loop
    run that thunk, which closes the trigger, before its own write: EBADF. Here the thunk cannot run
    until the write is done, so ``close()`` neither raises nor writes to a closed descriptor."""
    import os

    port = free_port()
    server = waitress_server(_app, host="127.0.0.1", port=port, threads=1, connection_limit=10)
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).text == "ok"  # the loop is running
    trigger, ran = server.trigger, threading.Event()
    close_channels = server._close_channels

    def close_channels_noting():
        ran.set()
        close_channels()

    server._close_channels = close_channels_noting  # the thunk close() hands over
    physical_pull, wrote = trigger._physical_pull, []

    def pull_after_the_loop_woke():
        os.write(trigger.trigger, b"x")  # an earlier pull: the loop wakes and runs the thunks it finds
        wrote.append(ran.wait(0.5))  # old order: the thunk ran here and closed the trigger
        physical_pull()

    trigger._physical_pull = pull_after_the_loop_woke
    try:
        server.close()
    finally:
        runner.join(10)
    # one pull is close()'s own; a channel closing meanwhile (the GET's connection) may pull too (seen in CI):
    # what matters is that the closing ran after every write, never during one
    assert wrote and not any(wrote), "the loop ran the closing before close() had written to the trigger"
    assert ran.is_set() and not runner.is_alive(), "close() did not end run()"


def _rest_tids() -> set[int]:
    """Ids of this process's threads the kernel knows as ``rest`` (the REST servers' Python threads)."""
    import os

    tids = set()
    for tid in os.listdir("/proc/self/task"):
        with contextlib.suppress(OSError), open(f"/proc/self/task/{tid}/comm") as f:
            if f.read().strip() == "rest":
                tids.add(int(tid))
    return tids


@pytest.mark.parametrize("kind", SERVERS)
def test_close_ends_run_with_a_connection_kept_alive_and_a_request_in_flight(kind):
    """``close()`` from another thread, while a client keeps its connection open and another waits for
    an answer: ``run()`` returns, the port refuses new connections, and none of the threads that served
    is left. waitress's own ``close()`` left its loop running for as long as any connection stayed
    open, and its task threads with it."""
    started, release = threading.Event(), threading.Event()

    def slow(environ, start_response):
        if environ["PATH_INFO"] == "/slow":
            started.set()
            release.wait(10)
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]

    before, rest_before = set(threading.enumerate()), _rest_tids()
    port = free_port()
    server = rest_server(slow, kind=kind, host="127.0.0.1", port=port, threads=2, connection_limit=10)
    runner = threading.Thread(target=server.run, daemon=True)
    runner.start()
    session = requests.Session()
    waiting = threading.Thread(target=_quietly, args=(requests.get, f"http://127.0.0.1:{port}/slow"),
                               kwargs={"timeout": 10})
    try:
        assert session.get(f"http://127.0.0.1:{port}/", timeout=5).text == "ok"  # kept alive in the session
        waiting.start()
        assert started.wait(5), "the slow request did not reach the application"
        server.close()
        release.set()
        runner.join(15)
        assert not runner.is_alive(), "close() did not end run()"
        with pytest.raises(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=2).close()
    finally:
        release.set()
        session.close()
        if waiting.is_alive() or waiting.ident:
            waiting.join(15)
    deadline = time.monotonic() + 10
    while True:
        left = [t.name for t in set(threading.enumerate()) - before  # granian's own threads: by their kernel name
                if t.is_alive() and t is not runner and not isinstance(t, threading._DummyThread)]
        left += [f"rest (tid {tid})" for tid in _rest_tids() - rest_before]
        if not left:
            break
        assert time.monotonic() < deadline, f"threads left after close(): {left}"
        time.sleep(0.05)


def _quietly(call, *args, **kw):
    """``call(*args, **kw)``, its ``requests`` error swallowed (a request the server was closed under)."""
    try:
        return call(*args, **kw)
    except requests.RequestException:
        return None


def test_a_stopped_granian_server_closes_only_its_own_descriptor():
    """granian's listener closes the descriptor it was given when it stops, after ``close()`` returned.
    Given the socket's own, that close hit whatever was opened under the same number in between (in
    the suite: the next server's socket, whose ``listen`` then failed in granian, which aborts the
    process on a panic). Here a file opened right after ``close()`` takes the number and must stay open."""
    import os

    server = GranianRESTServer(_app, host="127.0.0.1", port=free_port(), threads=1, connection_limit=10)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    port = server.address[1]
    assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).text == "ok"
    number = server.socket.fileno()
    server.close()
    fd = os.open(os.devnull, os.O_RDONLY)
    try:
        assert fd == number, "the socket's number was not the lowest free one: nothing to check"
        assert server.released.wait(30), "granian did not stop"
        thread.join(10)
        assert not thread.is_alive()
        os.fstat(fd)  # EBADF if granian closed it
    finally:
        os.close(fd)


def _log_of_a_node_that_exits(node, what: str) -> str:
    """Start ``node`` (a ``tools.launcher.NodeProcess``), wait for it to exit, assert it failed; its log.
    Kills it if it is still running when the caller's check fails."""
    from tools.launcher import wait_for

    try:
        node.start(wait=False)
        wait_for(lambda: node.proc.poll() is not None, 120, what=what)
        assert node.proc.returncode != 0
        with open(node.log_path) as fh:
            return fh.read()
    finally:
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()


def test_runnode_on_a_taken_rest_port_exits_saying_so(tmp_path):
    """Another process holds the node's REST port: the node stops with the address in its message
    (with granian's own socket it would have shared the port and served half of its connections)."""
    from tools.launcher import NodeProcess

    holder = socket.create_server(("127.0.0.1", 0))
    port = holder.getsockname()[1]
    node = NodeProcess(node_id="taken", rest_port=port, raft_port=free_port(), data_dir=str(tmp_path / "n"),
                       bootstrap_servers="127.0.0.1:9", roles="raft")
    try:
        log_text = _log_of_a_node_that_exits(node, "the node on a taken port to exit")
        assert f"REST server on 127.0.0.1:{port}" in log_text and "Address already in use" in log_text, \
            log_text[-2000:]
    finally:
        holder.close()


_FAILING_ACCEPT = """
import runpy, sys
sys.argv = sys.argv[2:]  # [manage.py, runnode, ...]
from webapp.connect import restserver
closing_server_class = restserver._closing_server_class

def failing_server_class():
    class FailingAccept(closing_server_class()):
        def handle_accept(self):  # wasyncore then calls handle_error(), which closes the server
            raise RuntimeError("accept failed (test)")
    return FailingAccept

restserver._closing_server_class = failing_server_class
runpy.run_path(sys.argv[0], run_name="__main__")
"""


def test_runnode_whose_rest_server_stops_by_itself_stops_the_node_with_exit_code_1(tmp_path):
    """The REST server's loop ends without a signal (here waitress closes itself when accepting fails):
    the node stops and exits 1 saying why, rather than end quietly with code 0 or keep running unreachable."""
    from tools.launcher import REPO_ROOT, NodeProcess, wait_for

    wrapper = tmp_path / "failing_accept.py"
    wrapper.write_text(_FAILING_ACCEPT)
    port = free_port()
    node = NodeProcess(node_id="selfstop", rest_port=port, raft_port=free_port(), data_dir=str(tmp_path / "n"),
                       bootstrap_servers="127.0.0.1:9", roles="raft", extra_args=["--rest-server", "waitress"],
                       command_prefix=[sys.executable, str(wrapper)], env={"PYTHONPATH": str(REPO_ROOT)})

    def exited_after_a_connection() -> bool:
        with contextlib.suppress(OSError):
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
        return node.proc.poll() is not None

    try:
        node.start(wait=False)
        wait_for(exited_after_a_connection, 120, what="the node to exit once its REST server stopped")
        with open(node.log_path) as fh:
            log_text = fh.read()
        assert node.proc.returncode == 1, log_text[-2000:]
        assert "the REST server stopped serving; stopping the node" in log_text, log_text[-2000:]
        assert "node selfstop: stopped" in log_text, log_text[-2000:]
    finally:
        if node.proc is not None and node.proc.poll() is None:
            node.proc.kill()


def test_asyncio_keeps_working_in_a_process_serving_granian():
    """granian's Rust-task scheduler registers a never-initialised stand-in ``asyncio.Task`` for the
    whole process; ``asyncio.all_tasks()`` (which ``asyncio.run`` calls on its way out, as do
    Playwright and any asyncio client) then raised "Future object is not initialized" (CI, the
    console's end-to-end tests). The node's server uses granian's asyncio scheduler, which registers nothing."""
    import asyncio

    async def one():
        await asyncio.sleep(0)
        return 1

    with serving(_app) as (server, port):
        assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).text == "ok"
        assert asyncio.run(one()) == 1
        loop = asyncio.new_event_loop()
        try:
            assert asyncio.all_tasks(loop) == set()
        finally:
            loop.close()


def test_members_forward_to_each_other_directly_whatever_proxy_the_environment_names(monkeypatch):
    """The member-to-member session ignores ``HTTP_PROXY`` (as Kafka Connect's workers do): here the proxy
    named refuses every connection, and the request still reaches the member."""
    from webapp.connect.api import forwarding

    monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{free_port()}")  # nothing listens there
    monkeypatch.setenv("NO_PROXY", "")
    with serving(_app, "granian") as (_, port):
        assert forwarding._http.request("GET", f"127.0.0.1:{port}", "/", body=None, headers={}, timeout=5).data == b"ok"
        with pytest.raises(requests.ConnectionError):  # a session that reads the environment goes to the proxy
            requests.Session().get(f"http://127.0.0.1:{port}/", timeout=5)


def test_concurrent_forwards_keep_their_connections_to_a_member_open():
    """As many forwards as run at once (``FORWARD_CONCURRENCY``) each keep their connection for the next
    request: requests' default pool, used before, kept 10, and every concurrent request past the tenth
    opened a connection of its own, which was closed after one answer."""
    from concurrent.futures import ThreadPoolExecutor

    from webapp.connect.api import forwarding

    n = forwarding.FORWARD_CONCURRENCY
    ports: set[str] = set()
    lock = threading.Lock()
    arrived = threading.Barrier(n, timeout=10)

    def app(environ, start_response):
        with lock:
            ports.add(environ["REMOTE_PORT"])
        arrived.wait()  # all n requests in flight at once
        return _app(environ, start_response)

    with serving(app, "waitress", threads=n, connection_limit=4 * n) as (_, port):
        address = f"127.0.0.1:{port}"
        with ThreadPoolExecutor(n) as pool:
            for _ in range(3):
                assert [r.data for r in pool.map(
                    lambda _: forwarding._http.request("GET", address, "/", body=None, headers={}, timeout=10),
                    range(n))] == [b"ok"] * n
    assert len(ports) <= n, f"{len(ports)} connections for 3 rounds of {n} concurrent requests"


def test_a_forward_to_a_port_nobody_listens_on_is_a_target_unreachable_and_other_failures_a_503(monkeypatch):
    """What the forwarding loop retries elsewhere (a refused connection: the leader just died) against what it
    answers at once (Connect's 503)."""
    from types import SimpleNamespace

    from webapp.connect.api import forwarding
    from webapp.connect.herder import ConnectRestError

    raw = SimpleNamespace(body=b"{}", method="PUT", content_type="application/json",
                          get_full_path=lambda: "/connectors/c/config")
    request = SimpleNamespace(_request=raw, user=SimpleNamespace(username="alice", role="operator"))
    with pytest.raises(forwarding.TargetUnreachable, match="refused"):
        forwarding.proxy(request, f"127.0.0.1:{free_port()}", "secret", timeout=5)
    silent = socket.socket()  # accepts (the kernel's backlog) and never answers
    silent.bind(("127.0.0.1", 0))
    silent.listen(8)
    try:
        with pytest.raises(ConnectRestError, match="Could not forward the request") as exc:
            forwarding.proxy(request, f"127.0.0.1:{silent.getsockname()[1]}", "secret", timeout=0.5)
        assert exc.value.status == 503
    finally:
        silent.close()


@pytest.mark.parametrize("variable, value", [
    ("RAFTCONNECT_OFFSET_FLUSH_INTERVAL_MS", "10s"),
    ("RAFTCONNECT_SCHEDULED_REBALANCE_MAX_DELAY_MS", "-1"),
    ("RAFTCONNECT_CONVERTER_DEFAULTS", "value.converter=x"),
])
def test_runnode_with_a_bad_worker_setting_exits_naming_it(tmp_path, variable, value):
    """Read later by the agent or by each validation, these are checked when the node starts."""
    from tools.launcher import NodeProcess

    node = NodeProcess(node_id="bad", rest_port=free_port(), raft_port=free_port(), data_dir=str(tmp_path / "n"),
                       bootstrap_servers="127.0.0.1:9", roles="raft", env={variable: value})
    log_text = _log_of_a_node_that_exits(node, "the node with a bad setting to exit")
    assert variable in log_text, log_text[-2000:]
