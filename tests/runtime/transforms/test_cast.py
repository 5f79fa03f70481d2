"""Cast (:mod:`webapp.runtime.transforms.cast`), one behaviour per test.

Expected values follow Kafka Connect's transforms (apache/kafka connect/transforms).
"""
from __future__ import annotations

import datetime as dt

import pytest

from webapp.runtime.converters import TIMESTAMP_LOGICAL
from webapp.runtime.transforms.chain import (
    TransformError,
    validate_transforms,
)

from .support import ALICE, UTC, one, rec, run, values


def test_cast_fields_with_java_conversions():
    schema = {"type": "struct", "optional": False, "fields": [
        {"field": "big", "type": "int64", "optional": False}, {"field": "f", "type": "double", "optional": False},
        {"field": "s", "type": "string", "optional": False}, {"field": "b", "type": "string", "optional": False},
        {"field": "n", "type": "int32", "optional": True}]}
    out = run(one("Cast$Value", spec="big:int8,f:string,s:int32,b:boolean,n:boolean"),
              rec({"big": 300, "f": 1.0, "s": "42", "b": "TRUE", "n": 0}, schema=schema))
    assert values(out) == [{"big": 44, "f": "1.0", "s": 42, "b": True, "n": False}]
    types = {f["field"]: (f["type"], f["optional"]) for f in out.value_schema["fields"]}
    assert types == {"big": ("int8", False), "f": ("string", False), "s": ("int32", False),
                     "b": ("boolean", False), "n": ("boolean", True)}


def test_cast_whole_value_and_timestamp_to_string_and_failure():
    out = run(one("Cast$Value", spec="string"), rec(12, schema={"type": "int64", "optional": True}))
    assert values(out) == ["12"] and out.value_schema == {"type": "string", "optional": True}
    ts_schema = {"type": "struct", "optional": False, "fields": [
        {"field": "at", "type": "int64", "name": TIMESTAMP_LOGICAL, "version": 1, "optional": False}]}
    out = run(one("Cast$Value", spec="at:string"),
              rec({"at": dt.datetime(2024, 5, 6, 7, 8, 9, 123000, tzinfo=UTC)}, schema=ts_schema))
    assert values(out) == [{"at": "2024-05-06T07:08:09.123Z"}]
    with pytest.raises(TransformError, match="x"):
        run(one("Cast$Value", spec="name:int32"), rec({**ALICE, "name": "x"}))
    out = run(one("Cast$Value", spec="a:float64"), rec({"a": "2.5"}, schema=None))
    assert values(out) == [{"a": 2.5}]


def test_cast_spec_validation():
    assert "Invalid type found in casting spec: int128" in str(validate_transforms(one("Cast$Value",
                                                                                       spec="a:int128")))
    assert "may only specify a single cast" in str(validate_transforms(one("Cast$Value", spec="int8,a:int8")))
