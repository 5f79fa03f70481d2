"""ClusterConnections: keep-alive pools by address between the cluster's own processes."""
from __future__ import annotations

import pytest
import urllib3

from tests.connect.test_rest_server import serving
from webapp.coordinator.connections import ClusterConnections


class _Recorder:
    """Answers ``200 ok`` (or a redirect for ``/moved``) and keeps each request's client port and path."""

    def __init__(self):
        self.seen: list[tuple[str, str]] = []

    def __call__(self, environ, start_response):
        query = environ.get("QUERY_STRING")
        self.seen.append((environ["REMOTE_PORT"], environ["PATH_INFO"] + (f"?{query}" if query else "")))
        if environ["PATH_INFO"] == "/moved":
            start_response("307 Temporary Redirect", [("Location", "/elsewhere")])
            return [b""]
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"ok"]


def test_requests_to_one_address_share_a_kept_connection_and_keep_their_query():
    app = _Recorder()
    http = ClusterConnections(maxsize=2)
    with serving(app, "waitress", threads=2) as (_, port):
        for i in range(5):
            assert http.request("GET", f"127.0.0.1:{port}", f"/x?i={i}", body=None, headers={}, timeout=5).data == b"ok"
    assert len({p for p, _ in app.seen}) == 1
    assert [path for _, path in app.seen] == [f"/x?i={i}" for i in range(5)]


def test_a_redirect_is_answered_as_it_is_not_followed():
    app = _Recorder()
    with serving(app, "waitress", threads=2) as (_, port):
        resp = ClusterConnections(maxsize=1).request("GET", f"127.0.0.1:{port}", "/moved", body=None, headers={},
                                                     timeout=5)
    assert resp.status == 307 and resp.headers["Location"] == "/elsewhere"
    assert [path for _, path in app.seen] == ["/moved"]


def test_past_its_address_limit_it_starts_over_and_still_answers():
    apps = [_Recorder() for _ in range(3)]
    http = ClusterConnections(maxsize=1, max_addresses=2)
    with serving(apps[0], "waitress") as (_, p0), serving(apps[1], "waitress") as (_, p1), \
            serving(apps[2], "waitress") as (_, p2):
        first = http.pool(f"127.0.0.1:{p0}")
        assert http.pool(f"127.0.0.1:{p0}") is first
        for port in (p0, p1, p2, p0):
            assert http.request("GET", f"127.0.0.1:{port}", "/", body=None, headers={}, timeout=5).status == 200
        assert http.pool(f"127.0.0.1:{p0}") is not first  # made again after the third address
    assert len(http._pools) <= 2


@pytest.mark.parametrize("address", ["", ":8083", "host:port"])
def test_an_address_that_is_no_host_and_port_is_refused(address):
    with pytest.raises(urllib3.exceptions.LocationParseError):
        ClusterConnections(maxsize=1).pool(address)


def test_a_refused_connection_is_a_new_connection_error():
    from webapp.kafka.embedded import free_port

    with pytest.raises(urllib3.exceptions.NewConnectionError):
        ClusterConnections(maxsize=1).request("GET", f"127.0.0.1:{free_port()}", "/", body=None, headers={},
                                              timeout=2)


class _Verifier:
    """Answers ``200`` with the signature's verdict (``ok`` or why not) and keeps the requests' headers."""

    def __init__(self, secret: str):
        self.secret = secret
        self.headers: list[dict[str, str]] = []

    def __call__(self, environ, start_response):
        from webapp.coordinator.signing import NONCE_HEADER, SIG_HEADER, TS_HEADER, verify

        def header(name):
            return environ.get("HTTP_" + name.upper().replace("-", "_"))

        body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
        self.headers.append({k: v for k, v in environ.items() if k.startswith(("HTTP_", "CONTENT_TYPE"))})
        why = verify(self.secret, environ["REQUEST_METHOD"], environ["PATH_INFO"], body, header(TS_HEADER),
                     header(SIG_HEADER), nonce=header(NONCE_HEADER))
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [(why or "ok").encode()]


def test_a_signed_request_verifies_with_its_body_and_headers_and_goes_direct_past_a_proxy(monkeypatch):
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.setenv(name, "http://127.0.0.1:9")  # nothing listens there: a proxied call would fail
    app = _Verifier("s3cret")
    http = ClusterConnections(maxsize=1)
    with serving(app, "waitress") as (_, port):
        put = http.signed("PUT", f"127.0.0.1:{port}", "/raftconnect/v1/internal/loggers/x", secret="s3cret",
                          body=b'{"level": "DEBUG"}', headers={"Content-Type": "application/json"}, timeout=5)
        get = http.signed("GET", f"127.0.0.1:{port}", "/raftconnect/v1/internal/leader", secret="s3cret", timeout=5)
        wrong = http.signed("GET", f"127.0.0.1:{port}", "/raftconnect/v1/internal/leader", secret="other", timeout=5)
    assert (put.data, get.data) == (b"ok", b"ok")
    assert wrong.data == b"Internal request signature does not match"
    assert app.headers[0]["CONTENT_TYPE"] == "application/json"


def test_a_signed_get_for_json_gives_the_body_or_one_kind_of_error_for_each_way_it_fails():
    from webapp.coordinator import signing
    from webapp.coordinator.connections import NotAnswered

    def app(env, start_response):
        def header(name: str) -> str | None:
            return env.get("HTTP_" + name.upper().replace("-", "_"))

        if signing.verify("s3cret", "GET", env["PATH_INFO"], b"", header(signing.TS_HEADER), header(signing.SIG_HEADER),
                          nonce=header(signing.NONCE_HEADER)) is not None:  # not signed with the secret: refused
            start_response("401 Unauthorized", [("Content-Type", "application/json")])
            return [b'{"error_code": 401, "message": "not signed"}']
        if env["PATH_INFO"] == "/gone":
            start_response("503 Service Unavailable", [("Content-Type", "application/json")])
            return [b'{"error_code": 503, "message": "no leader"}']
        start_response("200 OK", [("Content-Type", "application/json")])
        return [b'{"leader": "n1"}' if env["PATH_INFO"] == "/json" else b"<html>"]

    http = ClusterConnections(maxsize=1)
    with serving(app, "waitress") as (_, port):
        address = f"127.0.0.1:{port}"
        assert http.signed_get_json(address, "/json", secret="s3cret", timeout=5) == {"leader": "n1"}
        with pytest.raises(NotAnswered, match="HTTP 503: no leader") as failed:
            http.signed_get_json(address, "/gone", secret="s3cret", timeout=5)
        assert isinstance(failed.value, urllib3.exceptions.HTTPError)
        with pytest.raises(NotAnswered, match="HTTP 401: not signed"):
            http.signed_get_json(address, "/json", secret="another", timeout=5)
        with pytest.raises(ValueError):
            http.signed_get_json(address, "/html", secret="s3cret", timeout=5)
