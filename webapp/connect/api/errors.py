"""Mapping of every error to Kafka Connect's error body ``{"error_code": N, "message": "..."}``.

One place for it: DRF's exception handler and the JSON handlers for URLs that
match no view (404) and unexpected errors (500).
"""
from __future__ import annotations

import logging

from django.core.exceptions import RequestDataTooBig
from django.http import JsonResponse
from rest_framework import exceptions as drf_exc
from rest_framework.response import Response
from rest_framework.views import exception_handler

from raftnode import CommandRejected, RaftUnavailable
from webapp.connect.herder import ConnectRestError
from webapp.storage.base import StoreError

__all__ = ["connect_exception_handler", "connect_error", "error_body", "handler404", "handler500",
           "internal_error"]

log = logging.getLogger(__name__)


def error_body(status: int, message: str) -> dict:
    """Kafka Connect's ErrorMessage entity."""
    return {"error_code": status, "message": message}


def _detail_text(detail) -> str:
    if isinstance(detail, dict):
        return "; ".join(f"{k}: {_detail_text(v)}" for k, v in detail.items())
    if isinstance(detail, list):
        return "; ".join(_detail_text(d) for d in detail)
    return str(detail)


def connect_error(exc: BaseException) -> dict | None:
    """Connect's error body for a failure of the Herder, a store or Raft, or of the request itself
    (too large, unparsable); ``None`` for anything else (DRF's own exceptions, unexpected errors).

    The status is the body's ``error_code``. Shared by :func:`connect_exception_handler` and the
    REST fast path (``webapp.connect.api.fastpath``), so both answer a failure alike.
    """
    if isinstance(exc, ConnectRestError):
        return error_body(exc.status, exc.message)
    if isinstance(exc, StoreError):
        return error_body(exc.http_status, str(exc))
    if isinstance(exc, CommandRejected):
        return error_body(exc.code, exc.reason)
    if isinstance(exc, RaftUnavailable):
        return error_body(503, f"Metadata write could not be committed: {exc}")
    if isinstance(exc, RequestDataTooBig):
        return error_body(413, "Request body is larger than the allowed maximum")
    if isinstance(exc, drf_exc.ParseError):
        return error_body(400, f"Cannot deserialize the request body: {exc.detail}")
    return None


def connect_exception_handler(exc, context):
    """DRF exception handler producing Connect's error body for every failure."""
    body = connect_error(exc)
    if body is not None:
        return Response(body, status=body["error_code"])
    response = exception_handler(exc, context)
    if response is not None:
        response.data = error_body(response.status_code, _detail_text(getattr(exc, "detail", str(exc))))
        return response
    return Response(internal_error(exc), status=500)


def internal_error(exc: BaseException) -> dict:
    """Logs ``exc``, a failure nothing expected, with its traceback; Connect's error body of a 500 naming it."""
    log.exception("unhandled REST error", exc_info=exc)
    return error_body(500, f"Internal error: {type(exc).__name__}: {exc}")


def handler404(request, exception=None):
    """JSON 404 for paths no view matches."""
    return JsonResponse(error_body(404, f"HTTP 404 Not Found: {request.path}"), status=404)


def handler500(request):
    """JSON 500 for errors outside DRF views."""
    return JsonResponse(error_body(500, "Internal server error"), status=500)
