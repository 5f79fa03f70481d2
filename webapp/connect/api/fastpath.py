"""The REST fast path: the leader's connector creates and config writes without the middleware chain, URL resolver and DRF.

Owns :class:`ConnectWSGIHandler`, the node's WSGI application (``webapp.wsgi``): Django's own
``WSGIHandler`` (request and response objects, the WSGI exchange; the script prefix for the full
path; Django's ``request_started`` / ``request_finished`` wherever a database may be touched, see
:meth:`ConnectWSGIHandler.__call__`) which answers two request shapes itself (:data:`ROUTES`:
``PUT /connectors/{name}/config`` and ``POST /connectors``, how automation creates and updates
connectors) and hands every other request to Django's middleware chain and DRF unchanged. Must
not decide anything the DRF views do not: it calls the same Herder services, authenticates through the same credential caches,
checks the same role rule and renders with the same renderer and error bodies; whatever it is not
sure of goes to the full path, which answers as it always did.

Why: a connector config write on a Raft leader cost ~1.3 ms of the leader's CPU in process, of
which the Herder (validation, the Raft proposal, ConnectorInfo) was ~0.45 ms and Django's and
DRF's per-request machinery (eight middlewares, URL resolving, DRF's request wrapper,
authenticator loop, permission and negotiation steps, template response) the rest. The leader's
one interpreter lock is what 32 concurrent REST clients wait for (issue 16,
``benchmarks/cluster``), so that machinery set the cluster's write rate.

A request takes the fast path only when all of these hold, checked in this order:

* ``PUT /connectors/<name>/config`` (``<name>`` as Django's ``str`` converter: no ``/``) or
  ``POST /connectors``, no query string, ``Content-Type: application/json`` (UTF-8), an ``Accept`` DRF's
  negotiation can only answer with JSON (absent, ``*/*`` or ``application/json``), no ``Origin`` (a
  browser's request, whose CORS headers django-cors-headers' middleware decides);
* the fast path is enabled (``RAFTCONNECT_REST_FAST_PATH``, default on) and this node is a Raft
  member (a worker-only node's requests take the full path);
* the ``Host`` is allowed (``ALLOWED_HOSTS``; Django answers 400 otherwise) and
  ``SECURE_SSL_REDIRECT`` would not redirect;
* the credentials are ``Basic`` ones already verified within the cache's lifetime
  (``authentication.CachedBasicAuthentication``: a first request, a wrong password or a changed
  one take the full path, which runs the PBKDF2 check and fills the cache) or a valid replicated
  API token (``Token`` / ``Bearer``), of a user whose role may do this (``roles``); or, for a
  request another member forwarded (``X-RaftConnect-Forwarded: 1``, no ``Authorization``), its
  signature holds (``signing.verify_request``, the verdict kept on the request for the full path)
  and the role it names may do this. A forwarded request is served as the full path serves it
  (``ConnectAPIView.dispatch``): one attempt, within the budget it carries, and a 503 that wrote
  nothing says ``X-RaftConnect-Not-Leader`` (``raftnode.without_leader_wait``). Behind a load
  balancer two writes in three arrive at a follower, and the leader paid the full path for them:
  its REST threads' Python time per forwarded write 1.64 ms on the full path, 1.22 here
  (``benchmarks/cluster``, forwarded rows, a loaded host);
* on a follower: the request is not itself forwarded (the full path answers it: 503, not the
  leader), and it is forwarded to the leader here as the full path forwards it
  (``forwarding.forward_target`` and ``forwarding.forward``: the leader awaited during an election,
  the request's budget, again to the next leader if the target is gone), naming the user and role
  found above; its answer is passed on with ``Allow`` and ``Content-Length`` as DRF and Django set them.
  Should this member lead meanwhile, the full path takes the request over. The follower's own full
  path was half of what a forwarded write cost it (``benchmarks/cluster``, forwarded rows);
* on the leader: the body is a JSON object orjson decodes exactly as DRF's parser
  (``parsers.ConnectJSONParser``).

From the Herder call on, the request is answered here: success as the view answers (201 with
``Location`` on create, 200 on update, ConnectorInfo; ``Allow`` as DRF names the view's methods),
a failure with Connect's error body
(``errors.connect_error``). The response goes through Django's ``SecurityMiddleware`` like every
other. :func:`served` counts the requests answered here (``/metrics``:
``raftconnect_rest_fast_path_requests_total``).
"""
from __future__ import annotations

import base64
import binascii
import re
import time
from dataclasses import dataclass
from typing import Any, Callable

import orjson
from django.conf import settings
from django.core import signals
from django.core.exceptions import DisallowedHost
from django.core.handlers.wsgi import WSGIHandler, WSGIRequest, get_script_name
from django.http import HttpResponse
from django.http.response import HttpResponseBase
from django.middleware.security import SecurityMiddleware
from django.urls import set_script_prefix
from django.utils.cache import patch_vary_headers
from django.utils.log import log_response
from prometheus_client import REGISTRY

