"""Console and Django admin sessions that hold on every node of the cluster.

A session is a signed cookie (Django's ``signed_cookies`` engine, signed with the cluster's
``SECRET_KEY``), not a row in one node's database. A browser logged in through one node therefore
stays logged in when a load balancer, a bookmark or a failover sends it to another node, and
logging in needs neither Raft nor a shared database: a console session works while the cluster
has no leader. Django's own checks still run on every request: the cookie's signature and age
(``SESSION_COOKIE_AGE``), and the session's hash of the user's password hash, so changing a
user's password on any node ends that user's sessions everywhere; a deleted or deactivated user's
sessions end at their next request (:class:`~webapp.connect.api.accounts.ReplicatedUserBackend`).

What a cookie cannot do is be revoked: logging out deletes it from the browser, but a copy taken
before stays valid until it expires. Hence the shorter default age (12 hours against Django's two
weeks, ``RAFTCONNECT_SESSION_COOKIE_AGE_S``); to end a session that may have been copied, change
the user's password or deactivate the user. Every node must sign with the same key
(``RAFTCONNECT_SECRET_KEY``, else the cluster secret); a node with another key sees no session.

Django keeps the user's row id in the session (``SESSION_KEY``), and each node numbers its own
mirror rows of the replicated users (:func:`~webapp.connect.api.accounts.mirror`), so an id
written by one node may name another user, or nobody, on the next. At login
:func:`remember_user_name` adds the username (:data:`USER_NAME_KEY`), which is the same
everywhere; before Django reads the session's user, :class:`ClusterAuthenticationMiddleware`
points ``SESSION_KEY`` at this node's row for that name (:func:`localize`), mirroring the user
first where this node has never seen it. Without the rewrite the session's password hash would
not match the row the id names, and Django would end the session (never log in someone else:
the hash is of the user's own salted password hash).
"""
from __future__ import annotations

from typing import Any

from django.contrib import auth
from django.contrib.auth import get_user_model
from django.contrib.auth.middleware import AuthenticationMiddleware
from django.contrib.auth.middleware import get_user as cached_user
from django.utils.functional import SimpleLazyObject

from .accounts import active_row, directory

__all__ = ["USER_NAME_KEY", "ClusterAuthenticationMiddleware", "localize", "remember_user_name"]

#: the session key holding the logged-in user's name (Django's ``SESSION_KEY`` holds a node's row id)
USER_NAME_KEY = "_raftconnect_user"


def remember_user_name(sender: Any, request: Any, user: Any, **kwargs: Any) -> None:
    """``user_logged_in`` receiver: write the user's name into the new session (see module docstring)."""
    if request is not None and hasattr(request, "session"):
        request.session[USER_NAME_KEY] = user.get_username()


def _local_row(name: str):
    """This node's ``auth_user`` row for the user ``name``, mirrored from the replicated record first;
    ``None`` when there is no such user (or, replicated, an inactive one)."""
    state = directory()
    if state is None:  # no replicated users here: the node's own database
        return get_user_model()._default_manager.filter(**{get_user_model().USERNAME_FIELD: name}).first()
    return active_row(state, name)


def localize(request: Any) -> None:
    """Point the session's user id (Django's ``SESSION_KEY``) at this node's row of the user it names.

    A session without :data:`USER_NAME_KEY` is left as it is (Django then checks it as always). One whose
    user is gone or inactive is emptied (the cookie is deleted with the response). The session is
    changed only when the id differs, so it is signed again only on a node other than the last one.
    """
    session = request.session
    name = session.get(USER_NAME_KEY)
    if not isinstance(name, str):
        return
    row = _local_row(name)
    if row is None:
        session.flush()
        return
    pk = row._meta.pk.value_to_string(row)
    if session.get(auth.SESSION_KEY) != pk:
        session[auth.SESSION_KEY] = pk


def _user(request: Any):
    if not hasattr(request, "_cached_user"):
        localize(request)
    return cached_user(request)


class ClusterAuthenticationMiddleware(AuthenticationMiddleware):
    """Django's ``AuthenticationMiddleware`` whose ``request.user`` first :func:`localize`\\ s the session.

    ``request.user`` stays lazy: a request that never asks who it is (most API calls with Basic or token
    credentials still ask, through DRF's ``SessionAuthentication``) reads no session. Synchronous only,
    as the node's WSGI servers are: ``request.auser`` is Django's, without the rewrite.
    """

    def process_request(self, request: Any) -> None:
        super().process_request(request)
        request.user = SimpleLazyObject(lambda: _user(request))
