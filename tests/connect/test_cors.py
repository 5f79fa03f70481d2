"""Cross-origin access to the REST API: Connect's access.control.allow.origin / .methods (webapp.connect.cors)."""
from __future__ import annotations

import pytest
from django.test import RequestFactory

from webapp.connect import cors, workerconfig
from webapp.connect.api.fastpath import ConnectWSGIHandler

UI = "https://ui.example.com"


def test_settings_from_connects_values():
    none = cors.cors_settings(None)
    assert none["CORS_ALLOWED_ORIGINS"] == [] and not none["CORS_ALLOW_ALL_ORIGINS"]
    assert none["CORS_ALLOW_METHODS"] == ["GET", "POST", "HEAD"]  # Jetty's default, which Connect keeps
    assert not none["CORS_ALLOW_CREDENTIALS"]
    assert cors.cors_settings("*")["CORS_ALLOW_ALL_ORIGINS"]
    some = cors.cors_settings(f"{UI}, http://localhost:3000/, https://*.corp.example", "get,put,delete")
    assert some["CORS_ALLOWED_ORIGINS"] == [UI, "http://localhost:3000"]
    [pattern] = some["CORS_ALLOWED_ORIGIN_REGEXES"]
    import re

    assert re.match(pattern, "https://team.corp.example") and not re.match(pattern, "https://corp.example.evil.io")
    assert some["CORS_ALLOW_METHODS"] == ["GET", "PUT", "DELETE"]
    with pytest.raises(ValueError, match="ui.example.com.* is not an origin"):
        cors.cors_settings("ui.example.com")
    with pytest.raises(ValueError, match="unknown method"):
        cors.cors_settings(UI, "GET,FETCH")


def test_worker_properties_set_the_environment_and_refuse_a_bad_origin():
    cfg = workerconfig.worker_config({"access.control.allow.origin": UI,
                                      "access.control.allow.methods": "GET,POST,PUT,DELETE"}, environ={})
    assert cfg.env[cors.ORIGINS_ENV] == UI and cfg.env[cors.METHODS_ENV] == "GET,POST,PUT,DELETE"
    assert "access.control.allow.origin" not in cfg.ignored
    with pytest.raises(workerconfig.PropertiesError, match="access.control.allow.origin"):
        workerconfig.worker_config({"access.control.allow.origin": "example.com"}, environ={})


def _enable(settings) -> None:
    """What settings.py does when some origin is allowed: the middleware joins the chain."""
    settings.CORS_ENABLED = True
    chain = list(settings.MIDDLEWARE)
    chain.insert(chain.index("webapp.console.middleware.ConsoleFilesMiddleware") + 1,
                 "corsheaders.middleware.CorsMiddleware")
    settings.MIDDLEWARE = chain


@pytest.fixture
def allowed(settings):
    settings.CORS_ALLOWED_ORIGINS = [UI]
    settings.CORS_ALLOW_METHODS = ["GET", "POST", "PUT", "DELETE"]
    _enable(settings)


def test_no_middleware_and_no_vary_unless_some_origin_is_allowed(api, settings):
    assert not settings.CORS_ENABLED
    assert "corsheaders.middleware.CorsMiddleware" not in settings.MIDDLEWARE
    assert "Vary" not in api.get("/connectors", HTTP_ORIGIN=UI)


def test_an_allowed_origin_gets_the_headers_and_no_credentials(api, allowed):
    r = api.get("/connectors", HTTP_ORIGIN=UI)
    assert r.status_code == 200
    assert r["Access-Control-Allow-Origin"] == UI
    assert "Access-Control-Allow-Credentials" not in r  # cookies never travel cross-origin


def test_another_origin_gets_none(api, allowed):
    r = api.get("/connectors", HTTP_ORIGIN="https://elsewhere.example")
    assert r.status_code == 200 and "Access-Control-Allow-Origin" not in r


def test_none_by_default(api):
    r = api.get("/connectors", HTTP_ORIGIN=UI)
    assert "Access-Control-Allow-Origin" not in r


def test_a_preflight_is_answered_without_credentials(db, node, client, allowed):
    # the browser asks before a PUT with an Authorization header; it sends no credentials itself
    r = client.options("/connectors/x/config", HTTP_ORIGIN=UI, HTTP_ACCESS_CONTROL_REQUEST_METHOD="PUT",
                       HTTP_ACCESS_CONTROL_REQUEST_HEADERS="authorization, content-type")
    assert r.status_code == 200
    assert r["Access-Control-Allow-Origin"] == UI
    assert {m.strip() for m in r["Access-Control-Allow-Methods"].split(",")} == {"GET", "POST", "PUT", "DELETE"}
    assert "authorization" in r["Access-Control-Allow-Headers"].lower()


def test_the_django_admin_is_not_opened_to_other_origins(db, node, client, settings):
    settings.CORS_ALLOW_ALL_ORIGINS = True
    _enable(settings)
    assert "Access-Control-Allow-Origin" not in client.get("/admin/login/", HTTP_ORIGIN=UI)
    assert "Access-Control-Allow-Origin" in client.get("/admin/loggers", HTTP_ORIGIN=UI)  # Connect's endpoint


def test_a_browsers_write_takes_the_full_path():
    make = RequestFactory()
    body = {"name": "x", "config": {"connector.class": "FileStreamSource"}}
    plain = make.post("/connectors", body, content_type="application/json")
    browser = make.post("/connectors", body, content_type="application/json", HTTP_ORIGIN=UI)
    assert ConnectWSGIHandler._candidate(plain) is not None
    assert ConnectWSGIHandler._candidate(browser) is None
