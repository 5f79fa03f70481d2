"""REST users and API tokens: services and selectors over the replicated state, and each node's local mirror.

Owns who a caller is. The source of truth is the Raft state
(:class:`raftnode.state.ClusterStateMachine` ``users`` / ``tokens``), written only through
``RaftNode.commands`` (``user_put``, ``user_delete``, ``token_create``, ``token_revoke``):

* a user is ``{name, password (Django hash), role, active}``; the password is hashed here,
  with Django's configured hasher, by the node that proposes, so only the hash is logged;
* a token is named, one of several per user, optionally expiring; its key
  (``rct_`` + 43 URL-safe characters, 256 random bits) is returned once by
  :func:`token_create` and only its SHA-256 digest is logged. A plain digest suffices: the key
  is random, not a password a person chose. Expiry is checked by the authenticating node
  against its own clock.

The local mirror: Django's sessions, the Django admin (``request.user``, its log entries) and
``login()`` need rows of ``auth_user``. Each node therefore writes the replicated record of a
user into its own ``auth_user`` row (password hash, active, staff/superuser for admins, exactly
one role group) when that user authenticates (:func:`mirror`), never on the Raft thread. The
row is a cache: :class:`ReplicatedUserBackend` (Django's ``AUTHENTICATION_BACKENDS``) checks
passwords against the replicated hash, and a session whose user was deleted, deactivated or
whose password changed on any node ends at its next request. Editing a row in the Django admin
changes nothing that matters: the next authentication overwrites it.

A worker-only node holds no replica: it reads a copy of the users and token digests from a
Raft member of ``--cluster`` (:class:`RemoteDirectory`, signed ``GET
/raftconnect/v1/internal/users``, refreshed when older than 2 s, so a revocation reaches it
within that). Without either (no node in this process, a management command, or a
worker-only node that never reached a member) the local database is used as before
(Django's ``ModelBackend``, DRF's ``authtoken``).

Must not touch Raft except through ``node.raft.commands`` and the state's read methods.
"""
from __future__ import annotations

import copy
import hashlib
import logging
import os
import re
import secrets
import threading
import time
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.hashers import check_password, make_password

from raftnode import CommandRejected
from webapp.connect.herder import BadRequest, ConnectRestError, NotFoundError
from webapp.connect.locator import NodeNotReady, current, current_or_none

from .roles import ADMIN, ROLES

__all__ = ["ReplicatedUserBackend", "RemoteDirectory", "active_row", "directory", "mirror", "forget_mirrors", "token_digest", "user_list", "user_get", "user_create",
           "user_update", "user_delete", "token_list", "token_create", "token_revoke", "token_record", "token_user",
           "export_users", "import_users", "bootstrap_users", "MIGRATED_MARKER"]

log = logging.getLogger(__name__)

USER_NAME = re.compile(r"^[\w.@+-]{1,150}\Z")
TOKEN_NAME = re.compile(r"^[A-Za-z0-9._-]{1,64}\Z")
#: longest token lifetime accepted (ten years, seconds)
MAX_EXPIRES_IN_S = 10 * 365 * 86400
TOKEN_PREFIX = "rct_"
#: file in a node's data directory written once its local users and tokens were proposed into Raft
MIGRATED_MARKER = "users-migrated"


