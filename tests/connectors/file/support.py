"""What the file connector tests share: unique names, the reference table, task contexts, running tasks to the end.

``ENGINE[0]`` is the batch engine the tasks get: None (every batch a Spark job, as
outside a worker) or an in-process ``BatchEngine``, set by the ``engine`` fixture
(``tests/connectors/conftest.py``) for the modules that use it.
"""
from __future__ import annotations

import itertools
import os
from pathlib import Path

import pyarrow as pa
import pyarrow.csv as pacsv

from webapp.plugin import ConnectorTaskId, TaskContext, partition_key
from webapp.connectors.file import FileSinkConnector, FileSinkTask, FileSourceConnector, FileSourceTask

from tests.connectors.support import ENGINE

_names = (f"t{i}" for i in itertools.count())


def unique(prefix: str) -> str:
    return f"{prefix}-{next(_names)}"


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


def _run_tasks(task_class, configs, spark, kafka, tmp, name, store: dict, max_batches=None) -> int:
    """Start each task of ``configs`` in turn and run it until ``run_batch`` gives None (or ``max_batches``),
    committing its offsets into ``store``; returns the records the tasks reported."""
    total = 0
    for i, cfg in enumerate(configs):
        task = task_class(context(spark, kafka, name, i, tmp, store), cfg)
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
    return total


def run_source(spark, kafka, config, tmp, name, offsets=None, max_batches=None):
    """Run every task of a FileSourceConnector until done; returns (records, offsets, task configs)."""
    conn = FileSourceConnector()
    conn.start(config)
    configs = conn.task_configs(int(config.get("tasks.max", 1)))
    store = dict(offsets or {})
    total = _run_tasks(FileSourceTask, configs, spark, kafka, tmp, name, store, max_batches)
    return total, store, configs


def run_sink(spark, kafka, config, tmp, name, offsets=None, max_batches=None):
    """Run every task of a FileSinkConnector until no new records; returns (records, offsets)."""
    conn = FileSinkConnector()
    conn.start(config)
    store = dict(offsets or {})
    total = _run_tasks(FileSinkTask, conn.task_configs(int(config.get("tasks.max", 1))), spark, kafka, tmp, name,
                       store, max_batches)
    return total, store


def data_files(path: Path) -> list[str]:
    return sorted(n for n in os.listdir(path) if not n.startswith(("_", ".")))
