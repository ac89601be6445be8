"""Every lifecycle event kind of the management API, with the payload shape each one carries.

One table so emitters, the SSE filter, hook validation and the docs agree on the vocabulary.
Payload keys sit at the top level of the event document next to `seq`, `ts_ms`, `schema` and
`kind` (mgmt-api-records §3). Shapes are documentation plus a light check (`check_payload`):
emitters own their values, the bus never rewrites them.

Ref objects (`*` = always present, `~` = omitted when empty):
  ClientRef      {name*, fingerprint~, client_id~, plane*}
  SessionRef     {id*, client*, client_id~, mode*, hdr*, plane~}
  StreamRef      {mode*, hdr*, client*, client_id~, app~, plane*}
(`client`: the client's name; `client_id`: its certificate fingerprint's first 12 hex
digits; a session `id` is 8 random hex digits, the same scheme on both planes.)
  GameRef        {app~, title*, store~, client*, plane*}
  DeviceRef      {name*, fingerprint*, plane*}
"""

from __future__ import annotations

from types import MappingProxyType

SCHEMA_VERSION = 1

PLANE_NATIVE = "native"
PLANE_COMPAT = "compat"
PLANES = (PLANE_NATIVE, PLANE_COMPAT)

CLIENT_CONNECTED = "client.connected"
CLIENT_DISCONNECTED = "client.disconnected"
SESSION_STARTED = "session.started"
SESSION_ENDED = "session.ended"
STREAM_STARTED = "stream.started"
STREAM_STOPPED = "stream.stopped"
GAME_RUNNING = "game.running"
GAME_EXITED = "game.exited"
PAIRING_PENDING = "pairing.pending"
PAIRING_COMPLETED = "pairing.completed"
PAIRING_DENIED = "pairing.denied"
DISPLAY_CREATED = "display.created"
DISPLAY_RELEASED = "display.released"
LIBRARY_CHANGED = "library.changed"
UPDATE_AVAILABLE = "update.available"
UPDATE_APPLIED = "update.applied"
PLUGINS_CHANGED = "plugins.changed"
STORE_CHANGED = "store.changed"
HOST_STARTED = "host.started"
HOST_STOPPING = "host.stopping"

# The pseudo-kind of the SSE frame that tells a consumer it fell off the replay ring.
DROPPED = "dropped"

# `session_id` (client, stream, game refs; a session ref's `id`): which live session the event
# concerns, so a consumer can follow several at once. A game kept past its session has none.
CLIENT_REF = {"name": str, "fingerprint": str, "client_id": str, "plane": str, "session_id": str}
SESSION_REF = {"id": str, "client": str, "client_id": str, "mode": str, "hdr": bool, "plane": str}
STREAM_REF = {"mode": str, "hdr": bool, "client": str, "client_id": str, "app": str, "plane": str,
              "session_id": str}  # fmt: skip
GAME_REF = {"app": str, "title": str, "store": str, "client": str, "plane": str,
            "session_id": str}  # fmt: skip
DEVICE_REF = {"name": str, "fingerprint": str, "plane": str}

# kind -> {top-level payload key: type or ref-object shape}
KINDS: MappingProxyType[str, dict] = MappingProxyType(
    {
        CLIENT_CONNECTED: {"client": CLIENT_REF},
        CLIENT_DISCONNECTED: {"client": CLIENT_REF, "reason": str},  # quit | timeout | error
        SESSION_STARTED: {"session": SESSION_REF},
        SESSION_ENDED: {"session": SESSION_REF},
        # The codec negotiated (h264 / hevc / av1) and the FFmpeg encoder that opened.
        STREAM_STARTED: {"stream": STREAM_REF, "codec": str, "encoder": str},
        STREAM_STOPPED: {"stream": STREAM_REF},
        GAME_RUNNING: {"game": GAME_REF},
        GAME_EXITED: {"game": GAME_REF, "reason": str},  # exited | terminated
        PAIRING_PENDING: {"device": DEVICE_REF},
        PAIRING_COMPLETED: {"device": DEVICE_REF},
        PAIRING_DENIED: {"device": DEVICE_REF},
        DISPLAY_CREATED: {"backend": str, "mode": str},  # mode "WxH@Hz"
        DISPLAY_RELEASED: {"count": int},
        LIBRARY_CHANGED: {"source": str},  # "manual", a provider id or a scanner id
        UPDATE_AVAILABLE: {"version": str, "channel": str, "install_kind": str},
        UPDATE_APPLIED: {"from": str, "to": str},
        PLUGINS_CHANGED: {"id": str},
        STORE_CHANGED: {},
        # `gamestream` keeps the upstream field name: whether the compat plane is enabled.
        HOST_STARTED: {"version": str, "gamestream": bool},
        HOST_STOPPING: {"version": str, "gamestream": bool},  # same facts as host.started
    }
)

DOMAINS = frozenset(kind.split(".", 1)[0] for kind in KINDS)

# Keys the bus stamps; a payload may not carry them.
RESERVED_KEYS = frozenset({"seq", "ts_ms", "schema", "kind"})


def is_known(kind: str) -> bool:
    return kind in KINDS


def pattern_matches(pattern: str, kind: str) -> bool:
    """`domain.*` matches every kind of that domain (dot boundary); anything else is exact."""
    if pattern.endswith(".*"):
        return kind.startswith(pattern[:-1])
    return pattern == kind


def valid_pattern(pattern: str) -> bool:
    """A kind filter names a known kind or `<known domain>.*`."""
    if pattern.endswith(".*"):
        return pattern[:-2] in DOMAINS
    return pattern in KINDS


def check_payload(kind: str, payload: dict) -> list[str]:
    """Problems with a payload for `kind` (empty when fine); for tests and debug logging.

    Missing optional keys are fine (the spec omits empty fields); unknown extra keys are fine
    too (schema changes are additive).
    """
    problems: list[str] = []
    shape = KINDS.get(kind)
    if shape is None:
        return [f"unknown kind {kind!r}"]
    if not isinstance(payload, dict):
        return ["payload must be an object"]
    for key in RESERVED_KEYS & payload.keys():
        problems.append(f"payload key {key!r} is reserved")
    for key, expected in shape.items():
        if key not in payload:
            continue
        value = payload[key]
        if isinstance(expected, dict):
            if not isinstance(value, dict):
                problems.append(f"{key} must be an object")
                continue
            for sub, sub_type in expected.items():
                if sub in value and not _is(value[sub], sub_type):
                    problems.append(f"{key}.{sub} must be {sub_type.__name__}")
        elif not _is(value, expected):
            problems.append(f"{key} must be {expected.__name__}")
    return problems


def _is(value, expected: type) -> bool:
    if expected is int:
        return isinstance(value, int) and not isinstance(value, bool)
    return isinstance(value, expected)
