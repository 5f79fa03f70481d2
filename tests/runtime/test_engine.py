"""The batch engine: where a batch runs, the in-process runner, and in-process JsonConverter encoding."""
from __future__ import annotations

import datetime as dt
import json
import threading
import time

import pyarrow as pa
import pytest

from webapp.runtime.engine import (BatchEngine, PhaseTimes, encode_values, local_encodable, partition_index, phase,
                                   timed, use_phases)


# --------------------------------------------------------------------------------------
# choosing the path
# --------------------------------------------------------------------------------------
def test_auto_runs_small_batches_in_process_and_big_ones_on_spark():
    engine = BatchEngine(spark=object(), mode="auto", spark_min_rows=1000)
    assert not engine.use_spark({}, 999)
    assert engine.use_spark({}, 1000)
    assert not engine.use_spark({}, None)  # unknown size: in-process
    assert engine.use_spark({"raftconnect.spark.min.batch.rows": "10"}, 10)  # the connector's own threshold
    assert engine.batches == {"local": 2, "spark": 2}


def test_modes_force_a_path_and_no_local_path_means_spark():
    engine = BatchEngine(spark=object(), mode="auto")
    assert engine.use_spark({"raftconnect.task.engine": "spark"}, 1)
    assert not engine.use_spark({"raftconnect.task.engine": "local"}, 10**9)
    assert engine.use_spark({"raftconnect.task.engine": "local"}, 1, local_ok=False)
    assert not BatchEngine(spark=None).use_spark({}, 10**9)  # no Spark at all: in-process
    with pytest.raises(ValueError, match="raftconnect.task.engine must be one of"):
        engine.use_spark({"raftconnect.task.engine": "gpu"}, 1)


def test_the_worker_default_comes_from_the_environment(monkeypatch):
    monkeypatch.setenv("RAFTCONNECT_TASK_ENGINE", "spark")
    monkeypatch.setenv("RAFTCONNECT_SPARK_MIN_BATCH_ROWS", "5")
    engine = BatchEngine(spark=object())
    assert engine.mode == "spark" and engine.spark_min_rows == 5
    assert not engine.use_spark({"raftconnect.task.engine": "local"}, 1)


# --------------------------------------------------------------------------------------
# running pieces in-process
# --------------------------------------------------------------------------------------
def test_pieces_run_in_parallel_in_order_and_know_their_index():
    engine = BatchEngine(spark=None, threads=4)
    inside, peak, lock = [0], [0], threading.Lock()
    gate = threading.Barrier(4, timeout=10)  # all four pieces must be running at once to pass it

    def fn(batches):
        ids = [i for b in batches for i in b.column(0).to_pylist()]
        with lock:
            inside[0] += 1
            peak[0] = max(peak[0], inside[0])
        gate.wait()
        with lock:
            inside[0] -= 1
        yield pa.record_batch([pa.array(ids), pa.array([partition_index()])], names=["id", "index"])

    out = engine.run_pieces(fn, 4)
    assert [b[0].to_pydict() for b in out] == [{"id": [i], "index": [i]} for i in range(4)]
    assert peak[0] == 4
    engine.shutdown()


def test_a_failing_piece_fails_the_batch_after_every_piece_ended():
    engine = BatchEngine(spark=None, threads=3)
    ended = []
    failing = threading.Event()

    def fn(batches):
        i = partition_index()
        if i == 0:
            failing.set()
            raise ValueError("[source] piece 0 is bad")
        assert failing.wait(30)  # the other pieces are still running when piece 0 fails
        ended.append(i)
        yield pa.record_batch([pa.array([i])], names=["id"])

    with pytest.raises(ValueError, match="piece 0 is bad"):
        engine.run_pieces(fn, 3)
    assert sorted(ended) == [1, 2]
    engine.shutdown()


def test_phase_times_are_summed_per_task_across_piece_threads():
    engine = BatchEngine(spark=None, threads=2)
    times = PhaseTimes()

    def fn(batches):
        for b in batches:
            with phase("encode"):
                time.sleep(0.05)
            yield b

    use_phases(times)
    try:
        engine.run_pieces(lambda batches: timed(fn(batches), "read"), 2)
    finally:
        use_phases(None)
    got = times.as_json()
    assert got["encode"] >= 0.1 - 1e-3  # two pieces, 50 ms each
    assert got["read"] >= got["encode"] - 1e-3  # reading a piece's items includes the encoding inside
    engine.shutdown()


# --------------------------------------------------------------------------------------
# encoding JsonConverter values in-process
# --------------------------------------------------------------------------------------
def _mixed_table() -> pa.Table:
    return pa.table({
        "i8": pa.array([1, None, -128], pa.int8()),
        "i64": pa.array([2**62, 0, None], pa.int64()),
        "f32": pa.array([3.4028235e38, None, 1.5], pa.float32()),
        "f64": pa.array([0.1, 5e-324, None], pa.float64()),
        "b": pa.array([True, False, None]),
        "s": pa.array(['quote " backslash \\ newline \n', "4-byte \U0001F600", None]),
        "empty": pa.array(["", None, "x"]),
        "ts": pa.array([dt.datetime(1969, 12, 31, 23, 59, 59, 999000), dt.datetime(9999, 12, 31), None],
                       pa.timestamp("us", tz="UTC")),
        "d": pa.array([dt.date(1, 1, 1), dt.date(1970, 1, 2), None]),
        "raw": pa.array([b"\x00\xff", None, b""], pa.binary()),
        "lst": pa.array([[1, 2], None, []], pa.list_(pa.int32())),
        "st": pa.array([{"x": 1, "when": dt.date(2020, 1, 2)}, None, {"x": None, "when": None}]),
    })


