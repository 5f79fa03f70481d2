"""The REST fast path: ``PUT /connectors/{name}/config`` on the leader without the middleware chain, URL resolver and DRF.

Owns :class:`ConnectWSGIHandler`, the node's WSGI application (``webapp.wsgi``): Django's own
``WSGIHandler`` (request and response objects, ``request_started`` / ``request_finished``, the
script prefix, the WSGI exchange) which answers one request shape itself and hands every other
request to Django's middleware chain and DRF unchanged. Must not decide anything the DRF view
does not: it calls the same Herder service, authenticates through the same credential caches,
checks the same role rule and renders with the same renderer and error bodies; whatever it is not
sure of goes to the full path, which answers as it always did.

Why: a connector config write on a Raft leader cost ~1.3 ms of the leader's CPU in process, of
which the Herder (validation, the Raft proposal, ConnectorInfo) was ~0.45 ms and Django's and
DRF's per-request machinery (eight middlewares, URL resolving, DRF's request wrapper,
authenticator loop, permission and negotiation steps, template response) the rest. The leader's
one interpreter lock is what 32 concurrent REST clients wait for (issue 16,
``benchmarks/cluster``), so that machinery set the cluster's write rate.

A request takes the fast path only when all of these hold, checked in this order:

* ``PUT``, path ``/connectors/<name>/config`` (``<name>`` as Django's ``str`` converter: no
  ``/``), no query string, ``Content-Type: application/json`` (UTF-8), an ``Accept`` DRF's
  negotiation can only answer with JSON (absent, ``*/*`` or ``application/json``), not forwarded
  by another member (``X-RaftConnect-Forwarded``);
* the fast path is enabled (``RAFTCONNECT_REST_FAST_PATH``, default on) and this node is the Raft
  leader (a follower forwards writes: the full path);
* the ``Host`` is allowed (``ALLOWED_HOSTS``; Django answers 400 otherwise) and
  ``SECURE_SSL_REDIRECT`` would not redirect;
* the credentials are ``Basic`` ones already verified within the cache's lifetime
  (``authentication.CachedBasicAuthentication``: a first request, a wrong password or a changed
  one take the full path, which runs the PBKDF2 check and fills the cache) or a valid replicated
  API token (``Token`` / ``Bearer``), of a user whose role may write connectors (``roles``);
* the body is a JSON object orjson decodes exactly as DRF's parser (``parsers.ConnectJSONParser``).

From the Herder call on, the request is answered here: success as the view answers (201 with
``Location`` on create, 200 on update, ConnectorInfo), a failure with Connect's error body
(``errors.connect_error``). The response goes through Django's ``SecurityMiddleware`` like every
other. :func:`served` counts the requests answered here (``/metrics``:
``raftconnect_rest_fast_path_requests_total``).
"""
from __future__ import annotations

import base64
import binascii
import os
import re
from typing import Any

import orjson
from django.conf import settings
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest
from django.http import HttpResponse
from django.middleware.security import SecurityMiddleware

from webapp.connect.locator import current_or_none
from webapp.metrics import REST_FAST_PATH

from . import accounts
from .authentication import CachedBasicAuthentication
from .errors import connect_error, internal_error
from .forwarding import FORWARDED_HEADER
from .parsers import LONG_DIGITS
from .renderers import ConnectJSONRenderer
from .roles import required_role, role_at_least
from .views import ConnectorConfigView

__all__ = ["ConnectWSGIHandler", "ENV", "enabled", "served"]

#: environment variable: ``0`` sends every request through the full path (a benchmark's A/B, a suspected fault)
ENV = "RAFTCONNECT_REST_FAST_PATH"
_PATH = re.compile(r"/connectors/([^/]+)/config")
_PLAIN_ACCEPT = frozenset({"", "*/*", "application/json"})
_JSON_TYPES = frozenset({"application/json", "application/json; charset=utf-8", "application/json;charset=utf-8"})
_FORWARDED_META = "HTTP_" + FORWARDED_HEADER.upper().replace("-", "_")
#: the methods the full path names in ``Allow`` for ``/connectors/{name}/config`` (DRF: the view's handlers)
_ALLOW = "GET, PUT, PATCH, HEAD, OPTIONS"


