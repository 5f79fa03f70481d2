"""Hostile input to the REST API: every case answers a clear 4xx in Connect's error body and stores nothing.

(Basic cases — bad names, malformed JSON, unknown class — are in test_rest.py.)
"""
from __future__ import annotations

import json
import threading

import pytest
from django.test import Client

from .conftest import basic, make_user
from .test_rest import SOURCE, post, put, source_config


def assert_error(resp, status: int, fragment: str = "") -> None:
    assert resp.status_code == status, (resp.status_code, resp.content[:300])
    body = resp.json()
    assert set(body) == {"error_code", "message"} and body["error_code"] == status
    assert fragment in body["message"], body["message"]


def assert_nothing_stored(api, node) -> None:
    assert api.get("/connectors").json() == []
    assert node.herder.connector_names() == []


MALFORMED = [
    (b"{not json", "Cannot deserialize"),
    (b'{"name": "x", "config": {', "Cannot deserialize"),
    (b"\xff\xfe\x00garbage", "Cannot deserialize"),
    (b"", "name is required"),
    (b"null", "must be a JSON object"),
    (b'"a string"', "must be a JSON object"),
    (b"[" * 100_000 + b"]" * 100_000, "nesting is too deep"),  # refused, not a recursion crash (500)
]


def test_malformed_bodies(api, node):
    """One node for all cases (starting one per case would cost seconds each)."""
    for body, fragment in MALFORMED:
        assert_error(api.post("/connectors", body, content_type="application/json"), 400, fragment)
    assert_nothing_stored(api, node)


WRONG = [
    ({"name": 42, "config": {}}, "name is required and must be a non-empty string"),
    ({"name": ["a"], "config": {}}, "must be a non-empty string"),
    ({"name": "x", "config": "connector.class=x"}, "must be a JSON object"),
    ({"name": "x", "config": None}, "must be a JSON object"),
    ({"name": "x", "config": {"connector.class": SOURCE, "tasks.max": {"n": 1}}}, "must be a string, not dict"),
    ({"name": "x", "config": {"connector.class": SOURCE, "topic": None}}, "must not be null"),
    ({"name": "x", "config": {"connector.class": "com.example.NoSuchConnector"}}, "com.example.NoSuchConnector"),
    ({"name": "x", "config": {"connector.class": ""}}, "connector.class"),
    ({"name": "x", "config": {"connector.class": SOURCE, "tasks.max": "many"}}, "tasks.max"),
    ({"name": "x", "config": {"connector.class": SOURCE, "tasks.max": "-1"}}, "at least 1"),
    ({"name": "x", "config": {"connector.class": SOURCE}, "initial_state": "RUNNING-ish"}, "Invalid initial state"),
]


def test_wrong_types_and_values(api, node):
    for body, fragment in WRONG:
        assert_error(post(api, "/connectors", body), 400, fragment)
        assert_error(put(api, "/connectors/x/config", body.get("config")), 400)
    assert_nothing_stored(api, node)


BAD_NAMES = [
    ("line\nbreak", "control characters"),
    ("tab\tname", "control characters"),
    ("nul\x00name", "control characters"),
    ("del\x7fname", "control characters"),
    ("c1\x85name", "control characters"),
    ("../etc", "may not contain '/'"),
    ("   ", "required"),
    ("y" * 250, "too long"),
]


def test_more_bad_names(api, node, tmp_path):
    for name, fragment in BAD_NAMES:
        assert_error(post(api, "/connectors", {"name": name, "config": source_config(tmp_path)}), 400, fragment)
    assert_nothing_stored(api, node)


def test_names_in_the_url(api, node, tmp_path):
    # an encoded slash is decoded by the server into a path with one more segment: no view matches it
    resp = put(api, "/connectors/a%2Fb/config", source_config(tmp_path))
    assert resp.status_code in (400, 404) and resp.json()["error_code"] == resp.status_code
    assert_error(put(api, "/connectors/" + "z" * 10_000 + "/config", source_config(tmp_path)), 400, "too long")
    assert_error(put(api, "/connectors/bad%07name/config", source_config(tmp_path)), 400, "control characters")
    assert_error(api.get("/connectors/" + "q" * 10_000), 404, "not found")
    assert_nothing_stored(api, node)


def test_huge_values_and_bodies(api, node, tmp_path, settings):
    # a 10,000 character config value is legal (Connect stores strings as given)
    ok = post(api, "/connectors", {"name": "big", "config": source_config(tmp_path, **{"x.note": "n" * 10_000})})
    assert ok.status_code == 201 and len(api.get("/connectors/big/config").json()["x.note"]) == 10_000
    api.delete("/connectors/big")
    # a body over the limit is refused with 413 before it is parsed
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    body = json.dumps({"name": "huge", "config": source_config(tmp_path, **{"x.pad": "p" * (limit + 1)})})
    assert_error(api.post("/connectors", body, content_type="application/json"), 413, "larger than the allowed")
    assert_error(api.put("/connectors/huge/config", body, content_type="application/json"), 413)
    assert_nothing_stored(api, node)


def test_unknown_query_parameters_are_ignored_as_in_connect(api, tmp_path):
    """JAX-RS (Connect's REST layer) ignores query parameters a resource does not declare; so do we."""
    assert post(api, "/connectors?dry_run=true&x=%00", {"name": "src", "config": source_config(tmp_path)}).status_code == 201
    assert api.get("/connectors?foo=bar").json() == ["src"]
    assert api.get("/connectors/src/status?verbose=1").status_code == 200
    # unknown expand values are ignored too (Connect logs "Ignoring unknown expansion type")
    assert api.get("/connectors?expand=bogus").json() == {"src": {}}
    assert set(api.get("/connectors?expand=status&expand=bogus").json()["src"]) == {"status"}


def test_content_types_other_than_json_are_refused(api, node, tmp_path):
    resp = api.post("/connectors", "name=x", content_type="application/x-www-form-urlencoded")
    assert_error(resp, 415, "Unsupported media type")
    assert_nothing_stored(api, node)


@pytest.mark.django_db(transaction=True)
def test_concurrent_create_of_one_name_from_two_clients(node, tmp_path):
    make_user("operator", "operator")
    cfgs = [source_config(tmp_path, **{"x.client": str(i)}) for i in range(2)]
    barrier = threading.Barrier(2)
    results: list = [None, None]

    def create(i: int) -> None:
        client = Client(HTTP_AUTHORIZATION=basic("operator", "pw"))
        body = json.dumps({"name": "same", "config": cfgs[i]})
        barrier.wait()
        results[i] = client.post("/connectors", body, content_type="application/json")

    threads = [threading.Thread(target=create, args=(i,)) for i in range(2)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    codes = sorted(r.status_code for r in results)
    assert codes == [201, 409], [r.content for r in results]
    loser = next(r for r in results if r.status_code == 409)
    assert "already exists" in loser.json()["message"]
    winner = next(i for i, r in enumerate(results) if r.status_code == 201)
    assert node.herder.connector_names() == ["same"]
    assert node.herder.connector_config("same")["x.client"] == str(winner)  # exactly the winner's config
