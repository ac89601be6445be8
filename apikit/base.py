"""Base views of the two APIs: each carries its authentication, permissions and error shape.

Every route of an app subclasses one of these; nothing else decides who may call what.
"""

from __future__ import annotations

from django.http import HttpResponseRedirect, QueryDict
from rest_framework.exceptions import PermissionDenied
from rest_framework.views import APIView

from access import credentials
from access import csrf as csrf_rules
from access.admin import AdminAuthentication, AdminPrincipal, ScopePermission
from access.mgmt import (
    ConsoleSessionAuthentication,
    MgmtPermission,
    MgmtTokenAuthentication,
)
from apikit.errors import ApiError

UNSAFE_METHODS = {"POST", "PUT", "PATCH", "DELETE"}


class MgmtAPIView(APIView):
    """A route of the management API (`/api/v1`)."""

    authentication_classes = [MgmtTokenAuthentication]
    permission_classes = [MgmtPermission]


class ConsoleMgmtAPIView(MgmtAPIView):
    """A management route the web console calls too: the bearer token as on every route,
    else the operator's console session with Django's CSRF check on writes. Answers are
    never cached (they carry fingerprints and the armed PIN)."""

    authentication_classes = [MgmtTokenAuthentication, ConsoleSessionAuthentication]

    def finalize_response(self, request, response, *args, **kwargs):
        response = super().finalize_response(request, response, *args, **kwargs)
        response["Cache-Control"] = "no-store"
        return response


class OpenMgmtAPIView(APIView):
    """A management route that needs no token (health only)."""

    authentication_classes: list = []
    permission_classes: list = []


class FirstRunRedirect(Exception):
    pass


class AdminAPIView(APIView):
    """A route of the admin API (`/api`).

    `scopes` maps HTTP methods to the scope each needs; `admin` means Basic credentials or a `*`
    token; a method missing from the map needs admin. State-changing methods are CSRF-checked
    unless `csrf_exempt_methods` names them.
    """

    authentication_classes = [AdminAuthentication]
    permission_classes = [ScopePermission]
    scopes: dict[str, str] = {}
    csrf_exempt_methods: frozenset[str] = frozenset()

    def required_scope(self, method: str) -> str | None:
        if method in ("HEAD", "OPTIONS"):
            method = "GET"
        return self.scopes.get(method, "admin")

    def exec_fields(self, request) -> dict[str, str]:
        """Fields of this write that run commands or choose files (name -> why); they need
        `config:exec` beside the method's scope (`ScopePermission`). None by default."""
        return {}

    def permission_denied(self, request, message=None, code=None):
        unauthenticated = request.authenticators and not request.successful_authenticator
        if unauthenticated and _wants_html(request) and not credentials.credentials_exist():
            raise FirstRunRedirect()
        super().permission_denied(request, message, code)

    def check_permissions(self, request):
        super().check_permissions(request)
        principal = request.user
        if request.method in UNSAFE_METHODS and request.method not in self.csrf_exempt_methods:
            client_id = principal.client_id if isinstance(principal, AdminPrincipal) else None
            reason = csrf_rules.check(request, client_id or request.META.get("REMOTE_ADDR", ""))
            if reason:
                raise PermissionDenied(reason)

    def handle_exception(self, exc):
        if isinstance(exc, FirstRunRedirect):
            return HttpResponseRedirect("/welcome", status=307)
        return super().handle_exception(exc)


def _wants_html(request) -> bool:
    return "text/html" in request.headers.get("Accept", "")


def json_body(request):
    """The parsed JSON body; an absent body is a 400, never "every field omitted"."""
    data = request.data
    if request.stream is None or isinstance(data, QueryDict):
        raise ApiError(400, "a JSON request body is required")
    return data


def json_object(request) -> dict:
    """The request body, which must be a JSON object."""
    data = request.data
    if not isinstance(data, dict):
        raise ApiError(400, "request body must be a JSON object")
    return data


def ok(**fields) -> dict:
    """The admin API's success envelope around `fields`."""
    return {"status": True, "status_code": 200, **fields}


def int_param(request, name: str, default: int, low: int, high: int | None = None) -> int:
    """A query integer: 400 when malformed or below `low`, clamped to `high`."""
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        return default
    try:
        value = int(raw)
    except ValueError:
        raise ApiError(400, f"{name} must be an integer") from None
    if value < low:
        raise ApiError(400, f"{name} must be at least {low}")
    return min(value, high) if high is not None else value
