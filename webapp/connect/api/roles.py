"""Roles of REST users and the one permission class that enforces them.

Owns which role a request needs and which role a user has; views never check
roles themselves.

Roles are ordered, each including the ones before it:

* ``viewer``   — reads (GET/HEAD/OPTIONS) of every public resource;
* ``operator`` — plus connector writes (create, config, pause/resume/stop,
  restart, offsets, delete, plugin validation);
* ``admin``    — plus cluster operations: Raft membership, metadata-store
  switch/rollback and stores, logger levels (``/admin/loggers*``, reads too), backup and
  restore (reads too), users (``/raftconnect/v1/users*``, reads too).

A replicated user's role is its record's (``accounts.mirror`` puts it on the user);
otherwise the highest of the Django groups named like the roles (created by migration
``connect.0001_roles``, and kept by the mirror); a superuser is an admin; a user
in none of the groups has no role and is refused (403) everywhere but ``/``
and ``/health``. A request forwarded by another cluster member carries the
role the forwarding node computed (``ForwardedUser.role``).

The role a request needs is declared, not coded: a view may set
``required_role`` (one role, or ``{METHOD: role}``); otherwise the first rule
of :data:`POLICY` whose path pattern and methods match decides. Unauthenticated
requests get 401 with the ``WWW-Authenticate`` challenge, users whose role is
too low 403, both with Connect's error body.
"""
from __future__ import annotations

import re
from typing import Any

from rest_framework.permissions import BasePermission
from rest_framework.exceptions import PermissionDenied

__all__ = ["ROLES", "VIEWER", "OPERATOR", "ADMIN", "POLICY", "HasRole", "user_role", "required_role", "role_at_least"]

VIEWER, OPERATOR, ADMIN = "viewer", "operator", "admin"
#: lowest to highest; each role includes the rights of those before it
ROLES = (VIEWER, OPERATOR, ADMIN)
SAFE = frozenset({"GET", "HEAD", "OPTIONS"})
ANY = frozenset({"GET", "HEAD", "OPTIONS", "POST", "PUT", "PATCH", "DELETE"})
WRITES = ANY - SAFE

#: ``(regex on the request path, methods, role)``: the first match decides
POLICY: tuple[tuple[re.Pattern[str], frozenset[str], str], ...] = tuple(
    (re.compile(p), m, r) for p, m, r in (
        (r"^/admin/loggers(/|$)", ANY, ADMIN),
        (r"^/raftconnect/v1/raft(/|$)", WRITES, ADMIN),
        (r"^/raftconnect/v1/metadata-store(/|$)", WRITES, ADMIN),
        (r"^/raftconnect/v1/(backup|restore)$", ANY, ADMIN),  # the backup holds every config and password hash
        (r"^/raftconnect/v1/users(/|$)", ANY, ADMIN),  # users hold password hashes and roles
        (r"^/raftconnect/v1/tokens(/|$)", ANY, VIEWER),  # anyone with a role may manage their own tokens
        (r".*", SAFE, VIEWER),
        (r".*", WRITES, OPERATOR),
    )
)


def role_at_least(role: str | None, needed: str) -> bool:
    """True when ``role`` includes ``needed`` (``None``: no role, never enough)."""
    return role in ROLES and ROLES.index(role) >= ROLES.index(needed)


def user_role(user: Any) -> str | None:
    """The role of ``user``: a replicated user's (set by ``accounts.mirror``), else superuser -> admin,
    else its role groups, else ``None``.

    A forwarded user (``webapp.connect.api.forwarding.ForwardedUser``) has its role as an attribute.
    """
    if user is None or not getattr(user, "is_authenticated", False):
        return None
    cached = getattr(user, "_raftconnect_role", "unset")  # a replicated user's role, or an earlier answer
    if cached != "unset":
        return cached
    if getattr(user, "is_superuser", False):
        return ADMIN
    forwarded = getattr(user, "role", None)
    if forwarded is not None or not hasattr(user, "groups"):
        return forwarded if forwarded in ROLES else None
    names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
    role = next((r for r in reversed(ROLES) if r in names), None)
    user._raftconnect_role = role
    return role


def required_role(view: Any, method: str, path: str) -> str:
    """The role a request needs: the view's ``required_role`` if declared, else the first matching :data:`POLICY` rule."""
    declared = getattr(view, "required_role", None)
    if isinstance(declared, dict):
        declared = declared.get(method)
    if declared:
        return declared
    for pattern, methods, role in POLICY:
        if method in methods and pattern.search(path):
            return role
    return ADMIN  # unknown methods: the most restrictive


class HasRole(BasePermission):
    """DRF permission: the request's user has at least the role the view/path requires (see module docstring).

    Unauthenticated -> ``False`` (DRF turns it into 401 with the challenge);
    authenticated with too low a role -> :class:`PermissionDenied` (403) naming both roles.
    """

    def has_permission(self, request, view) -> bool:
        user = request.user
        if user is None or not getattr(user, "is_authenticated", False):
            return False
        needed = required_role(view, request.method, request._request.path)
        have = user_role(user)
        if role_at_least(have, needed):
            return True
        if have is None:
            raise PermissionDenied(f"User {user} has no RaftConnect role; {request.method} {request._request.path} "
                                   f"needs the {needed} role")
        raise PermissionDenied(f"User {user} has the {have} role; {request.method} {request._request.path} "
                               f"needs the {needed} role")
