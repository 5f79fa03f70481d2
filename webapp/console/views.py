"""The page shown at ``/console/`` while the console has not been built (see :mod:`webapp.console.middleware`)."""
from __future__ import annotations

from django.http import HttpRequest, HttpResponse

__all__ = ["not_built"]


def not_built(request: HttpRequest) -> HttpResponse:
    """503 with how to build the console (``make frontend``); the REST API works without it."""
    return HttpResponse(
        "<!doctype html><title>RaftConnect console</title>"
        "<h1>The console has not been built</h1>"
        "<p>In a checkout, run <code>make frontend</code> (npm ci and npm run build in <code>frontend/</code>, "
        "which writes <code>webapp/console/dist/</code>) and restart the node; a wheel is built only with the "
        "console in it. The REST API and <a href=\"/admin/\">the admin</a> work without it.</p>",
        status=503, content_type="text/html")
