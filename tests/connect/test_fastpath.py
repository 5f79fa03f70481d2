"""The REST fast path (``webapp.connect.api.fastpath``) answers exactly as Django's full path, or leaves the request to it.

Each request is sent as a WSGI call to the node's application (``ConnectWSGIHandler``) and to plain
Django (``WSGIHandler``, the full path) on the same in-process leader; the counter of requests the
fast path answered tells which path did.
"""
from __future__ import annotations

import io
import json
import sys

import pytest
from django.core.handlers.wsgi import WSGIHandler

from webapp.connect.api import accounts, fastpath
from webapp.connect.api.fastpath import ConnectWSGIHandler
from webapp.kafka.embedded import free_port

from .conftest import basic, make_user
from .test_rest import source_config

#: headers that differ between two answers for reasons other than the path taken
_VOLATILE = {"date"}


@pytest.fixture(autouse=True)
def fast_hashing(settings):
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.MD5PasswordHasher"]


@pytest.fixture
def apps(db, node):
    make_user("operator", "operator")
    make_user("viewer", "viewer")
    fast, full = ConnectWSGIHandler(), WSGIHandler()
    for user in ("operator", "viewer"):  # a first request verifies the password and fills the cache
        assert call(full, "GET", "/connectors", auth=basic(user, "pw"))[0] == 200
    return fast, full


def call(app, method: str, path: str, body: bytes | str | dict | None = None, *, auth: str | None = None,
         query: str = "", content_type: str = "application/json", **headers: str):
    """``(status, {lower-case header: value}, body bytes)`` of one WSGI call of ``app``."""
    if isinstance(body, dict):
        body = json.dumps(body)
    if isinstance(body, str):
        body = body.encode()
    body = body or b""
    environ = {"REQUEST_METHOD": method, "PATH_INFO": path, "QUERY_STRING": query, "SERVER_NAME": "127.0.0.1",
               "SERVER_PORT": "8083", "SERVER_PROTOCOL": "HTTP/1.1", "HTTP_HOST": "127.0.0.1:8083",
               "wsgi.url_scheme": "http", "wsgi.input": io.BytesIO(body), "wsgi.errors": sys.stderr,
               "CONTENT_LENGTH": str(len(body)), "CONTENT_TYPE": content_type}
    if auth:
        environ["HTTP_AUTHORIZATION"] = auth
    environ.update({"HTTP_" + k.upper(): v for k, v in headers.items()})
    answer = {}

    def start_response(status, response_headers, exc_info=None):
        answer["status"] = int(status[:3])
        answer["headers"] = {k.lower(): v for k, v in response_headers if k.lower() not in _VOLATILE}

    chunks = app(environ, start_response)
    try:
        data = b"".join(chunks)
    finally:
        chunks.close()
    return answer["status"], answer["headers"], data


def both(apps, *args, **kwargs):
    """The fast and the full path's answers to the same request, and whether the fast path answered.

    A connector the first created is deleted before the second request, which then creates it again.
    """
    fast, full = apps
    before = fastpath.served()
    a = call(fast, *args, **kwargs)
    taken = fastpath.served() - before
    assert taken in (0, 1)
    if a[0] == 201:  # created: the full path must create it too, not update it
        assert call(full, "DELETE", a[1]["location"].removeprefix("http://127.0.0.1:8083"),
                    auth=basic("operator", "pw"))[0] == 204
    return a, call(full, *args, **kwargs), bool(taken)


def test_a_create_and_an_update_are_answered_as_the_full_path_answers_them(apps, tmp_path):
    fast, full = apps
    config = source_config(tmp_path)
    path = "/connectors/fp/config"
    reference = call(full, "PUT", path, config, auth=basic("operator", "pw"))
    assert reference[0] == 201
    assert call(full, "DELETE", "/connectors/fp", auth=basic("operator", "pw"))[0] == 204
    before = fastpath.served()
    created = call(fast, "PUT", path, config, auth=basic("operator", "pw"))
    assert fastpath.served() == before + 1
    assert created == reference
    assert created[1]["location"] == "http://127.0.0.1:8083/connectors/fp"
    assert {"x-content-type-options", "referrer-policy", "allow"} <= set(created[1])

    config["topic"] = "t2"
    updated, reference, taken = both(apps, "PUT", path, config, auth=basic("operator", "pw"))
    assert taken and updated[0] == 200 and updated == reference
    assert json.loads(updated[2])["config"]["topic"] == "t2"


