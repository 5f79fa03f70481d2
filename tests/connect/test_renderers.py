"""The REST renderer (``webapp.connect.api.renderers``) writes what DRF's ``JSONRenderer`` writes.

Byte for byte for everything but the spelling of floats with exponents (same numbers) and NaN
(``null`` where DRF refused); DRF's own path for what orjson would write otherwise.
"""
from __future__ import annotations

import datetime
import decimal
import json
import uuid
from collections import OrderedDict, namedtuple

import pytest
from django.utils.translation import gettext_lazy
from rest_framework.renderers import JSONRenderer

from webapp.connect.api.renderers import ConnectJSONRenderer
from webapp.states import State

Point = namedtuple("Point", "x y")

SAME_BYTES = [
    {"name": "c1", "connector": {"state": "FAILED", "worker_id": "10.0.0.1:8083",
                                 "trace": "org.x.ConnectException: boom\n\tat A.b(A.java:1)"},
     "tasks": [{"id": 0, "state": "RUNNING", "worker_id": "w1"}], "type": "source"},
    {"offsets": [{"partition": {"kafka_topic": "t", "kafka_partition": 3}, "offset": {"kafka_offset": 2**63 - 1}}]},
    ["a", "b"], [], {}, "plain", 0, -1, True, False, 1.5, 0.1, 123456.789, 2.0,
    {"unicode": "é漢字🙂", "separators": "a\u2028b\u2029c", "controls": "\x00\x01\x1f\x7f\t\n\r\"\\/"},
    {"tuple": (1, "x"), "namedtuple": Point(1, 2), "ordered": OrderedDict([("b", 1), ("a", 2)])},
    {"state": State.RUNNING, "lazy": gettext_lazy("Not found."), "decimal": decimal.Decimal("1.25")},
    {"uuid": uuid.UUID("12345678-1234-5678-1234-567812345678"), "set": {7}, "bytes": b"raw"},
    {"datetime": datetime.datetime(2026, 11, 25, 12, 0, 0, 123456, tzinfo=datetime.timezone.utc),
     "naive": datetime.datetime(2026, 11, 25, 12, 0, 0, 123456), "date": datetime.date(2026, 11, 25),
     "time": datetime.time(1, 2, 3, 400000), "delta": datetime.timedelta(seconds=90)},
    {1: "int key", None: "none key", True: "bool key"},  # not orjson's: DRF's path
    {"big": 2**70, "negative": -(2**70)},  # beyond 64 bits: DRF's path
]


@pytest.mark.parametrize("data", SAME_BYTES, ids=range(len(SAME_BYTES)))
def test_the_same_bytes_as_drf(data):
    assert ConnectJSONRenderer().render(data) == JSONRenderer().render(data)


def test_floats_with_exponents_are_the_same_numbers():
    values = [1e-05, 1.2737359793454326e-07, 1e16, 1e22, 5e-324, 1.7976931348623157e308, -3.1e-9]
    ours, drf = ConnectJSONRenderer().render(values), JSONRenderer().render(values)
    assert json.loads(ours) == json.loads(drf) == values


def test_indented_bodies_and_none_are_drfs():
    data = {"a": [1, {"b": "c"}]}
    accepted = "application/json; indent=4"
    assert ConnectJSONRenderer().render(data, accepted) == JSONRenderer().render(data, accepted)
    assert b"\n    " in ConnectJSONRenderer().render(data, accepted)
    assert ConnectJSONRenderer().render(None) == b""


def test_what_drf_refuses_is_still_refused():
    class Opaque:
        pass

    for bad in ({"x": Opaque()}, {"s": "\ud800"}):  # no JSON form; a lone surrogate
        with pytest.raises(Exception) as drf:
            JSONRenderer().render(bad)
        with pytest.raises(type(drf.value)):
            ConnectJSONRenderer().render(bad)


def test_it_is_the_rest_apis_renderer(settings):
    from rest_framework.settings import api_settings

    assert api_settings.DEFAULT_RENDERER_CLASSES == [ConnectJSONRenderer]


def test_nan_and_infinities_become_null_where_drf_refused_them():
    data = {"rate": float("nan"), "max": float("inf")}
    with pytest.raises(ValueError):
        JSONRenderer().render(data)
    assert ConnectJSONRenderer().render(data) == b'{"rate":null,"max":null}'
