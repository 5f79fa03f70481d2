"""Free a request's objects when its response is sent, not at the next full garbage collection.

A request through Django and DRF leaves reference cycles behind:

* DRF: the view holds its response (``view.response``) and the response holds the view
  (``response.renderer_context["view"]``); DRF's ``Request`` holds itself
  (``parser_context["request"]``) and the view.
* Django: a view with ``get`` holds its own bound method (``head``); the ``WSGIRequest`` holds closures over itself (``request.user``'s
  ``SimpleLazyObject``, ``request.auser``) and the messages storage, which holds the request.

Objects in a cycle are freed only by the cyclic garbage collector, and a request that runs
for longer than a few thousand allocations (a connector list at 10,000 connectors) sees its
objects promoted to the oldest generation, which CPython collects only once its survivors
reach a quarter of everything it tracks: with a member's millions of state objects, minutes.
Until then each request keeps what its cycle reaches: the rendered body (6 MiB for
``GET /connectors?expand=status`` at 10,000 connectors), the parsed request data (an
agent's batch of 1,000 task statuses), the request body and the WSGI environ. A follower
polled by a console twice a second grew by ~6 MB/s and reached 1.8 GB (``benchmarks/scale``,
issue 16; the memory census showed the allocated blocks falling by 2.9 million at each full
collection).

:class:`ReleaseRequestMiddleware` (first in ``MIDDLEWARE``, so it runs after every other
middleware has finished with the response) cuts those links once the response is complete,
so reference counting frees the request and, once the server has sent it, the response.
"""
from __future__ import annotations

from typing import Callable

from django.http import HttpRequest, HttpResponseBase

__all__ = ["ReleaseRequestMiddleware", "release_request"]

#: attributes of a DRF view that point back at the request, its response or the view itself
#: (Django's ``View.setup`` stores ``self.head = self.get``, a bound method of the view)
_VIEW_LINKS = ("response", "request", "args", "kwargs", "headers", "head")
#: attributes of a Django request that are closures over it or hold it (auth, messages)
_REQUEST_LINKS = ("user", "auser", "_messages", "_cached_user")


def release_request(request: HttpRequest, response: HttpResponseBase) -> None:
    """Cut the reference cycles of a finished ``request`` and its ``response`` (see module docstring).

    Leaves what the response still needs to be sent: its rendered content, headers and
    closers. Safe on any response (a DRF ``Response`` or a plain Django one) and idempotent.
    """
    context = getattr(response, "renderer_context", None)
    if isinstance(context, dict):
        view = context.get("view")
        if view is not None:
            for name in _VIEW_LINKS:
                view.__dict__.pop(name, None)
        drf_request = context.get("request")
        if drf_request is not None and isinstance(getattr(drf_request, "parser_context", None), dict):
            drf_request.parser_context = None
        response.renderer_context = None
    for name in _REQUEST_LINKS:
        request.__dict__.pop(name, None)


class ReleaseRequestMiddleware:
    """Django middleware: :func:`release_request` on every response, after the other middleware ran."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponseBase]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponseBase:
        response = self.get_response(request)
        release_request(request, response)
        return response
