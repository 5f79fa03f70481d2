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
