"""Filter and the predicates (:mod:`webapp.runtime.transforms.filters`), one behaviour per test.

Expected values follow Kafka Connect's transforms (apache/kafka connect/transforms).
"""
from __future__ import annotations

from .support import ALICE, one, rec, run, values


def test_filter_with_topic_predicate_and_negate():
    cfg = {**one("Filter"), "transforms.t.predicate": "p", "predicates": "p",
           "predicates.p.type": "org.apache.kafka.connect.transforms.predicates.TopicNameMatches",
           "predicates.p.pattern": "tmp-.*"}
    out = run(cfg, rec(ALICE, topic="tmp-1"), rec({**ALICE, "id": 2}, topic="keep"), rec(ALICE, topic="tmp-2"))
    assert [r.topic for r in out.to_records()] == ["keep"]
    out = run({**cfg, "transforms.t.negate": "true"}, rec(ALICE, topic="tmp-1"), rec(ALICE, topic="keep"))
    assert [r.topic for r in out.to_records()] == ["tmp-1"]


def test_has_header_key_predicate():
    cfg = {**one("Filter"), "transforms.t.predicate": "h", "predicates": "h",
           "predicates.h.type": "HasHeaderKey", "predicates.h.name": "skip"}
    out = run(cfg, rec(ALICE, headers=[("x", b"")]), rec({**ALICE, "id": 2}, headers=[("skip", b"1")]),
              rec({**ALICE, "id": 3}))
    assert [v["id"] for v in values(out)] == [1, 3]


def test_tombstone_predicate_negated_guards_a_transform_and_keeps_order():
    cfg = {**one("ValueToKey", fields="id"), "transforms.t.predicate": "tomb", "transforms.t.negate": "true",
           "predicates": "tomb", "predicates.tomb.type": "RecordIsTombstone"}
    out = run(cfg, rec(ALICE, offset=1), rec(None, offset=2), rec({**ALICE, "id": 3}, offset=3))
    assert [(r.offset, r.key) for r in out.to_records()] == [(1, {"id": 1}), (2, None), (3, {"id": 3})]
