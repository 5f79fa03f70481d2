"""Automatic restart policy of FAILED tasks: config parsing, exponential backoff with a cap, series reset."""
from __future__ import annotations

import pytest

from webapp.runtime.restart import AUTO_RESTART, BACKOFF_MAX_MS, BACKOFF_MS, AutoRestartPolicy, RestartTracker, config_errors


def test_policy_from_config_defaults_and_opt_in():
    assert AutoRestartPolicy.from_config({}) == AutoRestartPolicy(False, 1000, 60000)
    p = AutoRestartPolicy.from_config({AUTO_RESTART: "TRUE", BACKOFF_MS: "200", BACKOFF_MAX_MS: "1000"})
    assert p == AutoRestartPolicy(True, 200, 1000)
    # a cap below the first delay is raised to it; an invalid config is the (disabled) default
    assert AutoRestartPolicy.from_config({AUTO_RESTART: "true", BACKOFF_MS: "500", BACKOFF_MAX_MS: "10"}).max_backoff_ms == 500
    assert AutoRestartPolicy.from_config({AUTO_RESTART: "yes"}).enabled is False


def test_config_errors_use_connects_messages():
    errors = config_errors({AUTO_RESTART: "yes", BACKOFF_MS: "-1", BACKOFF_MAX_MS: "soon"})
    assert errors[AUTO_RESTART] == [f"Invalid value yes for configuration {AUTO_RESTART}: Expected value to be either true or false"]
    assert "at least 0" in errors[BACKOFF_MS][0] and "Not a number of type LONG" in errors[BACKOFF_MAX_MS][0]
    assert config_errors({AUTO_RESTART: "false", BACKOFF_MS: "10"}) == {}


def test_delay_doubles_up_to_the_cap():
    p = AutoRestartPolicy(True, 100, 1000)
    assert [p.delay_ms(n) for n in range(1, 7)] == [100, 200, 400, 800, 1000, 1000]
    assert p.delay_ms(10_000) == 1000  # no overflow on long series
    with pytest.raises(ValueError):
        p.delay_ms(0)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now


def test_tracker_waits_the_backoff_counts_each_failed_instance_once_and_resets_after_a_stable_run():
    clock, p = Clock(), AutoRestartPolicy(True, 100, 1000)
    tr = RestartTracker(clock=clock)
    first = object()
    assert tr.failed("c-0", first, p, started_at=0.0) is False  # 1st failure: due in 0.1 s
    assert tr.failed("c-0", first, p, started_at=0.0) is False  # same instance: not counted again
    assert tr.failures("c-0") == 1
    clock.now = 0.1
    assert tr.failed("c-0", first, p, started_at=0.0) is True
    second = object()  # restarted at 0.1, fails again at once: 0.2 s
    assert tr.failed("c-0", second, p, started_at=0.1) is False and tr.failures("c-0") == 2
    clock.now = 0.29
    assert tr.failed("c-0", second, p, started_at=0.1) is False
    clock.now = 0.301
    assert tr.failed("c-0", second, p, started_at=0.1) is True
    third = object()  # ran 5 s (> the 1 s cap) before failing: a new series
    clock.now = 5.3
    assert tr.failed("c-0", third, p, started_at=0.3) is False and tr.failures("c-0") == 1
    tr.forget("c-0")
    assert tr.failures("c-0") == 0
