"""The bounded cache of verified Basic credentials (see :mod:`webapp.connect.api.authentication`).

Owns the cache alone so that both the authentication classes and the account
bootstrap (which seeds it with the admin password it has just hashed) can use it
without importing each other. Holds HMACs only, never a password.
"""
from __future__ import annotations

import hashlib
import hmac

from django.conf import settings

from webapp.runtime.recent import RecentKeys

__all__ = ["cache", "remember_verified"]


class _VerifiedCache(RecentKeys):
    """Keys (HMACs of user, password and stored hash) verified within ``ttl`` seconds; at most ``max_entries``."""

    def __init__(self, max_entries: int = 4096, ttl: float = 300.0):
        super().__init__(ttl, max_entries)

    def key(self, username: str, password: str, stored_hash: str) -> str:
        msg = "\x00".join((username, password, stored_hash)).encode()
        return hmac.new(settings.SECRET_KEY.encode(), msg, hashlib.sha256).hexdigest()

    def hit(self, key: str) -> bool:
        """Whether ``key`` was verified within ``ttl`` seconds (``key in cache``)."""
        return key in self


cache = _VerifiedCache()


def remember_verified(username: str, password: str, stored_hash: str) -> None:
    """Count ``(username, password)`` as verified against ``stored_hash`` without a PBKDF2 check.

    Only for a hash this process has just computed from that very password
    (``runnode`` setting the admin user's password at start): the check would
    repeat the same ~0.3 s of PBKDF2 on the first request and prove nothing new.
    """
    cache.add(cache.key(username, password, stored_hash))