def test_a_post_creates_as_the_full_path_does_and_a_second_post_conflicts(apps, tmp_path):
    body = {"name": "posted", "config": source_config(tmp_path), "initial_state": "PAUSED"}
    created, reference, taken = both(apps, "POST", "/connectors", body, auth=basic("operator", "pw"))
    assert taken and created[0] == 201 and created == reference
    assert created[1]["location"] == "http://127.0.0.1:8083/connectors/posted"
    assert created[1]["allow"] == "GET, POST, HEAD, OPTIONS"
    again, reference, taken = both(apps, "POST", "/connectors", body, auth=basic("operator", "pw"))
    assert taken and again == reference and again[0] == 409


@pytest.mark.parametrize("body", [
    {"config": {"connector.class": "FileSourceConnector"}},  # no name
    {"name": "nocfg"},  # no config
    {"name": "badstate", "config": {"connector.class": "FileSourceConnector"}, "initial_state": "ASLEEP"},
    {"name": "a/b", "config": {"connector.class": "FileSourceConnector"}},
])
def test_a_refused_post_gets_the_same_connect_error_from_the_fast_path(apps, body):
    fast, full, taken = both(apps, "POST", "/connectors", body, auth=basic("operator", "pw"))
    assert taken and fast == full and fast[0] == 400


@pytest.mark.parametrize("config, status", [
    ({"path": "/x", "topic": "t"}, 400),  # no connector.class
    ({"connector.class": "NoSuchConnector"}, 400),
    ({"connector.class": "FileSourceConnector", "path": "/nonexistent/in.csv", "topic": "t", "tasks.max": "0"}, 400),
    ({"connector.class": "FileSourceConnector", "name": "another", "path": "/x", "topic": "t"}, 400),
])
def test_a_refused_config_gets_the_same_connect_error_from_the_fast_path(apps, config, status, caplog):
    with caplog.at_level("WARNING", logger="django.request"):
        fast, full, taken = both(apps, "PUT", "/connectors/bad/config", config, auth=basic("operator", "pw"))
    assert taken
    assert fast == full
    assert fast[0] == status and json.loads(fast[2])["error_code"] == status
    logged = [r.getMessage() for r in caplog.records if r.name == "django.request"]
    assert logged == ["Bad Request: /connectors/bad/config"] * 2  # each path logs its 400 alike


@pytest.mark.parametrize("case", ["unverified password", "wrong password", "viewer", "no credentials",
                                  "not an object", "not JSON", "query string", "html accepted", "form body",
                                  "forwarded", "long number"])
def test_what_the_fast_path_cannot_tell_goes_to_the_full_path(apps, tmp_path, case):
    config = source_config(tmp_path)
    kw: dict = {"auth": basic("operator", "pw")}
    body: object = config
    if case == "unverified password":  # a user no request authenticated yet: the full path checks the hash
        make_user("newcomer", "operator")
        kw["auth"] = basic("newcomer", "pw")
    elif case == "wrong password":
        kw["auth"] = basic("operator", "nope")
    elif case == "viewer":
        kw["auth"] = basic("viewer", "pw")
    elif case == "no credentials":
        kw["auth"] = None
    elif case == "not an object":
        body = "[1, 2]"
    elif case == "not JSON":
        body = "{not json"
    elif case == "query string":
        kw["query"] = "expand=info"
    elif case == "html accepted":
        kw["accept"] = "text/html"
    elif case == "form body":
        kw["content_type"] = "application/x-www-form-urlencoded"
        body = "a=b"
    elif case == "forwarded":
        kw["x_raftconnect_forwarded"] = "1"
    elif case == "long number":
        body = json.dumps(config)[:-1] + ', "n": 12345678901234567890}'
    fast, full, taken = both(apps, "PUT", f"/connectors/{case.replace(' ', '-')}/config", body, **kw)
    assert not taken
    assert fast[0] == full[0] and json.loads(fast[2]) == json.loads(full[2])
    if case == "unverified password":  # the full path verified it: the next request takes the fast path
        _, _, taken = both(apps, "PUT", "/connectors/unverified-password/config", config, **kw)
        assert taken


def test_a_body_over_the_limit_gets_the_full_paths_413(apps, tmp_path, settings):
    settings.DATA_UPLOAD_MAX_MEMORY_SIZE = 64
    fast, full, taken = both(apps, "PUT", "/connectors/big/config", source_config(tmp_path),
                             auth=basic("operator", "pw"))
    assert not taken and fast == full and fast[0] == 413


