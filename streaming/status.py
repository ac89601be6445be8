"""The sessions part of `GET /api/v1/status` (mgmt-api-records §1.3 RuntimeStatus), from the
one registry, for any number of live sessions on both planes.

The reference shape describes one session: `session`/`stream` stay that (a representative:
the streaming compat session if any, else the first native one), while `sessions[]` lists every
live session with its id (what `DELETE /api/v1/session?id=` and `/api/apps/close {"id"}`
take), `games` has one row per session plus the lifecycle layer's kept and waiting games, and
`active_sessions` counts the streaming sessions of both planes.
"""

from __future__ import annotations

import logging

from games import lifecycle
from streaming.sessions import admission, registry

log = logging.getLogger("streaming.sessions")

RUNNING_STATES = ("armed", "streaming", "idle")


def runtime_status() -> dict:
    try:
        live = registry.live()
    except Exception:  # no Redis: report nothing rather than fail the status
        live = []
    rows = [session_row(rec) for rec in live]
    streaming = [rec for rec in live if _streaming(rec)]
    compat = next((rec for rec in streaming if rec.get("plane") == "compat"), None)
    native = [rec for rec in live if rec.get("plane") == "native"]
    first = compat or (native[0] if native else None)
    first = first or next((rec for rec in live if rec.get("plane") == "compat"), None)
    # One row per live session: a compat session's from its record; a native session's is
    # the lifecycle layer's game when it tracks one (store, library id), else a plain row.
    # Then the lifecycle layer's other games: kept ones and those waiting out their grace.
    tracked = _lifecycle_games()
    compat_ids = {rec["id"] for rec in live if rec.get("plane") == "compat"}
    tracked = [g for g in tracked if g.get("session_id") not in compat_ids]
    tracked_ids = {g.get("session_id") for g in tracked}
    games = [_game_row(rec) for rec in live
             if rec.get("plane") == "compat" or rec["id"] not in tracked_ids]  # fmt: skip
    games += tracked
    return {
        "video_streaming": bool(streaming),
        "audio_streaming": bool(streaming),
        "active_sessions": len(streaming),
        # The most sessions both planes admit at once (a fleet host places players by it).
        "max_sessions": admission.max_sessions(),
        "session": _size(first) if first else None,
        "stream": _stream(first) if first and _streaming(first) else None,
        "games": games,
        "sessions": rows,
    }


def _streaming(rec: dict) -> bool:
    """A native session streams for its whole life; a compat one while a client receives."""
    return rec.get("plane") == "native" or rec.get("state") == "streaming"


def _size(rec: dict) -> dict:
    return {"width": rec["width"], "height": rec["height"], "fps": rec["fps"]}


def _stream(rec: dict) -> dict:
    return {
        **_size(rec),
        "bitrate_kbps": int(rec.get("bitrate_kbps") or 0),
        "packet_size": int(rec.get("packet_size") or 0),
        "min_fec": int(rec.get("min_fec") or 0),
        "codec": rec.get("codec") or "h264",
        "time_to_first_frame_ms": None,
        "last_resize_ms": None,
    }


def session_row(rec: dict) -> dict:
    """One live session as the status, the dashboard and an operator's script see it."""
    return {
        "id": rec["id"],
        "plane": rec.get("plane", ""),
        "client": rec.get("client", ""),
        "client_id": rec.get("client_id", ""),
        "app": rec.get("app", ""),
        "app_title": rec.get("app_title") or rec.get("app_name") or "",
        "mode": rec.get("mode", ""),
        "state": rec.get("state", ""),
        "t_start": float(rec.get("t_start") or 0),
        "stream": _stream(rec) if _streaming(rec) else None,
    }


def _game_row(rec: dict) -> dict:
    """The session's own title (every session has one: Desktop too)."""
    row = {
        "session_id": rec["id"],
        "client": rec.get("client", ""),
        "title": rec.get("app_title") or rec.get("app_name") or rec.get("app", ""),
        "plane": rec.get("plane", ""),
        "state": "running" if rec.get("state") in RUNNING_STATES else "launching",
    }
    if rec.get("plane") == "native" and rec.get("app"):
        row["app_id"] = rec["app"]
        row["state"] = "running"
    return row


def _lifecycle_games() -> list[dict]:
    """The lifecycle layer's games that are not exited: kept ones and the ones waiting out
    their grace window (ActiveGame records)."""
    try:
        games = lifecycle.active_games()
    except Exception:  # status must answer even with a broken games file
        log.warning("game records unavailable", exc_info=True)
        return []
    return [g for g in games if g.get("state") != "exited"]
