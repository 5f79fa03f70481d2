"""The one accessor of this process's node, for what Django and DRF construct: :func:`current`.

Owns the process-wide handle of the running :class:`~webapp.connect.node.ConnectNode`
(:func:`current`, :func:`current_or_none`, :class:`NodeNotReady`) and its installation by the
node (:func:`set_current`, which also hands ``webapp.metrics`` its provider).

Why a locator at all: Django and DRF build views, authentication classes, auth backends and
admin pages themselves (from the URLconf and ``settings``), so those cannot be given the node
by a constructor the way Kafka's ``ConnectorsResource`` is given its ``Herder``. Those entry
points, and only those, call :func:`current` and pass what they got on explicitly (the Herder,
the store, the node) to services and selectors, which never look it up themselves. Which
modules may import this one is a contract (``node-locator`` in ``pyproject.toml``) and listed
in ``docs/ARCHITECTURE.md``:

* ``webapp.connect.node`` — installs the node (``set_current``);
* the REST entry points ``webapp.connect.api.views``, ``internal``, ``loggers``, ``stores``;
* DRF / Django authentication: ``webapp.connect.api.forwarding`` (``ForwardedUserAuthentication``:
  the cluster secret), ``webapp.connect.api.accounts`` (the auth backend and ``directory()``: the
  replicated users);
* the Django admin page ``webapp.connect.store_admin`` and the console's views ``webapp.console.api``;
* ``tools.bench_views`` (the REST benchmark's baseline views; not in the product).

``webapp.metrics`` and ``webapp.connect_metrics`` get :func:`current_or_none` as a provider
(``install``) and never import it. Must not import the node (annotations only) or Django.
"""
from __future__ import annotations

import threading
from typing import TYPE_CHECKING

from webapp import metrics

if TYPE_CHECKING:
    from webapp.connect.node import ConnectNode

__all__ = ["current", "current_or_none", "set_current", "NodeNotReady"]

_current: "ConnectNode | None" = None
_current_lock = threading.Lock()


class NodeNotReady(Exception):
    """No node is running in this process (or it has not finished starting)."""


def current() -> "ConnectNode":
    """The node running in this process. Raises :class:`NodeNotReady`."""
    if _current is None:
        raise NodeNotReady("This node has not finished starting")
    return _current


def current_or_none() -> "ConnectNode | None":
    """The node running in this process, or None (never raises)."""
    return _current


def set_current(node: "ConnectNode | None") -> None:
    """Install (or clear) the process-wide node; the first install registers the node's metrics collector."""
    global _current
    with _current_lock:
        _current = node
    if node is not None:
        metrics.install(current_or_none)  # webapp.metrics reads the node through this, never imports it