def test_an_api_token_takes_the_fast_path_and_a_revoked_one_does_not(apps, tmp_path):
    token = accounts.token_create(user="operator", name="ci")["token"]
    config = source_config(tmp_path)
    for scheme in ("Token", "Bearer"):
        fast, full, taken = both(apps, "PUT", "/connectors/tok/config", config, auth=f"{scheme} {token}")
        assert taken and fast == full and fast[0] in (200, 201)
    accounts.token_revoke(user="operator", name="ci")
    fast, full, taken = both(apps, "PUT", "/connectors/tok/config", config, auth=f"Token {token}")
    assert not taken and fast[0] == full[0] == 401


def test_switched_off_every_request_takes_the_full_path(apps, tmp_path, monkeypatch):
    monkeypatch.setenv(fastpath.ENV, "0")
    fast, full, taken = both(apps, "PUT", "/connectors/off/config", source_config(tmp_path),
                             auth=basic("operator", "pw"))
    assert not taken and fast == full and fast[0] == 201


class _Leader:
    """A stand-in leader on a port of its own: answers each forwarded request with ``answer`` and keeps what
    it was sent (path, forwarding headers, body)."""

    def __init__(self, answer=(201, {"name": "fw", "config": {}, "tasks": [], "type": "source"})):
        self.answer = answer
        self.seen: list[dict] = []

    def __call__(self, environ, start_response):
        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        self.seen.append({"path": environ["PATH_INFO"], "user": environ.get("HTTP_X_RAFTCONNECT_FORWARDED_USER"),
                          "budget": environ.get("HTTP_X_RAFTCONNECT_BUDGET_MS"),
                          "signed": bool(environ.get("HTTP_X_RAFTCONNECT_SIGNATURE")), "body": body})
        status, data = self.answer
        headers = [("Content-Type", "application/json")]
        if status == 201:
            headers.append(("Location", "http://leader:8083" + environ["PATH_INFO"].removesuffix("/config")))
        start_response(f"{status} X", headers)
        return [json.dumps(data).encode()]


def _both_on_a_follower(apps, *args, **kwargs):
    """:func:`both` on a follower: nothing is written here, so nothing is deleted between the two calls."""
    fast, full = apps
    before = fastpath.served()
    a = call(fast, *args, **kwargs)
    taken = fastpath.served() - before
    return a, call(full, *args, **kwargs), bool(taken)


@pytest.fixture
def follower(node, monkeypatch):
    """The in-process node as a follower whose leader is a :class:`_Leader` on a port of its own."""
    from .test_rest_server import serving

    leader = _Leader()
    with serving(leader, "waitress", threads=4) as (_, port):
        monkeypatch.setattr(type(node.raft), "is_leader", property(lambda self: False))
        monkeypatch.setattr(node, "leader_rest_address", lambda: f"127.0.0.1:{port}")
        yield leader


@pytest.mark.parametrize("auth", ["basic", "token"])
def test_a_follower_forwards_a_write_as_the_full_path_does_without_its_own_full_path(apps, follower, tmp_path,
                                                                                     auth):
    credentials = basic("operator", "pw")
    if auth == "token":
        credentials = "Bearer " + accounts.token_create(user="operator", name="ci")["token"]
    config = source_config(tmp_path)
    fast, full, taken = _both_on_a_follower(apps, "PUT", "/connectors/fw/config", config, auth=credentials)
    assert taken and fast == full and fast[0] == 201, (fast, full)
    assert fast[1]["location"] == "http://leader:8083/connectors/fw"  # the leader's answer, passed on
    sent_fast, sent_full = follower.seen
    assert sent_fast["user"] == sent_full["user"] == "operator;role=operator"
    assert sent_fast["signed"] and sent_fast["body"] == sent_full["body"] == json.dumps(config).encode()
    assert 0 < int(sent_fast["budget"]) <= 10_000 and 0 < int(sent_full["budget"]) <= 10_000
    follower.answer = (400, {"error_code": 400, "message": "Connector configuration is invalid"})
    fast, full, taken = _both_on_a_follower(apps, "POST", "/connectors", {"name": "p", "config": config},
                                            auth=credentials)
    assert taken and fast == full and fast[0] == 400


def test_a_follower_whose_leader_does_not_answer_says_so_as_the_full_path_does(apps, node, monkeypatch, settings,
                                                                               tmp_path):
    settings.FORWARD_WAIT_S = 0.3
    monkeypatch.setattr(type(node.raft), "is_leader", property(lambda self: False))
    gone = f"127.0.0.1:{free_port()}"  # nobody listens there
    monkeypatch.setattr(node, "leader_rest_address", lambda: gone)
    fast, full, taken = _both_on_a_follower(apps, "PUT", "/connectors/gone/config", source_config(tmp_path),
                                            auth=basic("operator", "pw"))
    assert taken and fast == full and fast[0] == 503
    assert f"The leader at {gone} is unreachable and no other leader was found" in json.loads(fast[2])["message"]


