"""TimestampConverter (:mod:`webapp.runtime.transforms.timestamp_converter`), one behaviour per test.

Expected values follow Kafka Connect's transforms (apache/kafka connect/transforms).
"""
from __future__ import annotations

import datetime as dt

import pytest

from webapp.runtime.converters import DATE_LOGICAL, TIME_LOGICAL, TIMESTAMP_LOGICAL
from webapp.runtime.transforms.chain import (
    TransformationChain,
    TransformError,
    validate_transforms,
)

from .support import UTC, one, rec, run, values


def test_timestamp_converter_string_to_timestamp_and_back():
    schema = {"type": "struct", "optional": False, "fields": [{"field": "at", "type": "string", "optional": True}]}
    out = run(one("TimestampConverter$Value", field="at", target_type="Timestamp",
                  format="yyyy-MM-dd HH:mm:ss.SSS"),
              rec({"at": "2024-01-02 03:04:05.678"}, schema=schema), rec({"at": None}, schema=schema))
    assert values(out) == [{"at": dt.datetime(2024, 1, 2, 3, 4, 5, 678000, tzinfo=UTC)}, {"at": None}]
    assert out.value_schema["fields"][0]["name"] == TIMESTAMP_LOGICAL
    back = TransformationChain.from_config(one("TimestampConverter$Value", field="at", target_type="string",
                                               format="dd/MM/yyyy'T'HH")).apply(out)
    assert values(back) == [{"at": "02/01/2024T03"}, {"at": None}]


def test_timestamp_converter_unix_precision_date_time_and_whole_value():
    out = run(one("TimestampConverter$Value", target_type="unix", unix_precision="seconds"),
              rec(dt.datetime(2024, 1, 2, 3, 4, 5, tzinfo=UTC),
                  schema={"type": "int64", "name": TIMESTAMP_LOGICAL, "version": 1, "optional": False}))
    assert values(out) == [1704164645] and out.value_schema == {"type": "int64", "optional": False}
    ms = 1704164645123
    out = run(one("TimestampConverter$Value", target_type="Date"), rec(ms, schema={"type": "int64"}))
    assert values(out) == [dt.date(2024, 1, 2)] and out.value_schema["name"] == DATE_LOGICAL
    out = run(one("TimestampConverter$Value", target_type="Time"), rec(ms, schema={"type": "int64"}))
    assert values(out) == [(3 * 3600 + 4 * 60 + 5) * 1000 + 123] and out.value_schema["name"] == TIME_LOGICAL
    out = run(one("TimestampConverter$Value", field="t", target_type="Timestamp", unix_precision="microseconds"),
              rec({"t": 1_500_000}, schema=None))
    assert values(out) == [{"t": dt.datetime(1970, 1, 1, 0, 0, 1, 500000, tzinfo=UTC)}]


def test_timestamp_converter_iso_zones():
    fmt = "yyyy-MM-dd'T'HH:mm:ss.SSSXXX"
    out = run(one("TimestampConverter$Value", target_type="unix", format=fmt),
              rec("2024-01-02T03:04:05.123+01:00", schema={"type": "string"}))
    assert values(out) == [1704161045123]
    back = run(one("TimestampConverter$Value", target_type="string", format=fmt),
               rec(1704161045123, schema={"type": "int64"}))
    assert values(back) == ["2024-01-02T02:04:05.123Z"]


def test_timestamp_converter_bad_string_and_config():
    with pytest.raises(TransformError, match="does not match pattern"):
        run(one("TimestampConverter$Value", target_type="Timestamp", format="yyyy-MM-dd"),
            rec("yesterday", schema={"type": "string"}))
    assert "requires format" in str(validate_transforms(one("TimestampConverter$Value", target_type="string")))
    assert "String must be one of" in str(validate_transforms(one("TimestampConverter$Value",
                                                                  target_type="Instant")))
