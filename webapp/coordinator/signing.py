"""HMAC signing of internal requests between cluster members.

Like Kafka Connect's sessioned internal REST protocol, every internal request
(heartbeat, status, offsets, task configs) carries
``X-RaftConnect-Timestamp`` (Unix ms) and ``X-RaftConnect-Signature``:
hex HMAC-SHA256 over ``METHOD\\nPATH\\nTIMESTAMP\\nBODY`` keyed with the cluster
secret. Requests older than ``max_skew_ms`` are refused, limiting replays.
"""
from __future__ import annotations

import hashlib
import hmac
import time

__all__ = ["sign", "verify", "signed_headers", "SIG_HEADER", "TS_HEADER"]

SIG_HEADER = "X-RaftConnect-Signature"
TS_HEADER = "X-RaftConnect-Timestamp"


def sign(secret: str, method: str, path: str, timestamp_ms: int, body: bytes) -> str:
    """Hex HMAC-SHA256 of the request (see module docstring)."""
    msg = b"\n".join([method.upper().encode(), path.encode(), str(timestamp_ms).encode(), body])
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()


def signed_headers(secret: str, method: str, path: str, body: bytes) -> dict[str, str]:
    """Headers that authenticate a request with ``secret`` now."""
    ts = int(time.time() * 1000)
    return {TS_HEADER: str(ts), SIG_HEADER: sign(secret, method, path, ts, body)}


def verify(secret: str, method: str, path: str, body: bytes, timestamp: str | None, signature: str | None,
           max_skew_ms: int = 60_000) -> str | None:
    """Why the request is not authentic, or ``None`` when it is."""
    if not timestamp or not signature:
        return "Internal request is not signed"
    try:
        ts = int(timestamp)
    except ValueError:
        return "Malformed internal request timestamp"
    if abs(time.time() * 1000 - ts) > max_skew_ms:
        return "Internal request timestamp is outside the allowed clock skew"
    expected = sign(secret, method, path, ts, body)
    if not hmac.compare_digest(expected, signature):
        return "Internal request signature does not match"
    return None
