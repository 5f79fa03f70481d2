"""raftconnect.file.allowed.paths: what the file connectors may read and write, one test per way out.

Real files, real symbolic links; no Kafka or Spark is needed because every
refusal happens before a task touches either. The REST and node-process side
is ``tests/integration/test_file_sandbox.py``.
"""
from __future__ import annotations

import os

import pytest

from webapp.runtime import file_access
from webapp.plugin import ConnectException, ConnectorTaskId, TaskContext
from webapp.connectors.file import FileSinkConnector, FileSinkTask, FileSourceConnector, FileSourceTask

SETTING = "raftconnect.file.allowed.paths"


@pytest.fixture
def node_dirs(tmp_path, monkeypatch):
    """A node's data dir (with ``cluster.secret`` and the default ``files/`` root) and a secret outside it.

    The setting is unset, as on a fresh node: only ``<data>/files`` is allowed.
    """
    data = tmp_path / "node"
    (data / "files").mkdir(parents=True)
    (data / "cluster.secret").write_text("the-cluster-secret\n")
    outside = tmp_path / "elsewhere"
    outside.mkdir()
    (outside / "secret.csv").write_text("token\nouter-secret\n")
    monkeypatch.setenv("RAFTCONNECT_DATA_DIR", str(data))
    monkeypatch.delenv(file_access.ENV, raising=False)
    return data, data / "files", outside


def source_errors(path: str, **extra) -> list[str]:
    return FileSourceConnector().validate({"path": path, "topic": "t", "format": "csv", **extra})["path"]


def sink_errors(path: str) -> list[str]:
    return FileSinkConnector().validate({"topics": "t", "path": path})["path"]


def test_the_default_root_is_the_data_dirs_files_and_a_file_there_is_allowed(node_dirs):
    data, files, _ = node_dirs
    (files / "in.csv").write_text("a\n1\n")
    access = file_access.policy()
    assert access.default and access.roots == (os.path.realpath(files),)
    assert source_errors(str(files / "in.csv")) == []
    assert sink_errors(str(files / "out" / "new")) == []  # need not exist yet


def test_an_absolute_path_outside_the_roots_is_refused_without_saying_whether_it_exists(node_dirs):
    _, _, outside = node_dirs
    for path in (str(outside / "secret.csv"), str(outside / "no-such-file.csv"), "/etc/shadow"):
        errors = source_errors(path)
        assert len(errors) == 1 and SETTING in errors[0] and "not under" in errors[0], errors
        assert "does not exist" not in errors[0] and "readable" not in errors[0]
    assert SETTING in sink_errors(str(outside / "out"))[0]


def test_dot_dot_traversal_out_of_the_root_is_refused(node_dirs):
    _, files, outside = node_dirs
    escape = f"{files}/../../elsewhere/secret.csv"
    assert os.path.exists(escape)
    errors = source_errors(escape)
    assert SETTING in errors[0] and "'..'" in errors[0]
    assert SETTING in sink_errors(f"{files}/../../elsewhere/out")[0]


def test_a_symlink_inside_the_root_pointing_outside_is_refused_also_inside_a_directory(node_dirs):
    _, files, outside = node_dirs
    link = files / "innocent.csv"
    link.symlink_to(outside / "secret.csv")
    errors = source_errors(str(link))
    assert SETTING in errors[0] and "symbolic link" in errors[0]
    assert str(outside) not in errors[0]  # the message does not tell where the link points
    # a directory source: its files are checked one by one (the link is one of them)
    folder = files / "batch"
    folder.mkdir()
    (folder / "a.csv").write_text("a\n1\n")
    (folder / "b.csv").symlink_to(outside / "secret.csv")
    assert SETTING in source_errors(str(folder))[0]
    (folder / "b.csv").unlink()
    assert source_errors(str(folder)) == []
    # a sink directory that is a link out of the root
    (files / "out").symlink_to(outside, target_is_directory=True)
    assert SETTING in sink_errors(str(files / "out"))[0]


