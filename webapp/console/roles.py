"""Console roles of a Django user: ``viewer``, ``operator``, ``admin``.

Roles are Django groups of those names. A superuser is always ``admin``; a
user in none of the groups is ``operator`` (the behaviour before roles
existed: every authenticated user could write). A principal without groups
that carries a ``role`` (a request forwarded by another member) has that role. The console uses the roles to
hide write actions; the REST API is where permissions are enforced.
"""
from __future__ import annotations

from typing import Any

__all__ = ["ROLES", "WRITE_ROLES", "roles_of"]

#: every role, weakest first
ROLES = ("viewer", "operator", "admin")
#: roles that may change connectors
WRITE_ROLES = frozenset({"operator", "admin"})


def roles_of(user: Any) -> list[str]:
    """The user's roles, weakest first (never empty for an authenticated user).

    ``user``: a Django user, or a forwarded principal without groups (its
    ``role`` if it has one; superuser → ``["admin"]``; otherwise ``["operator"]``).
    """
    names: set[str] = set()
    groups = getattr(user, "groups", None)
    if groups is not None:
        names = set(groups.filter(name__in=ROLES).values_list("name", flat=True))
    elif getattr(user, "role", None) in ROLES:
        names.add(user.role)
    if getattr(user, "is_superuser", False):
        names.add("admin")
    if not names:
        names.add("operator")
    return [r for r in ROLES if r in names]
