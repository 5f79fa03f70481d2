"""A small client of a node's public REST API (Kafka Connect's paths plus ``/raftconnect/v1/``).

Owns one HTTP call and its error mapping: a 4xx/5xx answer becomes
:class:`ApiError` with Connect's ``{"error_code", "message"}``, an unreachable
node :class:`ConnectionFailed`. It knows nothing of the command line, contexts
or output; it must not import Django or anything that needs a running node.
"""
from __future__ import annotations

from typing import Any
from urllib.parse import quote

import requests

__all__ = ["ConnectRestClient", "ApiError", "ConnectionFailed", "segment"]


class ApiError(Exception):
    """The API answered an error status.

    Attributes:
        status: the HTTP status (e.g. 404).
        error_code: Connect's ``error_code`` (the status when the body has none).
        message: Connect's ``message`` (the body's text when it is not Connect's JSON).
        body: the decoded body as received (dict, or text).
    """

    def __init__(self, status: int, body: Any):
        self.status = status
        self.body = body
        if isinstance(body, dict) and "message" in body:
            self.error_code = int(body.get("error_code") or status)
            self.message = str(body["message"])
        else:
            self.error_code = status
            self.message = (body if isinstance(body, str) else str(body)).strip() or f"HTTP {status}"
        super().__init__(f"{self.error_code}: {self.message}")

    def connect_body(self) -> dict[str, Any]:
        """Connect's error body ``{"error_code": int, "message": str}``."""
        return {"error_code": self.error_code, "message": self.message}


class ConnectionFailed(Exception):
    """The node could not be reached (refused, timed out, DNS); the message names the URL."""


def segment(value: str) -> str:
    """``value`` quoted as one URL path segment (a connector name may hold ``/`` or spaces)."""
    return quote(str(value), safe="")


class ConnectRestClient:
    """Calls one node's REST API.

    Args:
        url: base URL, e.g. ``http://127.0.0.1:8083`` (a trailing ``/`` is ignored).
        user, password: HTTP basic credentials, or ``None``.
        token: an API token (``POST /raftconnect/v1/tokens``), sent as
            ``Authorization: Token <token>``; takes precedence over basic credentials.
        timeout: seconds per request (connect and read).
    """

    def __init__(self, url: str, *, user: str | None = None, password: str | None = None,
                 token: str | None = None, timeout: float = 30.0):
        self.url = url.rstrip("/")
        self.timeout = timeout
        self.session = requests.Session()
        self.session.headers["Accept"] = "application/json"
        if token:
            self.session.headers["Authorization"] = f"Token {token}"
        elif user is not None:
            self.session.auth = (user, password or "")

    def request(self, method: str, path: str, *, json: Any = None, params: Any = None) -> tuple[int, Any]:
        """One call: ``(status, decoded body or None when empty)``.

        ``path`` starts with ``/`` and has its segments already quoted (:func:`segment`).
        Raises :class:`ApiError` for a status >= 400, :class:`ConnectionFailed` when
        nothing answered.
        """
        try:
            resp = self.session.request(method, self.url + path, json=json, params=params, timeout=self.timeout)
        except requests.RequestException as exc:
            raise ConnectionFailed(f"cannot reach {self.url}: {exc.__class__.__name__}: {exc}") from exc
        try:
            body = resp.json() if resp.content else None
        except ValueError:
            body = resp.text
        if resp.status_code >= 400:
            raise ApiError(resp.status_code, body)
        return resp.status_code, body

    def get(self, path: str, params: Any = None) -> Any:
        """``GET path``; the decoded body. Raises as :meth:`request`."""
        return self.request("GET", path, params=params)[1]
