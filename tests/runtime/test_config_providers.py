"""Config providers: ${env:...}, ${file:...}, ${directory:...}; resolved by the worker, never shown by REST."""
from __future__ import annotations

import pytest

from webapp.plugin import ConfigDef, ConfigKey
from webapp.runtime.config_providers import (HIDDEN, ConfigProviderError, mask_passwords, password_keys,
                                             reverse_transform, transform)


@pytest.fixture
def secrets(tmp_path, monkeypatch):
    props = tmp_path / "db.properties"
    props.write_text("# comment\nuser=alice\npassword = s3cr=t\nurl: jdbc:x\\\n  :y\n")
    d = tmp_path / "secrets"
    d.mkdir()
    (d / "token").write_text("tok-123\n")
    monkeypatch.setenv("DB_HOST", "db.example")
    return tmp_path


def test_each_provider_resolves(secrets):
    raw = {"host": "${env:DB_HOST}", "user": f"${{file:{secrets}/db.properties:user}}",
           "password": f"${{file:{secrets}/db.properties:password}}", "url": f"${{file:{secrets}/db.properties:url}}",
           "token": f"${{directory:{secrets}/secrets:token}}", "dsn": "postgres://${env:DB_HOST}:5432/x",
           "plain": "no $ {reference} here"}
    out = transform(raw)
    assert out == {"host": "db.example", "user": "alice", "password": "s3cr=t", "url": "jdbc:x:y",
                   "token": "tok-123\n", "dsn": "postgres://db.example:5432/x", "plain": "no $ {reference} here"}
    assert raw["host"] == "${env:DB_HOST}"  # the input is not changed


@pytest.mark.parametrize(("value", "message"), [
    ("${vault:secret/x:y}", "config k: unknown config provider 'vault' in ${vault:secret/x:y} (enabled: env, file, directory)"),
    ("${env:NOT_SET_ANYWHERE_42}", "environment variable NOT_SET_ANYWHERE_42 is not set on this worker"),
    ("${env:RAFTCONNECT_CLUSTER_SECRET}", "environment variable RAFTCONNECT_CLUSTER_SECRET is not allowed"),
    ("${file:{d}/db.properties:nokey}", "key nokey not found in"),
    ("${file:{d}/missing.properties:user}", "cannot read"),
    ("${directory:{d}/secrets:nofile}", "no file nofile in"),
    ("${directory:{d}/secrets:../db.properties}", "is not a file name"),
])
def test_failures_name_the_reference_and_the_cause(secrets, value, message):
    with pytest.raises(ConfigProviderError) as err:
        transform({"k": value.replace("{d}", str(secrets))})
    assert message.replace("{d}", str(secrets)) in str(err.value)
    assert str(err.value).startswith("config k: ")


def test_worker_settings_restrict_providers_paths_and_variables(secrets, monkeypatch, tmp_path):
    monkeypatch.setenv("RAFTCONNECT_CONFIG_PROVIDERS", "file")
    with pytest.raises(ConfigProviderError, match="unknown config provider 'env'"):
        transform({"k": "${env:DB_HOST}"})
    monkeypatch.setenv("RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS", str(secrets / "secrets"))
    with pytest.raises(ConfigProviderError, match="is not under RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS"):
        transform({"k": f"${{file:{secrets}/db.properties:user}}"})
    monkeypatch.delenv("RAFTCONNECT_CONFIG_PROVIDERS")
    assert transform({"k": f"${{directory:{secrets}/secrets:token}}"}) == {"k": "tok-123\n"}
    monkeypatch.setenv("RAFTCONNECT_CONFIG_PROVIDERS_ENV_ALLOWLIST_PATTERN", "APP_.*")
    with pytest.raises(ConfigProviderError, match="DB_HOST is not allowed"):
        transform({"k": "${env:DB_HOST}"})


@pytest.fixture
def fresh_node(secrets, monkeypatch):
    """A node's data dir with its ``cluster.secret`` and ``files/``; no path setting (the secure default)."""
    data = secrets / "node"
    (data / "files").mkdir(parents=True)
    (data / "cluster.secret").write_text("the-cluster-secret\n")
    (data / "files" / "app.properties").write_text("user=bob\n")
    monkeypatch.setenv("RAFTCONNECT_DATA_DIR", str(data))
    monkeypatch.delenv("RAFTCONNECT_FILE_ALLOWED_PATHS", raising=False)
    monkeypatch.delenv("RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS", raising=False)
    return data


def test_file_references_outside_the_allowed_roots_are_refused_by_default(fresh_node, secrets):
    for ref in (f"${{file:{fresh_node}/cluster.secret:x}}", f"${{file:{fresh_node}/files/../cluster.secret:x}}",
                f"${{file:{secrets}/db.properties:user}}", f"${{directory:{secrets}/secrets:token}}"):
        with pytest.raises(ConfigProviderError, match="raftconnect.file.allowed.paths"):
            transform({"k": ref})
    assert transform({"k": f"${{file:{fresh_node}/files/app.properties:user}}"}) == {"k": "bob"}


