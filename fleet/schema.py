"""The fleet event stream's operation in `/api/schema` (settings.HOST_HAND_WRITTEN_ROUTES)."""

from __future__ import annotations

from apikit.schema import MGMT_SCHEME, RETRY_AFTER, v1_error


def fleet_events_operation() -> dict:
    """`GET /api/v1/fleet/events`: a plain async Django view the generator never sees."""
    frames = (
        "Server-sent events, every member's: `id: <member id>:<seq>,...` (the member seqs sent "
        "so far), `event: <kind>`, `data: <the member's event JSON with host {id, name, url}>`. "
        "A member's own `dropped` and a resume below what the buffer holds for a member give "
        '`event: dropped` / `data: {"dropped":true,"host":{...}}` (no id). A `: keep-alive` '
        "comment follows every 15 s."
    )
    return {
        "operationId": "v1_fleet_events_stream",
        "summary": "The fleet's event stream (SSE)",
        "description": (
            "Replays the fleet buffer after `Last-Event-ID` (a vector of member seqs; an "
            "unparsable one is ignored and the whole buffer replayed), then follows live "
            "events. Operator only: the plugin token gets 403.\n\n" + frames
        ),
        "tags": ["v1"],
        "security": [{MGMT_SCHEME: []}],
        "parameters": [
            {
                "name": "Last-Event-ID",
                "in": "header",
                "required": False,
                "description": "The last frame's id, e.g. `3:120,5:88`.",
                "schema": {"type": "string"},
            }
        ],
        "responses": {
            "200": {
                "description": frames,
                "content": {"text/event-stream": {"schema": {"type": "string"}}},
            },
            "401": v1_error("No or wrong bearer token."),
            "403": v1_error("Not the operator."),
            "405": v1_error("method not allowed (GET only)"),
            "503": {
                **v1_error("too many fleet streams open, or Redis out of reach"),
                "headers": RETRY_AFTER,
            },
        },
    }
