"""Authentication of the management API (`/api/v1`): the bearer management or plugin token.

The plugin token is an allow list (spec: it "covers status, library, sessions and events"):
a route reaches a plugin only when `PLUGIN_ALLOWED` names its URL pattern and the method, so
a route added later is denied to plugins until someone classifies it. `PLUGIN_DENIED` records
why every other route is refused; the auth matrix test checks the two tables cover the URL map.
A plugin's own token (`plugin_tokens`, given by the plugin runner) is a plugin principal with
its id: it also reaches `PLUGIN_OWN` routes whose `plugin_id` is its own.

A fleet token (`fleet_tokens`, minted by this host's admin for a fleet host that manages it) is
an allow list of its own, `FLEET_ALLOWED`, under the same rule: every route not named there is
refused, so a route added later stays out of a fleet host's reach until classified.

A host started with `--no-mgmt-token` has no credential to check, so any web page the
operator opens could otherwise POST here: state-changing requests must prove they are not a
cross-site "simple" request (`tokenless_write_refusal`).
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.middleware.csrf import CsrfViewMiddleware
from rest_framework.authentication import BaseAuthentication, get_authorization_header
from rest_framework.exceptions import AuthenticationFailed, PermissionDenied
from rest_framework.permissions import BasePermission

from access import fleet_tokens, plugin_tokens, tokens
from access.origin import allowed_origins, origin_matches
from access.secrets import is_token_shaped, parse_bearer, tokens_equal

REALM = 'Bearer realm="hostmgmt"'
V1_ROUTE_PREFIX = "api/v1/"
PLUGIN_FORBIDDEN = "the plugin token may not use this route"
FLEET_FORBIDDEN = "the fleet token may not use this route"


@dataclass(frozen=True)
class MgmtPrincipal:
    """Who called: `admin` (management token or tokenless host), `plugin` (plugin token) or
    `fleet` (a fleet token; `fleet_name` is the name it was minted under).

    `tokenless` marks the admin a `--no-mgmt-token` host grants to a caller without a token.
    """

    role: str
    tokenless: bool = False
    plugin_id: str | None = (
        None  # a per-plugin token's id (access/plugin_tokens.py); None otherwise
    )
    fleet_name: str | None = None

    @property
    def is_authenticated(self) -> bool:
        return True

    @property
    def is_admin(self) -> bool:
        return self.role == "admin"


ADMIN = MgmtPrincipal("admin")
TOKENLESS_ADMIN = MgmtPrincipal("admin", tokenless=True)
PLUGIN = MgmtPrincipal("plugin")

# The plugin token's whole reach: URL pattern below /api/v1/ -> methods (HEAD counts as GET).
PLUGIN_ALLOWED: dict[str, frozenset[str]] = {
    # status
    "health": frozenset({"GET"}),
    "host": frozenset({"GET"}),
    "status": frozenset({"GET"}),
    # events
    "events": frozenset({"GET"}),
    # library (GET of one custom entry shows its detect paths and prep commands: not here)
    "library": frozenset({"GET"}),
    "library/scan": frozenset({"POST"}),
    "library/art/<str:entry_id>/<str:kind>": frozenset({"GET"}),
    "library/custom": frozenset({"POST"}),
    "library/custom/<str:entry_id>": frozenset({"PUT", "DELETE"}),
    "library/provider/<str:provider>": frozenset({"PUT", "DELETE"}),
    "library/scanners": frozenset({"GET"}),
    "library/scanners/<str:scanner>": frozenset({"PUT"}),
    # sessions: their status and ending them
    "session": frozenset({"DELETE"}),
    "session/settings": frozenset({"GET"}),
    "streams": frozenset({"GET"}),
    "streams/<str:session_id>": frozenset({"DELETE"}),
    "game/end": frozenset({"POST"}),
    # plugins: the directory (secret-free)
    "plugins": frozenset({"GET"}),
    # who the token is (a fleet host checks a presented token with it)
    "fleet/whoami": frozenset({"GET"}),
}

# Routes a plugin's OWN token (bound to an id, access/plugin_tokens.py) may call for its own id only
# (the `plugin_id` path parameter); the host's shared plugin token and other plugins get 403.
PLUGIN_OWN: dict[str, frozenset[str]] = {
    "plugins/<str:plugin_id>": frozenset({"PUT", "DELETE"}),
    "plugins/<str:plugin_id>/ui-credential": frozenset({"GET"}),
}

# Every other v1 route, with the reason it is outside the plugin's four families.
PLUGIN_DENIED: dict[str, str] = {
    "host/config": "host configuration",
    "host/compat": "host configuration",
    "host/restart": "host lifecycle",
    "host/shutdown": "host lifecycle",
    "logs": "host log",
    "update/status": "updater",
    "update/check": "updater",
    "update/apply": "updater",
    "hooks": "hook registration",
    "hooks/test": "hook registration",
    "hooks/deliveries": "hook registration",
    "clients": "pairing administration",
    "clients/<str:fingerprint>": "pairing administration",
    "native/pending": "pairing administration",
    "native/pending/<int:pending_id>/approve": "pairing administration",
    "native/pending/<int:pending_id>/deny": "pairing administration",
    "native/pair": "pairing administration",
    "native/pair/arm": "pairing administration",
    "native/clients": "pairing administration",
    "native/clients/<str:fingerprint>": "pairing administration",
    "capture/methods": "capture configuration",
    "compositors": "display configuration",
    "compositors/headless": "display configuration",
    "diagnostics/preflight": "host diagnostics",
    "display/monitors": "display configuration",
    "display/settings": "display configuration",
    "display/layout": "display configuration",
    "display/presets": "display configuration",
    "display/presets/<str:preset_id>": "display configuration",
    "display/release": "display configuration",
    "display/pin": "display configuration",
    "display/unpin": "display configuration",
    "display/state": "display configuration",
    "gpus": "GPU selection",
    "gpus/preference": "GPU selection",
    "store/catalog": "plugin store",
    "store/refresh": "plugin store",
    "store/installed": "plugin store",
    "store/install": "plugin store",
    "store/uninstall": "plugin store",
    "store/jobs": "plugin store",
    "store/jobs/<str:job_id>": "plugin store",
    "store/sources": "plugin store",
    "store/sources/<str:name>": "plugin store",
    "plugins/<str:plugin_id>": "another plugin's registration (own id only: PLUGIN_OWN)",
    "plugins/<str:plugin_id>/ui-credential": "another plugin's UI credential (own id only)",
    "store/runtime": "plugin store",
    "streams/<str:session_id>/thumbnail": "the screen's contents (operator only)",
    "fleet/tokens": "fleet administration",
    "fleet/tokens/<str:name>": "fleet administration",
    "fleet/identity": "fleet administration",
    "fleet/members": "fleet administration",
    "fleet/members/<int:member_id>": "fleet administration",
    # The fleet principal's (a fleet host vouching for a player it places here), never a plugin's.
    "fleet/tickets": "fleet placement",
    "fleet/members/<int:member_id>/sessions": "fleet administration",
    "fleet/members/<int:member_id>/sessions/<str:session_id>": "fleet administration",
    "fleet/events": "the fleet's events: other hosts' (operator only)",
}

# The fleet token's whole reach (docs/fleet.md): what a fleet host shows of its members and the
# sessions it ends there. Reads of configuration that carries commands or paths are not here.
FLEET_ALLOWED: dict[str, frozenset[str]] = {
    # status and health
    "health": frozenset({"GET"}),
    "host": frozenset({"GET"}),
    "status": frozenset({"GET"}),
    "fleet/whoami": frozenset({"GET"}),
    # events
    "events": frozenset({"GET"}),
    # library (the listing and its art; one custom entry's detect paths and prep are not here)
    "library": frozenset({"GET"}),
    "library/art/<str:entry_id>/<str:kind>": frozenset({"GET"}),
    # GPUs and displays: what is there and what is free
    "gpus": frozenset({"GET"}),
    "display/state": frozenset({"GET"}),
    "display/monitors": frozenset({"GET"}),
    # sessions: their status and ending them
    "session": frozenset({"DELETE"}),
    "session/settings": frozenset({"GET"}),
    "streams": frozenset({"GET"}),
    "streams/<str:session_id>": frozenset({"DELETE"}),
    # placement: a one-time approval for a browser player the fleet host places here
    "fleet/tickets": frozenset({"POST"}),
}


def plugin_allowed(route: str | None, method: str) -> bool:
    """Whether the plugin token may call `method` on the URL pattern `route` (as Django's
    `resolver_match.route` spells it). Unknown or unclassified routes are refused."""
    if not route or not route.startswith(V1_ROUTE_PREFIX):
        return False
    methods = PLUGIN_ALLOWED.get(route[len(V1_ROUTE_PREFIX) :])
    if methods is None:
        return False
    method = method.upper()
    if method == "HEAD":
        method = "GET"
    if method == "OPTIONS":
        return True
    return method in methods


def fleet_allowed(route: str | None, method: str) -> bool:
    """Whether a fleet token may call `method` on the URL pattern `route`; unknown or
    unclassified routes are refused."""
    if not route or not route.startswith(V1_ROUTE_PREFIX):
        return False
    methods = FLEET_ALLOWED.get(route[len(V1_ROUTE_PREFIX) :])
    if methods is None:
        return False
    method = method.upper()
    method = "GET" if method == "HEAD" else method
    return method == "OPTIONS" or method in methods


def plugin_own_allowed(route: str | None, method: str, kwargs: dict, plugin_id: str | None):
    """Whether a token bound to `plugin_id` may call `method` on `route` for the path's id."""
    if not plugin_id or not route or not route.startswith(V1_ROUTE_PREFIX):
        return False
    methods = PLUGIN_OWN.get(route[len(V1_ROUTE_PREFIX) :])
    if methods is None or kwargs.get("plugin_id") != plugin_id:
        return False
    method = method.upper()
    method = "GET" if method == "HEAD" else method
    return method == "OPTIONS" or method in methods


