"""Request parsing shared by the REST views: query flags and JSON bodies.

Owns the rules every view applies to a request's query string and body (the 400s
Connect answers for a malformed one). A leaf of ``webapp.connect.api``: it imports
no view module, so every view module can import it without an import circle.
"""
from __future__ import annotations

from typing import Any

from rest_framework.request import Request

from webapp.connect.herder import BadRequest

__all__ = ["bool_param", "json_object"]


def bool_param(request: Request, name: str, default: bool = False) -> bool:
    """The query parameter ``name`` as a bool: ``true``/``false`` (case-insensitive).

    Absent or empty gives ``default``. Errors: :class:`BadRequest` (400) for any other value.
    """
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    if raw.lower() not in ("true", "false"):
        raise BadRequest(f"Query parameter {name} must be true or false, not {raw!r}")
    return raw.lower() == "true"


def json_object(request: Request) -> dict[str, Any]:
    """The request body, which must be a JSON object. Errors: :class:`BadRequest` (400) otherwise."""
    data = request.data
    if not isinstance(data, dict):
        raise BadRequest("Request body must be a JSON object")
    return data
