"""``free_port`` with a port range of its own (the test suite's parallel workers each get one)."""
from __future__ import annotations

import socket

from webapp.kafka import embedded


def test_free_port_draws_distinct_bindable_ports_from_its_range(monkeypatch):
    monkeypatch.setenv(embedded.PORT_RANGE_ENV, "21000-21099")
    monkeypatch.setattr(embedded, "_handed_out", set())
    taken = socket.socket()
    for held in range(21000, 21100):  # a port already bound is never handed out (other tests' servers
        try:                          # may hold some of the range: take the first one free)
            taken.bind(("127.0.0.1", held))
            break
        except OSError:
            continue
    try:
        ports = [embedded.free_port() for _ in range(50)]
    finally:
        taken.close()
    assert len(set(ports)) == 50 and all(21000 <= p <= 21099 for p in ports) and held not in ports


def test_free_port_without_a_range_is_the_kernels_pick(monkeypatch):
    monkeypatch.delenv(embedded.PORT_RANGE_ENV, raising=False)
    port = embedded.free_port()
    with socket.socket() as s:
        s.bind(("127.0.0.1", port))
