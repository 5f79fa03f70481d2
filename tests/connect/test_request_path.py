"""What the REST request path's shortcuts must keep: each answers as the general path it skips.

The JSON parser (orjson in front of DRF's), content negotiation for plain JSON requests, the
kernel-resolved real path of the file access policy and the lazily made message storage.
"""
from __future__ import annotations

import io
import json
import os

import pytest
from django.contrib import messages
from django.http import HttpResponse
from django.test import RequestFactory
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from webapp.admin_site import LazyMessageMiddleware
from webapp.connect.api.parsers import ConnectJSONParser
from webapp.runtime.file_access import realpath

BODIES = [
    b'{"name": "c", "config": {"connector.class": "x", "tasks.max": "1"}}',
    b'{"a": 1, "a": 2}',  # the last of duplicate keys
    b'{"offset": 123456789012345678901234567890}',  # past 64 bits: an exact int, not a float
    b'{"offset": 9223372036854775807, "neg": -9223372036854775808}',
    b'{"topic": "1234567890123456789012345"}',  # a long digit run in a string
    b'"\\ud800"',  # a lone surrogate escape
    b'[1e400, -1e400]',  # past a double's range
    b'[0.1, 1e-7, 2.5e10, -0.0, 0]',
    '{"unicode": "é漢字🙂", "esc": "\\u00e9\\n\\t\\"\\\\"}'.encode(),
    b' \r\n\t{"spaced" : [ 1 , 2 ] }\r\n ',
    b'[' * 500 + b']' * 500,  # deep, within both decoders' limits
]

REFUSED = [
    b"NaN", b"[Infinity]", b"{not json", b"\xef\xbb\xbf{}", b"\xff\xfe\x00garbage", b'{"a": 1,}', b"[1] [2]",
]


def _parse(parser, body: bytes):
    return parser.parse(io.BytesIO(body), "application/json", {"encoding": "utf-8"})


@pytest.mark.parametrize("body", BODIES, ids=range(len(BODIES)))
def test_the_parser_reads_what_drfs_reads(body):
    got, want = _parse(ConnectJSONParser(), body), _parse(JSONParser(), body)
    assert json.dumps(got) == json.dumps(want)  # the same values and the same types (int stays int)
    assert type(got) is type(want)


@pytest.mark.parametrize("body", REFUSED, ids=range(len(REFUSED)))
def test_the_parser_refuses_what_drf_refuses_with_its_message(body):
    with pytest.raises(ParseError) as ours:
        _parse(ConnectJSONParser(), body)
    with pytest.raises(ParseError) as drfs:
        _parse(JSONParser(), body)
    assert str(ours.value.detail) == str(drfs.value.detail)


def test_the_parser_answers_too_deep_nesting_with_a_parse_error():
    with pytest.raises(ParseError, match="nesting is too deep"):
        _parse(ConnectJSONParser(), b"[" * 100_000 + b"]" * 100_000)


def test_other_charsets_are_decoded_by_drf():
    body = '{"name": "é"}'.encode("latin-1")
    got = ConnectJSONParser().parse(io.BytesIO(body), "application/json", {"encoding": "latin-1"})
    assert got == {"name": "é"}


@pytest.mark.parametrize("accept", [None, "*/*", "application/json"])
def test_plain_json_requests_get_compact_json(api, node, accept):
    headers = {} if accept is None else {"HTTP_ACCEPT": accept}
    resp = api.get("/", **headers)
    assert resp.status_code == 200 and resp["Content-Type"] == "application/json"
    assert b"\n" not in resp.content and json.loads(resp.content)["version"]


def test_other_accept_headers_still_go_through_drfs_negotiation(api, node):
    indented = api.get("/connector-plugins", HTTP_ACCEPT="application/json; indent=4")
    assert indented.status_code == 200
    assert b"\n    " in indented.content
    refused = api.get("/connector-plugins", HTTP_ACCEPT="text/html")
    assert refused.status_code == 406
    assert set(refused.json()) == {"error_code", "message"}
    assert api.get("/connector-plugins?format=json").status_code == 200


def test_realpath_gives_what_os_path_realpath_gives(tmp_path, monkeypatch):
    root = tmp_path / "r"
    (root / "d" / "e").mkdir(parents=True)
    (root / "d" / "f.csv").write_text("a\n")
    os.symlink(root / "d", root / "to-d")
    os.symlink("d/f.csv", root / "rel-link")
    os.symlink(root / "to-d", root / "chain")
    os.symlink(root / "missing", root / "dangling")
    os.symlink(root / "loop-b", root / "loop-a")
    os.symlink(root / "loop-a", root / "loop-b")
    os.mkfifo(root / "fifo")
    monkeypatch.chdir(root / "d")
    cases = [str(root / "d" / "f.csv"), str(root / "to-d" / "f.csv"), str(root / "rel-link"), str(root / "chain"),
             str(root / "chain" / "e" / ".." / "f.csv"), str(root / "to-d" / ".."), str(root / "dangling"),
             str(root / "missing" / "x"), str(root / "loop-a"), str(root / "fifo"), "f.csv", "e/../f.csv", "",
             ".", "..", "/", str(root) + "//d///f.csv"]
    for path in cases:
        assert realpath(path) == os.path.realpath(path), path
    with pytest.raises(ValueError):
        realpath("a\x00b")


def test_messages_are_stored_as_before_and_only_requests_that_use_them_touch_the_storage(settings):
    settings.MESSAGE_STORAGE = "django.contrib.messages.storage.cookie.CookieStorage"
    middleware = LazyMessageMiddleware(lambda request: HttpResponse("ok"))
    untouched = RequestFactory().get("/connectors")
    response = middleware(untouched)
    assert untouched._messages._wrapped is not None and "messages" not in response.cookies
    from django.utils.functional import empty

    assert untouched._messages._wrapped is empty  # never made

    def adds(request):
        messages.add_message(request, messages.INFO, "saved")
        return HttpResponse("ok")

    response = LazyMessageMiddleware(adds)(RequestFactory().get("/admin/"))
    assert "messages" in response.cookies  # stored as Django's middleware stores it
    shown = RequestFactory().get("/admin/")
    shown.COOKIES["messages"] = response.cookies["messages"].value
    LazyMessageMiddleware(lambda request: HttpResponse("ok")).process_request(shown)
    assert [m.message for m in messages.get_messages(shown)] == ["saved"]
