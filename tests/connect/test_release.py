"""Requests leave no cyclic garbage (``webapp.connect.api.release``).

Every request runs through Django's real WSGI handler (not the test client, which adds cycles of
its own, e.g. ``response.json``) with the collector off, then one collection with
``DEBUG_SAVEALL`` keeps whatever only the cyclic collector could free. Without
``ReleaseRequestMiddleware`` each request left ~74 objects there, among them the DRF
``Response`` holding the rendered body: on a member with millions of objects that garbage
waits minutes for a full collection (``benchmarks/scale``: a polled follower reached 1.8 GB).
"""
from __future__ import annotations

import base64
import gc
import json
import weakref

import pytest
from django.core.handlers.wsgi import WSGIHandler
from django.test.client import FakePayload, RequestFactory

from webapp.connect.api.release import ReleaseRequestMiddleware, release_request
from webapp.coordinator.signing import signed_headers

from .test_rest import source_config
from .test_rest_lifecycle import FakeWorker


def _call(handler: WSGIHandler, method: str, path: str, headers: dict[str, str], body: bytes = b"") -> int:
    """One request as a WSGI server makes it: the body read, the response closed. Returns the status."""
    path, _, query = path.partition("?")
    environ = RequestFactory()._base_environ(PATH_INFO=path, QUERY_STRING=query, REQUEST_METHOD=method, **headers)
    if body:
        environ.update({"wsgi.input": FakePayload(body), "CONTENT_LENGTH": str(len(body)),
                        "CONTENT_TYPE": "application/json"})
    response = handler(environ, lambda status, response_headers: None)
    b"".join(response)
    response.close()
    return response.status_code


def _cyclic_garbage(fn, times: int = 3) -> list[str]:
    """Type names of the objects that ``times`` calls of ``fn`` left for the cyclic collector."""
    gc.collect()
    gc.disable()
    gc.set_debug(gc.DEBUG_SAVEALL)
    try:
        for _ in range(times):
            fn()
        gc.collect()
        return sorted({type(o).__qualname__ for o in gc.garbage})
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        gc.enable()


@pytest.fixture
def wsgi(api):
    """``(handler, Authorization header)`` of the operator the ``api`` fixture made."""
    return WSGIHandler(), {"HTTP_AUTHORIZATION": api.defaults["HTTP_AUTHORIZATION"]}


def test_the_middleware_is_first_so_it_runs_after_every_other(settings):
    assert settings.MIDDLEWARE[0] == f"{ReleaseRequestMiddleware.__module__}.{ReleaseRequestMiddleware.__name__}"


def test_reads_writes_and_refusals_leave_no_cyclic_garbage(wsgi, tmp_path):
    handler, auth = wsgi
    config = json.dumps(source_config(tmp_path)).encode()
    assert _call(handler, "PUT", "/connectors/src/config", auth, config) == 201
    unknown_user = {"HTTP_AUTHORIZATION": "Basic " + base64.b64encode(b"nobody:pw").decode()}
    requests = {
        "list with statuses": ("GET", "/connectors?expand=status&expand=info", auth, b"", 200),
        "status": ("GET", "/connectors/src/status", auth, b"", 200),
        "config write": ("PUT", "/connectors/src/config", auth, config, 200),
        "not found": ("GET", "/connectors/nope/status", auth, b"", 404),
        "malformed body": ("PUT", "/connectors/src/config", auth, b"{nope", 400),
        "invalid config": ("PUT", "/connectors/src/config", auth, b'{"connector.class": "no.Such"}', 400),
        "unauthenticated": ("GET", "/connectors", unknown_user, b"", 401),
    }
    for what, (method, path, headers, body, status) in requests.items():
        assert _call(handler, method, path, headers, body) == status, what
        assert _cyclic_garbage(lambda: _call(handler, method, path, headers, body)) == [], what


def test_an_agents_signed_requests_leave_no_cyclic_garbage(wsgi, api, node):
    handler, _ = wsgi
    FakeWorker(api, node).view()  # registers the worker

    def heartbeat() -> None:
        body = json.dumps({"worker_id": "w9", "member": {"rest_address": "127.0.0.1:1"}, "running": {}}).encode()
        path = "/raftconnect/v1/internal/heartbeat"
        headers = {f"HTTP_{k.upper().replace('-', '_')}": v
                   for k, v in signed_headers(node.secret, "POST", path, body).items()}
        assert _call(handler, "POST", path, headers, body) == 200

    assert _cyclic_garbage(heartbeat) == []


def test_a_released_response_keeps_its_body_and_frees_its_view(api, tmp_path):
    """What the server still sends is kept; the view, request and parsed data are freed with the response."""
    from rest_framework.response import Response
    from rest_framework.views import APIView

    class Echo(APIView):
        authentication_classes, permission_classes = [], []

        def post(self, request):
            return Response({"got": request.data})

    request = RequestFactory().post("/echo", data={"a": "b" * 1000}, content_type="application/json")
    response = Echo.as_view()(request)
    response.render()
    view = weakref.ref(response.renderer_context["view"])
    drf_request = weakref.ref(response.renderer_context["request"])
    release_request(request, response)
    release_request(request, response)  # idempotent
    assert json.loads(response.content) == {"got": {"a": "b" * 1000}}
    gc.disable()
    try:
        del response
        assert view() is None and drf_request() is None  # by reference counting, no collection
    finally:
        gc.enable()