def test_a_follower_leaves_a_write_it_cannot_vouch_for_to_the_full_path(apps, follower, tmp_path):
    fast, full, taken = _both_on_a_follower(apps, "PUT", "/connectors/v/config", source_config(tmp_path),
                                            auth=basic("viewer", "pw"))
    assert not taken and fast == full and fast[0] == 403
    assert follower.seen == []  # refused here, as the full path refuses it


def _request(path: str):
    from django.core.handlers.wsgi import WSGIRequest

    return WSGIRequest({"REQUEST_METHOD": "PUT", "PATH_INFO": path, "QUERY_STRING": "", "SERVER_NAME": "127.0.0.1",
                        "SERVER_PORT": "8083", "HTTP_HOST": "127.0.0.1:8083", "wsgi.input": io.BytesIO(b"{}"),
                        "CONTENT_LENGTH": "2", "CONTENT_TYPE": "application/json", "wsgi.url_scheme": "http",
                        "HTTP_AUTHORIZATION": basic("operator", "pw")})


def _forwarded(node, method: str, path: str, body: dict, *, role: str = "operator", secret: str | None = None,
               budget_ms: int | None = None) -> dict[str, str]:
    """``call`` keyword headers of a request another member forwarded (``forwarding.proxy``): signed anew each
    call (a nonce is good once), naming the user and role the forwarding member authenticated."""
    from webapp.coordinator.signing import signed_headers

    headers = signed_headers(secret or node.secret, method, path, json.dumps(body).encode())
    headers.update({"X-RaftConnect-Forwarded": "1", "X-RaftConnect-Forwarded-User": f"alice;role={role}"})
    if budget_ms is not None:
        headers["X-RaftConnect-Budget-Ms"] = str(budget_ms)
    return {k.lower().replace("-", "_"): v for k, v in headers.items()}


def _both_forwarded(apps, node, method: str, path: str, body: dict, **kw):
    """:func:`both` for a forwarded request: each path gets its own signature."""
    fast, full = apps
    before = fastpath.served()
    a = call(fast, method, path, body, **_forwarded(node, method, path, body, **kw))
    taken = fastpath.served() - before
    if a[0] == 201:
        assert call(full, "DELETE", a[1]["location"].removeprefix("http://127.0.0.1:8083"),
                    auth=basic("operator", "pw"))[0] == 204
    return a, call(full, method, path, body, **_forwarded(node, method, path, body, **kw)), bool(taken)


def test_a_signed_forwarded_write_takes_the_fast_path_and_is_answered_as_the_full_path_answers_it(apps, node,
                                                                                                   tmp_path):
    config = source_config(tmp_path)
    created_fast, created_full, taken = _both_forwarded(apps, node, "PUT", "/connectors/fw/config", config)
    assert taken and created_fast == created_full and created_fast[0] == 201
    updated_fast, updated_full, taken = _both_forwarded(apps, node, "PUT", "/connectors/fw/config",
                                                        {**config, "tasks.max": "2"})
    assert taken and updated_fast == updated_full and updated_fast[0] == 200
    posted = {"name": "fw-post", "config": config}
    post_fast, post_full, taken = _both_forwarded(apps, node, "POST", "/connectors", posted)
    assert taken and post_fast == post_full and post_fast[0] == 201


@pytest.mark.parametrize("case", ["wrong secret", "viewer role", "own credentials too", "no user named"])
def test_a_forwarded_write_the_fast_path_cannot_vouch_for_goes_to_the_full_path(apps, node, tmp_path, case):
    config = source_config(tmp_path)
    path = f"/connectors/{case.replace(' ', '-')}/config"
    fast, full = apps
    answers = []
    for app in (fast, full):
        kw = _forwarded(node, "PUT", path, config, secret="not-the-cluster-secret" if case == "wrong secret" else None,
                        role="viewer" if case == "viewer role" else "operator")
        if case == "own credentials too":
            kw["auth"] = basic("operator", "pw")
        if case == "no user named":
            del kw["x_raftconnect_forwarded_user"]
        before = fastpath.served()
        answers.append(call(app, "PUT", path, config, **kw))
        assert fastpath.served() == before  # the fast path did not answer, in either call
        if answers[-1][0] == 201:  # created: the second call must create it too
            assert call(full, "DELETE", path.removesuffix("/config"), auth=basic("operator", "pw"))[0] == 204
    assert answers[0][0] == answers[1][0] and json.loads(answers[0][2]) == json.loads(answers[1][2])
    expected = {"wrong secret": 401, "viewer role": 403, "own credentials too": 201, "no user named": 401}
    assert answers[0][0] == expected[case], answers[0]