def plugin_denied(request, principal: MgmtPrincipal | None = None) -> bool:
    """The plugin token's verdict for a Django (or DRF) request that has been resolved."""
    match = getattr(request, "resolver_match", None)
    route = getattr(match, "route", None)
    if plugin_allowed(route, request.method):
        return False
    plugin_id = principal.plugin_id if principal is not None else None
    kwargs = getattr(match, "kwargs", None) or {}
    return not plugin_own_allowed(route, request.method, kwargs, plugin_id)


def scope_refusal(request, principal: MgmtPrincipal) -> str | None:
    """Why a plugin or fleet principal may not make this (resolved) request, or None."""
    if principal.role == "plugin" and plugin_denied(request, principal):
        return PLUGIN_FORBIDDEN
    if principal.role == "fleet":
        match = getattr(request, "resolver_match", None)
        if not fleet_allowed(getattr(match, "route", None), request.method):
            return FLEET_FORBIDDEN
    return None


# --- tokenless mode: no cross-site simple writes -------------------------------------------

SAFE_METHODS = frozenset({"GET", "HEAD", "OPTIONS"})
TOKENLESS_CROSS_SITE = "cross-site request refused: this host runs without a management token"
TOKENLESS_SIMPLE = (
    "state-changing request refused: without a management token send it same-origin, "
    "with Content-Type: application/json, or with an X-Requested-With header"
)


