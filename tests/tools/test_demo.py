"""The demos' shared wait (``tools.demo.run_until_sunk``) against a fake REST client, and their shared check of
what reached the sink (``verify_tables`` / ``verify_sink``): no node needed."""
from __future__ import annotations

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from tools.demo import run_until_sunk, verify_sink, verify_tables


class FakeClient:
    def __init__(self, sunk: list[int], failures: dict[str, list[str]] | None = None):
        self.created: list[str] = []
        self._sunk = iter(sunk)
        self._last = 0
        self._failures = failures or {}

    def create_connector(self, name, config):
        self.created.append(name)

    def failures(self, name):
        return self._failures.get(name, [])

    def sink_offsets_total(self, name):
        self._last = next(self._sunk, self._last)
        return self._last


def test_creates_in_order_and_returns_once_every_row_is_in_the_sink():
    said: list[str] = []
    client = FakeClient([0, 40, 100])
    seconds = run_until_sunk(client, {"src": {}, "sink": {}}, sink="sink", rows=100, where="the sink",
                             say=said.append, timeout=30, poll=0.01)
    assert client.created == ["src", "sink"] and seconds >= 0
    assert said[-1].startswith("        100 / 100 rows in the sink")


def test_a_failed_connector_or_the_timeout_ends_the_wait():
    with pytest.raises(RuntimeError, match="a connector failed:\ntask 0 FAILED"):
        run_until_sunk(FakeClient([0], {"src": ["task 0 FAILED"]}), {"src": {}, "sink": {}}, sink="sink",
                       rows=1, where="the sink", say=lambda m: None, timeout=30, poll=0.01)
    with pytest.raises(RuntimeError, match="MariaDB holds 5 of 10 rows after 0 s"):
        run_until_sunk(FakeClient([5]), {"sink": {}}, sink="sink", rows=10, where="MariaDB",
                       say=lambda m: None, timeout=0.05, poll=0.01)


def test_both_demos_verify_rows_columns_and_checksums_the_same_way(tmp_path):
    source = pa.table({"id": [1, 2, 3], "name": ["a", "b", None]})
    assert verify_tables(source, source).ok
    changed = verify_tables(source, pa.table({"id": [1, 2, 3], "name": ["a", "B", None]}))
    assert not changed.ok and changed.problems[0].startswith("column name:")
    assert verify_tables(source, source.slice(0, 2)).problems == ["row count: source 3, sink 2"]
    pq.write_table(source, tmp_path / "part-0.parquet")
    report = verify_sink(source, tmp_path)
    assert report.ok and (report.source_rows, report.sink_rows, report.columns) == (3, 3, 2)
