"""HTTP connections between the cluster's own processes: a member forwarding to the leader, an agent calling a node.

Owns :class:`ClusterConnections`, urllib3 connection pools by ``host:port``. Requests between the
cluster's processes go direct, as between Kafka Connect's workers: no proxy from ``HTTP_PROXY`` /
``ALL_PROXY``, no ``~/.netrc``, no redirects followed and no retries (each caller decides what a
failure means: another node, another attempt, an error). Must not import the web layer.

Why not requests or urllib3's ``PoolManager``: a requests session cost ~0.4 ms more CPU per call
(its merging, hooks and adapters, and a proxy and ``.netrc`` lookup each time); urllib3's
``PoolManager`` parses the URL and builds a pool key on every call, ~40 µs of a ~240 µs call
(in process, client side, a 5-header request and answer on this project's REST server;
``benchmarks/cluster``'s forwarded rows for what a follower pays per forwarded write).
"""
from __future__ import annotations

import json
import threading

import urllib3
from urllib3.util import parse_url

from .signing import signed_headers

__all__ = ["OCCASIONAL", "ClusterConnections", "error_message"]


class ClusterConnections:
    """Keep-alive connections to the cluster's processes, one urllib3 ``HTTPConnectionPool`` per address.

    Args:
        maxsize: connections kept open to each address (more may be opened while that many are in
            use; those are closed after their answer, as urllib3 does without ``block``).
        max_addresses: pools kept at most; past it every pool is closed and made again as needed
            (addresses are a cluster's few members; they change when members are replaced).

    Thread-safe: a pool is made once per address under a lock; requests run on the pools, which
    urllib3 makes safe to share.
    """

    def __init__(self, maxsize: int, max_addresses: int = 16) -> None:
        self.maxsize = maxsize
        self.max_addresses = max_addresses
        self._pools: dict[str, urllib3.HTTPConnectionPool] = {}
        self._lock = threading.Lock()

    def pool(self, address: str) -> urllib3.HTTPConnectionPool:
        """The pool of ``address`` (``host:port``, an IPv6 host in brackets), made on first use.
        Errors: ``urllib3.exceptions.LocationParseError`` for an address that is no ``host:port``."""
        pool = self._pools.get(address)
        if pool is not None:
            return pool
        url = parse_url(f"http://{address}")
        if not url.host:
            raise urllib3.exceptions.LocationParseError(address)
        with self._lock:
            pool = self._pools.get(address)
            if pool is None:
                if len(self._pools) >= self.max_addresses:
                    for old in self._pools.values():
                        old.close()  # connections in use are closed when their answer is read
                    self._pools = {}
                pool = urllib3.HTTPConnectionPool(url.host, url.port or 80, maxsize=self.maxsize, retries=False)
                self._pools = {**self._pools, address: pool}  # replaced, never changed: read without the lock
        return pool

    def request(self, method: str, address: str, path: str, *, body: bytes | None, headers: dict[str, str],
                timeout: float) -> urllib3.BaseHTTPResponse:
        """``method path`` (path and query) sent to ``address`` with ``body`` and ``headers``; its answer,
        read in full, whatever its status. ``timeout``: seconds to connect, and again between two reads.

        Errors: ``urllib3.exceptions.HTTPError`` when no answer came (``NewConnectionError`` for a
        refused connection, ``ReadTimeoutError``, ``ProtocolError`` ...).
        """
        return self.pool(address).urlopen(method, path, body=body, headers=headers,
                                          timeout=urllib3.Timeout(connect=timeout, read=timeout),
                                          retries=False, redirect=False)

    def signed(self, method: str, address: str, path: str, *, secret: str, body: bytes = b"",
               headers: dict[str, str] | None = None, timeout: float) -> urllib3.BaseHTTPResponse:
        """:meth:`request` authenticated as one of the cluster's processes: signed with the cluster's
        ``secret`` over ``method``, ``path`` and ``body`` (:func:`~webapp.coordinator.signing.signed_headers`,
        a fresh nonce each call); ``headers`` are added. Errors: as :meth:`request`."""
        sent = signed_headers(secret, method, path, body)
        if headers:
            sent.update(headers)
        return self.request(method, address, path, body=body or None, headers=sent, timeout=timeout)

    def signed_get_json(self, address: str, path: str, *, secret: str, timeout: float) -> object:
        """The decoded JSON body of a :meth:`signed` ``GET`` of ``path`` at ``address``.

        Errors: :class:`NotAnswered` (a ``urllib3`` ``HTTPError``) for an answer of status 300 or
        above, naming the status and the body's message; ``urllib3``'s errors as :meth:`request`;
        ``ValueError`` for a body that is not JSON. A caller catching ``(urllib3.exceptions.HTTPError,
        ValueError)`` thus catches every way the call can fail.
        """
        resp = self.signed("GET", address, path, secret=secret, timeout=timeout)
        if resp.status >= 300:
            raise NotAnswered(f"HTTP {resp.status}: {error_message(resp.data)}")
        return json.loads(resp.data)


class NotAnswered(urllib3.exceptions.HTTPError):
    """An internal call answered with an error status (:meth:`ClusterConnections.signed_get_json`)."""


def error_message(data: bytes) -> str:
    """What an error answer says: the ``message`` of a Connect error body (``{"error_code", "message"}``),
    else the body as text."""
    text = data.decode("utf-8", "replace")
    try:
        body = json.loads(text)
    except ValueError:
        return text
    return body.get("message", text) if isinstance(body, dict) else text


#: the process's pools for occasional internal calls (a worker-only node asking who leads or reading the
#: users, the Raft status of every member, a log level sent to every member, the store admin page's switch
#: sent to the leader); the busy paths keep their own
OCCASIONAL = ClusterConnections(maxsize=4)
