"""REST authentication: HTTP basic with a bounded cache of verified credentials, and API tokens.

Tokens are DRF's ``rest_framework.authtoken`` (one per user, in the node's
SQLite), sent as ``Authorization: Token <key>`` or ``Authorization: Bearer <key>``;
create one with ``manage.py drf_create_token USER`` or ``POST /raftconnect/v1/tokens``.

Django hashes passwords with PBKDF2 (about a million iterations, ~0.3 s of CPU
here), which is right for a login form and wrong for an API where automation
sends basic credentials on every request. After one full check, an entry keyed
by an HMAC of ``(username, password, stored password hash)`` is kept for
``ttl`` seconds, so a repeat request costs one HMAC. Changing the password
changes the stored hash and so misses the cache; the cache holds at most
``max_entries`` (oldest evicted): memory stays bounded.
"""
from __future__ import annotations

import hashlib
import hmac
import threading
import time
from collections import OrderedDict

from django.conf import settings
from django.contrib.auth import get_user_model
from rest_framework.authentication import BasicAuthentication, TokenAuthentication

__all__ = ["CachedBasicAuthentication", "BearerTokenAuthentication", "remember_verified"]


class _VerifiedCache:
    def __init__(self, max_entries: int = 4096, ttl: float = 300.0):
        self.max_entries = max_entries
        self.ttl = ttl
        self._data: OrderedDict[str, float] = OrderedDict()
        self._lock = threading.Lock()

    def key(self, username: str, password: str, stored_hash: str) -> str:
        msg = "\x00".join((username, password, stored_hash)).encode()
        return hmac.new(settings.SECRET_KEY.encode(), msg, hashlib.sha256).hexdigest()

    def hit(self, key: str) -> bool:
        with self._lock:
            expires = self._data.get(key)
            if expires is None:
                return False
            if expires < time.monotonic():
                del self._data[key]
                return False
            return True

    def add(self, key: str) -> None:
        with self._lock:
            self._data[key] = time.monotonic() + self.ttl
            self._data.move_to_end(key)
            while len(self._data) > self.max_entries:
                self._data.popitem(last=False)


_cache = _VerifiedCache()


def remember_verified(username: str, password: str, stored_hash: str) -> None:
    """Count ``(username, password)`` as verified against ``stored_hash`` without a PBKDF2 check.

    Only for a hash this process has just computed from that very password
    (``runnode`` setting the admin user's password at start): the check would
    repeat the same ~0.3 s of PBKDF2 on the first request and prove nothing new.
    """
    _cache.add(_cache.key(username, password, stored_hash))


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

    def authenticate_credentials(self, userid, password, request=None):
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


class BearerTokenAuthentication(TokenAuthentication):
    """DRF's token authentication under the ``Bearer`` keyword (the ``Token`` keyword is DRF's own class)."""

    keyword = "Bearer"
