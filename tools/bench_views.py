"""Baseline views for ``benchmarks/rest/run.py``: plain Django (no DRF, no authentication, no role check).

Mounted only when ``RAFTCONNECT_BENCH_BASELINE=1`` (see ``urls``), never in a
normal node. They return the same JSON as the real endpoints so that the
benchmark can divide the real endpoint's cost by the cost of serving the same
bytes from the same REST server and Django:

* ``GET /raftconnect/v1/bench/connectors-status`` — ``GET /connectors?expand=status``'s body,
  computed from the Herder (``?static=1``: the last computed bytes, the floor);
* ``GET /raftconnect/v1/bench/status/{name}`` — ``GET /connectors/{name}/status``'s body.
"""
from __future__ import annotations

import json

from django.http import HttpRequest, HttpResponse

from webapp.connect.locator import current

__all__ = ["connectors_status", "connector_status"]

_last: dict[str, bytes] = {}


def connectors_status(request: HttpRequest) -> HttpResponse:
    """The body of ``GET /connectors?expand=status`` from a plain Django view."""
    if request.GET.get("static") == "1" and "all" in _last:
        return HttpResponse(_last["all"], content_type="application/json")
    h = current().herder
    body = json.dumps({n: {"status": h.connector_status(n)} for n in h.connector_names()},
                      separators=(",", ":")).encode()
    _last["all"] = body
    return HttpResponse(body, content_type="application/json")


def connector_status(request: HttpRequest, name: str) -> HttpResponse:
    """The body of ``GET /connectors/{name}/status`` from a plain Django view."""
    return HttpResponse(json.dumps(current().herder.connector_status(name), separators=(",", ":")),
                        content_type="application/json")
