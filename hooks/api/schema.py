"""The event stream's operation in `/api/schema` (listed in settings.HOST_HAND_WRITTEN_ROUTES)."""

from __future__ import annotations

from apikit.schema import MGMT_SCHEME, RETRY_AFTER, v1_error
from hooks import conf, event_kinds


def events_operation() -> dict:
    """`GET /api/v1/events` for the schema: a plain async Django view the generator never sees."""
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
            f"{conf.SSE_MAX_STREAMS} concurrent streams per web process. The plugin token may "
            "read it.\n\n"
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
            "400": v1_error("`since` is not an integer from 0 to 2^63-1, or `kinds` names an "
                          "unknown kind"),
            "401": v1_error("invalid or missing bearer token"),
            "403": v1_error("the plugin token may not use this route"),
            "405": v1_error("method not allowed (GET only)"),
            "503": {
                **v1_error(
                    "too many event streams open (`Retry-After: 2`), or the event bus (Redis) "
                    "is out of reach (`Retry-After: 5`)"
                ),
                "headers": RETRY_AFTER,
            },
        },
    }  # fmt: skip
