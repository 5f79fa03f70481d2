"""REST resources of the metadata store: which store is active, and switching it online.

``GET /raftconnect/v1/metadata-store`` (any node; this member's view of Raft),
``POST /raftconnect/v1/metadata-store/switch`` with ``{"target": "<name>"}`` and
``POST /raftconnect/v1/metadata-store/rollback`` (both run on the leader; other
nodes forward them). Store operations need the admin role (``roles.POLICY``). Bodies are
described on :meth:`webapp.storage.switch.SwitchManager.status`; URLs are shown
with their passwords redacted.

Part of the web layer (it lived in ``webapp.storage`` before, which made storage import
the REST views); must not hold switch logic (``webapp.storage.switch`` owns it).
"""
from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from webapp.connect.herder import BadRequest, ConnectRestError
from webapp.connect.node import current

from .views import ConnectAPIView

from webapp.storage.switch import SwitchError, SwitchManager

__all__ = ["MetadataStoreView", "MetadataStoreSwitchView", "MetadataStoreRollbackView"]


def _switches() -> SwitchManager:
    node = current()
    if node.switches is None:
        raise ConnectRestError("This node is not a Raft member (roles: worker)", 404)
    return node.switches


def _run(fn, *args: Any) -> Response:
    try:
        return Response(fn(*args), status=202)
    except SwitchError as exc:
        raise ConnectRestError(str(exc), exc.status) from exc


class MetadataStoreView(ConnectAPIView):
    """``GET /raftconnect/v1/metadata-store``: the active store, configured stores, the latest switch."""

    def get(self, request: Request) -> Response:
        return Response(_switches().status())


class MetadataStoreSwitchView(ConnectAPIView):
    """``POST /raftconnect/v1/metadata-store/switch`` ``{"target": name}``: start a switch (202 + status).

    Errors: 400 bad body or target already active, 404 unknown store, 409 a
    switch is running, 503 no leader.
    """

    def post(self, request: Request) -> Response:
        body = request.data
        if not isinstance(body, dict) or set(body) - {"target"} or not isinstance(body.get("target"), str):
            raise BadRequest('Request body must be {"target": "<store name>"}')
        return _run(_switches().begin, body["target"])


class MetadataStoreRollbackView(ConnectAPIView):
    """``POST /raftconnect/v1/metadata-store/rollback``: abort the running switch, or switch back (202 + status)."""

    def post(self, request: Request) -> Response:
        return _run(_switches().rollback)
