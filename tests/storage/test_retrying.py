"""``RelationalMetadataStore._retrying``: the first attempt outside tenacity, then the same retries."""
from __future__ import annotations

import pytest
from django.db import IntegrityError, OperationalError

from webapp.storage.base import StoreUnavailable
from webapp.storage.relational import RelationalMetadataStore


class _Deadlock(Exception):
    sqlstate = "40P01"


def _deadlock() -> OperationalError:
    exc = OperationalError("deadlock detected")
    exc.__cause__ = _Deadlock()
    return exc


@pytest.fixture
def store():
    s = RelationalMetadataStore("retry-test", "postgresql://postgres@127.0.0.1:5432/unused")
    yield s
    s.close()


def _failing(errors: list[BaseException]):
    calls: list[int] = []

    def fn():
        calls.append(1)
        if len(calls) <= len(errors):
            raise errors[len(calls) - 1]
        return "written"
    return fn, calls


def test_a_first_attempt_that_succeeds_runs_once(store):
    fn, calls = _failing([])
    assert store._retrying(fn) == "written" and len(calls) == 1


def test_conflicts_are_retried_up_to_five_attempts_in_all(store):
    fn, calls = _failing([_deadlock()] * 4)
    assert store._retrying(fn) == "written" and len(calls) == 5
    fn, calls = _failing([_deadlock()] * 5)
    with pytest.raises(StoreUnavailable):
        store._retrying(fn)
    assert len(calls) == 5


def test_an_integrity_error_is_retried_only_when_asked(store):
    fn, calls = _failing([IntegrityError("duplicate key")])
    assert store._retrying(fn, retry_integrity=True) == "written" and len(calls) == 2
    fn, calls = _failing([IntegrityError("duplicate key")])
    with pytest.raises(IntegrityError):
        store._retrying(fn)
    assert len(calls) == 1


def test_other_errors_are_not_retried(store):
    fn, calls = _failing([OperationalError("connection refused")])
    with pytest.raises(StoreUnavailable):
        store._retrying(fn)
    assert len(calls) == 1
    fn, calls = _failing([ValueError("a bug")])
    with pytest.raises(ValueError):
        store._retrying(fn)
    assert len(calls) == 1