# ------------------------------------------------------------------ selectors
class RemoteDirectory:
    """A worker-only node's copy of the replicated users and token digests, read from a Raft member.

    Offers the state machine's read methods (``user``, ``user_names``, ``token``, ``user_tokens``).
    ``fetch()`` returns ``{"users", "tokens"}`` or raises; the copy is fetched again when older
    than ``ttl`` seconds (``clock``: ``time.monotonic``); when a fetch fails the previous copy is
    kept for up to ``max_stale`` seconds, and no new fetch is tried for ``ttl`` seconds (requests
    do not each wait for an unreachable cluster). :meth:`ready` tells whether there is a copy at all.
    """

    def __init__(self, fetch, ttl: float = 2.0, max_stale: float = 60.0, clock=time.monotonic):
        self._fetch, self.ttl, self.max_stale, self._clock = fetch, ttl, max_stale, clock
        self._data: dict[str, Any] | None = None
        self._at = 0.0
        self._failed_at: float | None = None
        self._lock = threading.Lock()

    def _fresh(self, now: float) -> bool:
        return (self._data is not None and now - self._at < self.ttl) or (
            self._failed_at is not None and now - self._failed_at < self.ttl)

    def _current(self) -> dict[str, Any] | None:
        now = self._clock()
        if self._fresh(now):
            return self._data
        with self._lock:
            if self._fresh(self._clock()):
                return self._data
            self._failed_at = None
            try:
                data = self._fetch()
                self._data = {"users": dict(data["users"]), "tokens": dict(data["tokens"])}
                self._at = self._clock()
            except Exception as exc:  # noqa: BLE001 - any failure: keep the last copy for a while
                self._failed_at = self._clock()
                log.warning("users: could not read the replicated users from the cluster: %s", exc)
                if self._data is not None and now - self._at >= self.max_stale:
                    self._data = None
        return self._data

    def ready(self) -> bool:
        """Whether a copy is available (fetching one if needed)."""
        return self._current() is not None

    def _part(self, key: str) -> dict[str, Any]:
        data = self._current()
        return {} if data is None else data[key]

    def user(self, name: str) -> dict[str, Any] | None:
        """As ``ClusterStateMachine.user``."""
        rec = self._part("users").get(name)
        return dict(rec) if rec is not None else None

    def user_names(self) -> list[str]:
        """As ``ClusterStateMachine.user_names``."""
        return sorted(self._part("users"))

    def token(self, digest: str) -> dict[str, Any] | None:
        """As ``ClusterStateMachine.token``."""
        rec = self._part("tokens").get(digest)
        return dict(rec) if rec is not None else None

    def user_tokens(self, user: str) -> list[dict[str, Any]]:
        """As ``ClusterStateMachine.user_tokens``."""
        return sorted(({"name": t["name"], "created": t["created"], "expires": t["expires"]}
                       for t in self._part("tokens").values() if t["user"] == user), key=lambda t: t["name"])


def _fetch_from_cluster(node) -> dict[str, Any]:
    """The users and tokens, asked of the ``--cluster`` members in turn (``GET /raftconnect/v1/internal/users``,
    signed, direct). Errors: ``ConnectionError`` naming what each member answered."""
    import urllib3

    from webapp.coordinator.connections import OCCASIONAL

    errors = []
    for address in node.options.cluster:
        try:
            return OCCASIONAL.signed_get_json(address, "/raftconnect/v1/internal/users", secret=node.secret, timeout=2)
        except (urllib3.exceptions.HTTPError, ValueError) as exc:
            errors.append(f"{address}: {exc}")
    raise ConnectionError("; ".join(errors) or "no --cluster address")


_remote_lock = threading.Lock()


def directory():
    """Where this process reads users and tokens: the Raft member's state (``ClusterStateMachine``), a
    worker-only node's :class:`RemoteDirectory`, or ``None`` (use the local database)."""
    node = current_or_none()
    if node is None:
        return None
    raft = getattr(node, "raft", None)
    if raft is not None:
        return raft.state
    if not getattr(node, "options", None) or not node.options.cluster:
        return None
    remote = getattr(node, "user_directory", None)
    if remote is None:
        with _remote_lock:
            remote = getattr(node, "user_directory", None)
            if remote is None:
                remote = node.user_directory = RemoteDirectory(lambda: _fetch_from_cluster(node))
    return remote if remote.ready() else None


def _commands():
    try:
        node = current()
    except NodeNotReady as exc:
        raise ConnectRestError(str(exc), 503) from exc
    if node.raft is None:
        raise ConnectRestError("This node is not a Raft member (roles: worker)", 404)
    return node.raft.commands


