"""``python manage.py createconnectuser NAME --role viewer|operator|admin``: a REST user of this node.

The password is read from the environment variable named by ``--password-env``
(default ``RAFTCONNECT_USER_PASSWORD``) or prompted for; it is never taken from
the command line (it would show in ``ps`` and shell history). Running it again
for an existing user changes the role (and the password, when one is given).
Users are replicated in Raft (``webapp.connect.api.accounts``). Before a node's first
start, this command creates the user in the node's database (``RAFTCONNECT_DATA_DIR``)
and ``runnode`` moves it into the replicated users when it starts; once a data
directory's users were moved (its ``users-migrated`` marker), it refuses and points to
``POST /raftconnect/v1/users``, which works on any node. In a process running a node
(tests), it writes the replicated users directly.
"""
from __future__ import annotations

import getpass
import os

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction

from webapp import environment
from webapp.connect.api import accounts
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
    state = accounts.directory()
    if state is not None:  # a node runs in this process: its replicated users are the truth
        created = state.user(username) is None
        if created:
            accounts.user_create(name=username, password=password, role=role)
        else:
            accounts.user_update(name=username, password=password, role=role)
        accounts.mirror(username, state.user(username))  # this node's row now, not at the first login
        return created
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
        data_dir = os.environ.get(environment.DATA_DIR_ENV)
        if data_dir and os.path.exists(os.path.join(data_dir, accounts.MIGRATED_MARKER)):
            raise CommandError("This node's users are replicated in Raft: create or change users with "
                               "POST/PATCH /raftconnect/v1/users on any node (admin role)")
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
