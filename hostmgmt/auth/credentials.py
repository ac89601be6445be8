"""The admin credentials: one Django superuser, so the Django admin pages accept them too.

Password hashes are Django's (PBKDF2, deliberately slow). HTTP Basic sends the password on every
request, so a verified header is remembered for a few minutes by a keyed digest that includes the
stored hash: changing the password invalidates it at once, and the plaintext is never kept.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time

from django.contrib.auth import get_user_model
from django.db import transaction

_CACHE_TTL = 300.0
_CACHE_MAX = 256
_cache_key = secrets.token_bytes(32)
_cache: dict[bytes, float] = {}
_lock = threading.Lock()


def admin_user():
    User = get_user_model()
    return User.objects.filter(is_superuser=True, is_active=True).order_by("id").first()


def credentials_exist() -> bool:
    return admin_user() is not None


def verify(username: str, password: str):
    """The admin user when `username`/`password` match it, else None."""
    user = admin_user()
    if user is None:
        # Spend comparable time so the answer does not reveal whether credentials exist.
        get_user_model()().set_password(password)
        return None
    digest = hmac.new(
        _cache_key, f"{username}\0{password}\0{user.password}".encode(), hashlib.sha256
    ).digest()
    now = time.monotonic()
    with _lock:
        expiry = _cache.get(digest)
        if expiry and expiry > now:
            return user
    if not hmac.compare_digest(username.encode(), user.get_username().encode()):
        user.check_password(password)  # same cost as a good username
        return None
    if not user.check_password(password):
        return None
    with _lock:
        if len(_cache) >= _CACHE_MAX:
            _cache.clear()
        _cache[digest] = now + _CACHE_TTL
    return user


class CredentialError(ValueError):
    pass


def set_credentials(username: str, password: str) -> None:
    """Create or replace the admin credentials."""
    if not username or len(username) > 150 or any(ord(c) < 33 for c in username):
        raise CredentialError("username must be 1-150 printable characters without spaces")
    if not password:
        raise CredentialError("password must not be empty")
    User = get_user_model()
    with transaction.atomic():
        user = admin_user()
        if user is None:
            user = User(is_superuser=True, is_staff=True, is_active=True)
        user.username = username
        user.set_password(password)
        user.save()
    with _lock:
        _cache.clear()