def token_digest(key: str) -> str:
    """SHA-256 hex digest of a token key: what Raft stores instead of the key."""
    return hashlib.sha256(key.encode()).hexdigest()


def _user_json(name: str, rec: dict[str, Any], tokens: int) -> dict[str, Any]:
    return {"name": name, "role": rec["role"], "active": rec["active"], "created": rec["created"],
            "updated": rec["updated"], "tokens": tokens}


def user_list() -> list[dict[str, Any]]:
    """Every replicated user: ``[{"name", "role", "active", "created", "updated" (unix s), "tokens": count}]``."""
    state = _state_or_404()
    return [_user_json(n, state.user(n), len(state.user_tokens(n))) for n in state.user_names()]


def user_get(name: str) -> dict[str, Any]:
    """One user as in :func:`user_list`. Errors: :class:`NotFoundError` (404)."""
    state = _state_or_404()
    rec = state.user(name)
    if rec is None:
        raise NotFoundError(f"User {name} not found")
    return _user_json(name, rec, len(state.user_tokens(name)))


def token_list(user: str) -> list[dict[str, Any]]:
    """``user``'s tokens, never their keys: ``[{"name", "created", "expires" (unix s | None), "expired"}]``."""
    now = time.time()
    return [dict(t, expired=t["expires"] is not None and t["expires"] <= now)
            for t in _state_or_404().user_tokens(user)]


def _state_or_404():
    state = directory()
    if state is None:
        raise ConnectRestError("Users and tokens are served by Raft members; this node has no Raft state", 404)
    return state


# ------------------------------------------------------------------- services
def _check_name(name: Any, pattern: re.Pattern[str], what: str) -> str:
    if not isinstance(name, str) or not pattern.match(name):
        raise BadRequest(f"{what} must be 1 to {150 if pattern is USER_NAME else 64} characters of "
                         f"{'letters, digits and @.+-_' if pattern is USER_NAME else 'letters, digits and ._-'}")
    return name


def _check_role(role: Any) -> str:
    if role not in ROLES:
        raise BadRequest(f"role must be one of {', '.join(ROLES)}")
    return role


def _check_password(password: Any) -> str:
    if not isinstance(password, str) or not password:
        raise BadRequest("password must be a non-empty string")
    return password


def user_create(*, name: str, password: str | None, role: str, active: bool = True) -> dict[str, Any]:
    """Create a replicated user (password hashed here before it is proposed); returns it as :func:`user_get`.

    ``password=None``: an unusable password (a user that only tokens can authenticate).

    Errors: :class:`BadRequest` (400) bad name/role/password, ``CommandRejected`` 409 exists.
    """
    _check_name(name, USER_NAME, "name")
    _check_role(role)
    if not isinstance(active, bool):
        raise BadRequest("active must be true or false")
    hashed = make_password(None) if password is None else make_password(_check_password(password))
    changes = {"password": hashed, "role": role, "active": active}
    _commands().user_put(name=name, changes=changes, create=True, now=time.time())
    return user_get(name)


def user_update(*, name: str, password: str | None = None, role: str | None = None,
                active: bool | None = None) -> dict[str, Any]:
    """Change a user's password, role and/or active flag (``None``: unchanged); returns it.

    Errors: 400 bad values or nothing to change, 404 unknown user, 409 it is the last active admin.
    """
    changes: dict[str, Any] = {}
    if password is not None:
        changes["password"] = make_password(_check_password(password))
    if role is not None:
        changes["role"] = _check_role(role)
    if active is not None:
        if not isinstance(active, bool):
            raise BadRequest("active must be true or false")
        changes["active"] = active
    if not changes:
        raise BadRequest("Nothing to change: give password, role and/or active")
    _commands().user_put(name=name, changes=changes, create=False, now=time.time())
    return user_get(name)


def user_delete(*, name: str) -> None:
    """Delete a user and all its tokens. Errors: 404 unknown, 409 the last active admin."""
    _commands().user_delete(name=name)


