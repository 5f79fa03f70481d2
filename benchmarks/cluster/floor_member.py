#!/usr/bin/env python
"""One member of ``rest_floor.py``'s HTTP floor: a raw pysyncobj key-value member behind the node's REST server.

The least any HTTP front over a Python Raft member can cost: the node's own REST server
(:func:`webapp.connect.restserver.rest_server`, granian, 16 Python threads) with a WSGI application
that does only what every write needs — read and decode the JSON body, propose it with
``sync=True`` to ``run.py``'s raw baseline member (:func:`run.raw_member`), and encode a JSON answer.
No Django, no authentication, no validation.

With ``--raftnode`` the member is RaftConnect's own (:class:`raftnode.RaftNode`, its defaults: group
commit, an immediate send of each proposal) and a write is the Raft store's config write
(``commands.put_connector_config``): the REST API's Raft path without the web layer.

``PUT /k/<key>`` (JSON body): ``{"key", "value"}``, 200 once committed; 503 when this member is not
the leader. ``GET /leader``: ``{"leader": true|false}``. Runs until SIGTERM.

Usage (``rest_floor.py`` starts it): ``python floor_member.py --raft 127.0.0.1:P --peers A,B --http-port N
--data DIR``.
"""
from __future__ import annotations

import argparse
import json
import signal
import sys
import threading
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))


class _RaftNodeKV:
    """:class:`raftnode.RaftNode` behind ``run.raw_member``'s two calls (``put``, ``_isLeader``)."""

    def __init__(self, me: str, peers: list[str], data: str) -> None:
        from raftnode import RaftConfig, RaftNode

        self.raft = RaftNode(RaftConfig(self_address=me, peers=peers, data_dir=data, password="bench"))

    def _isLeader(self) -> bool:  # pysyncobj's name
        return self.raft.is_leader

    def put(self, k, v, sync: bool = True, timeout: float = 10):
        from raftnode import RaftUnavailable

        try:
            return self.raft.commands.put_connector_config(name=k, config=v, target_state=None, create_only=False,
                                                           timeout=timeout)
        except RaftUnavailable as exc:
            raise _Unavailable(str(exc)) from exc

    def destroy(self) -> None:
        self.raft.destroy()


class _Unavailable(Exception):
    """A proposal this member could not make (not the leader, no quorum in time)."""


def application_for(kv):
    """The floor's WSGI application over the member ``kv`` (pysyncobj's ``put``/``_isLeader``)."""
    from pysyncobj.syncobj import SyncObjException

    def app(environ, start_response):
        path = environ.get("PATH_INFO", "")

        def answer(status: str, body: dict):
            raw = json.dumps(body).encode()
            start_response(status, [("Content-Type", "application/json"), ("Content-Length", str(len(raw)))])
            return [raw]

        if environ["REQUEST_METHOD"] == "GET" and path == "/leader":
            return answer("200 OK", {"leader": kv._isLeader()})
        if environ["REQUEST_METHOD"] == "PUT" and path.startswith("/k/"):
            length = int(environ.get("CONTENT_LENGTH") or 0)
            value = json.loads(environ["wsgi.input"].read(length))
            key = path[3:]
            try:
                kv.put(key, value, sync=True, timeout=10)
            except (SyncObjException, _Unavailable) as exc:
                return answer("503 Service Unavailable", {"error": str(exc)})
            return answer("200 OK", {"key": key, "value": value})
        return answer("404 Not Found", {"error": path})

    return app


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--raft", required=True)
    parser.add_argument("--peers", required=True)
    parser.add_argument("--http-port", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--threads", type=int, default=16)
    parser.add_argument("--raftnode", action="store_true", help="RaftConnect's RaftNode instead of raw pysyncobj")
    args = parser.parse_args()
    from run import raw_member  # this file's directory is on the path: it is run as a script
    from webapp.connect.restserver import rest_server

    peers = [p for p in args.peers.split(",") if p]
    kv = _RaftNodeKV(args.raft, peers, args.data) if args.raftnode else raw_member(args.raft, peers, args.data)
    server = rest_server(application_for(kv), host="127.0.0.1", port=args.http_port, threads=args.threads,
                         connection_limit=256)
    signal.signal(signal.SIGTERM, lambda *_: threading.Thread(target=server.close, daemon=True).start())
    server.run()
    kv.destroy()
    return 0


if __name__ == "__main__":
    sys.exit(main())
