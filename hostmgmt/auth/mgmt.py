"""Authentication of the management API (`/api/v1`): the bearer management or plugin token."""

from __future__ import annotations

import re
from dataclasses import dataclass

from django.conf import settings
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed
from rest_framework.permissions import BasePermission

from hostmgmt.auth import tokens
from hostmgmt.auth.secrets import is_token_shaped, parse_bearer, tokens_equal

REALM = 'Bearer realm="hostmgmt"'


@dataclass(frozen=True)
class MgmtPrincipal:
    """Who called: `admin` (management token or tokenless host) or `plugin` (plugin token)."""

    role: str

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


ADMIN = MgmtPrincipal("admin")
PLUGIN = MgmtPrincipal("plugin")

# Routes the plugin token may not use (path below /api/v1, methods or None for all).
_PLUGIN_DENIED: list[tuple[re.Pattern, frozenset[str] | None]] = [
    (re.compile(r"^/hooks(/.*)?$"), None),
    (re.compile(r"^/store(/.*)?$"), None),
    (re.compile(r"^/update(/.*)?$"), None),
    (re.compile(r"^/support-bundles(/.*)?$"), None),
    (re.compile(r"^/host/(restart|shutdown)/?$"), None),
    (re.compile(r"^/pair(/.*)?$"), None),
    (re.compile(r"^/native/(pair|pending)(/.*)?$"), None),
    (re.compile(r"^/(native/)?clients/[^/]+/?$"), frozenset({"DELETE"})),
    (re.compile(r"^/library/custom/[^/]+/?$"), frozenset({"GET"})),
    (re.compile(r"^/plugins/[^/]+/ui-credential/?$"), None),
]


def plugin_denied(path: str, method: str) -> bool:
    sub = path[len("/api/v1") :] if path.startswith("/api/v1") else path
    for pattern, methods in _PLUGIN_DENIED:
        if pattern.match(sub) and (methods is None or method.upper() in methods):
            return True
    return False


def resolve(header: bytes) -> MgmtPrincipal | None:
    """The principal an Authorization header proves, or None. Shared with the SSE endpoint."""
    token = parse_bearer(header)
    if token is None or not is_token_shaped(token):
        return None
    admin = tokens.current_token(tokens.MGMT)
    if admin and tokens_equal(token, admin):
        return ADMIN
    plugin = tokens.current_token(tokens.PLUGIN)
    if plugin and tokens_equal(token, plugin):
        return PLUGIN
    return None


def tokenless() -> bool:
    return settings.HOST_NO_MGMT_TOKEN


class MgmtTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <64 hex>`; a host started with --no-mgmt-token needs none."""

    def authenticate(self, request):
        header = get_authorization_header(request)
        if tokenless() and not header:
            return (ADMIN, None)
        if not header:
            return None
        principal = resolve(header)
        if principal is None:
            if tokenless():
                return (ADMIN, None)
            raise AuthenticationFailed("invalid or missing bearer token")
        return (principal, None)

    def authenticate_header(self, request):
        return REALM


class MgmtPermission(BasePermission):
    message = "the plugin token may not use this route"

    def has_permission(self, request, view):
        principal = request.user
        if not isinstance(principal, MgmtPrincipal):
            return False
        return not (principal.role == "plugin" and plugin_denied(request.path, request.method))
