"""What drf-spectacular cannot see by itself, for `/api/schema` and `/api/docs`.

- The security schemes of both APIs (bearer management/plugin token; admin Basic or scoped
  bearer token), from the two authentication classes.
- Hand-written routes that are plain (async) Django views rather than DRF views, so the
  generator never visits them: `GET /api/v1/events` (the SSE stream). `HAND_WRITTEN` is the
  table; `tests/hostmgmt/test_api_schema.py` checks that every `/api/...` route of the URL map
  is in the schema, so a new plain view without an entry here fails that test.
"""

from __future__ import annotations

from drf_spectacular.extensions import OpenApiAuthenticationExtension

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
        "`DELETE /session`, `POST /game/end`, `GET /session/settings`; 403 everywhere else). "
        "None needed on a host started with `--no-mgmt-token`, whose state-changing requests "
        "must then be same-origin or carry `Content-Type: application/json` or "
        "`X-Requested-With` (403 otherwise)."
    ),
}


class MgmtTokenScheme(OpenApiAuthenticationExtension):
    target_class = "hostmgmt.auth.mgmt.MgmtTokenAuthentication"
    name = MGMT_SCHEME

    def get_security_definition(self, auto_schema):
        return _MGMT_DEFINITION


class AdminScheme(OpenApiAuthenticationExtension):
    target_class = "hostmgmt.auth.admin.AdminAuthentication"
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


def _error(description: str) -> dict:
    return {
        "description": description,
        "content": {
            "application/json": {
                "schema": {
                    "type": "object",
                    "properties": {"error": {"type": "string"}},
                    "required": ["error"],
                }
            }
        },
    }


def _events_operation() -> dict:
    from hooks import conf, event_kinds

    kinds = sorted(event_kinds.KINDS)
    domains = sorted(f"{d}.*" for d in event_kinds.DOMAINS)
    frames = (
        "Server-sent events. Each frame: `id: <seq>`, `event: <kind>`, `data: <event JSON>` "
        "(`{seq, ts_ms, schema, kind, <domain object>...}`). A stream whose cursor fell off the "
        "replay ring (newest 1024 events) or is ahead of it first gets `event: dropped` / "
        '`data: {"dropped":true}` (no id): resync from `GET /api/v1/status`. A `: keep-alive` '
        "comment follows every 15 s."
    )
    return {
        "operationId": "v1_events_stream",
        "summary": "Lifecycle event stream (SSE)",
        "description": (
            "Replays the events after the cursor from the in-memory ring, then follows live "
            "events. Resume with `Last-Event-ID` (wins over `since`) or `?since=`. At most "
            f"{conf.SSE_MAX_STREAMS} concurrent streams. The plugin token may read it.\n\n"
            + frames
        ),
        "tags": ["v1"],
        "security": [{MGMT_SCHEME: []}],
        "parameters": [
            {
                "name": "since",
                "in": "query",
                "required": False,
                "description": (
                    "Replay events with a seq above this one (integer 0 to 2^63-1; anything "
                    "else is 400). Default 0: the whole ring."
                ),
                "schema": {"type": "integer", "format": "int64", "minimum": 0},
            },
            {
                "name": "kinds",
                "in": "query",
                "required": False,
                "description": (
                    "Comma-separated exact kinds or `domain.*` prefixes (an unknown one is "
                    "400); empty = every kind. Kinds: "
                    + ", ".join(f"`{k}`" for k in kinds)
                    + ". Prefixes: "
                    + ", ".join(f"`{d}`" for d in domains)
                    + "."
                ),
                "schema": {"type": "string"},
                "example": "stream.*,pairing.pending",
            },
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "description": (
                    "Decimal seq of the last frame received; wins over `since`. An unparsable "
                    "value is ignored."
                ),
                "schema": {"type": "string"},
            },
        ],
        "responses": {
            "200": {
                "description": frames,
                "content": {
                    "text/event-stream": {
                        "schema": {"type": "string"},
                        "example": (
                            'id: 42\nevent: stream.started\ndata: {"seq":42,"ts_ms":'
                            '1764547200000,"schema":1,"kind":"stream.started","stream":{"mode":'
                            '"1920x1080@60","hdr":false,"client":"Deck","app":"steam:570",'
                            '"plane":"native"}}\n\n'
                        ),
                    }
                },
            },
            "400": _error("`since` is not an integer from 0 to 2^63-1, or `kinds` names an "
                          "unknown kind"),
            "401": _error("invalid or missing bearer token"),
            "403": _error("the plugin token may not use this route"),
            "405": _error("method not allowed (GET only)"),
            "503": _error(
                "too many event streams open (`Retry-After: 2`), or the event bus is unavailable"
            ),
        },
    }  # fmt: skip


# path -> {method: operation factory}
HAND_WRITTEN = {
    "/api/v1/events": {"get": _events_operation},
}


def add_hand_written_routes(result, generator, request, public):
    """drf-spectacular postprocessing hook (SPECTACULAR_SETTINGS["POSTPROCESSING_HOOKS"])."""
    paths = result.setdefault("paths", {})
    for route, methods in HAND_WRITTEN.items():
        item = paths.setdefault(route, {})
        for method, factory in methods.items():
            item[method] = factory()
    schemes = result.setdefault("components", {}).setdefault("securitySchemes", {})
    schemes.setdefault(MGMT_SCHEME, _MGMT_DEFINITION)
    return result