from raftnode import without_leader_wait
from webapp import environment
from webapp.connect.herder import Herder
from webapp.connect.locator import current_or_none
from webapp.connect.response_headers import apply_rules
from webapp.coordinator.signing import verify_request
from webapp.metrics import REST_FAST_PATH
from webapp.storage.raft import RaftMetadataStore

from . import accounts
from .authentication import CachedBasicAuthentication
from .errors import connect_error, internal_error
from .forwarding import (
    FORWARDED_HEADER,
    NOT_LEADER_HEADER,
    ForwardedUser,
    forward,
    forward_target,
    forwarded_budget_s,
    forwarded_claim,
    forwarded_user,
    request_budget_s,
)
from .parsers import LONG_DIGITS
from .renderers import ConnectJSONRenderer
from .roles import required_role, role_at_least
from .views import ConnectorConfigView, ConnectorsView, accepts_plain_json

__all__ = ["ConnectWSGIHandler", "ENV", "ROUTES", "enabled", "served"]

#: the environment variable that turns the fast path off (``0``; :func:`webapp.environment.rest_fast_path`)
ENV = environment.REST_FAST_PATH_ENV
_JSON_TYPES = frozenset({"application/json", "application/json; charset=utf-8", "application/json;charset=utf-8"})
_FORWARDED_META = "HTTP_" + FORWARDED_HEADER.upper().replace("-", "_")


def enabled() -> bool:
    """Whether the fast path may answer (``RAFTCONNECT_REST_FAST_PATH`` is not ``0``); read per request."""
    return environment.rest_fast_path()


def served() -> float:
    """Requests the fast path answered in this process since it started (its ``/metrics`` counter)."""
    return REGISTRY.get_sample_value("raftconnect_rest_fast_path_requests_total") or 0.0


class _NotHere(Exception):
    """The request is not one the fast path answers: the full path takes it."""


def _allow(view: type) -> str:
    """The ``Allow`` header DRF sends for ``view``: its handler methods, ``HEAD`` with ``GET`` (as Django's
    ``View.setup`` adds it), in ``http_method_names`` order."""
    return ", ".join(m.upper() for m in view.http_method_names if hasattr(view, m) or (m == "head" and hasattr(view, "get")))


def _put_config(herder: Herder, match: re.Match, body: dict) -> tuple[int, dict, str | None]:
    created, info = herder.connector_put_config(name=match.group(1), config=body)
    return (201, info, f"/connectors/{match.group(1)}") if created else (200, info, None)


def _create(herder: Herder, match: re.Match, body: dict) -> tuple[int, dict, str | None]:
    info = herder.connector_create(name=body.get("name"), config=body.get("config"),
                                   initial_state=body.get("initial_state"))
    return 201, info, f"/connectors/{info['name']}"


@dataclass(frozen=True)
class _Route:
    """A request shape the fast path answers: ``method`` on a path ``path`` matches in full, served as
    ``view`` serves it (its role rule and ``Allow`` header) by ``serve(herder, match, body) -> (status,
    ConnectorInfo, Location path or None)``, the same Herder service the view calls."""

    method: str
    path: re.Pattern[str]
    view: type
    serve: Callable[[Herder, re.Match, dict], tuple[int, dict, str | None]]


#: what the fast path answers; the views' own ``put`` / ``post`` are the reference (``tests/connect/test_fastpath.py``)
ROUTES = (
    _Route("PUT", re.compile(r"/connectors/([^/]+)/config"), ConnectorConfigView, _put_config),
    _Route("POST", re.compile(r"/connectors"), ConnectorsView, _create),
)


class _Forwarding:
    """What forwarding reads of DRF's ``Request`` (``forwarding.forward_target``, ``forward``, ``proxy``), for a
    write the fast path forwards: the Django request, its method, the user it names to the leader, and the
    request's time budget from now (``request_budget_s``, as ``ConnectAPIView.initial`` sets it)."""

    leader_only = False

    def __init__(self, request: WSGIRequest, user: ForwardedUser) -> None:
        self._request = request
        self.method = request.method
        self.user = user
        self.forward_deadline = time.monotonic() + request_budget_s(request.method)


class _Answer(HttpResponse):
    """A fast-path answer that touched no database: closing it frees what it holds, as Django's
    ``HttpResponseBase.close`` does, without sending ``request_finished`` (no ``request_started`` was
    sent for it; see :meth:`ConnectWSGIHandler.__call__`)."""

    def close(self) -> None:
        for closer in self._resource_closers:
            try:
                closer()
            except Exception:  # noqa: BLE001, S110 - as Django's close
                pass
        self._resource_closers.clear()
        self.closed = True

    @classmethod
    def passing_on(cls, response: HttpResponse) -> HttpResponse:
        """``response`` (the leader's answer, as ``forwarding.proxy`` built it) as an :class:`_Answer`;
        anything but a plain ``HttpResponse`` is left as it is."""
        if type(response) is HttpResponse:
            response.__class__ = cls  # same layout, one method differs: nothing to copy
        return response