def enabled() -> bool:
    """Whether the fast path may answer (``RAFTCONNECT_REST_FAST_PATH`` is not ``0``); read per request."""
    return os.environ.get(ENV, "1") != "0"


def served() -> float:
    """Requests the fast path answered in this process since it started."""
    return REST_FAST_PATH._value.get()


class _NotHere(Exception):
    """The request is not one the fast path answers: the full path takes it."""


class ConnectWSGIHandler(WSGIHandler):
    """Django's WSGI handler with the fast path of ``PUT /connectors/{name}/config`` (see module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._security = SecurityMiddleware(lambda request: None)
        self._basic = CachedBasicAuthentication()
        self._renderer = ConnectJSONRenderer()

    def get_response(self, request: WSGIRequest):
        """The fast path's answer when it takes ``request`` (see module docstring), else Django's."""
        match = self._candidate(request)
        if match is not None:
            try:
                response = self._serve(request, match.group(1))
            except _NotHere:
                pass
            else:
                REST_FAST_PATH.inc()
                return self._security.process_response(request, response)
        return super().get_response(request)

    @staticmethod
    def _candidate(request: WSGIRequest):
        meta = request.META
        if request.method != "PUT" or meta.get("QUERY_STRING") or meta.get(_FORWARDED_META):
            return None
        match = _PATH.fullmatch(request.path_info)
        if (match is None or meta.get("CONTENT_TYPE", "").lower() not in _JSON_TYPES
                or meta.get("HTTP_ACCEPT", "") not in _PLAIN_ACCEPT or not enabled()):
            return None
        return match

    def _serve(self, request: WSGIRequest, name: str) -> HttpResponse:
        node = current_or_none()
        if node is None or node.raft is None or not node.raft.is_leader or settings.SECURE_SSL_REDIRECT:
            raise _NotHere
        try:
            request.get_host()
        except DisallowedHost:
            raise _NotHere from None
        role = self._role(request)
        if role is None or not role_at_least(role, required_role(ConnectorConfigView, "PUT", request.path)):
            raise _NotHere
        body = request.body  # kept on the request: the full path reads it again if it takes over
        if LONG_DIGITS.search(body):
            raise _NotHere
        try:
            config = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise _NotHere from None
        if not isinstance(config, dict):
            raise _NotHere
        try:
            created, info = node.herder.connector_put_config(name=name, config=config)
        except Exception as exc:  # noqa: BLE001 - every failure is answered with Connect's error body
            body = connect_error(exc) or internal_error(exc)
            return self._json(body, body["error_code"])
        response = self._json(info, 201 if created else 200)
        if created:
            response["Location"] = request.build_absolute_uri(f"/connectors/{name}")
        return response

    def _role(self, request: WSGIRequest) -> str | None:
        """The role of the replicated user whose credentials the request carries, already verified; ``None``
        when only the full path can tell (see module docstring). The user's row in this node's database is
        left as it is: the full path's authentication keeps it in step (``accounts.mirror``), and nothing
        here reads it."""
        if accounts.directory() is None:
            return None
        auth = request.META.get("HTTP_AUTHORIZATION", "").encode("latin-1", "replace").split()
        if len(auth) != 2:
            return None
        scheme = auth[0].lower()
        if scheme == b"basic":
            try:
                decoded = base64.b64decode(auth[1], validate=True)
                try:
                    text = decoded.decode("utf-8")
                except UnicodeDecodeError:
                    text = decoded.decode("latin-1")
            except (TypeError, ValueError, binascii.Error):
                return None
            userid, sep, password = text.partition(":")
            rec = self._basic.verified_record(userid, password) if sep else None
            return None if rec is None else rec["role"]
        if scheme in (b"token", b"bearer"):
            try:
                found = accounts.token_record(auth[1].decode())
            except UnicodeError:
                return None
            return None if found is None else found[0]["role"]
        return None

    def _json(self, data: Any, status: int) -> HttpResponse:
        content = self._renderer.render(data)
        response = HttpResponse(content, status=status, content_type="application/json")
        response["Allow"] = _ALLOW
        response["Content-Length"] = str(len(content))  # as Django's CommonMiddleware sets it
        return response
