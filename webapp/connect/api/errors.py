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

__all__ = ["connect_exception_handler", "error_body", "handler404", "handler500"]

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


def connect_exception_handler(exc, context):
    """DRF exception handler producing Connect's error body for every failure."""
    if isinstance(exc, ConnectRestError):
        return Response(error_body(exc.status, exc.message), status=exc.status)
    if isinstance(exc, StoreError):
        return Response(error_body(exc.http_status, str(exc)), status=exc.http_status)
    if isinstance(exc, CommandRejected):
        return Response(error_body(exc.code, exc.reason), status=exc.code)
    if isinstance(exc, RaftUnavailable):
        return Response(error_body(503, f"Metadata write could not be committed: {exc}"), status=503)
    if isinstance(exc, RequestDataTooBig):
        return Response(error_body(413, "Request body is larger than the allowed maximum"), status=413)
    if isinstance(exc, drf_exc.ParseError):
        return Response(error_body(400, f"Cannot deserialize the request body: {exc.detail}"), status=400)
    response = exception_handler(exc, context)
    if response is not None:
        response.data = error_body(response.status_code, _detail_text(getattr(exc, "detail", str(exc))))
        return response
    log.exception("unhandled REST error", exc_info=exc)
    return Response(error_body(500, f"Internal error: {type(exc).__name__}: {exc}"), status=500)


def handler404(request, exception=None):
    """JSON 404 for paths no view matches."""
    return JsonResponse(error_body(404, f"HTTP 404 Not Found: {request.path}"), status=404)


def handler500(request):
    """JSON 500 for errors outside DRF views."""
    return JsonResponse(error_body(500, "Internal server error"), status=500)
