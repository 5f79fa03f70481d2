"""Cross-origin access to the REST API: Kafka Connect's ``access.control.allow.origin`` / ``.methods``.

Owns turning those two values (worker properties, or ``RAFTCONNECT_REST_CORS_ALLOWED_ORIGINS`` /
``RAFTCONNECT_REST_CORS_ALLOWED_METHODS``) into django-cors-headers' settings. Connect hands them to
Jetty's ``CrossOriginFilter``, whose rules are kept: empty origins (the default) mean no cross-origin
access; ``*`` any origin; otherwise a comma-separated list of origins (``scheme://host[:port]``),
where an origin with ``*`` in it is a pattern (``https://*.example.com``: ``*`` matches any
characters). Methods default to Jetty's ``GET,POST,HEAD``. Unlike Jetty's default, credentials
(cookies) are never allowed cross-origin: the API is called with an ``Authorization`` header, and
allowing cookies would let any allowed site act with an operator's console session.

Imports nothing from Django: ``workerconfig`` checks a properties file with it before settings load.
"""
from __future__ import annotations

import re
from typing import Any

__all__ = ["ORIGINS_ENV", "METHODS_ENV", "DEFAULT_METHODS", "cors_settings"]

ORIGINS_ENV = "RAFTCONNECT_REST_CORS_ALLOWED_ORIGINS"
METHODS_ENV = "RAFTCONNECT_REST_CORS_ALLOWED_METHODS"
#: Jetty's CrossOriginFilter default, which Connect keeps when access.control.allow.methods is empty
DEFAULT_METHODS = ("GET", "POST", "HEAD")
_METHODS = {"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"}
_ORIGIN = re.compile(r"^[a-z][a-z0-9+.-]*://[^/\s]+$", re.IGNORECASE)
#: where cross-origin requests are answered with CORS headers: the REST API, not the Django admin
#: pages (``/admin/`` followed by anything but Connect's ``loggers``) or the console's files
URLS_REGEX = r"^/(?!admin/(?!loggers)|console/).*$"


def cors_settings(origins: str | None, methods: str | None = None) -> dict[str, Any]:
    """django-cors-headers settings for Connect's ``access.control.allow.origin`` (``origins``) and
    ``access.control.allow.methods`` (``methods``), as described in the module docstring.

    Returns ``{"CORS_ALLOW_ALL_ORIGINS", "CORS_ALLOWED_ORIGINS", "CORS_ALLOWED_ORIGIN_REGEXES",
    "CORS_ALLOW_METHODS", "CORS_ALLOW_CREDENTIALS", "CORS_URLS_REGEX"}``. Raises ``ValueError`` naming
    the bad entry: an origin that is not ``scheme://host[:port]`` (Jetty compares it with the browser's
    ``Origin`` header, which always has both), or an unknown method.
    """
    entries = [o.strip() for o in (origins or "").split(",") if o.strip()]
    exact: list[str] = []
    patterns: list[str] = []
    allow_all = "*" in entries
    for origin in entries:
        if origin == "*":
            continue
        origin = origin.rstrip("/")  # "https://ui.example.com/" as often written: the browser sends no slash
        if not _ORIGIN.match(origin.replace("*", "x")):
            raise ValueError(f"access.control.allow.origin: {origin!r} is not an origin: expected "
                             f"scheme://host[:port] (e.g. https://ui.example.com), a pattern such as "
                             f"https://*.example.com, or * for any origin")
        if "*" in origin:
            patterns.append("^" + ".*".join(re.escape(part) for part in origin.split("*")) + "$")
        else:
            exact.append(origin)
    names = [m.strip().upper() for m in (methods or "").split(",") if m.strip()] or list(DEFAULT_METHODS)
    unknown = [m for m in names if m not in _METHODS]
    if unknown:
        raise ValueError(f"access.control.allow.methods: unknown method(s) {', '.join(unknown)}; expected some "
                         f"of {', '.join(sorted(_METHODS))}")
    return {"CORS_ALLOW_ALL_ORIGINS": allow_all, "CORS_ALLOWED_ORIGINS": [] if allow_all else exact,
            "CORS_ALLOWED_ORIGIN_REGEXES": [] if allow_all else patterns,
            "CORS_ALLOW_METHODS": names, "CORS_ALLOW_CREDENTIALS": False, "CORS_URLS_REGEX": URLS_REGEX}
