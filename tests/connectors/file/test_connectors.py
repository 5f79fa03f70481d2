"""The file connectors on the control plane (:mod:`webapp.connectors.file.connectors`): per-key validation
errors, task configs, task classes. No Kafka or Spark needed."""
from __future__ import annotations

import pytest

from webapp.plugin import ConnectException
from webapp.connectors.file import FileSinkConnector, FileSinkTask, FileSourceConnector, FileSourceTask
from webapp.runtime.recent import RecentKeys


def test_source_validation_reports_per_key_errors(tmp_path):
    conn = FileSourceConnector()
    errors = conn.validate({})
    assert errors["path"] and errors["topic"] and not errors["format"]
    errors = conn.validate({"path": str(tmp_path / "nope.csv"), "topic": "t", "format": "xml",
                            "tasks.max": "0", "value.converter": "org.apache.kafka.connect.storage.StringConverter",
                            "value.converter.schemas.enable": "maybe"})
    assert "does not exist" in errors["path"][0]
    assert "must be one of" in errors["format"][0]
    assert errors["tasks.max"] and errors["value.converter"] and errors["value.converter.schemas.enable"]
    odd = tmp_path / "data.xyz"
    odd.write_text("a,b\n1,2\n")
    assert "Cannot infer the format" in conn.validate({"path": str(odd), "topic": "t"})["format"][0]
    assert "Invalid topic name" in conn.validate({"path": str(odd), "topic": "bad topic", "format": "csv"})["topic"][0]
    with pytest.raises(ConnectException, match="path"):
        conn.start({"topic": "t"})
    assert all(v == [] for v in conn.validate({"path": str(odd), "topic": "t", "format": "csv"}).values())


def test_sink_validation_reports_per_key_errors(tmp_path):
    conn = FileSinkConnector()
    errors = conn.validate({})
    assert errors["topics"] and errors["path"]
    afile = tmp_path / "file"
    afile.write_text("x")
    errors = conn.validate({"topics": "a,b c", "path": str(afile), "format": "avro", "batch.max.rows": "x"})
    assert "Invalid topic name" in errors["topics"][0]
    assert "not a directory" in errors["path"][0]
    assert errors["format"] and errors["batch.max.rows"]
    with pytest.raises(ConnectException, match="topics"):
        conn.start({"path": str(tmp_path)})
    conn.start({"topics": "a, b", "path": str(tmp_path / "out"), "tasks.max": "3"})
    configs = conn.task_configs(5)
    assert [(c["task.index"], c["task.count"]) for c in configs] == [("0", "3"), ("1", "3"), ("2", "3")]


def test_connectors_name_their_task_classes():
    assert FileSourceConnector.task_class is FileSourceTask
    assert FileSinkConnector.task_class is FileSinkTask
    assert FileSourceConnector.type == "source" and FileSinkConnector.type == "sink"


def test_a_passed_path_check_is_reused_for_a_second_and_a_failed_one_never(tmp_path, monkeypatch):
    from webapp.connectors.file import connectors

    clock = [100.0]
    monkeypatch.setattr(connectors, "_passed", RecentKeys(1.0, 1024, clock=lambda: clock[0]))
    made = []
    real_check = connectors._check_source_path
    monkeypatch.setattr(connectors, "_check_source_path", lambda *a: made.append(a[1]) or real_check(*a))
    conn = FileSourceConnector()
    csv = tmp_path / "in.csv"
    config = {"path": str(csv), "topic": "t", "format": "csv"}

    assert "does not exist" in conn.validate(config)["path"][0]
    csv.write_text("a\n1\n")  # created right after the error: seen at once (failures are not kept)
    assert conn.validate(config)["path"] == []
    assert made == [str(csv), str(csv)]
    csv.unlink()
    assert conn.validate(config)["path"] == []  # a pass is reused within the second...
    assert len(made) == 2
    clock[0] += 1.0
    assert "does not exist" in conn.validate(config)["path"][0]  # ...and checked again after it
    assert len(made) == 3

    csv.write_text("a\n1\n")
    assert conn.validate(config)["path"] == []
    other_pattern = {**config, "file.pattern": "*.csv"}
    assert conn.validate(other_pattern)["path"] == [] and len(made) == 5  # another pattern: its own check
    monkeypatch.setenv("RAFTCONNECT_FILE_ALLOWED_PATHS", str(tmp_path / "elsewhere"))
    monkeypatch.setattr("webapp.runtime.file_access._policies", {})
    assert "not under" in conn.validate(config)["path"][0]  # other allowed roots: checked again
    assert len(made) == 6
