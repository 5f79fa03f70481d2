"""The file source task (:mod:`webapp.connectors.file.source_task`): resuming from offsets, files that grow,
parking on the file watcher, unparsable files. Real Kafka (Tansu) and Spark; every test runs with both batch engines.
"""
from __future__ import annotations

import itertools

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from webapp.plugin import ConnectException, partition_key
from webapp.connectors.file import FileSourceConnector, FileSourceTask
from webapp.runtime.converters import decode_value
from tests.connectors.file.support import (
    assert_same_rows,
    context,
    data_files,
    reference,
    run_sink,
    run_source,
    unique,
)
from tests.kafka_helpers import read_topic

#: every test here runs with both batch engines (Spark per batch, and in-process)
pytestmark = pytest.mark.usefixtures("engine")


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


def test_a_line_being_written_is_read_once_it_is_whole(spark, kafka_broker, tmp_path, monkeypatch):
    """A followed file's unterminated last line waits for its writer (appends are not atomic); once the file
    has been quiet for PARTIAL_LINE_QUIET_SECONDS, as the task observed it on the monotonic clock, it is read
    even without a newline. Wall-clock jumps change nothing: a jump forward does not make the line being
    written look old, a jump back does not keep the finished one waiting."""
    import time

    from tools.launcher import wait_for
    from webapp.connectors.file.source_task import PARTIAL_LINE_QUIET_SECONDS

    src = tmp_path / "feed.csv"
    src.write_text("id,name,value\n1,a,0.5\n2,b")  # a writer is in the middle of row 2
    topic = unique("feed")
    conn = FileSourceConnector()
    conn.start({"path": str(src), "topic": topic})
    task = FileSourceTask(context(spark, kafka_broker, "feed", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    real_time = time.time
    try:  # each look below follows a change of the file, so how long a batch takes does not matter
        assert task.run_batch().records == 1 and task.idle_delay() == PARTIAL_LINE_QUIET_SECONDS
        # the wall clock jumps an hour ahead: the file's mtime looks an hour old from now on
        monkeypatch.setattr(time, "time", lambda: real_time() + 3600)
        with open(src, "a") as fh:
            fh.write(",1.5\n3,c")  # row 2 finished, row 3 begun
        assert task.run_batch().records == 1  # row 2 only
        with open(src, "a") as fh:
            fh.write(",2")  # row 3 still being written (no newline yet): not read, however old its mtime looks
        assert task.run_batch() is None and task.idle_delay() == PARTIAL_LINE_QUIET_SECONDS
        # and an hour back: the mtime looks an hour in the future; once quiet, row 3 is read all the same
        monkeypatch.setattr(time, "time", lambda: real_time() - 3600)
        def records() -> int:
            result = task.run_batch()
            return result.records if result is not None else 0

        row3 = wait_for(records, 30, interval=0.25, what="the unterminated last line to be read once the file is quiet")
        assert row3 == 1
    finally:
        monkeypatch.setattr(time, "time", real_time)
        task.stop()
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


def test_unparsable_source_file_fails_with_its_name(spark, kafka_broker, tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("a,b\n1,2\n3,4,5\n")
    conn = FileSourceConnector()
    conn.start({"path": str(bad), "topic": unique("bad-src")})
    task = FileSourceTask(context(spark, kafka_broker, "bad", 0, tmp_path), conn.task_configs(1)[0])
    task.start()
    with pytest.raises(ConnectException, match="bad.csv"):
        task.run_batch()