def token_create(*, user: str, name: str, expires_in_s: float | None = None) -> dict[str, Any]:
    """Issue ``user`` a new token ``name``: ``{"name", "token" (the key, shown only now), "created", "expires"}``.

    ``expires_in_s``: lifetime in seconds (``None``: never expires). Errors: 400 bad name or
    lifetime, or ``user`` is not a replicated user; ``CommandRejected`` 409 the user has a token
    of that name (an existing token is never replaced).
    """
    _check_name(name, TOKEN_NAME, "name")
    if expires_in_s is not None and (isinstance(expires_in_s, bool) or not isinstance(expires_in_s, (int, float))
                                     or not 0 < expires_in_s <= MAX_EXPIRES_IN_S):
        raise BadRequest(f"expires_in_s must be a number of seconds between 0 and {MAX_EXPIRES_IN_S}")
    if _state_or_404().user(user) is None:
        raise BadRequest(f"User {user} is not a user of the cluster; tokens are issued to cluster users only")
    key = TOKEN_PREFIX + secrets.token_urlsafe(32)
    now = time.time()
    expires = None if expires_in_s is None else now + float(expires_in_s)
    _commands().token_create(user=user, name=name, digest=token_digest(key), now=now, expires=expires)
    return {"name": name, "token": key, "created": now, "expires": expires}


def token_revoke(*, user: str, name: str) -> None:
    """Revoke ``user``'s token ``name`` on every node. Errors: 404 no such token."""
    _commands().token_revoke(user=user, name=name)


# ------------------------------------------------------------- authentication
#: user name -> the role whose group :func:`mirror` last gave the row; forgotten with every ORM write of
#: users or groups that is not the mirror's own (:func:`forget_mirrors`), at most :data:`MIRROR_MAX_ENTRIES`
_groups_done: dict[str, str] = {}
_mirror_lock = threading.Lock()
#: ``active`` while this thread's :func:`mirror` writes a row: the signals of its own writes
_mirroring = threading.local()

#: how long a checked row is trusted without reading it again, when no ORM write of a user row or
#: of group membership was seen (those forget every checked row at once: :func:`forget_mirrors`)
MIRROR_TTL_S = 60.0
#: at most this many users' checked rows are kept (the oldest checked goes first)
MIRROR_MAX_ENTRIES = 4096