def _is_json(content_type: str) -> bool:
    media = content_type.split(";", 1)[0].strip().lower()
    return media == "application/json" or (
        media.startswith("application/") and media.endswith("+json")
    )


def tokenless_write_refusal(request) -> str | None:
    """Why a state-changing request to a tokenless host is refused, or None when it may pass.

    A browser sends a cross-site request without a CORS preflight only when it is "simple"
    (form content types, no custom headers), and it says where it came from in `Origin` and
    `Sec-Fetch-Site`. So a write passes when it is same-origin, or carries a header no
    cross-site page can set without our (never granted) preflight consent: a JSON
    Content-Type or `X-Requested-With`. `Authorization` does not count: browsers replay
    cached Basic credentials on cross-site requests by themselves. A request that names a
    foreign origin is refused whatever else it carries.
    """
    if request.method.upper() in SAFE_METHODS:
        return None
    headers = request.headers
    fetch_site = headers.get("Sec-Fetch-Site", "").strip().lower()
    origin = headers.get("Origin")
    if fetch_site and fetch_site not in ("same-origin", "none"):
        return TOKENLESS_CROSS_SITE
    if origin is not None:
        if origin == "null" or not origin_matches(origin, allowed_origins(request.get_host())):
            return TOKENLESS_CROSS_SITE
        return None
    if fetch_site:
        return None
    if _is_json(headers.get("Content-Type", "")) or headers.get("X-Requested-With"):
        return None
    return TOKENLESS_SIMPLE


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
    plugin_id = plugin_tokens.lookup(token)
    if plugin_id:
        return MgmtPrincipal("plugin", plugin_id=plugin_id)
    fleet_name = fleet_tokens.lookup(token)
    if fleet_name:
        return MgmtPrincipal("fleet", fleet_name=fleet_name)
    return None


