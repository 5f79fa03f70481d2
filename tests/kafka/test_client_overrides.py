"""Connect's client override keys: the one mapping table, its checks, its README copy and the policy (issue 15 item 3)."""
from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from webapp.kafka import client_overrides as co

README = Path(__file__).resolve().parents[2] / "README.md"


def test_readme_table_is_the_generated_one():
    text = README.read_text(encoding="utf-8")
    m = re.search(r"<!-- client-overrides-table:[^>]*-->\n(.*?)<!-- /client-overrides-table -->", text, re.S)
    assert m, "README lost its client overrides table markers"
    assert m.group(1) == co.markdown_table(), "README's table is stale: paste co.markdown_table() between the markers"


def test_every_mapped_name_is_a_librdkafka_property_of_its_clients():
    for row in co.CLIENT_KEYS:
        if row.librdkafka is None or " " in row.librdkafka:
            continue
        for client in row.clients:
            assert co.librdkafka_value_error(client, row.librdkafka, "1") != co.librdkafka_value_error(
                client, "no.such.property", "1"), (row.java, client)


def test_java_names_are_mapped_per_client_type():
    config = {"producer.override.max.request.size": "5000000", "producer.override.linger.ms": "5",
              "producer.override.buffer.memory": "33554432", "producer.override.request.timeout.ms": "9000",
              "consumer.override.fetch.max.wait.ms": "50", "consumer.override.max.partition.fetch.bytes": "1048576",
              "consumer.override.request.timeout.ms": "9000", "consumer.override.auto.offset.reset": "earliest",
              "admin.override.request.timeout.ms": "7000", "producer.override.queue.buffering.max.messages": "10",
              "producer.override.sasl.jaas.config":
                  'org.apache.kafka.common.security.plain.PlainLoginModule required username="u" password="p\\"q";'}
    assert co.override_errors(config, "All") == {}
    assert co.client_overrides(config, "producer") == {
        "message.max.bytes": "5000000", "linger.ms": "5", "queue.buffering.max.kbytes": "32768",
        "request.timeout.ms": "9000", "queue.buffering.max.messages": "10", "sasl.username": "u",
        "sasl.password": 'p"q'}
    assert co.client_overrides(config, "consumer") == {"fetch.wait.max.ms": "50", "max.partition.fetch.bytes": "1048576",
                                                       "socket.timeout.ms": "9000"}
    assert co.client_overrides(config, "admin") == {"socket.timeout.ms": "7000"}
    assert co.with_admin_overrides({"bootstrap.servers": "b:9092"}, config) == {
        "bootstrap.servers": "b:9092", "admin.socket.timeout.ms": "7000"}


@pytest.mark.parametrize("key, value, says", [
    ("producer.override.no.such.thing", "1", "not a Kafka client setting"),
    ("consumer.override.max.poll.records", "500", "no librdkafka equivalent"),
    ("consumer.override.linger.ms", "5", "not a consumer setting"),
    ("producer.override.ssl.protocol", "TLSv1.3", "no librdkafka equivalent"),
    ("producer.override.bootstrap.servers", "elsewhere:9092", "cannot be overridden"),
    ("consumer.override.sasl.kerberos.kinit.cmd", "touch /tmp/x", "cannot be set by a connector"),
    ("admin.override.plugin.library.paths", "/tmp/evil.so", "loads shared libraries"),
    ("consumer.override.auto.offset.reset", "latest", "only earliest is supported"),
    ("producer.override.acks", "most", "Invalid value most for configuration acks"),
    ("producer.override.max.request.size", "2000000000", "outside allowed range"),
    ("producer.override.ssl.truststore.location", "/etc/trust.jks", "PEM"),
])
def test_unusable_keys_are_errors_naming_the_key(key, value, says):
    errors = co.override_errors({key: value}, "All")
    assert list(errors) == [key]
    assert errors[key][0].startswith(f"{key}: ") and says in errors[key][0], errors


def test_override_policy_as_in_connect():
    config = {"producer.override.linger.ms": "5", "producer.override.security.protocol": "SASL_SSL",
              "producer.override.sasl.mechanism": "PLAIN"}
    assert co.override_errors(config, "All") == {}
    assert set(co.override_errors(config, "Principal")) == {"producer.override.linger.ms"}
    none = co.override_errors(config, "org.apache.kafka.connect.connector.policy.NoneConnectorClientConfigOverridePolicy")
    assert none["producer.override.linger.ms"] == [
        "producer.override.linger.ms: The 'None' policy does not allow 'linger.ms' to be overridden in the connector "
        "configuration."]
    assert len(none) == 3
    assert co.override_policy({}) == "All"
    assert co.override_policy({co.OVERRIDE_POLICY_ENV: "principal"}) == "Principal"
    with pytest.raises(ValueError, match="connector.client.config.override.policy"):
        co.normalize_policy("Some")


def test_worker_properties_carry_the_policy_and_refuse_an_unknown_one():
    from webapp.connect.workerconfig import PropertiesError, worker_config

    cfg = worker_config({"connector.client.config.override.policy": "None",
                         "sasl.kerberos.kinit.cmd": "kinit -k"}, environ={})  # the operator's, not a connector's
    assert cfg.env == {co.OVERRIDE_POLICY_ENV: "None"} and not cfg.warnings
    assert cfg.kafka == {"sasl.kerberos.kinit.cmd": "kinit -k"}
    with pytest.raises(PropertiesError, match="unknown policy"):
        worker_config({"connector.client.config.override.policy": "Most"}, environ={})


def test_a_config_provider_reference_is_checked_by_key_only():
    from webapp.runtime.config_providers import has_references

    config = {"producer.override.sasl.jaas.config": "${file:/run/secrets/kafka.properties:jaas}",
              "producer.override.linger.ms": "${env:LINGER}", "producer.override.lingr.ms": "${env:LINGER}",
              "consumer.override.sasl.kerberos.kinit.cmd": "${env:CMD}", "consumer.override.linger.ms": "${env:L}"}
    errors = co.override_errors(config, "All", unresolved=has_references)
    assert sorted(errors) == ["consumer.override.linger.ms", "consumer.override.sasl.kerberos.kinit.cmd",
                              "producer.override.lingr.ms"]
    assert "not a Kafka client setting" in errors["producer.override.lingr.ms"][0]
    assert "cannot be set by a connector" in errors["consumer.override.sasl.kerberos.kinit.cmd"][0]
    assert set(co.override_errors(config, "None", unresolved=has_references)) == set(config)
