"""HMAC signing of internal requests between cluster members.

Like Kafka Connect's sessioned internal REST protocol, every internal request
(heartbeat, status, offsets, task configs, forwarded writes) carries
``X-RaftConnect-Timestamp`` (ms), ``X-RaftConnect-Nonce`` (128 random bits, hex)
and ``X-RaftConnect-Signature``: hex HMAC-SHA256 over
``METHOD\\nPATH\\nTIMESTAMP\\nNONCE\\nBODY`` keyed with the cluster secret.

Replay protection, and why a wall-clock jump does not break it:

* The timestamp comes from :func:`clock_ms`, the wall clock read once when the
  process started plus the time elapsed since on the boot clock (Linux
  ``CLOCK_BOOTTIME``: monotonic, and it counts a host's suspension, which
  ``time.monotonic()`` does not; ``time.monotonic()`` elsewhere): a later step of
  the host's wall clock (NTP, an operator; ±1 h in ``make chaos``) changes
  neither what a process signs nor what it accepts, and a process that lived
  through a VM suspension does not fall behind one started after it. Before, a member whose wall
  clock jumped refused every heartbeat and was refused by every peer (60 s skew).
* A request is accepted when its timestamp is within ``max_skew_ms`` of the
  receiver's :func:`clock_ms` and its nonce was not seen in the last
  ``2 * max_skew_ms`` (measured with ``time.monotonic()``): a captured request
  is refused both inside and outside the window (before, it could be replayed
  for 60 s).
* Requests without a nonce (members of an older version, during a rolling
  upgrade) are checked as before: ``METHOD\\nPATH\\nTIMESTAMP\\nBODY`` and the
  window only.

What remains: two processes whose wall clocks differed by more than
``max_skew_ms`` *when they started* still refuse each other (the message says
so); start nodes with a synchronised clock.
"""
from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time
from collections import OrderedDict

__all__ = ["sign", "verify", "verify_request", "signed_headers", "clock_ms", "SIG_HEADER", "TS_HEADER", "NONCE_HEADER",
           "ReplayCache", "DEFAULT_MAX_SKEW_MS"]

SIG_HEADER = "X-RaftConnect-Signature"
TS_HEADER = "X-RaftConnect-Timestamp"
NONCE_HEADER = "X-RaftConnect-Nonce"
DEFAULT_MAX_SKEW_MS = 60_000

if hasattr(time, "CLOCK_BOOTTIME"):
    def _elapsed_clock() -> float:
        return time.clock_gettime(time.CLOCK_BOOTTIME)
else:  # pragma: no cover - not Linux
    _elapsed_clock = time.monotonic

# the wall clock as this process found it at start, advanced by the boot clock only
_WALL0_MS = time.time() * 1000.0
_MONO0 = _elapsed_clock()


def clock_ms() -> int:
    """This process's clock for signing, in Unix ms: the wall clock at process start plus the boot-clock time since.

    Immune to steps of the wall clock after start (see module docstring); tracks real
    time as closely as the boot clock does (NTP slews it too, and it counts suspension).
    """
    return int(_WALL0_MS + (_elapsed_clock() - _MONO0) * 1000.0)


class ReplayCache:
    """Nonces seen recently, each kept ``window_s`` seconds of ``time.monotonic()``; thread-safe, bounded.

    ``max_entries`` bounds memory; when full the oldest nonce is dropped (only a
    holder of the cluster secret can fill it, and a dropped nonce's request is
    still outside the timestamp window soon after).
    """

    def __init__(self, window_s: float, max_entries: int = 200_000):
        self.window_s = window_s
        self.max_entries = max_entries
        self._seen: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def first_use(self, nonce: str) -> bool:
        """Record ``nonce``; ``True`` when it was not seen within the window (the request may proceed)."""
        now = time.monotonic()
        with self._lock:
            seen = self._seen
            while seen:
                oldest, expires = next(iter(seen.items()))
                if expires > now and len(seen) < self.max_entries:
                    break
                seen.popitem(last=False)
            if nonce in seen:
                return False
            seen[nonce] = now + self.window_s
            return True


_replays = ReplayCache(2 * DEFAULT_MAX_SKEW_MS / 1000.0 + 1.0)


def sign(secret: str, method: str, path: str, timestamp_ms: int, body: bytes, nonce: str | None = None) -> str:
    """Hex HMAC-SHA256 of the request (see module docstring); without ``nonce`` the older four-part message."""
    parts = [method.upper().encode(), path.encode(), str(timestamp_ms).encode()]
    if nonce is not None:
        parts.append(nonce.encode())
    msg = b"\n".join([*parts, body])
    return hmac.new(secret.encode(), msg, hashlib.sha256).hexdigest()


def signed_headers(secret: str, method: str, path: str, body: bytes) -> dict[str, str]:
    """Headers that authenticate one request with ``secret`` now (a fresh nonce each call: never reuse them)."""
    ts = clock_ms()
    nonce = secrets.token_hex(16)
    return {TS_HEADER: str(ts), NONCE_HEADER: nonce, SIG_HEADER: sign(secret, method, path, ts, body, nonce)}


def verify(secret: str, method: str, path: str, body: bytes, timestamp: str | None, signature: str | None,
           max_skew_ms: int = DEFAULT_MAX_SKEW_MS, nonce: str | None = None,
           replays: ReplayCache | None = None) -> str | None:
    """Why the request is not authentic, or ``None`` when it is.

    ``nonce``: the request's ``X-RaftConnect-Nonce`` (``None`` for an older member's
    request). A valid request's nonce is consumed: verifying the same request twice
    refuses the second time (call once per request). ``replays``: the cache to use
    (default: this process's).
    """
    if not timestamp or not signature:
        return "Internal request is not signed"
    try:
        ts = int(timestamp)
    except ValueError:
        return "Malformed internal request timestamp"
    expected = sign(secret, method, path, ts, body, nonce)
    if not hmac.compare_digest(expected, signature):
        return "Internal request signature does not match"
    skew_ms = clock_ms() - ts
    if abs(skew_ms) > max_skew_ms:
        return (f"Internal request timestamp is outside the allowed clock skew ({max_skew_ms / 1000:g} s): "
                f"the sender's clock differs from this node's by {skew_ms / 1000:+.0f} s, as each process read "
                "its wall clock when it started (synchronise the clocks and restart the one that is wrong)")
    if nonce is not None and not (replays or _replays).first_use(nonce):
        return "Internal request was already received (replayed nonce)"
    return None


def verify_request(secret: str, raw) -> str | None:
    """:func:`verify` of a Django ``HttpRequest`` (duck-typed: ``method``, ``get_full_path()``, ``body``,
    ``headers``), once per request: the verdict is kept on the request, so a second authentication of
    the same request (another DRF ``Request`` around it) does not see its own nonce as a replay."""
    verdict = getattr(raw, "_raftconnect_signature_verdict", False)
    if verdict is False:
        verdict = verify(secret, raw.method, raw.get_full_path(), raw.body, raw.headers.get(TS_HEADER),
                         raw.headers.get(SIG_HEADER), nonce=raw.headers.get(NONCE_HEADER))
        raw._raftconnect_signature_verdict = verdict
    return verdict
