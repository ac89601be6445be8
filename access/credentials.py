"""The admin credentials: one Django superuser, so the Django admin pages accept them too.

Password hashes are Django's (PBKDF2, deliberately slow). HTTP Basic sends the password on every
request, so a verified header is remembered for a few minutes after its last use, by a keyed
digest that includes the stored hash: changing the password invalidates it at once, and the
plaintext is never kept.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import threading
import time

from django.contrib.auth import get_user_model, password_validation
from django.core.exceptions import ValidationError
from django.db import transaction

from common import dbversion

_CACHE_TTL = 300.0
_CACHE_MAX = 256
_cache_key = secrets.token_bytes(32)
_cache: dict[bytes, float] = {}
_inflight: dict[bytes, threading.Lock] = {}
_lock = threading.Lock()
_now = time.monotonic


def admin_user():
    User = get_user_model()
    return User.objects.filter(is_superuser=True, is_active=True).order_by("id").first()


def credentials_exist() -> bool:
    return admin_user() is not None


def verify(username: str, password: str, *, shared: bool = False):
    """The admin user when `username`/`password` match it, else None.

    `shared=True` (HTTP Basic, which sends the password with every request) answers from a
    user object kept until the database changes, instead of a query per request; its caller
    must only read it. A login, which saves `last_login` on the user, gets its own."""
    user = dbversion.cached("credentials.admin_user", admin_user) if shared else admin_user()
    if user is None:
        # Spend comparable time so the answer does not reveal whether credentials exist.
        get_user_model()().set_password(password)
        return None
    digest = hmac.new(
        _cache_key, f"{username}\0{password}\0{user.password}".encode(), hashlib.sha256
    ).digest()
    if _remembered(digest):
        return user
    # One check per header at a time: when a remembered header expired, or before the first,
    # every request carrying it in that second would otherwise run its own PBKDF2 (about a
    # second of CPU each); under 70 Basic requests a second that stalled the API for 10 s.
    with _lock:
        gate = _inflight.setdefault(digest, threading.Lock())
    with gate:
        try:
            if _remembered(digest):
                return user
            if not hmac.compare_digest(username.encode(), user.get_username().encode()):
                user.check_password(password)  # same cost as a good username
                return None
            if not user.check_password(password):
                return None
            with _lock:
                if len(_cache) >= _CACHE_MAX:
                    _cache.clear()
                _cache[digest] = _now() + _CACHE_TTL
            return user
        finally:
            with _lock:
                _inflight.pop(digest, None)


def _remembered(digest: bytes) -> bool:
    """Whether this header was verified within the last `_CACHE_TTL` of its use (each use
    extends it: a script polling all day never waits for a fresh PBKDF2)."""
    now = _now()
    with _lock:
        expiry = _cache.get(digest)
        if expiry and expiry > now:
            _cache[digest] = now + _CACHE_TTL
            return True
    return False


class CredentialError(ValueError):
    """Refused credentials; `field` names the request field at fault where there is one."""

    def __init__(self, message: str, field: str | None = None):
        super().__init__(message)
        self.field = field


class AlreadySetUp(CredentialError):
    """The first admin exists already: first-run creation never replaces it."""


def _check_username(username: str) -> None:
    if not username or len(username) > 150 or any(ord(c) < 33 for c in username):
        raise CredentialError(
            "username must be 1-150 printable characters without spaces", "username"
        )


def check_password_rules(username: str, password: str, field: str = "password") -> None:
    """Django's AUTH_PASSWORD_VALIDATORS (length 8+, not common, not like the username).

    Applied where a person chooses a password (`/welcome`, `/api/password`), not in
    `set_credentials`, so tools and test fixtures can still set any password directly.
    """
    if not password:
        raise CredentialError("password must not be empty", field)
    try:
        password_validation.validate_password(password, get_user_model()(username=username))
    except ValidationError as exc:
        raise CredentialError(" ".join(exc.messages), field) from None


def set_credentials(username: str, password: str) -> None:
    """Create or replace the admin credentials."""
    _check_username(username)
    if not password:
        raise CredentialError("password must not be empty", "password")
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


_first_run_lock = threading.Lock()


def create_first_admin(username: str, password: str):
    """Create the first admin, or raise AlreadySetUp when one exists: never a replacement.

    The existence check and the insert share one transaction, which this host's SQLite
    settings open with BEGIN IMMEDIATE (the write lock, taken before the check), so a racing
    request in another thread or process waits and then sees the winner; the lock serialises
    this process's threads even on a database without that mode. The hash is computed before
    the lock so the slow part does not hold it.
    """
    _check_username(username)
    if not password:
        raise CredentialError("password must not be empty", "password")
    User = get_user_model()
    user = User(username=username, is_superuser=True, is_staff=True, is_active=True)
    user.set_password(password)
    with _first_run_lock, transaction.atomic():
        if admin_user() is not None:
            raise AlreadySetUp("admin credentials are already set")
        user.save()
    with _lock:
        _cache.clear()
    return user