def test_in_process_values_equal_the_jvm_path(spark):
    """Both paths must put the same records into Kafka: compare every payload and the schema."""
    from webapp.runtime.converters import encode_value_column

    table = _mixed_table()
    local = [json.loads(v) for v in encode_values(table).to_pylist()]
    df = spark.createDataFrame(table)
    jvm = [json.loads(r.v) for r in df.select(encode_value_column(df.schema).alias("v")).collect()]
    assert [v["payload"] for v in local] == [v["payload"] for v in jvm]
    assert local[0]["schema"]["fields"][0] == {"field": "i8", "type": "int8", "optional": True}
    assert [f["field"] for f in local[0]["schema"]["fields"]] == table.column_names


def test_nan_and_infinities_are_the_same_bytes_on_both_paths(spark):
    """NaN and infinities: the strings "NaN", "Infinity", "-Infinity", as Connect's JsonConverter (Jackson's
    default) and Spark's to_json write them, byte for byte on both paths; before, the in-process path wrote null.

    Only non-finite values and floats whose text both write alike are compared as bytes: for other finite floats
    Java's Double/Float.toString (1.0E16) and the in-process shortest form (1e+16) are different texts of the same
    value (compared as values in :func:`test_in_process_values_equal_the_jvm_path`)."""
    from webapp.runtime.converters import encode_value_column

    nan, inf = float("nan"), float("inf")
    table = pa.table({"id": pa.array([1, 2, 3, 4, 5], pa.int64()),
                      "f64": pa.array([nan, inf, -inf, None, 0.1], pa.float64()),
                      "f32": pa.array([-inf, nan, 1.5, inf, None], pa.float32()),
                      "s": pa.array(["NaN", None, "", "x", "é"])})
    df = spark.createDataFrame(table)
    for schemas in (True, False):
        local = encode_values(table, schemas_enable=schemas).to_pylist()
        jvm = [r.v.encode() for r in df.select(encode_value_column(df.schema, schemas).alias("v")).collect()]
        assert local == jvm
    assert [json.loads(v)["f64"] for v in encode_values(table, schemas_enable=False).to_pylist()] == [
        "NaN", "Infinity", "-Infinity", None, 0.1]


def test_schemaless_values_are_bare_payloads_and_nulls_are_kept():
    values = encode_values(pa.table({"a": [1, None], "b": ["x", None]}), schemas_enable=False).to_pylist()
    assert [json.loads(v) for v in values] == [{"a": 1, "b": "x"}, {"a": None, "b": None}]


def test_types_without_an_in_process_encoding_are_refused():
    decimals = pa.table({"d": pa.array([1], pa.decimal128(5, 2))})
    assert not local_encodable(decimals.schema)
    assert local_encodable(_mixed_table().schema)
    with pytest.raises(ValueError, match="cannot encode"):
        encode_values(decimals)


# --------------------------------------------------------------------------------------
# worker processes
# --------------------------------------------------------------------------------------
_AGENT = """
import sys, time
from webapp.runtime.engine import BatchEngine
e = BatchEngine(None, mode="local")
e.processes = 2
import threading
t = threading.Thread(target=e.warm)  # as the agent does: warmed from a thread that then ends
t.start()
t.join()
import pyarrow as pa
def fn(batches):
    for b in batches:
        yield b
print(sum(e.run_pieces(fn, 2, lambda i, bs: sum(b.num_rows for b in bs), processes=True)), flush=True)
time.sleep(120)
"""


def test_pieces_run_in_worker_processes_that_die_with_the_agent(tmp_path):
    """Pieces shipped to the engine's processes give their results back; kill -9 of the agent leaves no orphan."""
    import os
    import subprocess
    import sys

    from tools.launcher import wait_for

    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    agent = subprocess.Popen([sys.executable, "-c", _AGENT], cwd=root, stdout=subprocess.PIPE, text=True)
    try:
        assert agent.stdout.readline().strip() == "2"  # one row per piece, counted in the worker processes
        kids = subprocess.run(["pgrep", "-P", str(agent.pid)], capture_output=True, text=True).stdout.split()
        assert len(kids) >= 2
    finally:
        agent.kill()
        agent.wait()

    def gone(pid: str) -> bool:
        try:
            with open(f"/proc/{pid}/stat") as f:
                return f.read().split()[2] == "Z"
        except OSError:
            return True
    wait_for(lambda: all(gone(k) for k in kids), 30, what="the worker processes to die with the agent")
