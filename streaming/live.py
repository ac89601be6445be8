"""The live sessions as the console's "Now streaming" page and `GET /api/v1/streams` show
them: one entry per registry record, both planes, with the session's own last minute of
per-second figures (`SessionCore.live_point`), and a stop for one session.

Nothing here measures: each session process publishes its points with its heartbeat.
"""

from __future__ import annotations

import re

from streaming.sessions import registry

ID_RE = re.compile(r"^[0-9a-f]{8}$")
STOP_WAIT_S = 8.0
_POINT_FIELDS = ("ts_ms", "fps", "bitrate_kbps", "target_kbps", "loss_pct", "rtt_ms",
                 "encode_ms", "capture_ms")  # fmt: skip


def _text(value, limit: int = 256) -> str:
    return str(value or "")[:limit]


def _int(value) -> int:
    return value if isinstance(value, int) and not isinstance(value, bool) else 0


def _point(raw) -> dict | None:
    if not isinstance(raw, dict):
        return None
    out = {}
    for name in _POINT_FIELDS:
        value = raw.get(name)
        out[name] = (
            value if isinstance(value, int | float) and not isinstance(value, bool) else None
        )
    return out


def _options(raw) -> dict:
    """The open encoder's FFmpeg options as text (bounded: the record is the sessions' own)."""
    if not isinstance(raw, dict):
        return {}
    return {_text(k, 64): _text(v, 256) for k, v in list(raw.items())[:64]}


def entry(rec: dict) -> dict:
    """The public view of one registry record (no tokens, sockets or keys)."""
    points = [p for p in (_point(x) for x in rec.get("live") or []) if p is not None]
    encoder = rec.get("encoder") if isinstance(rec.get("encoder"), dict) else {}
    return {
        "id": _text(rec.get("id"), 16),
        "plane": _text(rec.get("plane"), 16),
        "state": _text(rec.get("state"), 16),
        "client": _text(rec.get("client")),
        "client_id": _text(rec.get("client_id"), 16),
        "app": _text(rec.get("app")),
        "app_title": _text(rec.get("app_title") or rec.get("app")),
        "mode": _text(rec.get("mode"), 32),
        "width": _int(rec.get("width")),
        "height": _int(rec.get("height")),
        "fps": _int(rec.get("fps")),
        "codec": _text(rec.get("codec") or "h264", 16),
        "encoder": _text(rec.get("encoder_name") or encoder.get("backend") or "software", 32),
        "encoder_options": _options(rec.get("encoder_options")),
        "t_start": rec.get("t_start") if isinstance(rec.get("t_start"), int | float) else None,
        "live": points,
        "now": points[-1] if points else None,
    }


def streams() -> list[dict]:
    """Every live session, oldest first. Raises when the registry (Redis) is unreachable."""
    return [entry(rec) for rec in registry.live()]


def stop(session_id: str, wait_s: float | None = None) -> bool:
    """Ask one session to end (deliberately: its display skips the linger); False when no
    live session has that id."""
    session_id = str(session_id)
    if not ID_RE.match(session_id):
        return False
    rec = registry.get(session_id)
    if rec is None:
        return False
    registry.stop([rec], "api", deliberate=True,
                  wait_s=STOP_WAIT_S if wait_s is None else wait_s)  # fmt: skip
    return True
