"""The file connectors on the control plane (:mod:`webapp.connectors.file.connectors`): per-key validation
errors, task configs, task classes. No Kafka or Spark needed."""
from __future__ import annotations

import pytest

from webapp.plugin import ConnectException
from webapp.connectors.file import FileSinkConnector, FileSinkTask, FileSourceConnector, FileSourceTask


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
