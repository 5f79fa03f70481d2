"""webapp.environment: each variable's default and unit, read when asked (not at import)."""
import pytest

from webapp import environment


def test_defaults_when_nothing_is_set(monkeypatch):
    for name in ("RAFTCONNECT_TASK_IDLE_MAX_MS", "RAFTCONNECT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS",
                 "RAFTCONNECT_SINK_WAKE_INTERVAL_MS", "RAFTCONNECT_TASK_ENGINE", "RAFTCONNECT_CONFIG_PROVIDERS",
                 "RAFTCONNECT_CLUSTER_SECRET", "RAFTCONNECT_FORWARD_WAIT_S"):
        monkeypatch.delenv(name, raising=False)
    assert environment.task_idle_max_s() == 1.0
    assert environment.task_shutdown_graceful_timeout_s() == 5.0
    assert environment.sink_wake_interval_s() == 0.1
    assert environment.task_engine() == "auto"
    assert environment.config_providers() == ["env", "file", "directory"]
    assert environment.cluster_secret() is None
    assert environment.forward_wait_s() == 10.0


def test_values_are_read_at_call_time_in_their_units(monkeypatch):
    monkeypatch.setenv("RAFTCONNECT_TASK_IDLE_MAX_MS", "250")
    monkeypatch.setenv("RAFTCONNECT_TASK_ENGINE", "  Spark ")
    monkeypatch.setenv("RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS", " /a , ,/b")
    monkeypatch.setenv("RAFTCONNECT_CLUSTER_SECRET", "")
    assert environment.task_idle_max_s() == 0.25
    assert environment.task_engine() == "spark"
    assert environment.config_provider_allowed_paths() == ["/a", "/b"]
    assert environment.cluster_secret() is None  # empty is unset
    monkeypatch.setenv("RAFTCONNECT_TASK_THREADS", "many")
    with pytest.raises(ValueError):
        environment.task_threads()
