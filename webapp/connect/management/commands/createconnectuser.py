"""``python manage.py createconnectuser NAME --role viewer|operator|admin``: a REST user of this node.

The password is read from the environment variable named by ``--password-env``
(default ``RAFTCONNECT_USER_PASSWORD``) or prompted for; it is never taken from
the command line (it would show in ``ps`` and shell history). Running it again
for an existing user changes the role (and the password, when one is given).
Users live in the node's SQLite (``RAFTCONNECT_DATA_DIR``): run it with the
same environment as ``runnode`` on every node the user should reach, or give
the user a token on one node (``POST /raftconnect/v1/tokens``) and use that node.
"""
from __future__ import annotations

import getpass
import os

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from webapp.connect.api.roles import ADMIN, ROLES

__all__ = ["Command", "create_connect_user"]


def create_connect_user(*, username: str, role: str, password: str | None) -> bool:
    """Create or update ``username`` with exactly one role group; returns True when created.

    ``admin`` also makes the user staff (Django admin pages). ``password=None``
    keeps the existing password (a new user then cannot log in until one is set).
    Raises ``ValueError`` for an unknown role.
    """
    if role not in ROLES:
        raise ValueError(f"Unknown role {role!r}: use one of {', '.join(ROLES)}")
    model = get_user_model()
    with transaction.atomic():
        user, created = model.objects.get_or_create(username=username)
        if password is not None:
            user.set_password(password)
        elif created:
            user.set_unusable_password()
        user.is_staff = role == ADMIN
        user.save()
        user.groups.remove(*Group.objects.filter(name__in=ROLES))
        user.groups.add(Group.objects.get(name=role))
    return created


class Command(BaseCommand):
    help = "Create or update a REST user with a role (viewer, operator, admin)."

    def add_arguments(self, parser) -> None:
        parser.add_argument("username")
        parser.add_argument("--role", choices=ROLES, required=True)
        parser.add_argument("--password-env", default="RAFTCONNECT_USER_PASSWORD",
                            help="environment variable holding the password (prompted for when unset)")
        parser.add_argument("--no-password", action="store_true",
                            help="keep the current password (token-only user when new)")

    def handle(self, *args, **o) -> None:
        password = None
        if not o["no_password"]:
            password = os.environ.get(o["password_env"])
            if password is None:
                if not os.isatty(0):
                    raise CommandError(f"Set {o['password_env']} or use --no-password (no terminal to prompt on)")
                password = getpass.getpass(f"Password for {o['username']}: ")
            if not password:
                raise CommandError("The password may not be empty")
        created = create_connect_user(username=o["username"], role=o["role"], password=password)
        self.stdout.write(f"{'Created' if created else 'Updated'} user {o['username']} with role {o['role']}")
