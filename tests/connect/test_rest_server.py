"""The node's REST server keeps answering with more open client connections than waitress' default allows."""
from __future__ import annotations

import argparse
import socket
import threading

import pytest
import requests

from webapp.connect.management.commands.runnode import rest_server
from webapp.connect.nodeargs import add_node_arguments
from webapp.kafka.embedded import free_port


def _app(environ, start_response):
    start_response("200 OK", [("Content-Type", "text/plain")])
    return [b"ok"]


def test_default_connection_limit_is_above_waitress_own(monkeypatch):
    monkeypatch.delenv("RAFTCONNECT_REST_CONNECTION_LIMIT", raising=False)
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    assert parser.parse_args([]).rest_connection_limit == 1000
    monkeypatch.setenv("RAFTCONNECT_REST_CONNECTION_LIMIT", "300")
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    assert parser.parse_args([]).rest_connection_limit == 300


@pytest.mark.parametrize("limit, answers", [(1000, True), (100, False)])
def test_a_request_is_served_while_150_idle_connections_are_open(limit, answers):
    """150 kept-alive connections (workers, forwarding members) and one more client: waitress' default
    limit of 100 stops accepting it; the node's limit does not."""
    port = free_port()
    server = rest_server(_app, host="127.0.0.1", port=port, threads=2, connection_limit=limit)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    idle = []
    try:
        for _ in range(150):
            s = socket.create_connection(("127.0.0.1", port))
            idle.append(s)
        try:
            ok = requests.get(f"http://127.0.0.1:{port}/", timeout=3).text == "ok"
        except requests.RequestException:
            ok = False
        assert ok is answers
    finally:
        for s in idle:
            s.close()
        server.close()


def test_a_request_is_served_when_its_socket_is_numbered_past_select_s_limit():
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
        port = free_port()
        server = rest_server(_app, host="127.0.0.1", port=port, threads=2, connection_limit=100)
        assert server.socket.fileno() >= 1024
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        try:
            assert requests.get(f"http://127.0.0.1:{port}/", timeout=5).text == "ok"
            assert thread.is_alive()
        finally:
            server.close()
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
    server = rest_server(_app, host="127.0.0.1", port=free_port(), threads=1, connection_limit=100)
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


def test_concurrent_large_and_small_responses_arrive_whole_with_few_loop_turns(monkeypatch):
    """Responses past the output buffer's high watermark (the task thread waits for the loop to drain
    it) and small ones, from 6 clients at once: every body arrives whole, and the loop turns a few
    times per request, not once per GIL hand-over."""
    import waitress.wasyncore as wasyncore

    big = b"x" * (17 * 1024 * 1024)  # waitress's outbuf_high_watermark is 16 MiB

    def app(environ, start_response):
        body = big if environ["PATH_INFO"] == "/big" else b"ok"
        start_response("200 OK", [("Content-Type", "text/plain"), ("Content-Length", str(len(body)))])
        return [body]

    turns = [0]
    poll2 = wasyncore.poll2

    def counted(timeout=0.0, map=None):
        turns[0] += 1
        return poll2(timeout, map)

    monkeypatch.setattr(wasyncore, "poll2", counted)
    port = free_port()
    server = rest_server(app, host="127.0.0.1", port=port, threads=4, connection_limit=100)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    errors: list[str] = []

    def client(n: int) -> None:
        with requests.Session() as session:
            for i in range(40):
                path = "/big" if n == 0 and i % 10 == 0 else "/small"
                r = session.get(f"http://127.0.0.1:{port}{path}", timeout=30)
                want = big if path == "/big" else b"ok"
                if r.status_code != 200 or r.content != want:
                    errors.append(f"{path}: {r.status_code}, {len(r.content)} bytes")

    try:
        clients = [threading.Thread(target=client, args=(n,)) for n in range(6)]
        for c in clients:
            c.start()
        for c in clients:
            c.join(120)
        assert not any(c.is_alive() for c in clients), "a client is still waiting for its response"
        assert not errors, errors[:5]
        assert turns[0] / 240 < 20, f"{turns[0]} loop turns for 240 requests"
    finally:
        server.close()
