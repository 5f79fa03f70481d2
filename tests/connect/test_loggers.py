"""``/admin/loggers`` (Connect's LoggingResource) on an in-process node."""
from __future__ import annotations

import logging

import pytest

from webapp.loggers import Loggers

from .test_rest import put


@pytest.fixture
def restore_levels():
    names = ("rc.test", "rc.test.child", "rc.testing")
    before = {n: logging.getLogger(n).level for n in names}
    yield
    for n, lvl in before.items():
        logging.getLogger(n).setLevel(lvl)


def test_list_get_and_set_worker_scope(admin_api, restore_levels):
    logging.getLogger("rc.test.child")  # exists before the change, so the namespace covers it
    listing = admin_api.get("/admin/loggers").json()
    assert "root" in listing and set(listing["root"]) == {"level", "last_modified"}
    resp = put(admin_api, "/admin/loggers/rc.test", {"level": "debug"})
    assert resp.status_code == 200
    affected = resp.json()
    assert "rc.test" in affected and "rc.test.child" in affected and affected == sorted(affected)
    assert logging.getLogger("rc.test.child").getEffectiveLevel() == logging.DEBUG
    got = admin_api.get("/admin/loggers/rc.test.child").json()
    assert got["level"] == "DEBUG" and isinstance(got["last_modified"], int)
    assert admin_api.get("/admin/loggers").json()["rc.test"]["level"] == "DEBUG"
    warn = put(admin_api, "/admin/loggers/rc.test.child?scope=bogus", {"level": "WARN"})  # unknown scope: worker
    assert warn.status_code == 200 and logging.getLogger("rc.test.child").level == logging.WARNING


def test_cluster_scope_is_204_and_applies_here(admin_api, restore_levels):
    resp = put(admin_api, "/admin/loggers/rc.testing?scope=cluster", {"level": "ERROR"})
    assert resp.status_code == 204
    assert logging.getLogger("rc.testing").level == logging.ERROR


def test_hostile_logger_requests(admin_api, client):
    missing = admin_api.get("/admin/loggers/no.such.logger.anywhere")
    assert missing.status_code == 404 and missing.json()["message"] == "Logger no.such.logger.anywhere not found."
    bad_level = put(admin_api, "/admin/loggers/rc.test", {"level": "LOUD"})
    assert bad_level.status_code == 404 and bad_level.json()["message"] == "invalid log level 'LOUD'."
    no_level = put(admin_api, "/admin/loggers/rc.test", {"lvl": "DEBUG"})
    assert no_level.status_code == 400
    assert no_level.json()["message"] == "Desired 'level' parameter was not specified in request."
    assert put(admin_api, "/admin/loggers/rc.test", {"level": 3}).status_code == 400
    assert admin_api.put("/admin/loggers/rc.test", data="{x", content_type="application/json").status_code == 400
    assert "no.such.logger.anywhere" not in logging.root.manager.loggerDict
    del client.defaults["HTTP_AUTHORIZATION"]
    assert client.get("/admin/loggers").status_code == 401
    assert put(client, "/admin/loggers/root", {"level": "DEBUG"}).status_code == 401


def test_root_namespace_sets_every_logger_and_reports_last_modified():
    clock = iter([1000, 2000])
    loggers = Loggers(clock=lambda: next(clock))
    saved = {n: lg.level for n, lg in logging.root.manager.loggerDict.items() if isinstance(lg, logging.Logger)}
    saved_root = logging.root.level
    try:
        affected = loggers.set_level("root", "ERROR")
        assert "root" in affected and len(affected) == len(saved) + 1
        assert loggers.level("root") == {"level": "ERROR", "last_modified": 1000}
        loggers.set_level("rc.unit", "TRACE")
        assert loggers.level("rc.unit") == {"level": "TRACE", "last_modified": 2000}
    finally:
        for n, lvl in saved.items():
            logging.getLogger(n).setLevel(lvl)
        logging.root.setLevel(saved_root)
        logging.getLogger("rc.unit").setLevel(logging.NOTSET)


def test_cluster_scope_fans_out_signed_requests_to_every_member(admin_api, node, restore_levels):
    """Another member (a tiny HTTP server registered through a signed heartbeat) gets the level."""
    import json
    import threading
    from http.server import BaseHTTPRequestHandler, HTTPServer

    from webapp.coordinator.signing import NONCE_HEADER, SIG_HEADER, TS_HEADER, verify

    from .test_rest_lifecycle import internal

    got = []

    class Handler(BaseHTTPRequestHandler):
        def do_PUT(self):  # noqa: N802 - http.server's naming
            body = self.rfile.read(int(self.headers["Content-Length"]))
            got.append((self.path, json.loads(body),
                        verify(node.secret, "PUT", self.path, body, self.headers[TS_HEADER], self.headers[SIG_HEADER],
                               nonce=self.headers[NONCE_HEADER])))
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'["rc.testing"]')

        def log_message(self, *args):
            pass

    server = HTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        resp = internal(admin_api, node, "POST", "/raftconnect/v1/internal/heartbeat",
                        {"worker_id": "w-other", "member": {"rest_address": f"127.0.0.1:{server.server_port}"},
                         "running": {}})
        assert resp.status_code == 200
        assert put(admin_api, "/admin/loggers/rc.testing?scope=cluster", {"level": "WARN"}).status_code == 204
        assert got == [("/raftconnect/v1/internal/loggers/rc.testing", {"level": "WARN"}, None)]
        assert logging.getLogger("rc.testing").level == logging.WARNING  # and here
    finally:
        server.shutdown()


def test_internal_logger_endpoint_needs_a_signature(admin_api, node, restore_levels):
    from .test_rest_lifecycle import internal

    assert put(admin_api, "/raftconnect/v1/internal/loggers/rc.testing", {"level": "ERROR"}).status_code in (401, 403)
    resp = internal(admin_api, node, "PUT", "/raftconnect/v1/internal/loggers/rc.testing", {"level": "ERROR"})
    assert resp.status_code == 200 and "rc.testing" in resp.json()
    assert logging.getLogger("rc.testing").level == logging.ERROR
