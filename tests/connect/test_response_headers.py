"""Connect's response.http.headers.config: headers added to every REST response, on both request paths."""
from __future__ import annotations

import pytest
from django.http import HttpResponse

from webapp.connect import workerconfig
from webapp.connect.response_headers import ENV, HeaderRule, apply_rules, parse_rules

from .conftest import basic
from .test_fastpath import apps, both, call, fast_hashing  # noqa: F401 - fixtures of the fast-path tests
from .test_rest import source_config

#: Connect's documented example, a rule quoted because its value holds commas
CONNECT_EXAMPLE = ('"add Cache-Control: no-cache, no-store, must-revalidate", add X-XSS-Protection: 1; mode=block, '
                   'set Strict-Transport-Security: max-age=31536000; includeSubDomains, addDate Expires: 0')


def test_rules_are_parsed_as_connect_writes_them():
    assert parse_rules(CONNECT_EXAMPLE) == (
        HeaderRule("add", "Cache-Control", "no-cache, no-store, must-revalidate"),
        HeaderRule("add", "X-XSS-Protection", "1; mode=block"),
        HeaderRule("set", "Strict-Transport-Security", "max-age=31536000; includeSubDomains"),
        HeaderRule("addDate", "Expires", 0))
    assert parse_rules("") == () and parse_rules(None) == ()
    assert parse_rules("set Content-Security-Policy: default-src 'self'; img-src https:")[0].value == \
        "default-src 'self'; img-src https:"  # a value may hold ':'


@pytest.mark.parametrize("bad, says", [
    ("add Cache-Control no-cache", "expected '\\[action\\] \\[header name\\]:\\[header value\\]'"),
    ("append X-A: 1", "invalid action 'append'"),
    ("set X A: 1", "invalid header name"),
    ("setDate Expires: tomorrow", "needs milliseconds"),
])
def test_a_bad_rule_is_refused_with_what_connect_expects(bad, says):
    with pytest.raises(ValueError, match=says):
        parse_rules(bad)
    with pytest.raises(workerconfig.PropertiesError, match="response.http.headers.config"):
        workerconfig.worker_config({"response.http.headers.config": bad}, environ={})


def test_worker_property_sets_the_environment():
    cfg = workerconfig.worker_config({"response.http.headers.config": CONNECT_EXAMPLE}, environ={})
    assert cfg.env[ENV] == CONNECT_EXAMPLE and "response.http.headers.config" not in cfg.ignored


def test_actions():
    r = HttpResponse()
    r["Cache-Control"] = "private"
    apply_rules(r, parse_rules("add Cache-Control: no-store, set X-Frame-Options: DENY, set X-Frame-Options: SAMEORIGIN, "
                               "setDate Expires: 60000"), now=lambda: 784111777.0)
    assert r["Cache-Control"] == "private, no-store"
    assert r["X-Frame-Options"] == "SAMEORIGIN"
    assert r["Expires"] == "Sun, 06 Nov 1994 08:50:37 GMT"  # RFC 9110's example date, 60 s on


@pytest.fixture
def rules(settings):
    settings.REST_RESPONSE_HEADER_RULES = parse_rules("set X-Frame-Options: DENY, add Cache-Control: no-store")
    settings.MIDDLEWARE = ["webapp.connect.response_headers.ResponseHeadersMiddleware", *settings.MIDDLEWARE]


def test_every_answer_carries_them_on_both_paths(rules, apps, tmp_path):  # noqa: F811 - the imported fixture
    _, full = apps
    (created, reference, taken) = both(apps, "POST", "/connectors", {"name": "rh", "config": source_config(tmp_path)},
                                       auth=basic("operator", "pw"))
    assert taken, "the fast path did not answer the create"
    for answer in (created, reference):
        assert answer[0] == 201
        assert answer[1]["x-frame-options"] == "DENY" and answer[1]["cache-control"] == "no-store"
    refused = call(full, "GET", "/connectors", auth=basic("operator", "wrong"))
    assert refused[0] == 401 and refused[1]["x-frame-options"] == "DENY"  # errors too


def test_none_by_default(apps, settings):  # noqa: F811 - the imported fixture
    assert settings.REST_RESPONSE_HEADER_RULES == ()
    assert "webapp.connect.response_headers.ResponseHeadersMiddleware" not in settings.MIDDLEWARE
    _, full = apps
    assert "x-frame-options" not in call(full, "GET", "/connectors", auth=basic("operator", "pw"))[1]
