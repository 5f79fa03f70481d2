"""The Django admin page of the metadata store: stores, adding/testing/removing them, switching and rolling back.

Superusers only (staff login and CSRF come from ``AdminSite.admin_view``). The page acts
through the same services as the REST API (:mod:`webapp.connect.store_catalog`,
:class:`~webapp.storage.switch.SwitchManager`); on a follower an action is forwarded to the
leader's REST API, signed with the cluster secret and naming the superuser.

What the page shows is computed here, once, for the first render and for the live part the
page's script fetches every second while a switch runs (``?part=live``): the step indicator
(prepare → copy → verify → commit) with progress and elapsed time, and a plain-language result
with readable times and what happens to the old store (:func:`switch_view`). Starting a switch
first shows a confirmation that says what will happen (``action=confirm``). Store URLs are
shown as added (references) or with passwords redacted; no password is ever rendered.

Part of the web layer, beside the REST views it forwards to; must not hold switch logic
(``webapp.storage.switch`` owns it) nor store rules (``store_catalog`` owns them).
"""
from __future__ import annotations

import datetime as dt
import json
import time
from typing import Any, Callable

import urllib3
from django.contrib import messages
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.template.response import TemplateResponse
from django.utils.timesince import timesince

from webapp.connect.locator import NodeNotReady, current
from webapp.connect.store_catalog import StoreCatalogError, store_add, store_remove, store_test
from webapp.coordinator.connections import OCCASIONAL, error_message
from webapp.storage.switch import SwitchError

__all__ = ["metadata_store", "switch_view", "readable_duration"]

_API = "/raftconnect/v1/metadata-store"
#: the steps the page shows, in order, with the switch phase each one stands for
STEPS = (("prepare", "Prepare"), ("copy", "Copy"), ("verify", "Verify"), ("commit", "Commit"))


# ----------------------------------------------------------------------------- presentation
def readable_duration(seconds: float | None) -> str:
    """``0.4 s``, ``12 s``, ``2 min 5 s``, ``1 h 3 min`` (``""`` for ``None``)."""
    if seconds is None:
        return ""
    if seconds < 10:
        return f"{seconds:.1f} s"
    seconds = int(round(seconds))
    if seconds < 60:
        return f"{seconds} s"
    if seconds < 3600:
        return f"{seconds // 60} min {seconds % 60} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60} min"


def _clock(ts: float | None, now: float) -> str:
    """``2026-11-25 14:32:05 UTC (3 minutes ago)`` for unix seconds ``ts`` (``""`` for none)."""
    if not ts:
        return ""
    when = dt.datetime.fromtimestamp(ts, dt.timezone.utc)
    ago = now - ts
    if ago < 60:
        rel = "just now" if ago < 2 else f"{int(ago)} s ago"
    else:
        rel = timesince(when, dt.datetime.fromtimestamp(now, dt.timezone.utc)).replace("\xa0", " ") + " ago"
    return f"{when:%Y-%m-%d %H:%M:%S} UTC ({rel})"


def _failed_step(progress: dict[str, Any]) -> str:
    """The step an aborted switch was in, from what its progress had recorded."""
    if "verify_s" in progress:
        return "commit"
    if "names_verified" in progress:
        return "verify"
    if "names_total" in progress:
        return "copy"
    return "prepare"


def _plural(n: int, word: str, plural: str | None = None) -> str:
    return f"{n} {word if n == 1 else plural or word + 's'}"


