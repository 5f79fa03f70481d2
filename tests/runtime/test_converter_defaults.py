"""The worker's converters (worker properties key/value/header.converter) as the defaults of connector configs."""
from __future__ import annotations

import json
import threading

import pytest

from tools.launcher import wait_for
from webapp.connect import workerconfig
from webapp.connect.herder import connector_config_errors
from webapp.plugin import ConnectorTaskId, SourceConnector, Task
from webapp.runtime import converter_defaults, registry
from webapp.runtime.converter_defaults import ENV, with_defaults
from webapp.runtime.worker import Worker
from webapp.runtime.worker_task import TaskExecutor, WorkerTask
from webapp.states import TargetState

JSON = "org.apache.kafka.connect.json.JsonConverter"
STRING = "org.apache.kafka.connect.storage.StringConverter"
WORKER = {"key.converter": STRING, "value.converter": JSON, "value.converter.schemas.enable": "false"}


def test_a_connector_without_a_converter_of_a_kind_gets_the_workers():
    assert with_defaults({"topic": "t"}, WORKER) == {"topic": "t", **WORKER}
    # its own value converter: none of the worker's value settings; the key converter still comes from the worker
    own = {"value.converter": JSON}
    assert with_defaults(own, WORKER) == {**own, "key.converter": STRING}
    # a setting of its own without a class: kept (Connect would take the worker's)
    kept = {"value.converter.schemas.enable": "true"}
    assert with_defaults(kept, WORKER)["value.converter.schemas.enable"] == "true"
    plain = {"topic": "t"}
    assert with_defaults(plain, {}) is plain  # nothing to add: no copy


def test_environment(monkeypatch):
    monkeypatch.delenv(ENV, raising=False)
    assert converter_defaults.from_environment() == {}
    monkeypatch.setenv(ENV, json.dumps(WORKER))
    assert converter_defaults.from_environment() == WORKER
    monkeypatch.setenv(ENV, "[1, 2]")
    with pytest.raises(ValueError, match=ENV):
        converter_defaults.from_environment()


def test_worker_properties_carry_them_and_warn_of_a_converter_not_here():
    cfg = workerconfig.worker_config({**WORKER, "header.converter": "x.Y"}, environ={})
    assert json.loads(cfg.env[ENV]) == {**WORKER, "header.converter": "x.Y"}
    assert not any("converter" in k for k in cfg.ignored) and cfg.warnings == []
    avro = workerconfig.worker_config({"value.converter": "io.confluent.connect.avro.AvroConverter"}, environ={})
    assert any("AvroConverter: not available" in w for w in avro.warnings)
    assert ENV not in workerconfig.worker_config(WORKER, environ={ENV: "{}"}).env  # the environment wins


def test_validation_sees_the_workers_converters(monkeypatch):
    plugin = registry.resolve("io.confluent.connect.jdbc.JdbcSourceConnector")
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSourceConnector", "mode": "bulk",
              "connection.url": "jdbc:postgresql://127.0.0.1:5432/test", "topic.prefix": "t-"}
    monkeypatch.delenv(ENV, raising=False)
    assert not connector_config_errors(dict(config), plugin).get("value.converter.schemas.enable")
    # the worker's schemaless JSON would reach this connector, which needs schemas: refused at create time
    monkeypatch.setenv(ENV, json.dumps(WORKER))
    assert connector_config_errors(dict(config), plugin)["value.converter.schemas.enable"]
    assert not connector_config_errors({**config, "value.converter": JSON}, plugin).get(
        "value.converter.schemas.enable")  # its own converter: the worker's settings do not apply


SEEN: list[dict] = []


class CaptureTask(Task):
    def start(self):
        SEEN.append(dict(self.config))

    def run_batch(self):
        return None


class CaptureConnector(SourceConnector):
    task_class = CaptureTask
    version = "test"

    def task_configs(self, max_tasks):
        return [dict(self.config)]


@pytest.fixture
def capture(monkeypatch):
    desc = registry.PluginDesc("CaptureConnector", "source", "test", CaptureConnector)
    monkeypatch.setattr(registry, "resolve", lambda name: desc)
    monkeypatch.setenv(ENV, json.dumps(WORKER))
    SEEN.clear()


def test_the_task_split_and_the_task_run_with_them(capture, tmp_path):
    configs, _ = Worker._split({"connector.class": "CaptureConnector", "topic": "t"})
    assert configs == [{"connector.class": "CaptureConnector", "topic": "t", **WORKER}]
    executor = TaskExecutor(threads=2)
    client = type("C", (), {"report_status": lambda *a, **k: None, "start_task": lambda *a, **k: [],
                            "lock": threading.Lock()})()
    task = WorkerTask(task_id=ConnectorTaskId("c", 0), config={"connector.class": "CaptureConnector", "topic": "t"},
                      generation=1, target_state=TargetState.STARTED, client=client, spark=None, kafka_config={},
                      work_dir=str(tmp_path), executor=executor)
    try:
        task.start()
        wait_for(lambda: SEEN, 10, what="the task to start")
        assert SEEN[0]["value.converter.schemas.enable"] == "false" and SEEN[0]["key.converter"] == STRING
        assert "key.converter" not in task.config  # the view's config is compared as it came
    finally:
        task.stop()
        task.join(10)
        executor.shutdown()
