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
* the REST entry points ``webapp.connect.api.views``, ``internal``, ``loggers``, ``stores``, and the
  WSGI application's fast path ``webapp.connect.api.fastpath``;
* DRF / Django authentication: ``webapp.connect.api.forwarding`` (``ForwardedUserAuthentication``:
  the cluster secret), ``webapp.connect.api.accounts`` (the auth backend and ``directory()``: the
  replicated users);
* the Django admin page ``webapp.connect.store_admin`` and the console's views ``webapp.console.api``;
* ``tools.bench_views`` (the REST benchmark's baseline views; not in the product).

``webapp.metrics`` and ``webapp.connect_metrics`` get :func:`current_or_none` as a provider
(``install``) and never import it. Must not import the node (it imports this module; what the
entry points use of it is the :class:`RunningNode` protocol) or Django.
"""
from __future__ import annotations

import threading
from typing import Any, Protocol

from webapp import metrics

__all__ = ["current", "current_or_none", "set_current", "NodeNotReady", "RunningNode"]


class RunningNode(Protocol):
    """What the entry points use of the running node (a :class:`~webapp.connect.node.ConnectNode`).

    ``options`` (the node's ``NodeOptions``), ``secret`` (the cluster secret, bytes), ``raft`` (the
    ``RaftNode``; ``None`` on a worker-only node), ``herder``, ``coordinator``, ``store`` (the active
    metadata store), ``stores`` (the store set), ``switches`` (the switch manager), ``user_directory``
    (a worker-only node's copy of the users), ``health``, the leader lookups of the forwarding and the cluster view.
    """

    options: Any
    secret: bytes
    raft: Any
    herder: Any
    coordinator: Any
    store: Any
    stores: Any
    switches: Any
    user_directory: Any
    health: Any

    def cluster_leader(self, refresh: bool = False) -> str | None:
        """A worker-only node's view of the leader's REST address (asked of ``--cluster``), or None."""
        ...

    def leader_rest_address(self) -> str | None:
        """The Raft leader's REST address, or None."""
        ...

    def cluster_view(self) -> dict[str, Any]:
        """The body of ``GET /raftconnect/v1/cluster``."""
        ...


_current: RunningNode | None = None
_current_lock = threading.Lock()


class NodeNotReady(Exception):
    """No node is running in this process (or it has not finished starting)."""


def current() -> RunningNode:
    """The node running in this process. Raises :class:`NodeNotReady`."""
    if _current is None:
        raise NodeNotReady("This node has not finished starting")
    return _current


def current_or_none() -> RunningNode | None:
    """The node running in this process, or None (never raises)."""
    return _current


def set_current(node: RunningNode | None) -> None:
    """Install (or clear) the process-wide node; the first install registers the node's metrics collector."""
    global _current
    with _current_lock:
        _current = node
    if node is not None:
        metrics.install(current_or_none)  # webapp.metrics reads the node through this, never imports it