class _CheckedRows:
    """Rows :func:`mirror` found equal to their replicated record, so the next request skips the ``SELECT``.

    An entry is ``name -> (replicated fields, epoch, monotonic time, user)``. It is used only while
    the record's password hash, active flag and role are unchanged, no user row or group
    membership was saved or deleted through the ORM on this node since it was read (``epoch``:
    the Django admin's edits go through the ORM) and for at most :data:`MIRROR_TTL_S` (edits by
    other means, e.g. SQL). Bounded by :data:`MIRROR_MAX_ENTRIES`. Before this, every
    authenticated request read its ``auth_user`` row: ~8 % of the leader's CPU under 32 REST
    clients writing configs (benchmarks/cluster, issue 16).
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._rows: dict[str, tuple[tuple, int, float, Any]] = {}
        self.epoch = 0

    def forget(self) -> None:
        """Drop every entry: a user row or a group membership changed on this node."""
        with self._lock:
            self.epoch += 1
            self._rows.clear()

    def get(self, name: str, fields: tuple):
        """A copy of the user checked for ``fields``, or ``None`` when there is no valid entry."""
        hit = self._rows.get(name)
        if hit is None or hit[0] != fields or hit[1] != self.epoch or time.monotonic() - hit[2] > MIRROR_TTL_S:
            return None
        return copy.copy(hit[3])  # each request its own instance: login() and the admin set attributes on it

    def put(self, name: str, fields: tuple, epoch: int, user) -> None:
        """Remember ``user`` as checked for ``fields`` at ``epoch`` (read before its row was)."""
        with self._lock:
            if epoch != self.epoch:  # a row changed while it was read: read it again next time
                return
            _remember(self._rows, name, (fields, epoch, time.monotonic(), copy.copy(user)))


_checked = _CheckedRows()


def _remember(table: dict, key: str, value: Any) -> None:
    """Set ``table[key]`` as its newest entry, dropping the oldest first when ``table`` holds
    :data:`MIRROR_MAX_ENTRIES` (the bound of :class:`_CheckedRows` and of ``_groups_done``)."""
    table.pop(key, None)
    if len(table) >= MIRROR_MAX_ENTRIES:
        table.pop(next(iter(table), None), None)
    table[key] = value


def forget_mirrors(**_signal: Any) -> None:
    """Signal receiver (``post_save``/``post_delete`` of the user model and ``Group``, ``m2m_changed`` of
    user groups; connected in ``ConnectConfig.ready``): the next authentication reads its row again.

    A write that is not :func:`mirror`'s own (the Django admin's user or group pages, a deleted row)
    also forgets which rows were given their role's group, so the next authentication of each user
    sets its groups again: a group added in the admin is taken away. The mirror's own writes leave
    that alone; otherwise each one would make every other user's next request write its groups.
    """
    _checked.forget()
    if not getattr(_mirroring, "active", False):
        _groups_done.clear()


def _mirror_row(model, name: str):
    """The ``auth_user`` row of ``name`` as a model instance, or ``None``: one plain ``SELECT``.

    Read on every authenticated request; the ORM's ``filter(...).first()`` cost ~0.6 ms of CPU to
    build and compile the query against ~0.06 ms for this (issue 16: ~13 % of the leader's GIL time
    under 32 REST clients). Reads the key, the name and the fields :func:`mirror` compares, each
    through its field's ``to_python`` (SQLite answers 0/1 for booleans); the instance comes from the
    ORM's own ``from_db`` with the other fields deferred (read from the database if ever used).
    """
    from django.db import connections

    meta = model._meta
    wanted = {meta.pk.attname, meta.get_field(model.USERNAME_FIELD).attname, "password", "is_active", "is_staff",
              "is_superuser"}
    fields = [f for f in meta.concrete_fields if f.attname in wanted]  # from_db takes them in this order
    username = meta.get_field(model.USERNAME_FIELD).column
    connection = connections[model._default_manager.db]
    q = connection.ops.quote_name
    sql = (f"SELECT {', '.join(q(f.column) for f in fields)} FROM {q(meta.db_table)} "
           f"WHERE {q(username)} = %s")
    with connection.cursor() as cur:
        cur.execute(sql, [name])
        row = cur.fetchone()
    if row is None:
        return None
    return model.from_db(connection.alias, [f.attname for f in fields], [f.to_python(v) for f, v in zip(fields, row)])


def mirror(name: str, rec: dict[str, Any]):
    """This node's ``auth_user`` row for replicated user ``name`` (record ``rec``), rewritten where it differs.

    The row gets the replicated password hash and active flag, staff and superuser for the admin
    role (and neither otherwise), and exactly the role's group, so an edit of the row (the Django
    admin's user pages) is undone at the user's next authentication. The returned user carries the
    replicated role (``_raftconnect_role``, which ``roles.user_role`` prefers to anything on the row).
    A row found equal is not read again while nothing changed it (:class:`_CheckedRows`).
    """
    from django.contrib.auth.models import Group
    from django.db import transaction

    fields = (rec["password"], bool(rec["active"]), rec["role"])
    user = _checked.get(name, fields)
    if user is not None:
        user._raftconnect_role = rec["role"]
        return user
    epoch = _checked.epoch
    model = get_user_model()
    admin = rec["role"] == ADMIN
    want = {"password": rec["password"], "is_active": bool(rec["active"]), "is_staff": admin, "is_superuser": admin}
    user = _mirror_row(model, name)
    if user is not None and all(getattr(user, k) == v for k, v in want.items()) and _groups_done.get(name) == rec["role"]:
        _checked.put(name, fields, epoch, user)
    else:
        with _mirror_lock, transaction.atomic():
            _mirroring.active = True
            try:
                user = model._default_manager.filter(username=name).first() or model(username=name)
                for k, v in want.items():
                    setattr(user, k, v)
                user.save()
                user.groups.remove(*Group.objects.filter(name__in=ROLES).exclude(name=rec["role"]))
                user.groups.add(*Group.objects.filter(name=rec["role"]))
            finally:
                _mirroring.active = False
            _remember(_groups_done, name, rec["role"])  # a user dropped from it has its groups set again
    user._raftconnect_role = rec["role"]
    return user


def token_user(key: str):
    """``(user, token record)`` for a token key, or ``None`` when unknown, expired, or its user is gone/inactive.

    Requires a replicated state (see :func:`directory`).
    """
    found = token_record(key)
    return None if found is None else (mirror(found[1]["user"], found[0]), found[1])


def token_record(key: str) -> tuple[dict[str, Any], dict[str, Any]] | None:
    """``(user record, token record)`` for a valid token key, as :func:`token_user` judges it, without
    mirroring the user into this node's database (the REST fast path needs only the record's role).

    Requires a replicated state (see :func:`directory`).
    """
    state = directory()
    tok = state.token(token_digest(key))
    if tok is None or (tok["expires"] is not None and tok["expires"] <= time.time()):
        return None
    rec = state.user(tok["user"])
    if rec is None or not rec["active"]:
        return None
    return rec, tok


class ReplicatedUserBackend(ModelBackend):
    """Django authentication backend over the replicated users (see module docstring).

    ``authenticate`` checks the password against the replicated hash and returns the mirrored
    row; ``get_user`` (sessions) returns the row only while its replicated user exists and is
    active, refreshing the mirror first. Without a replicated state: Django's ``ModelBackend``.
    """

    def authenticate(self, request, username=None, password=None, **kwargs):
        state = directory()
        if state is None:
            return super().authenticate(request, username=username, password=password, **kwargs)
        if username is None or password is None:
            return None
        rec = state.user(username)
        if rec is None or not rec["active"] or not check_password(password, rec["password"]):
            return None
        return mirror(username, rec)

    def get_user(self, user_id):
        user = super().get_user(user_id)
        state = directory()
        if user is None or state is None:
            return user
        return active_row(state, user.get_username())


def active_row(state, name: str):
    """This node's ``auth_user`` row of the replicated user ``name``, mirrored first (:func:`mirror`);
    ``None`` when ``state`` (see :func:`directory`) has no such user or it is inactive."""
    rec = state.user(name)
    if rec is None or not rec["active"]:
        return None
    return mirror(name, rec)


# ------------------------------------------------------------ backup, bootstrap
def export_users() -> list[dict[str, Any]]:
    """The replicated users in the backup's shape: ``[{"username", "password" (Django hash), "is_active",
    "is_superuser" (admin role), "groups": [role]}]``; tokens are never exported."""
    state = _state_or_404()
    out = []
    for name in state.user_names():
        rec = state.user(name)
        out.append({"username": name, "password": rec["password"], "is_active": rec["active"],
                    "is_superuser": rec["role"] == ADMIN, "groups": [rec["role"]]})
    return out


def _role_of(entry: dict[str, Any]) -> str | None:
    if entry.get("is_superuser"):
        return ADMIN
    groups = set(entry.get("groups") or [])
    return next((r for r in reversed(ROLES) if r in groups), None)


def import_users(users: list[dict[str, Any]]) -> dict[str, list[str]]:
    """Create the backup's users the cluster lacks (password hashes as they are); existing ones are kept.

    The role is ``admin`` for a superuser, else the highest role group; a user with neither is
    imported inactive with the ``viewer`` role, so nobody gains rights. Returns ``{"created", "kept"}``
    (name lists). Errors: ``RaftUnavailable``.
    """
    commands, state = _commands(), _state_or_404()
    created, kept = [], []
    now = time.time()
    for u in users:
        name = u["username"]
        if state.user(name) is not None:
            kept.append(name)
            continue
        role = _role_of(u)
        changes = {"password": str(u.get("password") or "!"), "role": role or "viewer",
                   "active": bool(u.get("is_active", True)) and role is not None}
        try:
            commands.user_put(name=name, changes=changes, create=True, now=now)
            created.append(name)
        except CommandRejected as exc:
            if exc.code != 409:
                raise
            kept.append(name)
    return {"created": created, "kept": kept}


def _local_users() -> list[dict[str, Any]]:
    model = get_user_model()
    return [{"username": u.get_username(), "password": u.password, "is_active": u.is_active,
             "is_superuser": u.is_superuser, "groups": sorted(g.name for g in u.groups.all())}
            for u in model._default_manager.order_by("username").prefetch_related("groups")]


def _migrate_local(node) -> None:
    """Once per data directory: propose this node's pre-replication users and DRF tokens into Raft."""
    marker = os.path.join(node.options.data_dir, MIGRATED_MARKER)
    if os.path.exists(marker):
        return
    summary = import_users(_local_users())
    tokens = 0
    try:
        from rest_framework.authtoken.models import Token

        for tok in Token.objects.select_related("user"):
            name = tok.user.get_username()
            if node.raft.state.user(name) is None:
                continue
            try:
                node.raft.commands.token_create(user=name, name="legacy", digest=token_digest(tok.key),
                                                now=tok.created.timestamp(), expires=None)
                tokens += 1
            except CommandRejected:
                pass  # this user already has a token named legacy (another node's)
    except LookupError:  # authtoken not installed
        pass
    if summary["created"] or tokens:
        log.warning("users: moved %d local user(s) (%s) and %d token(s) into the replicated users",
                    len(summary["created"]), ", ".join(summary["created"]), tokens)
    with open(marker, "w") as fh:
        fh.write("local users and tokens were proposed into Raft; the local tables are now a mirror\n")