def switch_view(switch: dict[str, Any] | None, now: float | None = None) -> dict[str, Any] | None:
    """What the page shows of ``switch`` (the Raft record, see ``ClusterStateMachine``), or ``None``.

    Shape: ``{"outcome": "running" | "committed" | "completed" | "aborted", "running": bool,
    "steps": [{"key", "label", "state": "done" | "current" | "pending" | "failed", "detail"}],
    "percent": 0..100, "elapsed": str, "started": str, "headline": str, "result": [sentence]}``.
    ``now``: unix seconds (default the clock).
    """
    if not switch:
        return None
    now = time.time() if now is None else now
    phase, p = switch["phase"], switch.get("progress") or {}
    src, dst = switch["source"], switch["target"]
    order = [k for k, _ in STEPS]
    current_step = {"prepare": "prepare", "copy": "copy", "verify": "verify", "committed": "commit"}.get(phase)
    failed = _failed_step(p) if phase == "aborted" else None
    total = p.get("names_total") or 0
    details = {"prepare": readable_duration(p.get("prepare_s")), "copy": readable_duration(p.get("copy_s")),
               "verify": readable_duration(p.get("verify_s")),
               "commit": f"writes held {p['commit_stall_ms']:.0f} ms" if "commit_stall_ms" in p else ""}
    if phase == "copy":
        details["copy"] = f"{p.get('names_copied', 0)} of {total} names"
    if phase == "verify":
        details["verify"] = f"{p.get('names_verified', 0)} of {total} names"
    steps = []
    for key, label in STEPS:
        if phase == "completed":
            state = "done"
        elif failed is not None:
            state = "failed" if key == failed else ("done" if order.index(key) < order.index(failed) else "pending")
        else:
            at = order.index(current_step)
            state = "done" if order.index(key) < at else ("current" if key == current_step else "pending")
        steps.append({"key": key, "label": label, "state": state, "detail": details[key] if state != "pending" else ""})
    percent = {"prepare": 2, "copy": 5 + 55 * (p.get("names_copied", 0) / total if total else 0),
               "verify": 60 + 35 * (p.get("names_verified", 0) / total if total else 0),
               "committed": 97, "completed": 100}.get(phase)
    end = switch.get("updated_at") if phase in ("completed", "aborted") else now
    elapsed = p.get("duration_s") if phase == "completed" and "duration_s" in p else \
        max(0.0, (end or now) - switch["started_at"])
    view: dict[str, Any] = {
        "outcome": "running" if phase in ("prepare", "copy", "verify") else phase,
        "running": phase in ("prepare", "copy", "verify", "committed"),
        "steps": steps, "percent": None if percent is None else int(percent),
        "elapsed": readable_duration(elapsed), "started": _clock(switch.get("started_at"), now),
        "source": src, "target": dst,
    }
    if view["running"]:
        doing = {"prepare": f"preparing {dst} (schema, reachability, writer lease)",
                 "copy": f"copying {p.get('names_copied', 0)} of {total} connector names while writes continue",
                 "verify": f"verifying {p.get('names_verified', 0)} of {total} names (counts and checksums)",
                 "committed": f"{dst} is active; making {src} read-only"}[phase]
        view["headline"] = f"Switching from {src} to {dst}: {doing}."
        view["result"] = []
    elif phase == "completed":
        digest = p.get("digest") or {}
        counts = {k: (digest.get(k) or {}).get("count", 0) for k in ("config", "statuses", "offsets")}
        view["headline"] = f"Switched from {src} to {dst} in {view['elapsed']}."
        view["result"] = [
            f"Started {view['started']}; finished {_clock(switch.get('updated_at'), now)}.",
            f"{_plural(counts['config'], 'connector')}, {_plural(counts['statuses'], 'status', 'statuses')} and "
            f"{_plural(counts['offsets'], 'offset')} were copied and verified: counts and checksums match.",
        ]
        if "commit_stall_ms" in p:
            view["result"].append(f"Writes waited at most {p['commit_stall_ms']:.0f} ms at the commit.")
        if p.get("old_store_read_only") is False:
            view["result"].append(f"{src} did not answer when it was to be made read-only: nobody can write it "
                                  "anyway (its writer lease is fenced by the Raft term); it keeps its data.")
        else:
            view["result"].append(f"{src} is now read-only and keeps its data as it was at the switch, for roll "
                                  "back; nothing was deleted from it.")
    else:  # aborted
        view["headline"] = f"The switch from {src} to {dst} was rolled back after {view['elapsed']}, " \
                           f"during {failed}."
        view["result"] = [
            f"Reason: {switch.get('error') or 'unknown'}.",
            f"{src} stayed the active store and kept every write; nothing was lost.",
            f"{dst} may hold a partial copy; a later switch to it replaces it.",
            f"Started {view['started']}.",
        ]
    return view


# ----------------------------------------------------------------------------- actions
def _via_leader(node, request: HttpRequest, method: str, path: str, body: dict | None,
                local: Callable[[], Any]) -> Any:
    """``local()`` here if this node is the leader, else the leader's answer to ``method path``.

    Errors: :class:`SwitchError` with the leader's status and message (or 503 when none answers).
    """
    if node.raft.is_leader:
        try:
            return local()
        except StoreCatalogError as exc:
            raise SwitchError(str(exc), exc.status) from exc
    from webapp.connect.api.forwarding import FORWARDED_HEADER, FORWARDED_USER_HEADER

    leader = node.leader_rest_address()
    if not leader:
        raise SwitchError("no Raft leader is known right now; try again", 503)
    data = json.dumps(body).encode() if body is not None else b""
    headers = {FORWARDED_HEADER: "1", FORWARDED_USER_HEADER: f"{request.user.get_username()};role=admin",
               "Content-Type": "application/json"}
    try:
        resp = OCCASIONAL.signed(method, leader, path, secret=node.secret, body=data, headers=headers, timeout=30)
    except urllib3.exceptions.HTTPError as exc:
        raise SwitchError(f"the leader at {leader} did not answer: {exc}", 503) from exc
    if resp.status >= 400:
        raise SwitchError(error_message(resp.data), resp.status)
    return json.loads(resp.data) if resp.data else None


