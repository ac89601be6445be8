"""What drf-spectacular cannot see by itself, for `/api/schema` and `/api/docs`.

- The security schemes of both APIs (bearer management/plugin token; admin Basic or scoped
  bearer token), from the two authentication classes.
- Hand-written routes that are plain (async) Django views rather than DRF views, so the
  generator never visits them: `GET /api/v1/events` (the SSE stream, `hooks/api/schema.py`).
  `settings.HOST_HAND_WRITTEN_ROUTES` is the table; `tests/hostmgmt/test_api_schema.py` checks
  that every `/api/...` route of the URL map is in the schema, so a new plain view without an
  entry there fails that test.
- The statuses the shared machinery answers on every route it guards (`document_errors`):
  authentication, scopes, origin and CSRF, login throttling, body parsing and limits, unknown
  path values, Redis out of reach; each with its API's error body. A view names only the
  statuses its own code answers (409, 429 ...) with `error(...)`, and marks itself
  `needs_redis = True` when it cannot answer without Redis.
  `tests/hostmgmt/test_api_conformance.py` sends hostile requests to every operation and fails
  on any status the document does not list.
"""

from __future__ import annotations

from django.conf import settings
from django.utils.module_loading import import_string
from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.utils import OpenApiResponse
from drf_spectacular.views import SpectacularAPIView
from rest_framework.negotiation import DefaultContentNegotiation


class SchemaView(SpectacularAPIView):
    """`/api/schema`: YAML by default, JSON on `?format=json` or `Accept: application/json`
    (the APIs' own negotiation always answers JSON, which would hide the YAML)."""

    content_negotiation_class = DefaultContentNegotiation


MGMT_SCHEME = "mgmtToken"
ADMIN_BASIC_SCHEME = "adminBasic"
ADMIN_TOKEN_SCHEME = "adminToken"

_MGMT_DEFINITION = {
    "type": "http",
    "scheme": "bearer",
    "description": (
        "Management token (64 hex, `mgmt-token` in the state dir) or the plugin token "
        "(`plugin-token`; covers status, library, sessions and events only: `GET /health`, "
        "`/host`, `/status`, `/events`, the library routes except `GET /library/custom/{id}`, "
        "`DELETE /session`, `POST /game/end`, `GET /session/settings`; 403 everywhere else), "
        "or a fleet token (`POST /fleet/tokens`; status, events, the library listing, GPUs, "
        "displays, and ending sessions; 403 everywhere else; docs/fleet.md). "
        "None needed on a host started with `--no-mgmt-token`, whose state-changing requests "
        "must then be same-origin or carry `Content-Type: application/json` or "
        "`X-Requested-With` (403 otherwise)."
    ),
}


class MgmtTokenScheme(OpenApiAuthenticationExtension):
    target_class = "access.mgmt.MgmtTokenAuthentication"
    name = MGMT_SCHEME

    def get_security_definition(self, auto_schema):
        return _MGMT_DEFINITION


class ConsoleSessionScheme(OpenApiAuthenticationExtension):
    """The web console's login session on the routes it calls (`ConsoleMgmtAPIView`)."""

    target_class = "access.mgmt.ConsoleSessionAuthentication"
    name = "consoleSession"

    def get_security_definition(self, auto_schema):
        return {
            "type": "apiKey",
            "in": "cookie",
            "name": "sessionid",
            "description": "the operator's console login; writes also need Django's CSRF token "
            "(`X-CSRFToken`)",
        }


class AdminScheme(OpenApiAuthenticationExtension):
    target_class = "access.admin.AdminAuthentication"
    name = [ADMIN_BASIC_SCHEME, ADMIN_TOKEN_SCHEME]

    def get_security_requirement(self, auto_schema):
        return [{ADMIN_BASIC_SCHEME: []}, {ADMIN_TOKEN_SCHEME: []}]  # either one

    def get_security_definition(self, auto_schema):
        return [
            {"type": "http", "scheme": "basic", "description": "admin credentials"},
            {
                "type": "http",
                "scheme": "bearer",
                "description": "scoped API token (`POST /api/tokens`); each route needs a scope",
            },
        ]


V1_ERROR = "ManagementError"
ADMIN_ERROR = "AdminError"
ERROR_COMPONENTS = {
    V1_ERROR: {
        "type": "object",
        "description": "Error body of the management API (`/api/v1`).",
        "properties": {
            "error": {"type": "string"},
            "fields": {
                "type": "array",
                "description": "400 only: one entry per invalid field (dotted path)",
                "items": {
                    "type": "object",
                    "properties": {"field": {"type": "string"}, "message": {"type": "string"}},
                    "required": ["field", "message"],
                },
            },
        },
        "required": ["error"],
    },
    ADMIN_ERROR: {
        "type": "object",
        "description": "Error body of the admin API (`/api`).",
        "properties": {
            "status": {"type": "boolean", "enum": [False]},
            "status_code": {"type": "integer"},
            "error": {"type": "string"},
        },
        "required": ["status", "status_code", "error"],
    },
}


def error(description: str) -> OpenApiResponse:
    """A status a view's own code answers; `document_errors` gives it its API's error body."""
    return OpenApiResponse(description=description)


