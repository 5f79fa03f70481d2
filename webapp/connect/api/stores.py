"""REST resources of the metadata store: which store is active, and switching it online.

``GET /raftconnect/v1/metadata-store`` (any node; this member's view of Raft),
``POST /raftconnect/v1/metadata-store/switch`` with ``{"target": "<name>"}`` and
``POST /raftconnect/v1/metadata-store/rollback`` (both run on the leader; other
nodes forward them).

Stores added at run time (:mod:`webapp.connect.store_catalog`), replicated to every node:
``GET /raftconnect/v1/metadata-store/stores`` (every store, as in the status body),
``POST /raftconnect/v1/metadata-store/stores`` ``{"name", "url", "password"?}`` (201; secrets as
config-provider references only), ``GET``/``DELETE /raftconnect/v1/metadata-store/stores/{name}``
(204; 409 while active or in a running switch) and ``POST .../stores/{name}/test`` (200, connect
and schema check from the leader: ``{"name", "ok", "checks", "connectors"}``; a failed check is
``"ok": false`` with its message, not an error status).

Store writes need the admin role (``roles.POLICY``). Bodies are described on
:meth:`webapp.storage.switch.SwitchManager.status`; URLs are shown as added (references)
or with their passwords redacted, never with a password.

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

from drf_spectacular.utils import extend_schema, inline_serializer
from rest_framework import serializers
from rest_framework.request import Request
from rest_framework.response import Response

from webapp.connect.herder import BadRequest, ConnectRestError
from webapp.connect.locator import current
from webapp.connect.store_catalog import StoreCatalogError, store_add, store_remove, store_test
from webapp.storage.backup import BackupError, export_backup, restore_backup
from webapp.storage.switch import SwitchError, SwitchManager

from . import serializers as rc
from .accounts import export_users, import_users
from .views import ConnectAPIView

__all__ = ["MetadataStoreView", "MetadataStoreSwitchView", "MetadataStoreRollbackView", "BackupView", "RestoreView",
           "MetadataStoresView", "MetadataStoreEntryView", "MetadataStoreTestView", "export_users", "import_users"]


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


_NEW_STORE = inline_serializer("NewMetadataStore", {
    "name": serializers.CharField(), "url": serializers.CharField(),
    "password": serializers.CharField(required=False, allow_null=True,
                                      help_text="a config-provider reference such as ${env:PG_PASSWORD}")})
def _catalog(fn, *, raft: bool = True, **kwargs: Any) -> Any:
    """Call the catalog service ``fn`` with this node's stores (and Raft member); errors as Connect's body."""
    node = current()
    if node.raft is None or node.stores is None:
        raise ConnectRestError("This node is not a Raft member (roles: worker)", 404)
    if raft:
        kwargs["raft"] = node.raft
    try:
        return fn(stores=node.stores, **kwargs)
    except StoreCatalogError as exc:
        raise ConnectRestError(str(exc), exc.status) from exc


def _username(request: Request) -> str:
    """The caller's user name (a Django user, or a user named by a forwarding member)."""
    return getattr(request.user, "username", None) or str(request.user)


def _store(name: str) -> dict[str, Any]:
    found = [s for s in _switches().status()["stores"] if s["name"] == name]
    if not found:
        raise ConnectRestError(f"Unknown metadata store {name!r}", 404)
    return found[0]


class MetadataStoresView(ConnectAPIView):
    """``GET``: every metadata store this node knows; ``POST``: add one on every node (201)."""

    @extend_schema(responses={200: serializers.ListSerializer(child=rc.MetadataStoreSerializer())})
    def get(self, request: Request) -> Response:
        return Response(_switches().status()["stores"])

    @extend_schema(request=_NEW_STORE, responses={201: rc.MetadataStoreSerializer})
    def post(self, request: Request) -> Response:
        body = request.data
        if not isinstance(body, dict) or set(body) - {"name", "url", "password"} or {"name", "url"} - set(body):
            raise BadRequest('Request body must be {"name", "url", "password" (optional, a ${provider:...} reference)}')
        _catalog(store_add, name=body["name"], url=body["url"], password=body.get("password"),
                 user=_username(request))
        return Response(_store(body["name"].strip()), status=201)


class MetadataStoreEntryView(ConnectAPIView):
    """``GET`` one metadata store; ``DELETE`` a store added at run time (204)."""

    @extend_schema(responses={200: rc.MetadataStoreSerializer})
    def get(self, request: Request, name: str) -> Response:
        return Response(_store(name))

    @extend_schema(request=None, responses={204: None})
    def delete(self, request: Request, name: str) -> Response:
        _catalog(store_remove, name=name, user=_username(request))
        return Response(status=204)


class MetadataStoreTestView(ConnectAPIView):
    """``POST``: connect to the store from the leader and check its schema (200 with each check's outcome)."""

    @extend_schema(request=None, responses={200: rc.MetadataStoreTestSerializer})
    def post(self, request: Request, name: str) -> Response:
        return Response(_catalog(store_test, raft=False, name=name))