def _test(node, request: HttpRequest, name: str) -> dict[str, Any]:
    return _via_leader(node, request, "POST", f"{_API}/stores/{name}/test", None,
                       lambda: store_test(stores=node.stores, name=name))


def _act(node, request: HttpRequest) -> HttpResponse | None:
    """Run the POSTed action; a response to render instead of redirecting (test, confirm), else None."""
    action, post = request.POST.get("action"), request.POST
    user = request.user.get_username()
    name = (post.get("name") or post.get("target") or "").strip()
    if action == "add":
        body = {"name": name, "url": post.get("url", ""), "password": post.get("password") or None}
        _via_leader(node, request, "POST", f"{_API}/stores", body,
                    lambda: store_add(raft=node.raft, stores=node.stores, user=user, **body))
        messages.success(request, f"Store {name} added on every node. Test it before switching to it.")
    elif action == "remove":
        _via_leader(node, request, "DELETE", f"{_API}/stores/{name}", None,
                    lambda: store_remove(raft=node.raft, stores=node.stores, name=name, user=user))
        messages.success(request, f"Store {name} removed from every node; its database was left as it is.")
    elif action == "test":
        return _page(request, node, test_result=_test(node, request, name))
    elif action == "confirm":
        return _confirm(request, node, name)
    elif action == "switch":
        _via_leader(node, request, "POST", f"{_API}/switch", {"target": name}, lambda: node.switches.begin(name))
        messages.success(request, f"Switch to {name} started.")
    elif action == "rollback":
        _via_leader(node, request, "POST", f"{_API}/rollback", {}, node.switches.rollback)
        messages.success(request, "Roll back requested.")
    else:
        messages.error(request, "Unknown action.")
    return None


def _confirm(request: HttpRequest, node, target: str) -> HttpResponse:
    """The confirmation page of a switch: what will happen, and the target's test."""
    status = node.switches.status()
    try:
        names = len(node.store.active.all_names())
    except Exception as exc:  # noqa: BLE001 - shown, the operator decides
        names, error = None, str(exc)
    else:
        error = None
    context = {"title": f"Switch the metadata store to {target}?", "status": status, "target": target,
               "source": status["active"], "source_names": names, "source_error": error,
               "test": _test(node, request, target)}
    from django.contrib import admin

    context.update(admin.site.each_context(request))
    return TemplateResponse(request, "admin/storage/confirm_switch.html", context)


def _page(request: HttpRequest, node, *, test_result: dict | None = None, part: str | None = None) -> HttpResponse:
    status = node.switches.status() if node is not None else None
    now = time.time()
    context = {
        "title": "Metadata store",
        "status": status,
        "targets": [s["name"] for s in status["stores"] if not s["active"] and not s.get("error")] if status else [],
        "view": switch_view(status["switch"], now) if status else None,
        "test_result": test_result,
        "stores": [dict(s, added=_clock(s.get("added_at"), now)) for s in status["stores"]] if status else [],
    }
    if part == "live":
        return TemplateResponse(request, "admin/storage/_live.html", context)
    from django.contrib import admin

    context.update(admin.site.each_context(request))
    return TemplateResponse(request, "admin/storage/metadata_store.html", context)


def metadata_store(request: HttpRequest) -> HttpResponse:
    """``GET|POST /admin/metadata-store/``: the page (``?part=live``: its live part alone); POST ``action=``
    ``add`` (name, url, password), ``test``/``remove`` (name), ``confirm``/``switch`` (target) or ``rollback``."""
    if not request.user.is_superuser:
        raise PermissionDenied("Only superusers may see or switch the metadata store")
    try:
        node = current()
    except NodeNotReady:
        node = None
    if node is None or node.switches is None:
        messages.error(request, "This process runs no Raft member: open the admin page of a raft node.")
        return _page(request, None)
    if request.method == "POST":
        try:
            response = _act(node, request)
        except SwitchError as exc:
            messages.error(request, str(exc))
            response = None
        return response or HttpResponseRedirect(request.path)
    return _page(request, node, part=request.GET.get("part"))