def _leave_to_the_full_path() -> HttpResponse:
    """``forward``'s ``serve_here`` for the fast path: this member leads now, and the full path serves it."""
    raise _NotHere


class ConnectWSGIHandler(WSGIHandler):
    """Django's WSGI handler with the REST fast path of :data:`ROUTES` (see module docstring)."""

    def __init__(self) -> None:
        super().__init__()
        self._security = SecurityMiddleware(lambda request: None)
        self._basic = CachedBasicAuthentication()
        self._renderer = ConnectJSONRenderer()
        self._allow = {route: _allow(route.view) for route in ROUTES}

    def __call__(self, environ: dict, start_response: Callable) -> HttpResponseBase:
        """Django's ``WSGIHandler.__call__`` (Django 5.2), with the fast path's answer where it takes the
        request (see module docstring), else the middleware chain's.

        Django's ``request_started`` / ``request_finished`` are housekeeping of its database connections
        and caches (``close_old_connections``, ``reset_queries``, ``close_caches``, ``reset_urlconf``,
        the relational stores' ``close_retired_connections``), 7-15 % of a fast-path write's Python time.
        A fast-path answer that touches no database (a write on a leader whose metadata store is Raft, a
        write forwarded from a follower) goes without them: its response is a :class:`_Answer`, which
        does not send ``request_finished``; the thread's connections are looked after at its next
        request through the full path. Any other request sends both as Django does.
        """
        request = self.request_class(environ)
        response = None
        found = self._candidate(request)
        if found is not None:
            try:
                response = self._serve(request, *found)
            except _NotHere:
                pass
        if response is None:
            set_script_prefix(get_script_name(environ))  # for reverse(); the fast path reverses nothing
            signals.request_started.send(sender=self.__class__, environ=environ)
            response = self.get_response(request)
        else:
            REST_FAST_PATH.inc()
            response = self._security.process_response(request, response)
            if settings.CORS_ENABLED:  # as django-cors-headers' middleware marks the full path's answers
                patch_vary_headers(response, ("origin",))
            apply_rules(response, settings.REST_RESPONSE_HEADER_RULES)  # response.http.headers.config
            response._resource_closers.append(request.close)  # as BaseHandler.get_response does
            if response.status_code >= 400:  # logged as Django logs the full path's errors
                log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        # from here on as WSGIHandler.__call__
        response._handler_class = self.__class__
        status = "%d %s" % (response.status_code, response.reason_phrase)
        response_headers = [*response.items(),
                            *(("Set-Cookie", c.output(header="")) for c in response.cookies.values())]
        start_response(status, response_headers)
        if getattr(response, "file_to_stream", None) is not None and environ.get("wsgi.file_wrapper"):
            response.file_to_stream.close = response.close
            response = environ["wsgi.file_wrapper"](response.file_to_stream, response.block_size)
        return response

    @staticmethod
    def _candidate(request: WSGIRequest) -> tuple[_Route, re.Match] | None:
        meta = request.META
        if meta.get("QUERY_STRING"):
            return None
        for route in ROUTES:
            if request.method == route.method:
                match = route.path.fullmatch(request.path_info)
                if match is not None:
                    break
        else:
            return None
        if (meta.get("CONTENT_TYPE", "").lower() not in _JSON_TYPES or not accepts_plain_json(meta)
                or "HTTP_ORIGIN" in meta or not enabled()):  # a browser's request: CORS is the middleware's
            return None
        return route, match

    def _serve(self, request: WSGIRequest, route: _Route, match: re.Match) -> HttpResponse:
        node = current_or_none()
        if node is None or node.raft is None or settings.SECURE_SSL_REDIRECT:
            raise _NotHere
        leads = node.raft.is_leader
        forwarded = _FORWARDED_META in request.META
        if forwarded and not leads:  # the full path answers 503 with X-RaftConnect-Not-Leader
            raise _NotHere
        try:
            request.get_host()
        except DisallowedHost:
            raise _NotHere from None
        user = (None, self._forwarded_role(request, node)) if forwarded else self._user(request)
        if user is None or user[1] is None or not role_at_least(
                user[1], required_role(route.view, route.method, request.path)):
            raise _NotHere
        if not leads:
            return self._forward(request, node, route, user)
        try:
            body = request.body  # kept on the request: the full path reads it again if it takes over
        except Exception:  # noqa: BLE001 - too large (413), a client gone: the full path answers as it does
            raise _NotHere from None
        if LONG_DIGITS.search(body):
            raise _NotHere
        try:
            data = orjson.loads(body)
        except orjson.JSONDecodeError:
            raise _NotHere from None
        if not isinstance(data, dict):
            raise _NotHere
        if not forwarded:
            return self._answer(request, node, route, match, data)
        # as ConnectAPIView.dispatch serves a forwarded request: one attempt within the forwarder's budget
        with without_leader_wait(forwarded_budget_s(request.headers)) as attempt:
            response = self._answer(request, node, route, match, data)
        if attempt.not_leader and response.status_code == 503:
            response[NOT_LEADER_HEADER] = "1"  # nothing reached a log: the forwarder may send it to the leader
        return response

    def _answer(self, request: WSGIRequest, node, route: _Route, match: re.Match, data: dict) -> HttpResponse:
        """The Herder's answer to the request (its error in Connect's body), as the view renders it.

        With a metadata store other than Raft the Herder reads and writes a database: Django's
        ``request_started`` is sent first and the answer sends ``request_finished``, as on the full path."""
        quiet = node.store is not None and node.store.active_name == RaftMetadataStore.name
        if not quiet:  # once: nothing after this point leaves the request to the full path
            signals.request_started.send(sender=self.__class__, environ=request.environ)
        try:
            status, info, location = route.serve(node.herder, match, data)
        except Exception as exc:  # noqa: BLE001 - every failure is answered with Connect's error body
            return self._error(exc, route, quiet)
        response = self._json(info, status, route, quiet)
        if location is not None:
            response["Location"] = request.build_absolute_uri(location)
        return response

    def _user(self, request: WSGIRequest) -> tuple[str, str] | None:
        """``(name, role)`` of the replicated user whose credentials the request carries, already verified;
        ``None`` when only the full path can tell (see module docstring). The user's row in this node's
        database is left as it is: the full path's authentication keeps it in step (``accounts.mirror``),
        and nothing here reads it."""
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
            return None if rec is None else (userid, rec["role"])
        if scheme in (b"token", b"bearer"):
            try:
                found = accounts.token_record(auth[1].decode())
            except UnicodeError:
                return None
            return None if found is None else (found[1]["user"], found[0]["role"])
        return None

    def _forward(self, request: WSGIRequest, node, route: _Route, user: tuple[str | None, str]) -> HttpResponse:
        """The leader's answer to a write this follower received, as the full path forwards it
        (``ConnectAPIView.initial`` and ``_forward``: :func:`~.forwarding.forward_target`, then
        :func:`~.forwarding.forward`), without this member's middleware chain and DRF. Should this member
        lead meanwhile, the full path takes the request over (nothing of it was written here)."""
        try:
            request.body  # noqa: B018 - read here: too large (413), a client gone: the full path answers
        except Exception:  # noqa: BLE001
            raise _NotHere from None
        forwarding = _Forwarding(request, ForwardedUser(*user))
        try:
            target = forward_target(forwarding, node)
            if target is None:  # this member leads now
                raise _NotHere
            response = forward(forwarding, node, target, _leave_to_the_full_path)
        except _NotHere:
            raise
        except Exception as exc:  # noqa: BLE001 - answered with Connect's error body, as DRF's handler does
            return self._error(exc, route, True)
        response = _Answer.passing_on(response)  # a forwarded write touched no database here
        response["Allow"] = self._allow[route]
        response["Content-Length"] = str(len(response.content))  # as Django's CommonMiddleware sets it
        return response

    @staticmethod
    def _forwarded_role(request: WSGIRequest, node) -> str | None:
        """The role a request forwarded by another member names, once its signature is verified; ``None``
        when only the full path can tell: credentials of its own (DRF tries them first), no user named,
        a signature that does not hold (the full path answers 401 with the verdict kept on the request)."""
        user = forwarded_claim(request.headers)
        if user is None or request.META.get("HTTP_AUTHORIZATION"):
            return None
        if verify_request(node.secret, request):
            return None
        return forwarded_user(user)[1]

    def _error(self, exc: Exception, route: _Route, quiet: bool) -> HttpResponse:
        """``exc`` answered with Connect's error body (``errors.connect_error``, else an internal error)."""
        error = connect_error(exc) or internal_error(exc)
        return self._json(error, error["error_code"], route, quiet)

    def _json(self, data: Any, status: int, route: _Route, quiet: bool) -> HttpResponse:
        """``data`` rendered as the view renders it; ``quiet``: an :class:`_Answer` (no ``request_finished``)."""
        content = self._renderer.render(data)
        response = (_Answer if quiet else HttpResponse)(content, status=status, content_type="application/json")
        response["Allow"] = self._allow[route]
        response["Content-Length"] = str(len(content))  # as Django's CommonMiddleware sets it
        return response