def _error_content(component: str) -> dict:
    return {"application/json": {"schema": {"$ref": f"#/components/schemas/{component}"}}}


def v1_error(description: str) -> dict:
    """A management-API error response of the schema, with its body."""
    return {"description": description, "content": _error_content(V1_ERROR)}


def hand_written() -> dict:
    """path -> {method: operation factory}: `settings.HOST_HAND_WRITTEN_ROUTES`, each factory
    named by dotted path and living with its route's app (the framework imports no app)."""
    return {
        route: {method: import_string(path) for method, path in methods.items()}
        for route, methods in settings.HOST_HAND_WRITTEN_ROUTES.items()
    }


def add_hand_written_routes(result, generator, request, public):
    """drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    paths = result.setdefault("paths", {})
    for route, methods in hand_written().items():
        item = paths.setdefault(route, {})
        for method, factory in methods.items():
            item[method] = factory()
    schemes = result.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes.setdefault(MGMT_SCHEME, _MGMT_DEFINITION)
    return result


RETRY_AFTER = {"Retry-After": {"description": "seconds to wait", "schema": {"type": "integer"}}}
_WWW_AUTHENTICATE = {
    "WWW-Authenticate": {"description": "the scheme", "schema": {"type": "string"}}
}
_HEADERS = {"401": _WWW_AUTHENTICATE, "429": RETRY_AFTER, "503": RETRY_AFTER}


def _guarded(op: dict) -> bool:
    return any(requirement for requirement in op.get("security") or [])


def shared_statuses(path: str, op: dict, needs_redis: bool, method: str = "get") -> dict[str, str]:
    """Status -> description of what the shared machinery (authentication, permissions,
    middleware, parsers, URL resolver, error handler) can answer on this operation."""
    v1 = path.startswith("/api/v1/")
    params = op.get("parameters", [])
    out: dict[str, str] = {}
    if _guarded(op):
        out["401"] = "no credentials, or invalid ones"
        out["403"] = (
            "the plugin token may not use this route, or (on a host without a management "
            "token) a cross-site or simple-form write"
            if v1
            else "the credential lacks this route's scope (or `config:exec` for fields that run "
            "commands or choose files), a browser write without a valid CSRF token, or the "
            "caller's address is outside `origin_web_ui_allowed`"
        )
        if not v1:
            out["429"] = "too many failed logins from this address (`Retry-After`)"
            # The failed-login buckets live in Redis; without it no login can be counted.
            needs_redis = True
    elif not v1:
        out["403"] = "the caller's address is outside `origin_web_ui_allowed`"
    if "requestBody" in op:
        out["400"] = (
            "malformed JSON, a body of the wrong shape or an invalid value (`fields` names "
            "each invalid field)"
            if v1
            else "malformed JSON, a body that is not application/json, of the wrong shape, or "
            "an invalid value"
        )
        out["413"] = f"request body over {'4' if v1 else '1'} MiB"
        if v1:
            out["415"] = "request body is not application/json"
    if any(p["in"] == "query" and p.get("schema", {}).get("type") == "integer" for p in params):
        out["400"] = out.get("400", "a query value that is not an integer or out of range")
    if any(p["in"] == "path" for p in params):
        out["404"] = "nothing has that id, or a path value of the wrong form"
    if needs_redis:
        out["503"] = "the host's Redis is out of reach (`Retry-After`)"
    if method in ("post", "put", "patch", "delete"):  # docs/host-state.md, "Disk"
        out["507"] = "the host's state directory is full; nothing changed"
        read_only = "the host's state directory is read-only; nothing changed (`Retry-After`)"
        out["503"] = f"{out['503']}; or {read_only}" if "503" in out else read_only
    return out


def _views(generator) -> dict[tuple[str, str], type]:
    """(path, method) -> view class, from the endpoints the generator walked."""
    out = {}
    for path, _regex, method, callback in getattr(generator, "endpoints", None) or []:
        view = getattr(callback, "cls", None)
        if view is not None:
            out[(path, method.lower())] = view
    return out


def document_errors(result, generator, request, public):
    """drf-spectacular postprocessing hook: every operation lists the statuses the shared
    machinery can answer, and every error status carries its API's error body."""
    schemas = result.setdefault("components", {}).setdefault("schemas", {})
    schemas.update(ERROR_COMPONENTS)
    views = _views(generator)
    for path, item in result.get("paths", {}).items():
        body = _error_content(V1_ERROR if path.startswith("/api/v1/") else ADMIN_ERROR)
        for method, op in item.items():
            if not isinstance(op, dict) or "responses" not in op:
                continue
            view = views.get((path, method))
            needs_redis = bool(getattr(view, "needs_redis", False))
            responses = op["responses"]
            shared = shared_statuses(path, op, needs_redis, method)
            for code, description in shared.items():
                responses.setdefault(code, {"description": description})
            for code, response in responses.items():
                if code[0] in "45":
                    response.setdefault("content", body)
                    if code in _HEADERS:
                        response.setdefault("headers", _HEADERS[code])
            op["responses"] = dict(sorted(responses.items()))
    return result
