"""OpenAPI schema hooks (drf-spectacular): what the published schema covers.

The schema is generated from the views at ``/raftconnect/v1/openapi.json``;
cluster-internal endpoints (``/raftconnect/v1/internal/...``, HMAC-signed, used
by agents and nodes) are left out because no client should call them.
"""
from __future__ import annotations

from typing import Any

__all__ = ["public_endpoints_only"]


def public_endpoints_only(endpoints: list[tuple[str, str, str, Any]]) -> list[tuple[str, str, str, Any]]:
    """drf-spectacular preprocessing hook: drop ``(path, regex, method, view)`` entries of internal endpoints."""
    return [e for e in endpoints if not e[0].startswith("/raftconnect/v1/internal/")]