def test_the_data_dir_and_its_cluster_secret_are_refused_even_under_an_allowed_root(node_dirs, monkeypatch):
    data, files, _ = node_dirs
    for setting in (None, str(data.parent)):  # default, then a root that contains the whole data dir
        if setting:
            monkeypatch.setenv(file_access.ENV, setting)
        for path in (str(data), str(data / "cluster.secret"), str(data / "raft")):
            errors = source_errors(path) if path.endswith("secret") else sink_errors(path)
            assert SETTING in errors[0] and "data directory" in errors[0], (setting, path, errors)
        (files / "ok.csv").write_text("a\n1\n")
        assert source_errors(str(files / "ok.csv")) == []  # its files/ stays usable


def test_the_setting_lists_roots_and_replaces_the_default(node_dirs, monkeypatch, tmp_path):
    _, files, outside = node_dirs
    monkeypatch.setenv(file_access.ENV, f" {outside} , {tmp_path / 'other'} ")
    access = file_access.policy()
    assert not access.default and access.roots == (os.path.realpath(outside), os.path.realpath(tmp_path / "other"))
    assert source_errors(str(outside / "secret.csv")) == []
    (files / "in.csv").write_text("a\n1\n")
    assert SETTING in source_errors(str(files / "in.csv"))[0]  # files/ is only the default
    assert file_access.normalize("rel/a, /abs/b,,") == f"{os.path.abspath('rel/a')},/abs/b"


def test_a_process_without_data_dir_or_setting_allows_nothing(monkeypatch, tmp_path):
    monkeypatch.delenv("RAFTCONNECT_DATA_DIR", raising=False)
    monkeypatch.delenv(file_access.ENV, raising=False)
    (tmp_path / "in.csv").write_text("a\n1\n")
    assert "allowed: nothing" in source_errors(str(tmp_path / "in.csv"))[0]
    assert SETTING in source_errors("bad\x00path")[0]  # not a crash


def _context(tmp_path, name: str) -> TaskContext:
    return TaskContext(task_id=ConnectorTaskId(name, 0), spark=None, kafka_config={}, work_dir=str(tmp_path))


def test_a_symlink_swapped_in_after_validation_fails_the_source_task_before_it_reads(node_dirs, tmp_path):
    _, files, outside = node_dirs
    feed = files / "feed.csv"
    feed.write_text("a\n1\n")
    conn = FileSourceConnector()
    conn.start({"path": str(feed), "topic": "t"})  # validated: a regular file in the root
    task_config = conn.task_configs(1)[0]
    feed.unlink()
    feed.symlink_to(outside / "secret.csv")
    with pytest.raises(file_access.PathNotAllowed, match=SETTING) as raised:
        FileSourceTask(_context(tmp_path, "swap"), task_config).start()
    assert isinstance(raised.value, ConnectException)
    with pytest.raises(file_access.PathNotAllowed, match=SETTING):  # the connector re-splitting refuses too
        conn.task_configs(1)


def test_a_symlink_swapped_in_after_validation_fails_the_sink_task_before_it_writes(node_dirs, tmp_path):
    _, files, outside = node_dirs
    out = files / "out"
    conn = FileSinkConnector()
    conn.start({"topics": "t", "path": str(out)})
    out.symlink_to(outside, target_is_directory=True)
    with pytest.raises(file_access.PathNotAllowed, match=SETTING):
        FileSinkTask(_context(tmp_path, "swap-sink"), conn.task_configs(1)[0]).start()
    assert sorted(os.listdir(outside)) == ["secret.csv"]  # no staging directory was created there


def test_a_changed_setting_applies_at_once_and_a_repointed_root_link_within_the_policy_ttl(tmp_path, monkeypatch):
    a, b = tmp_path / "a", tmp_path / "b"
    a.mkdir()
    b.mkdir()
    link = tmp_path / "root"
    link.symlink_to(a)
    monkeypatch.delenv("RAFTCONNECT_DATA_DIR", raising=False)
    monkeypatch.setenv(file_access.ENV, str(a))
    assert file_access.policy().roots == (str(a),)
    monkeypatch.setenv(file_access.ENV, str(link))
    assert file_access.policy().roots == (str(a),)  # a new setting: resolved now, through the link
    link.unlink()
    link.symlink_to(b)
    assert file_access.policy().roots == (str(a),)  # the same setting within POLICY_TTL_S: as resolved
    monkeypatch.setattr(file_access, "POLICY_TTL_S", 0.0)
    assert file_access.policy().roots == (str(b),)
    assert file_access.violation(str(b / "x.csv")) is None and file_access.violation(str(a / "x.csv")) is not None

