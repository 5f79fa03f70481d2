"""Contexts file and connector files of the ``raftconnect`` client (no node needed)."""
from __future__ import annotations

import json
import stat

import pytest

from webapp.cli.connectorfiles import ConnectorFileError, parse_connector_file
from webapp.cli.contexts import DEFAULT_URL, ContextError, ContextStore, default_config_path, resolve_connection


def test_store_roundtrip_is_private_and_first_context_is_current(tmp_path):
    path = tmp_path / "sub" / "config.json"
    store = ContextStore(path)
    store.set("a", {"url": "http://a:8083", "user": "u", "password": "p"})
    store.set("b", {"url": "http://b:8083", "token": "t"})
    store.save()
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    again = ContextStore(path)
    assert again.current == "a" and again.get("b") == {"url": "http://b:8083", "token": "t"}
    again.use("b")
    again.delete("b")
    assert again.current is None
    with pytest.raises(ContextError, match="no context named 'b'"):
        again.use("b")


def test_resolution_precedence(tmp_path):
    store = ContextStore(tmp_path / "c.json")
    assert resolve_connection(store).url == DEFAULT_URL
    store.set("a", {"url": "http://a:8083", "user": "u", "password": "p"})
    store.set("b", {"url": "http://b:8083", "token": "t"})
    conn = resolve_connection(store)
    assert (conn.url, conn.user, conn.password, conn.token, conn.context) == ("http://a:8083", "u", "p", None, "a")
    conn = resolve_connection(store, context="b", url="http://flag:1")
    assert (conn.url, conn.token, conn.user) == ("http://flag:1", "t", None)
    conn = resolve_connection(store, context="b", user="x", password="y")  # basic replaces the token
    assert (conn.user, conn.password, conn.token) == ("x", "y", None)
    with pytest.raises(ContextError):
        resolve_connection(store, context="zzz")


def test_malformed_file_and_default_path(tmp_path):
    bad = tmp_path / "bad.json"
    bad.write_text("[1]")
    with pytest.raises(ContextError):
        ContextStore(bad)
    assert str(default_config_path({"RAFTCONNECT_CLI_CONFIG": "/x/c.json"})) == "/x/c.json"
    assert str(default_config_path({"XDG_CONFIG_HOME": "/cfg"})) == "/cfg/raftconnect/config.json"


def test_connector_file_formats():
    nested = parse_connector_file(json.dumps({"name": "n", "config": {"tasks.max": 2, "x": True}}), "a.json")
    assert nested == [("n", {"tasks.max": "2", "x": "true", "name": "n"})]
    flat = parse_connector_file(json.dumps([{"name": "m", "topic": "t"}]), "b.json")
    assert flat == [("m", {"name": "m", "topic": "t"})]
    props = parse_connector_file("name=p\nconnector.class=C\n# c\ntopics=a,b\n", "p.properties")
    assert props == [("p", {"name": "p", "connector.class": "C", "topics": "a,b"})]
    for text in ("{", '{"config": {}}', "connector.class=C\n", "[]"):
        with pytest.raises(ConnectorFileError):
            parse_connector_file(text, "x")
