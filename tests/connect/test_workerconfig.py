"""Worker properties (``runnode --config``): parsing, key mapping, precedence, and the exact Kafka
client configs a task builds from them (webapp/connect/workerconfig.py)."""
from __future__ import annotations

import argparse
import json
import logging

import pytest

from webapp.connect.node import ConnectNode, NodeOptions
from webapp.connect.nodeargs import add_node_arguments, data_dir_from_argv
from webapp.connect.workerconfig import (KAFKA_CLIENT_CONFIG_ENV, PropertiesError, check_client_config,
                                         expand_config_argv, parse_properties, report, worker_config)
from webapp.kafka.spark_io import (CONSUMER_DEFAULTS, PRODUCER_DEFAULTS, _CONSUMER_ONLY_PREFIXES,
                                   _PRODUCER_ONLY_PREFIXES, _client_config)
from webapp.kafka.topics import _admin_config
from webapp.runtime.agent import kafka_config_from_env

SASL_FILE = """
# a Connect distributed worker, as operators write it
bootstrap.servers=k1:9093,k2:9093
group.id=connect-cluster
config.storage.topic=connect-configs
security.protocol=SASL_SSL
sasl.mechanism=SCRAM-SHA-512
sasl.jaas.config=org.apache.kafka.common.security.scram.ScramLoginModule required \\
    username="connect" password="pa ss";
ssl.truststore.type=PEM
ssl.truststore.location=/etc/kafka/ca.pem
ssl.endpoint.identification.algorithm=
producer.linger.ms=50
producer.compression.type=zstd
consumer.fetch.wait.max.ms=100
consumer.security.protocol=SASL_SSL
admin.request.timeout.ms=9000
listeners=http://0.0.0.0:18083
rest.advertised.host.name=connect-1.internal
task.shutdown.graceful.timeout.ms=7000
raftconnect.node.id=n7
raftconnect.roles=raft
raftconnect.data.dir=/srv/rc/n7
no.such.key=1
"""


def _parse(argv):
    parser = argparse.ArgumentParser()
    add_node_arguments(parser)
    return parser.parse_args(argv)


def test_properties_syntax_follows_java():
    props = parse_properties("a=1\n! comment\n  # comment\nb : two\nc three\nd=multi\\\n   line\ne=\\u00e9\\t\n"
                             "f\ng=x=y\na=last\n")
    assert props == {"a": "last", "b": "two", "c": "three", "d": "multiline", "e": "é\t", "f": "", "g": "x=y"}


def test_connect_keys_map_to_flags_env_and_client_settings(caplog):
    cfg = worker_config(parse_properties(SASL_FILE), environ={})
    flags = dict(zip(cfg.flags[::2], cfg.flags[1::2]))
    assert flags == {"--bootstrap-servers": "k1:9093,k2:9093", "--node-id": "n7", "--roles": "raft",
                     "--data-dir": "/srv/rc/n7", "--rest-listen": "0.0.0.0:18083",
                     "--rest-address": "connect-1.internal:18083"}
    assert cfg.env == {"RAFTCONNECT_TASK_SHUTDOWN_GRACEFUL_TIMEOUT_MS": "7000"}
    assert cfg.kafka == {
        "security.protocol": "SASL_SSL", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "connect", "sasl.password": "pa ss",  # from the JAAS line
        "ssl.ca.location": "/etc/kafka/ca.pem", "ssl.endpoint.identification.algorithm": "none",
        "producer.linger.ms": "50", "producer.compression.type": "zstd",
        "consumer.fetch.wait.max.ms": "100", "consumer.security.protocol": "SASL_SSL",
        "admin.socket.timeout.ms": "9000",  # Java request.timeout.ms: librdkafka admin requests time out on socket.timeout.ms
    }
    # unknown keys warn, Connect's own storage keys are accepted quietly
    assert cfg.warnings == ["no.such.key: unknown worker setting; ignored"]
    assert sorted(cfg.ignored) == ["config.storage.topic", "group.id"]
    with caplog.at_level(logging.INFO, logger="raftconnect.node"):
        report(cfg)
    assert "no.such.key: unknown worker setting" in caplog.text
    assert "not used by RaftConnect: config.storage.topic, group.id" in caplog.text


def test_command_line_wins_over_environment_wins_over_file(tmp_path):
    path = tmp_path / "worker.properties"
    path.write_text("raftconnect.node.id=from-file\nbootstrap.servers=file:9092\nraftconnect.weight=3\n"
                    "raftconnect.data.dir=" + str(tmp_path / "d") + "\n")
    env: dict[str, str] = {"RAFTCONNECT_BOOTSTRAP_SERVERS": "env:9092"}
    argv = expand_config_argv(["--config", str(path), "--weight", "2"], environ=env)
    assert "--bootstrap-servers" not in argv  # the environment's value stays the default
    ns = _parse(argv)
    assert (ns.node_id, ns.weight, ns.config) == ("from-file", 2.0, str(path))
    assert data_dir_from_argv(argv) == str(tmp_path / "d")
    ns = _parse(expand_config_argv([f"--config={path}", "--node-id", "flag"], environ=env))
    assert ns.node_id == "flag"


