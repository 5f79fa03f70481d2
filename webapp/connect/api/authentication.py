"""REST authentication: HTTP basic with a bounded cache of verified credentials, and API tokens.

Users and tokens are the replicated ones (:mod:`webapp.connect.api.accounts`), so a
credential works on every Raft member. Tokens are sent as ``Authorization: Token <key>``
or ``Authorization: Bearer <key>``; issue them with ``POST /raftconnect/v1/tokens``.
A worker-only node (no replicated state) still uses its own database: local users and
DRF ``authtoken`` tokens.

Django hashes passwords with PBKDF2 (about a million iterations, ~0.3 s of CPU
here), which is right for a login form and wrong for an API where automation
sends basic credentials on every request. After one full check, an entry keyed
by an HMAC of ``(username, password, stored password hash)`` is kept for
``ttl`` seconds, so a repeat request costs one HMAC. Changing the password
changes the stored hash and so misses the cache; the cache holds at most
``max_entries`` (oldest evicted): memory stays bounded (the cache itself is
:mod:`webapp.connect.api.verified`).
"""
from __future__ import annotations

from django.contrib.auth import get_user_model
from rest_framework.authentication import BasicAuthentication, TokenAuthentication
from rest_framework.exceptions import AuthenticationFailed

from . import accounts
from .verified import cache as _cache
from .verified import remember_verified

__all__ = ["CachedBasicAuthentication", "ReplicatedTokenAuthentication", "BearerTokenAuthentication",
           "remember_verified"]


class CachedBasicAuthentication(BasicAuthentication):
    """DRF's basic authentication, remembering recently verified credentials (see module docstring)."""

    def authenticate_header(self, request) -> str:
        """The 401 challenge: Basic, except for scripts sending ``X-Requested-With: XMLHttpRequest``.

        A browser answers a Basic challenge with its own password dialog; the
        console (which logs in with a session) sends that header and gets
        ``Session`` instead, a scheme browsers do not prompt for.
        """
        if request.headers.get("X-Requested-With") == "XMLHttpRequest":
            return 'Session realm="api"'
        return super().authenticate_header(request)

    @staticmethod
    def verified_record(userid: str, password: str) -> dict | None:
        """The replicated record of user ``userid`` (``accounts``: ``{"password", "active", "role", ...}``) when
        ``password`` was verified for its current hash within the cache's lifetime and the user is active;
        ``None`` otherwise (unknown, inactive, not cached: only a full check can tell). Never hashes, never
        touches the database. The REST fast path (``fastpath``) reads the role from it and leaves every
        other case to this class's full check.
        """
        state = accounts.directory()
        rec = state.user(userid) if state is not None else None
        if rec is not None and rec["active"] and _cache.hit(_cache.key(userid, password, rec["password"])):
            return rec
        return None

    def authenticate_credentials(self, userid, password, request=None):
        state = accounts.directory()
        if state is not None:  # the replicated users; the hash in the key is the replicated one
            rec = self.verified_record(userid, password)
            if rec is not None:
                return accounts.mirror(userid, rec), None
            rec = state.user(userid)
            result = super().authenticate_credentials(userid, password, request)  # ReplicatedUserBackend
            if rec is not None:
                _cache.add(_cache.key(userid, password, rec["password"]))
            return result
        model = get_user_model()
        try:
            user = model._default_manager.get_by_natural_key(userid)
        except model.DoesNotExist:
            user = None
        if user is not None and user.is_active:
            key = _cache.key(userid, password, user.password)
            if _cache.hit(key):
                return user, None
        result = super().authenticate_credentials(userid, password, request)
        if user is not None:
            _cache.add(_cache.key(userid, password, result[0].password))
        return result


class ReplicatedTokenAuthentication(TokenAuthentication):
    """``Authorization: Token <key>``: a replicated token (named, expiring, revocable; see ``accounts``).

    Refused (401) when unknown, revoked, expired (by this node's clock) or when its user is
    deleted or inactive. Without a replicated state here: DRF's local ``authtoken`` table.
    """

    def authenticate_credentials(self, key):
        if accounts.directory() is None:
            return super().authenticate_credentials(key)
        found = accounts.token_user(key)
        if found is None:
            raise AuthenticationFailed("Invalid, expired or revoked token")
        return found


class BearerTokenAuthentication(ReplicatedTokenAuthentication):
    """:class:`ReplicatedTokenAuthentication` under the ``Bearer`` keyword."""

    keyword = "Bearer"
