"""Authentication of the admin API (`/api`): scoped bearer tokens first, then HTTP Basic."""

from __future__ import annotations

import base64
import binascii
from dataclasses import dataclass, field

from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied, Throttled
from rest_framework.permissions import BasePermission

from access import api_tokens, credentials, throttle
from access.scopes import ADMIN, CONFIG_EXEC
from access.secrets import parse_bearer

REALM = 'Basic realm="Streaming Host", charset="UTF-8"'


@dataclass(frozen=True)
class AdminPrincipal:
    name: str
    via: str  # "basic", "token" or "session"
    scopes: frozenset[str] = field(default_factory=frozenset)

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def is_admin(self) -> bool:
        return self.via in ("basic", "session") or ADMIN in self.scopes

    def has_scope(self, scope: str) -> bool:
        if self.is_admin:
            return True
        return scope != "admin" and scope in self.scopes

    @property
    def client_id(self) -> str:
        return f"{self.via}:{self.name}"


def client_ip(request) -> str:
    return request.META.get("REMOTE_ADDR", "") or "unknown"


def _basic(header: bytes) -> tuple[str, str] | None:
    parts = header.split()
    if len(parts) != 2 or parts[0].lower() != b"basic":
        return None
    try:
        decoded = base64.b64decode(parts[1], validate=True).decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return None
    if ":" not in decoded:
        return None
    username, password = decoded.split(":", 1)
    return username, password


class AdminAuthentication(BaseAuthentication):
    """Bearer `<64 hex>` scoped token, else Basic admin credentials, else the console session."""

    def authenticate(self, request):
        header = get_authorization_header(request)
        ip = client_ip(request)
        if not header:
            return self._session(request)
        wait = throttle.blocked_for(ip)
        if wait:
            raise Throttled(wait=wait, detail="too many failed logins; try again later")
        principal = self._check(header)
        if principal is None:
            throttle.record_failure(ip)
            raise AuthenticationFailed("invalid credentials")
        if principal.via == "basic":
            # Only the password clears the bucket: a working scoped token must not let its
            # holder go on guessing the admin password.
            throttle.record_success(ip)
        return (principal, None)

    @staticmethod
    def _check(header: bytes) -> AdminPrincipal | None:
        token = parse_bearer(header)
        if token is not None:
            stored = api_tokens.authenticate(token)
            if stored is None:
                return None
            return AdminPrincipal(stored.name, "token", frozenset(stored.scopes))
        basic = _basic(header)
        if basic is None:
            return None
        user = credentials.verify(*basic, shared=True)
        if user is None:
            return None
        return AdminPrincipal(user.get_username(), "basic")

    @staticmethod
    def _session(request):
        # The web console signs in through Django's session; its writes carry Django's CSRF.
        user = getattr(request._request, "user", None)
        if user is not None and user.is_authenticated and user.is_superuser:
            return (AdminPrincipal(user.get_username(), "session"), None)
        return None

    def authenticate_header(self, request):
        return REALM


class ScopePermission(BasePermission):
    """The view's `scopes` maps an HTTP method to the scope it needs (`admin` = Basic or `*`).

    A write whose body carries fields that run commands or choose files (the view's
    `exec_fields`, from the marks in `hostconfig/schema.py`) also needs `config:exec`:
    without that, `config:set` would be code execution as the host user under a weaker name.
    """

    message = "this credential lacks the scope this route needs"

    def has_permission(self, request, view):
        principal = request.user
        if not isinstance(principal, AdminPrincipal):
            return False
        needed = view.required_scope(request.method)
        if needed is None:
            return True
        allowed = principal.is_admin if needed == "admin" else principal.has_scope(needed)
        if allowed and not principal.has_scope(CONFIG_EXEC):
            refuse_exec_fields(view.exec_fields(request))
        return allowed


def refuse_exec_fields(fields: dict[str, str]) -> None:
    """403 naming each field and why it needs `config:exec` (or the admin password)."""
    if fields:
        why = "; ".join(f"{name} {reason}" for name, reason in sorted(fields.items()))
        raise PermissionDenied(
            f"this credential may not write {', '.join(sorted(fields))}: {why}; "
            f"that needs the {CONFIG_EXEC} scope or the admin password"
        )
