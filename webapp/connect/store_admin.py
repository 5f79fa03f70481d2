"""The Django admin page of the metadata store: active store, switch progress, switch and rollback.

Superusers only (staff login and CSRF come from ``AdminSite.admin_view``). The
page acts through the same :class:`~webapp.storage.switch.SwitchManager` calls
as the REST API; on a follower the action is forwarded to the leader's REST API,
signed with the cluster secret and naming the superuser. Store URLs are shown
with passwords redacted. Part of the web layer, beside the REST views it forwards to;
must not hold switch logic (``webapp.storage.switch`` owns it).
"""
from __future__ import annotations

import json

import requests
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse

from webapp.connect.locator import NodeNotReady, current
from webapp.coordinator.signing import signed_headers

from webapp.storage.switch import SwitchError

__all__ = ["metadata_store"]


def _on_leader(node, request: HttpRequest, action: str, body: dict) -> None:
    """Run ``action`` (``switch``/``rollback``) here if leader, else through the leader's REST API."""
    if node.raft.is_leader:
        if action == "switch":
            node.switches.begin(body.get("target", ""))
        else:
            node.switches.rollback()
        return
    from webapp.connect.api.forwarding import FORWARDED_HEADER, FORWARDED_USER_HEADER

    leader = node.leader_rest_address()
    if not leader:
        raise SwitchError("no Raft leader is known right now; try again", 503)
    path = f"/raftconnect/v1/metadata-store/{action}"
    data = json.dumps(body).encode()
    headers = signed_headers(node.secret, "POST", path, data)
    headers.update({FORWARDED_HEADER: "1", FORWARDED_USER_HEADER: f"{request.user.get_username()};role=admin",
                    "Content-Type": "application/json"})
    try:
        resp = requests.post(f"http://{leader}{path}", data=data, headers=headers, timeout=30)
    except requests.RequestException as exc:
        raise SwitchError(f"the leader at {leader} did not answer: {exc}", 503) from exc
    if resp.status_code >= 400:
        try:
            message = resp.json().get("message", resp.text)
        except ValueError:
            message = resp.text
        raise SwitchError(message, resp.status_code)


def metadata_store(request: HttpRequest) -> HttpResponse:
    """``GET|POST /admin/metadata-store/``: show the store status; POST ``action=switch&target=…`` or ``action=rollback``."""
    if not request.user.is_superuser:
        raise PermissionDenied("Only superusers may see or switch the metadata store")
    try:
        node = current()
    except NodeNotReady:
        node = None
    if node is None or node.switches is None:
        messages.error(request, "This process runs no Raft member: open the admin page of a raft node.")
        status = None
    else:
        if request.method == "POST":
            action = request.POST.get("action")
            try:
                if action == "switch":
                    _on_leader(node, request, "switch", {"target": request.POST.get("target", "")})
                    messages.success(request, f"Switch to {request.POST.get('target')} started.")
                elif action == "rollback":
                    _on_leader(node, request, "rollback", {})
                    messages.success(request, "Rollback requested.")
                else:
                    messages.error(request, "Unknown action.")
            except SwitchError as exc:
                messages.error(request, str(exc))
            return HttpResponseRedirect(request.path)
        status = node.switches.status()
    context = {
        "title": "Metadata store",
        "status": status,
        "targets": [s["name"] for s in status["stores"] if not s["active"]] if status else [],
        "switch_json": json.dumps(status["switch"], indent=2) if status and status["switch"] else "",
    }
    from django.contrib import admin

    context.update(admin.site.each_context(request))
    return TemplateResponse(request, "admin/storage/metadata_store.html", context)
