"""raftconnect.jdbc.allowed.hosts: the database hosts JDBC connectors may reach (issue 19 item 1).

Unit tests of the matching, of validate, of a task's start and of the connection itself (no database
needed: a refused host is refused before any socket opens), and the REST 400 on an in-process node.
"""
from __future__ import annotations

import json

import pytest

from webapp.connectors.jdbc import dbio
from webapp.plugin import ConnectException, ConnectorTaskId, TaskContext
from webapp.connectors.jdbc import (
    ALLOWED_HOSTS_ENV,
    JdbcSinkConnector,
    JdbcSourceConnector,
    JdbcSourceTask,
    allowed_hosts,
    shown_url,
)

from tests.connect.conftest import api, node  # noqa: F401 - the in-process node and its operator client

SETTING = "raftconnect.jdbc.allowed.hosts"


@pytest.mark.parametrize("host, port, allowed", [
    ("db.example", 5432, ["db.example"]),
    ("DB.Example", 5432, ["db.example"]),
    ("db.example", 6543, ["db.example:6543"]),
    ("pg1.prod.example", 5432, ["*.prod.example"]),
    ("10.1.2.3", 3306, ["10.0.0.0/8"]),
    ("127.0.0.1", 5432, ["127.0.0.1"]),
    ("localhost", 5432, ["127.0.0.0/8", "::1"]),  # a name resolved against IP entries: every address inside
    ("::1", 5432, ["[::1]:5432"]),
    ("anything", 1, []),  # unset: any host
])
def test_allowed_hosts(host, port, allowed):
    assert dbio.host_violation(host, port, allowed) is None


@pytest.mark.parametrize("host, port, allowed", [
    ("evil.example", 5432, ["db.example"]),
    ("db.example", 5433, ["db.example:5432"]),
    ("prod.example", 5432, ["*.prod.example"]),  # the wildcard is for names under the domain
    ("notprod.example", 5432, ["*.prod.example"]),
    ("db.example.evil.net", 5432, ["db.example"]),
    ("192.168.1.1", 5432, ["10.0.0.0/8"]),
    ("no-such-host.invalid", 5432, ["10.0.0.0/8"]),  # unresolvable names match no IP entry
    ("169.254.169.254", 80, ["db.example", "10.0.0.0/8"]),
])
def test_refused_hosts_name_the_setting(host, port, allowed):
    problem = dbio.host_violation(host, port, allowed)
    assert problem and SETTING in problem and f"{host}:{port}" in problem


def test_the_setting_is_read_at_each_call(monkeypatch):
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, " db1 , *.db.example,,10.0.0.0/8 ")
    assert allowed_hosts() == ["db1", "*.db.example", "10.0.0.0/8"]
    monkeypatch.delenv(ALLOWED_HOSTS_ENV)
    assert allowed_hosts() == []


def test_validate_refuses_a_host_outside_the_list_on_connection_url(monkeypatch):
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "db.example")
    good = {"connection.url": "jdbc:postgresql://db.example/x", "topics": "t"}
    assert not JdbcSinkConnector().validate(good)["connection.url"]
    bad = JdbcSourceConnector().validate({"connection.url": "jdbc:mysql://10.9.9.9:3306/x", "mode": "bulk",
                                          "topic.prefix": "p-"})
    assert any(SETTING in m for m in bad["connection.url"])


def test_a_task_checks_again_when_it_starts(monkeypatch, tmp_path):
    """Validated on one node, started on a worker whose list does not allow the host: the task fails."""
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "db.example")
    context = TaskContext(ConnectorTaskId("j", 0), None, {}, str(tmp_path))
    task = JdbcSourceTask(context, {"connection.url": "jdbc:postgresql://other.example/x", "mode": "bulk",
                                    "topic.prefix": "p-", "tables": json.dumps(["t"])})
    with pytest.raises(ConnectException, match=SETTING):
        task.start()


def test_every_connection_checks_the_list_it_was_given():
    """dbio.connect runs on Spark's workers too: it refuses before any socket opens."""
    params = {"dialect": "postgresql", "host": "203.0.113.7", "port": 5432, "database": "x", "user": None,
              "password": None, "allowed_hosts": ["db.example"]}
    with pytest.raises(dbio.HostNotAllowed, match=SETTING):
        dbio.connect(params)


def test_messages_never_show_a_password_in_the_url():
    assert shown_url("jdbc:postgresql://u:s3cr3t@h/db") == "jdbc:postgresql://u:[hidden]@h/db"
    assert shown_url("jdbc:mysql://h/db?user=u&password=s3cr3t&x=1") == "jdbc:mysql://h/db?user=u&password=[hidden]&x=1"
    errors = JdbcSourceConnector().validate({"connection.url": "jdbc:oracle://u:s3cr3t@h/db", "mode": "bulk"})
    assert errors["connection.url"] and "s3cr3t" not in json.dumps(errors)


@pytest.mark.django_db
def test_create_and_validate_answer_400_naming_the_setting(api, monkeypatch):
    monkeypatch.setenv(ALLOWED_HOSTS_ENV, "db.example,10.0.0.0/8")
    config = {"connector.class": "io.confluent.connect.jdbc.JdbcSinkConnector", "topics": "t",
              "connection.url": "jdbc:postgresql://metadata.internal:5432/x"}
    created = api.post("/connectors", data=json.dumps({"name": "j1", "config": config}),
                       content_type="application/json")
    assert created.status_code == 400 and created.json()["error_code"] == 400
    assert SETTING in created.json()["message"]
    validated = api.put("/connector-plugins/JdbcSinkConnector/config/validate", data=json.dumps(config),
                        content_type="application/json")
    assert validated.status_code == 200 and validated.json()["error_count"] >= 1
    url_errors = [c["value"]["errors"] for c in validated.json()["configs"] if c["value"]["name"] == "connection.url"]
    assert url_errors and any(SETTING in e for e in url_errors[0])
    config["connection.url"] = "jdbc:postgresql://10.1.2.3:5432/x"
    ok = api.post("/connectors", data=json.dumps({"name": "j2", "config": config}), content_type="application/json")
    assert ok.status_code == 201, ok.content