def bootstrap_users(node, *, admin_user: str | None, admin_password: str | None) -> None:
    """At ``runnode`` on a Raft member, after the control plane started: move this node's local users in
    (once, :data:`MIGRATED_MARKER`), disable the local rows of users the cluster no longer has, then make ``admin_user`` an active replicated admin with
    ``admin_password`` unless it already is one with that password (so nodes started with the same
    settings propose nothing). Errors: ``RaftUnavailable`` when nothing could be committed.
    """
    _migrate_local(node)
    # rows of users deleted from the cluster since (stale mirrors): disabled, so that even a lost marker
    # cannot bring them back with their old password (rows are kept: the Django admin's log refers to them)
    get_user_model()._default_manager.exclude(username__in=node.raft.state.user_names()).update(
        is_active=False, password=make_password(None))
    if not admin_user or not admin_password:
        return
    def current_admin() -> bool:
        rec = node.raft.state.user(admin_user)
        return rec is not None and rec["active"] and rec["role"] == ADMIN and check_password(admin_password,
                                                                                              rec["password"])

    from .verified import remember_verified

    # each path below ends with a replicated hash this process has checked or computed from admin_password:
    # it enters the verified-credentials cache, so the first request does not pay PBKDF2 once more
    if current_admin():
        remember_verified(admin_user, admin_password, node.raft.state.user(admin_user)["password"])
        return
    changes = {"password": make_password(admin_password), "role": ADMIN, "active": True}
    create = node.raft.state.user(admin_user) is None
    try:
        node.raft.commands.user_put(name=admin_user, changes=changes, create=create, now=time.time())
    except CommandRejected as exc:
        if exc.code != 409 or not create:
            raise
        if current_admin():  # another node created it meanwhile, with the same password
            remember_verified(admin_user, admin_password, node.raft.state.user(admin_user)["password"])
            return
        node.raft.commands.user_put(name=admin_user, changes=changes, create=False, now=time.time())
    remember_verified(admin_user, admin_password, changes["password"])
