"""errors.* handling: config, retry with backoff within the timeout, tolerance, DLQ headers."""
from __future__ import annotations

import random

import pytest

from webapp.plugin import ConnectException
from webapp.runtime.errors import (
    ErrorHandlingConfig,
    ProcessingError,
    RetriableException,
    RetryWithToleranceOperator,
    Stage,
    ToleranceExceeded,
    dlq_headers,
    is_retriable,
    validate_error_config,
)


class FakeClock:
    """A clock that only moves when the operator sleeps."""

    def __init__(self):
        self.now = 0.0
        self.sleeps: list[float] = []

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def operator(clock: FakeClock, **cfg) -> RetryWithToleranceOperator:
    return RetryWithToleranceOperator(ErrorHandlingConfig(**cfg), clock=clock, sleep=clock.sleep,
                                      rng=random.Random(1))


def flaky(failures: int, exc=RetriableException("broker away")):
    calls = {"n": 0}

    def op():
        calls["n"] += 1
        if calls["n"] <= failures:
            raise exc
        return "ok"

    return op, calls


def test_defaults_match_kafka_connect():
    cfg = ErrorHandlingConfig.from_config({})
    assert (cfg.tolerance, cfg.retry_timeout_ms, cfg.retry_delay_max_ms, cfg.log_enable, cfg.dlq_topic,
            cfg.dlq_replication_factor, cfg.dlq_context_headers) == ("none", 0, 60000, False, "", 3, False)


def test_retriable_error_is_retried_with_doubling_backoff_until_success():
    clock = FakeClock()
    op, calls = flaky(3)
    assert operator(clock, retry_timeout_ms=60_000).execute(op, Stage.KAFKA_PRODUCE) == "ok"
    assert calls["n"] == 4
    assert clock.sleeps == [0.3, 0.6, 1.2]


def test_backoff_is_capped_by_delay_max_and_by_the_deadline():
    clock = FakeClock()
    op, calls = flaky(100)
    with pytest.raises(ToleranceExceeded, match="Tolerance exceeded in error handler"):
        operator(clock, retry_timeout_ms=5_000, retry_delay_max_ms=1_000).execute(op, Stage.TASK_PUT)
    assert all(s <= 1.0 for s in clock.sleeps)
    assert sum(clock.sleeps) == pytest.approx(5.0)
    assert calls["n"] == len(clock.sleeps) + 1


def test_no_retry_by_default_and_non_retriable_errors_fail_at_once():
    clock = FakeClock()
    op, calls = flaky(1)
    with pytest.raises(ToleranceExceeded):
        operator(clock).execute(op, Stage.KAFKA_PRODUCE)
    assert calls["n"] == 1 and clock.sleeps == []
    op, calls = flaky(1, ValueError("bad data"))
    with pytest.raises(ValueError):
        operator(clock, retry_timeout_ms=60_000).execute(op, Stage.KAFKA_PRODUCE)
    assert calls["n"] == 1 and clock.sleeps == []


def test_infinite_retry_timeout_keeps_retrying():
    clock = FakeClock()
    op, calls = flaky(30)
    assert operator(clock, retry_timeout_ms=-1, retry_delay_max_ms=10).execute(op, Stage.TASK_PUT) == "ok"
    assert calls["n"] == 31


def test_transient_kafka_errors_in_the_cause_chain_are_retriable():
    try:
        try:
            raise RuntimeError("[kafka] delivery failed: KafkaError{code=_MSG_TIMED_OUT}")
        except RuntimeError as inner:
            raise ConnectException("producing failed") from inner
    except ConnectException as e:
        assert is_retriable(e)
    assert not is_retriable(ConnectException("schema mismatch"))


def test_tolerance_none_fails_and_all_skips_per_record_errors_only(caplog):
    err = ProcessingError(Stage.TRANSFORMATION, "org.apache.kafka.connect.transforms.Cast$Value",
                          "org.apache.kafka.connect.errors.DataException", "bad", topic="t", partition=0, offset=5)
    with pytest.raises(ToleranceExceeded, match="Cast"):
        operator(FakeClock()).tolerate(err)
    op = operator(FakeClock(), tolerance="all", log_enable=True, log_include_messages=True)
    with caplog.at_level("ERROR"):
        op.tolerate(err)
    assert op.total_errors_tolerated == 1
    assert "consumed record is {topic='t', partition=0, offset=5}" in caplog.text
    with pytest.raises(ToleranceExceeded):
        op.tolerate(ProcessingError(Stage.TASK_PUT, "x", "y", "z"))


def test_dlq_headers_have_kafka_names_and_order():
    err = ProcessingError.from_exception(ValueError("nope"), Stage.VALUE_CONVERTER,
                                         "org.apache.kafka.connect.json.JsonConverter", topic="in", partition=2,
                                         offset=41)
    headers = dlq_headers(err, "my-sink", 3)
    names = [k for k, _ in headers]
    p = "__connect.errors."
    assert names == [p + "topic", p + "partition", p + "offset", p + "connector.name", p + "task.id", p + "stage",
                     p + "class.name", p + "exception.class.name", p + "exception.message",
                     p + "exception.stacktrace"]
    d = dict(headers)
    assert (d[p + "topic"], d[p + "partition"], d[p + "offset"], d[p + "task.id"]) == (b"in", b"2", b"41", b"3")
    assert d[p + "stage"] == b"VALUE_CONVERTER" and d[p + "exception.class.name"] == b"builtins.ValueError"
    assert b"ValueError: nope" in d[p + "exception.stacktrace"]


def test_config_validation():
    errors = validate_error_config({"errors.tolerance": "some", "errors.retry.timeout": "-2",
                                    "errors.deadletterqueue.topic.name": "in", "topics": "in,other"})
    assert "String must be one of: none, all" in errors["errors.tolerance"][0]
    assert "at least -1" in errors["errors.retry.timeout"][0]
    assert "may not be included in the list of topics" in errors["errors.deadletterqueue.topic.name"][0]
    assert validate_error_config({"errors.deadletterqueue.topic.name": "dlq"}, sink=False)
    assert validate_error_config({"errors.tolerance": "all", "errors.log.enable": "true"}) == {}