def test_a_forwarded_write_past_its_budget_proposes_nothing(apps, node, tmp_path):
    answer, full, taken = _both_forwarded(apps, node, "PUT", "/connectors/late/config", source_config(tmp_path),
                                          budget_ms=0)
    assert taken and answer == full and answer[0] == 503
    assert "time budget ran out" in json.loads(answer[2])["message"]
    assert "x-raftconnect-not-leader" not in answer[1]  # not said: the forwarder must not send it again
    assert node.store.get_connector("late") is None


def test_a_forwarded_write_on_a_leader_deposed_meanwhile_says_nothing_was_written(apps, node, tmp_path, monkeypatch):
    """The member led when the request came in (the fast path took it) and no longer did when the Herder
    proposed: one attempt, 503 with ``X-RaftConnect-Not-Leader``, so the forwarder sends it to the new leader."""
    fast, _ = apps
    answers = iter([True])  # the fast path's own check; every later one: deposed
    monkeypatch.setattr(type(node.raft), "is_leader", property(lambda self: next(answers, False)))
    config = source_config(tmp_path)
    before = fastpath.served()
    status, headers, body = call(fast, "PUT", "/connectors/deposed/config", config,
                                 **_forwarded(node, "PUT", "/connectors/deposed/config", config))
    assert fastpath.served() == before + 1
    assert status == 503 and headers.get("x-raftconnect-not-leader") == "1", body
    monkeypatch.undo()
    assert node.store.get_connector("deposed") is None


@pytest.fixture
def housekeeping():
    """What Django's ``request_started`` / ``request_finished`` were sent during a test (by signal)."""
    from django.core import signals

    sent: list[str] = []

    def started(**_):
        sent.append("started")

    def finished(**_):
        sent.append("finished")

    signals.request_started.connect(started)
    signals.request_finished.connect(finished)
    yield sent
    signals.request_started.disconnect(started)
    signals.request_finished.disconnect(finished)


def test_a_write_on_the_raft_store_skips_djangos_database_housekeeping_and_still_frees_the_request(
        apps, tmp_path, housekeeping, monkeypatch):
    from django.core.handlers.wsgi import WSGIRequest

    closed = []
    monkeypatch.setattr(WSGIRequest, "close", lambda self: closed.append(self.path))
    fast, full = apps
    before = fastpath.served()
    status = call(fast, "PUT", "/connectors/quiet/config", source_config(tmp_path), auth=basic("operator", "pw"))[0]
    assert status == 201 and fastpath.served() == before + 1
    assert housekeeping == [] and closed == ["/connectors/quiet/config"]
    # a refused write is answered quietly too
    assert call(fast, "PUT", "/connectors/quiet/config", {"connector.class": "NoSuch"},
                auth=basic("operator", "pw"))[0] == 400
    assert housekeeping == [] and len(closed) == 2
    # what the fast path leaves to the full path gets both, once
    assert call(fast, "PUT", "/connectors/quiet/config", source_config(tmp_path), auth=basic("viewer", "pw"))[0] == 403
    assert housekeeping == ["started", "finished"]
    housekeeping.clear()
    assert call(fast, "GET", "/connectors/quiet", auth=basic("operator", "pw"))[0] == 200
    assert housekeeping == ["started", "finished"]


def test_a_write_on_a_database_store_gets_djangos_housekeeping_as_on_the_full_path(apps, node, tmp_path,
                                                                                   housekeeping, monkeypatch):
    from webapp.storage.switch.router import StoreRouter

    fast, full = apps
    monkeypatch.setattr(StoreRouter, "active_name", property(lambda self: "postgresql"))
    monkeypatch.setattr(StoreRouter, "active", property(lambda self: self.stores.get("raft")))
    before = fastpath.served()
    status = call(fast, "PUT", "/connectors/kept/config", source_config(tmp_path), auth=basic("operator", "pw"))[0]
    assert status == 201 and fastpath.served() == before + 1
    assert housekeeping == ["started", "finished"]


def test_a_write_a_follower_forwards_skips_djangos_housekeeping(apps, follower, tmp_path, housekeeping):
    fast, full = apps
    before = fastpath.served()
    answer = call(fast, "PUT", "/connectors/fw/config", source_config(tmp_path), auth=basic("operator", "pw"))
    assert answer[0] == 201 and fastpath.served() == before + 1 and len(follower.seen) == 1
    assert housekeeping == []