def test_a_directory_key_that_links_out_of_the_directory_is_refused(fresh_node, secrets):
    d = fresh_node / "files" / "creds"
    d.mkdir()
    (d / "ok").write_text("fine")
    (d / "leak").symlink_to(fresh_node / "cluster.secret")
    assert transform({"k": f"${{directory:{d}:ok}}"}) == {"k": "fine"}
    with pytest.raises(ConfigProviderError, match="data directory"):
        transform({"k": f"${{directory:{d}:leak}}"})


def test_the_providers_own_list_still_decides_but_never_opens_the_data_dir(fresh_node, secrets, monkeypatch):
    monkeypatch.setenv("RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS", str(secrets))  # contains the data dir
    assert transform({"k": f"${{file:{secrets}/db.properties:user}}"}) == {"k": "alice"}
    with pytest.raises(ConfigProviderError, match="data directory"):
        transform({"k": f"${{file:{fresh_node}/cluster.secret:x}}"})
    # the file connectors' setting does not widen the providers' own list
    monkeypatch.setenv("RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS", str(secrets / "secrets"))
    monkeypatch.setenv("RAFTCONNECT_FILE_ALLOWED_PATHS", str(secrets))
    with pytest.raises(ConfigProviderError, match="is not under RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS"):
        transform({"k": f"${{file:{secrets}/db.properties:user}}"})


def test_reverse_transform_keeps_secrets_out_of_task_configs(secrets):
    raw = {"password": "${env:DB_HOST}", "topic": "t"}
    resolved = transform(raw)
    tasks = [{"password": "db.example", "topic": "t", "task.id": "0"}]
    assert reverse_transform(raw, resolved, tasks) == [{"password": "${env:DB_HOST}", "topic": "t", "task.id": "0"}]


def test_password_keys_are_masked_as_kafka_does():
    cdef = ConfigDef((ConfigKey("user"), ConfigKey("password", "PASSWORD")))
    assert mask_passwords({"user": "a", "password": "x"}, password_keys(cdef)) == {"user": "a", "password": HIDDEN}
    assert HIDDEN == "[hidden]"


class RecordingClient:
    """The control-plane client's calls the worker makes here, recorded (no cluster in these tests)."""

    def __init__(self):
        self.task_configs: list[list[dict]] = []
        self.statuses: list[tuple] = []

    def put_task_configs(self, connector, generation, configs):
        self.task_configs.append(configs)

    def report_status(self, connector, task, generation, state, trace=None):
        self.statuses.append((connector, task, state, trace))

    def get_offsets(self, connector):
        return []

    def start_task(self, task_id, generation):
        return self.get_offsets(task_id.connector)


def _connector(path_value: str) -> dict:
    return {"config": {"connector.class": "raftconnect.connectors.file.FileSourceConnector", "name": "src",
                       "path": path_value, "format": "csv", "topic": "t", "tasks.max": "1"},
            "generation": 1, "target_state": "STARTED", "tasks": []}


def test_the_worker_starts_the_connector_with_resolved_values_and_stores_references(tmp_path, monkeypatch):
    from webapp.runtime.worker import Worker

    (tmp_path / "in.csv").write_text("a\n1\n")
    monkeypatch.setenv("IN_FILE", str(tmp_path / "in.csv"))
    client = RecordingClient()
    worker = Worker(worker_id="w1", client=client, member={}, kafka_config={}, data_dir=str(tmp_path),
                    spark_factory=lambda: None)
    worker._reconcile_connectors({"src": _connector("${env:IN_FILE}")})
    assert client.statuses[-1][2] == "RUNNING", client.statuses  # start() checked that the resolved path exists
    [configs] = client.task_configs
    assert configs[0]["path"] == "${env:IN_FILE}"  # the stored task config keeps the reference


def test_an_unresolvable_reference_fails_the_connector_and_the_task_with_the_reason(tmp_path):
    from webapp.plugin import ConnectorTaskId
    from webapp.runtime.worker import Worker
    from webapp.runtime.worker_task import WorkerTask

    client = RecordingClient()
    worker = Worker(worker_id="w1", client=client, member={}, kafka_config={}, data_dir=str(tmp_path),
                    spark_factory=lambda: None)
    worker._reconcile_connectors({"src": _connector("${env:NOT_SET_ANYWHERE_42}")})
    state, trace = client.statuses[-1][2:]
    assert state == "FAILED" and "config path: cannot resolve ${env:NOT_SET_ANYWHERE_42}" in trace
    task = WorkerTask(task_id=ConnectorTaskId("src", 0), config=_connector("${nope:x}")["config"], generation=1,
                      target_state="STARTED", client=client, spark=lambda: None, kafka_config={},
                      work_dir=str(tmp_path))
    task.start()  # a WorkerTask is steps on an executor (a private one here), not a thread
    task.join(30)
    assert not task.is_alive()
    state, trace = client.statuses[-1][2:]
    assert state == "FAILED" and "unknown config provider 'nope'" in trace