def test_client_settings_travel_to_the_agent_as_json(tmp_path):
    env: dict[str, str] = {}
    path = tmp_path / "w.properties"
    path.write_text("security.protocol=SSL\nproducer.acks=1\n")
    expand_config_argv(["--config", str(path)], environ=env)
    assert json.loads(env[KAFKA_CLIENT_CONFIG_ENV]) == {"security.protocol": "SSL", "producer.acks": "1"}


def test_listeners_and_advertised_address():
    cfg = worker_config({"listeners": "http://:8090"}, environ={})
    assert cfg.flags[:2] == ["--rest-listen", "0.0.0.0:8090"]
    assert cfg.flags[2] == "--rest-address" and cfg.flags[3].endswith(":8090")
    cfg = worker_config({"listeners": "http://10.0.0.5:8083", "rest.advertised.port": "443"}, environ={})
    assert cfg.flags == ["--rest-listen", "10.0.0.5:8083", "--rest-address", "10.0.0.5:443"]
    with pytest.raises(PropertiesError, match="https"):
        worker_config({"listeners": "https://0.0.0.0:8443"}, environ={})


def test_java_only_client_settings_warn():
    cfg = worker_config({"ssl.truststore.location": "/x.jks", "ssl.protocol": "TLSv1.3",
                         "producer.max.request.size": "1"}, environ={})
    assert "ssl.ca.location" not in cfg.kafka and "ssl.protocol" not in cfg.kafka
    assert cfg.kafka["producer.message.max.bytes"] == "1"  # Java's name, mapped by the one override table
    assert any("PEM" in w for w in cfg.warnings) and any("ssl.protocol" in w for w in cfg.warnings)


def test_librdkafka_check_drops_unknown_properties_and_refuses_bad_values():
    kept, warnings = check_client_config({"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u",
                                          "sasl.password": "p",
                                          "producer.linger.ms": "5", "producer.max.request.size": "9",
                                          "consumer.buffer.memory": "10"})
    assert kept == {"security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN", "sasl.username": "u",
                    "sasl.password": "p", "producer.linger.ms": "5"}
    assert sorted(warnings) == ["consumer.buffer.memory: not a librdkafka setting; ignored",
                                "producer.max.request.size: not a librdkafka setting; ignored"]
    with pytest.raises(PropertiesError, match="security.protocol"):
        check_client_config({"security.protocol": "CARRIER_PIGEON"})


def test_exact_client_configs_a_task_receives(tmp_path):
    """Node options → agent environment → the agent's kafka_config → each client type's librdkafka config."""
    cfg = worker_config(parse_properties(SASL_FILE), environ={})
    node = ConnectNode(NodeOptions(node_id="n7", data_dir=str(tmp_path), bootstrap_servers="k1:9093,k2:9093",
                                   kafka_client_config=cfg.kafka))
    kafka_config = kafka_config_from_env(node.agent_env())
    security = {"bootstrap.servers": "k1:9093,k2:9093", "security.protocol": "SASL_SSL",
                "sasl.mechanism": "SCRAM-SHA-512", "sasl.username": "connect", "sasl.password": "pa ss",
                "ssl.ca.location": "/etc/kafka/ca.pem", "ssl.endpoint.identification.algorithm": "none"}

    producer = _client_config(kafka_config, PRODUCER_DEFAULTS, _CONSUMER_ONLY_PREFIXES,
                              {"compression.type": "lz4"})  # a connector's producer.override.* wins
    assert producer == {**PRODUCER_DEFAULTS, **security, "linger.ms": "50", "compression.type": "lz4"}

    consumer = _client_config(kafka_config, CONSUMER_DEFAULTS, _PRODUCER_ONLY_PREFIXES, None)
    assert consumer == {**CONSUMER_DEFAULTS, **security, "fetch.wait.max.ms": "100"}

    assert _admin_config(kafka_config) == {**security, "socket.timeout.ms": "9000"}


def test_a_node_without_a_file_gives_tasks_bootstrap_servers_only(tmp_path, monkeypatch):
    monkeypatch.setenv(KAFKA_CLIENT_CONFIG_ENV, json.dumps({"security.protocol": "SSL"}))  # not this node's
    node = ConnectNode(NodeOptions(node_id="n1", data_dir=str(tmp_path), bootstrap_servers="b:9092"))
    assert kafka_config_from_env(node.agent_env()) == {"bootstrap.servers": "b:9092"}


