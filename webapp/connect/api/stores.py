"""REST resources of the metadata store: which store is active, and switching it online.

``GET /raftconnect/v1/metadata-store`` (any node; this member's view of Raft),
``POST /raftconnect/v1/metadata-store/switch`` with ``{"target": "<name>"}`` and
``POST /raftconnect/v1/metadata-store/rollback`` (both run on the leader; other
nodes forward them). Store operations need the admin role (``roles.POLICY``). Bodies are
described on :meth:`webapp.storage.switch.SwitchManager.status`; URLs are shown
with their passwords redacted.

``GET /raftconnect/v1/backup`` (``?users=false`` leaves the REST users out) and
``POST /raftconnect/v1/restore`` with a backup document: the cluster's metadata
as one file and back (:mod:`webapp.storage.backup`); both run on the leader and
need the admin role. Users are the replicated ones (:mod:`.accounts`): exported
with their password hashes, restored as replicated users where the cluster lacks them.

Part of the web layer (it lived in ``webapp.storage`` before, which made storage import
the REST views); must not hold switch logic (``webapp.storage.switch`` owns it).
"""
from __future__ import annotations

from typing import Any

from rest_framework.request import Request
from rest_framework.response import Response

from webapp.connect.herder import BadRequest, ConnectRestError
from webapp.connect.locator import current
from webapp.storage.backup import BackupError, export_backup, restore_backup
from webapp.storage.switch import SwitchError, SwitchManager

from .accounts import export_users, import_users
from .views import ConnectAPIView

__all__ = ["MetadataStoreView", "MetadataStoreSwitchView", "MetadataStoreRollbackView", "BackupView", "RestoreView",
           "export_users", "import_users"]


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


def _router():
    node = current()
    if node.raft is None:
        raise ConnectRestError("This node is not a Raft member (roles: worker)", 404)
    if not node.raft.is_leader:
        raise ConnectRestError("This node is not the Raft leader; retry the request", 503)
    return node.store


class BackupView(ConnectAPIView):
    """``GET /raftconnect/v1/backup``: the cluster's metadata as one backup document (200).

    ``?users=false`` leaves the REST users out. Served by the leader (others
    forward it), with writes held back while it reads. Errors: 409 while a
    store switch runs, 503 no leader.
    """

    leader_only = True

    def get(self, request: Request) -> Response:
        users = (request.query_params.get("users") or "true").lower() != "false"
        try:
            document = export_backup(_router(), users=export_users() if users else None)
        except BackupError as exc:
            raise ConnectRestError(str(exc), exc.status) from exc
        stamp = document["created_at"].replace(":", "").replace("-", "").split(".")[0]
        return Response(document, headers={"Content-Disposition": f'attachment; filename="raftconnect-backup-{stamp}.json"'})


class RestoreView(ConnectAPIView):
    """``POST /raftconnect/v1/restore`` with a backup document: write its connectors, offsets and users (200).

    Answers ``{"connectors", "offsets", "names", "users": {"created", "kept"}}``.
    Errors: 400 not a valid backup (the message says why), 409 the cluster
    already holds some of its names or a store switch runs, 503 no leader.
    """

    def post(self, request: Request) -> Response:
        try:
            summary = restore_backup(_router(), request.data)
        except BackupError as exc:
            raise ConnectRestError(str(exc), exc.status) from exc
        summary["users"] = import_users(request.data.get("users") or [])
        herder = current().herder
        if herder.poke:  # the coordinator assigns the restored connectors now, not at its next round
            herder.poke()
        return Response(summary)
