"""How the JDBC tasks run their work: shipped to Spark's workers, or in-process on the engine.

Owns registering :mod:`.dbio` with cloudpickle by value (Spark's workers receive its
functions without importing it), the one-line cause of a failed Spark job that a
task's error names (``_spark_error``), and ``_LocalJob``: a job run on the runtime's
engine that answers ``collect()`` like a Spark job.

Must not touch: what a job reads or writes (the tasks and :mod:`.dbio` decide).
"""
from __future__ import annotations

from . import dbio

__all__: list[str] = []


def _register_by_value() -> None:
    """Ship ``dbio`` to Spark's workers by value (they never import this project)."""
    from pyspark import cloudpickle

    cloudpickle.register_pickle_by_value(dbio)


def _spark_error(e: BaseException) -> str:
    text = str(e)
    for marker in ("[jdbc] ", "[source] ", "[sink] ", "[kafka] ", "StaleOffsetError", "SparkException: "):
        idx = text.find(marker)
        if idx >= 0:
            return text[idx:].splitlines()[0][:2000]
    return (text.splitlines()[0] if text else repr(e))[:2000]


class _LocalJob:
    """A sink job run in-process: ``collect()`` gives the same rows as the Spark job's (see write_partition)."""

    def __init__(self, engine, fn, n: int):
        self.engine, self.fn, self.n = engine, fn, n

    def collect(self) -> list:
        return [_Row(r) for batches in self.engine.run_pieces(self.fn, self.n) for b in batches for r in b.to_pylist()]


class _Row(dict):
    """A result row readable as ``row.name`` and ``row["name"]``, like a Spark Row."""

    __getattr__ = dict.__getitem__
