"""JDBC connector tests' databases: one scratch database per server for each test module."""
from __future__ import annotations

import pytest

from tools.databases import scratch_database


@pytest.fixture(scope="module")
def pg_db():
    """A PostgreSQL database for the module's tables (dropped after it)."""
    with scratch_database("postgresql", "i6jdbc") as name:
        yield name


@pytest.fixture(scope="module")
def my_db():
    """A MariaDB database (utf8mb4, binary collation) for the module's tables (dropped after it)."""
    with scratch_database("mysql", "i6jdbc") as name:
        yield name