def tokenless() -> bool:
    return settings.HOST_NO_MGMT_TOKEN


class MgmtTokenAuthentication(BaseAuthentication):
    """`Authorization: Bearer <64 hex>`; a host started with --no-mgmt-token needs none."""

    def authenticate(self, request):
        header = get_authorization_header(request)
        if tokenless() and not header:
            return (TOKENLESS_ADMIN, None)
        if not header:
            return None
        principal = resolve(header)
        if principal is None:
            if tokenless():
                return (TOKENLESS_ADMIN, None)
            raise AuthenticationFailed("invalid or missing bearer token")
        return (principal, None)

    def authenticate_header(self, request):
        return REALM


class MgmtPermission(BasePermission):
    message = PLUGIN_FORBIDDEN

    def has_permission(self, request, view):
        principal = request.user
        if not isinstance(principal, MgmtPrincipal):
            return False
        if principal.tokenless:
            reason = tokenless_write_refusal(request)
            if reason:
                raise PermissionDenied(reason)
            return True
        reason = scope_refusal(request, principal)
        if reason:
            raise PermissionDenied(reason)
        return True


# --- the web console's session ---------------------------------------------------------------

CONSOLE_ADMIN = MgmtPrincipal("admin")


class _CsrfCheck(CsrfViewMiddleware):
    def _reject(self, request, reason):
        return reason


def csrf_failure(request) -> str | None:
    """Django's CSRF verdict on a request (cookie + `X-CSRFToken`, Origin/Referer against the
    host): None when it passes, else the reason. Safe methods always pass."""
    check = _CsrfCheck(lambda _request: None)
    check.process_request(request)  # reads the CSRF cookie into request.META
    return check.process_view(request, None, (), {})


class ConsoleSessionAuthentication(BaseAuthentication):
    """The operator's console session (a Django superuser login) on a management route that
    opts in (`apikit.base.ConsoleMgmtAPIView`), so the browser never holds the
    management token. Writes must pass Django's CSRF check: a session cookie rides along on
    any request the browser sends, a cross-site one included."""

    def authenticate(self, request):
        user = getattr(request._request, "user", None)
        if user is None or not user.is_authenticated or not user.is_superuser:
            return None
        reason = csrf_failure(request._request)
        if reason:
            raise PermissionDenied(f"CSRF check failed: {reason}")
        return (CONSOLE_ADMIN, None)
