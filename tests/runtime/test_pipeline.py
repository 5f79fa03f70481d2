"""SinkPipeline / SourcePipeline worker functions on Arrow tables (no Spark job; the Spark runs are in
tests/connectors/file/test_transforms.py)."""
from __future__ import annotations

import pyarrow as pa
import pytest

from webapp.plugin import ConnectorTaskId
from webapp.runtime.pipeline import SinkPipeline, SourcePipeline, needs_pipeline
from webapp.runtime.transforms.record import headers_type

SCHEMA = {"type": "struct", "optional": False, "fields": [{"field": "id", "type": "int64", "optional": False},
                                                          {"field": "amount", "type": "string", "optional": True}]}
TASK = ConnectorTaskId("sink", 2)


def decoded_rows(rows):
    """What SinkPipeline.decoded hands the workers: raw columns + payload + converter error."""
    payload_type = pa.struct([("id", pa.int64()), ("amount", pa.string())])
    return pa.table({
        "kafka_topic": pa.array(["in"] * len(rows)), "kafka_partition": pa.array([0] * len(rows), pa.int32()),
        "kafka_offset": pa.array([r["offset"] for r in rows], pa.int64()),
        "key": pa.array([r.get("key") for r in rows], pa.binary()),
        "value": pa.array([r.get("raw", b"{}") for r in rows], pa.binary()),
        "timestamp": pa.array([1000] * len(rows), pa.int64()),
        "headers": pa.array([[{"key": "h", "value": b"1"}]] * len(rows), headers_type()),
        "__rc_payload": pa.array([r.get("payload") for r in rows], payload_type),
        "__rc_conv_error": pa.array([r.get("error") for r in rows], pa.string())})


def plan(**cfg):
    return SinkPipeline.plan({"transforms": "cast", "transforms.cast.type": "Cast$Value",
                              "transforms.cast.spec": "amount:int32", **cfg}, SCHEMA, TASK, schemaless=False)


def test_sink_worker_splits_good_rows_and_error_rows_with_dlq_headers():
    p = plan(**{"errors.tolerance": "all", "errors.deadletterqueue.context.headers.enable": "true"})
    out = p.transform(decoded_rows([
        {"offset": 0, "payload": {"id": 0, "amount": "10"}},
        {"offset": 1, "raw": b"{bad", "error": "Converting byte[] failed"},
        {"offset": 2, "payload": {"id": 2, "amount": "x"}, "raw": b"orig", "key": b"k2"},
        {"offset": 3, "payload": None, "raw": None}]))
    rows = out.to_pylist()
    good = [r for r in rows if r["__rc_err_stage"] is None]
    bad = {r["kafka_offset"]: r for r in rows if r["__rc_err_stage"] is not None}
    assert [(r["kafka_offset"], r["__rc_value"]) for r in good] == [(0, {"id": 0, "amount": 10}), (3, None)]
    assert bad[1]["__rc_err_stage"] == "VALUE_CONVERTER" and bad[1]["value"] == b"{bad"
    assert bad[2]["__rc_err_stage"] == "TRANSFORMATION" and bad[2]["key"] == b"k2" and bad[2]["value"] == b"orig"
    headers = dict((h["key"], h["value"]) for h in bad[2]["__rc_dlq_headers"])
    assert headers["h"] == b"1" and headers["__connect.errors.offset"] == b"2"
    assert headers["__connect.errors.task.id"] == b"2"
    assert headers["__connect.errors.class.name"] == b"org.apache.kafka.connect.transforms.Cast$Value"


def test_sink_worker_with_tolerance_none_raises_naming_the_record():
    p = plan()
    with pytest.raises(RuntimeError, match=r"\[sink\] Tolerance exceeded in error handler.*offset=2"):
        p.transform(decoded_rows([{"offset": 1, "payload": {"id": 1, "amount": "1"}},
                                  {"offset": 2, "payload": {"id": 2, "amount": "x"}}]))


def test_sink_worker_decodes_keys_for_key_transforms_and_rejects_bad_keys():
    p = SinkPipeline.plan({"transforms": "k", "transforms.k.type": "HoistField$Key", "transforms.k.field": "key",
                           "errors.tolerance": "all", "key.converter.schemas.enable": "false"},
                          SCHEMA, TASK, schemaless=False)
    out = p.transform(decoded_rows([{"offset": 0, "payload": {"id": 0, "amount": "a"}, "key": b'"k0"'},
                                    {"offset": 1, "payload": {"id": 1, "amount": "b"}, "key": b"{nope"}]))
    rows = out.to_pylist()
    assert [(r["kafka_offset"], r["__rc_err_stage"]) for r in rows] == [(0, None), (1, "KEY_CONVERTER")]


def test_source_worker_transforms_rows_and_plans_types():
    connect = {"type": "struct", "optional": False, "fields": [{"field": "a", "type": "int64", "optional": True}]}
    arrow = pa.schema([("a", pa.int64())])
    p = SourcePipeline.plan({"transforms": "t", "transforms.t.type": "InsertField$Value",
                             "transforms.t.timestamp.field": "ts", "transforms.t.topic.field": "tp"},
                            arrow, connect, TASK)
    out = p.transform(pa.table({"a": [1, 2]}), "topic", 5000)
    assert out.schema.equals(p.arrow_out)
    assert [r["__rc_value"]["tp"] for r in out.to_pylist()] == ["topic", "topic"]
    assert [f["field"] for f in p.out.value_schema["fields"]] == ["a", "tp", "ts"]


def test_needs_pipeline():
    assert not needs_pipeline({"topics": "x"})
    assert needs_pipeline({"transforms": "a"}) and needs_pipeline({"errors.tolerance": "all"})
    assert needs_pipeline({"errors.deadletterqueue.topic.name": "d"})


def test_source_worker_skips_bad_records_with_tolerance_all_and_fails_without():
    connect = {"type": "struct", "optional": False, "fields": [{"field": "n", "type": "string", "optional": True}]}
    arrow = pa.schema([("n", pa.string())])
    cfg = {"transforms": "c", "transforms.c.type": "Cast$Value", "transforms.c.spec": "n:int32"}
    tolerant = SourcePipeline.plan({**cfg, "errors.tolerance": "all"}, arrow, connect, TASK)
    out = tolerant.transform(pa.table({"n": ["1", "x", "3"]}), "t", None)
    assert [r["__rc_value"]["n"] for r in out.to_pylist()] == [1, 3]
    strict = SourcePipeline.plan(cfg, arrow, connect, TASK)
    with pytest.raises(RuntimeError, match=r"\[source\] Tolerance exceeded in error handler"):
        strict.transform(pa.table({"n": ["1", "x"]}), "t", None)
