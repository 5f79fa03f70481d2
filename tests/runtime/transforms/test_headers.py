"""InsertHeader and DropHeaders (:mod:`webapp.runtime.transforms.headers`), one behaviour per test.

Expected values follow Kafka Connect's transforms (apache/kafka connect/transforms).
"""
from __future__ import annotations

from .support import ALICE, one, rec, run


def test_insert_header_and_drop_headers():
    out = run(one("InsertHeader", header="source", value_literal="file"),
              rec(ALICE, headers=[("a", b"1")]), rec(ALICE))
    assert [r.headers for r in out.to_records()] == [[("a", b"1"), ("source", b"file")], [("source", b"file")]]
    out = run(one("DropHeaders", headers="a,c"), rec(ALICE, headers=[("a", b"1"), ("b", b"2"), ("c", None)]),
              rec(ALICE), rec(ALICE, headers=[("a", b"x")]))
    assert [r.headers for r in out.to_records()] == [[("b", b"2")], [], []]