def test_the_file_allowed_paths_key_maps_to_its_flag():
    from webapp.connect.workerconfig import worker_config

    cfg = worker_config({"raftconnect.file.allowed.paths": "/data/a,/data/b"}, environ={})
    assert cfg.flags[cfg.flags.index("--file-allowed-paths") + 1] == "/data/a,/data/b" and not cfg.warnings


def test_the_jdbc_allowed_hosts_key_maps_to_its_flag_unless_the_environment_sets_it():
    from webapp.connect.workerconfig import worker_config

    cfg = worker_config({"raftconnect.jdbc.allowed.hosts": "db1:5432,10.0.0.0/8"}, environ={})
    assert cfg.flags[cfg.flags.index("--jdbc-allowed-hosts") + 1] == "db1:5432,10.0.0.0/8" and not cfg.warnings
    env_wins = worker_config({"raftconnect.jdbc.allowed.hosts": "db1"},
                             environ={"RAFTCONNECT_JDBC_ALLOWED_HOSTS": "db2"})
    assert "--jdbc-allowed-hosts" not in env_wins.flags


PROVIDERS_FILE = """
config.providers=secrets,env
config.providers.secrets.class=org.apache.kafka.common.config.provider.FileConfigProvider
config.providers.secrets.param.allowed.paths={root}
config.providers.env.class=org.apache.kafka.common.config.provider.EnvVarConfigProvider
config.providers.env.param.allowlist.pattern=DB_.*
config.providers.vault.class=com.example.VaultConfigProvider
"""


def test_connect_config_providers_enable_their_aliases_and_restrict_them(tmp_path, monkeypatch):
    from webapp.runtime import config_providers

    (tmp_path / "db.properties").write_text("password=s3cret\n")
    cfg = worker_config(parse_properties(PROVIDERS_FILE.format(root=tmp_path)), environ={})
    assert cfg.env == {"RAFTCONNECT_CONFIG_PROVIDERS": "secrets=file,env",
                       "RAFTCONNECT_CONFIG_PROVIDERS_ALLOWED_PATHS": str(tmp_path),
                       "RAFTCONNECT_CONFIG_PROVIDERS_ENV_ALLOWLIST_PATTERN": "DB_.*"}
    # vault is not listed in config.providers: Connect ignores its keys, and so do we, saying so
    assert cfg.warnings == ["config.providers.vault.class: its alias is not in config.providers; ignored"]
    for key, value in cfg.env.items():
        monkeypatch.setenv(key, value)
    monkeypatch.setenv("DB_USER", "app")
    monkeypatch.setenv("OTHER", "x")
    resolved = config_providers.transform({"connection.password": f"${{secrets:{tmp_path}/db.properties:password}}",
                                           "connection.user": "${env:DB_USER}"})
    assert resolved == {"connection.password": "s3cret", "connection.user": "app"}
    # the built-in alias "file" is not enabled by this file, and the env pattern holds
    with pytest.raises(config_providers.ConfigProviderError, match="unknown config provider 'file'"):
        config_providers.transform({"p": f"${{file:{tmp_path}/db.properties:password}}"})
    with pytest.raises(config_providers.ConfigProviderError, match="OTHER is not allowed"):
        config_providers.transform({"p": "${env:OTHER}"})


def test_config_providers_the_node_cannot_run_are_refused_at_start():
    with pytest.raises(PropertiesError, match="VaultConfigProvider: not available in RaftConnect"):
        worker_config({"config.providers": "vault",
                       "config.providers.vault.class": "com.example.VaultConfigProvider"}, environ={})
    with pytest.raises(PropertiesError, match="config.providers.file.class: missing"):
        worker_config({"config.providers": "file"}, environ={})
    # the environment wins over the file, as for every other key
    cfg = worker_config({"config.providers": "", }, environ={"RAFTCONNECT_CONFIG_PROVIDERS": "env"})
    assert "RAFTCONNECT_CONFIG_PROVIDERS" not in cfg.env
    assert worker_config({"config.providers": ""}, environ={}).env == {"RAFTCONNECT_CONFIG_PROVIDERS": ""}


def test_the_sample_worker_properties_uses_only_keys_the_node_knows(tmp_path):
    """deploy/worker.properties, with every commented-out setting switched on, maps without a warning."""
    import re

    from tools.launcher import REPO_ROOT

    text = (REPO_ROOT / "deploy" / "worker.properties").read_text()
    text = re.sub(r"(?m)^#([a-z][\w.]*=)", r"\1", text)
    props = parse_properties(text)
    props["config.providers.secrets.param.allowed.paths"] = str(tmp_path)
    assert "config.providers" in props and "sasl.jaas.config" in props
    cfg = worker_config(props, environ={})
    assert cfg.warnings == []
