"""Fixtures of every connector package's tests: the batch engine, both kinds."""
from __future__ import annotations

import pytest

from tests.connectors.support import ENGINE


@pytest.fixture(params=["spark", "local"])
def engine(request, spark):
    """Runs a test with each batch engine: None (a Spark job per batch) and an in-process ``BatchEngine``,
    handed to the tasks through ``ENGINE[0]`` (:mod:`tests.connectors.support`)."""
    from webapp.runtime.engine import BatchEngine

    ENGINE[0] = None if request.param == "spark" else BatchEngine(spark, mode="local")
    yield request.param
    if ENGINE[0] is not None:
        ENGINE[0].shutdown()
    ENGINE[0] = None
