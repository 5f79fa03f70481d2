"""RegexRouter and TimestampRouter (:mod:`webapp.runtime.transforms.routers`), one behaviour per test.

Expected values follow Kafka Connect's transforms (apache/kafka connect/transforms).
"""
from __future__ import annotations

import datetime as dt

import pytest

from webapp.runtime.transforms.chain import (
    TransformError,
)

from .support import ALICE, UTC, P, one, rec, run


def test_regex_router_whole_match_and_java_groups():
    out = run(one(P + "RegexRouter", regex="(.*)-raw", replacement="$1-clean"), rec(ALICE, topic="orders-raw"),
              rec(ALICE, topic="orders-raw-x"))
    assert [r.topic for r in out.to_records()] == ["orders-clean", "orders-raw-x"]
    out = run(one("RegexRouter", regex="(?P<t>o.*)", replacement="x.${t}"), rec(ALICE, topic="orders"))
    assert out.to_records()[0].topic == "x.orders"


def test_timestamp_router_formats_record_time_and_requires_it():
    day = int(dt.datetime(2024, 3, 4, tzinfo=UTC).timestamp() * 1000)
    out = run(one("TimestampRouter"), rec(ALICE, timestamp=day), rec(ALICE, timestamp=day + 86_400_000))
    assert [r.topic for r in out.to_records()] == ["people-20240304", "people-20240305"]
    out = run(one("TimestampRouter", topic_format="${timestamp}_${topic}", timestamp_format="yyyy.MM"),
              rec(ALICE, timestamp=day))
    assert out.to_records()[0].topic == "2024.03_people"
    out = run(one("TimestampRouter", topic_format="t", timestamp_format="yyyy"), rec(ALICE, timestamp=day))
    assert out.to_records()[0].topic == "t"
    out = run(one("TimestampRouter", topic_format="${topic}@${timestamp}", timestamp_format="HH:mm:ss.SSS"),
              rec(ALICE, timestamp=day + 3_723_045))
    assert out.to_records()[0].topic == "people@01:02:03.045"
    with pytest.raises(TransformError, match="Timestamp missing"):
        run(one("TimestampRouter"), rec(ALICE))
