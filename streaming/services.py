"""The running compat session as the rest of the host sees it: one record in Redis.

Why Redis: the session lives in a Celery worker process, while the nvhttp listener (/launch,
/serverinfo), daphne (/api/v1/status, DELETE /api/v1/session, /api/apps/close) and the pairing
services (unpair, disable) sit in other processes. The stream ports are fixed per host, so
there is at most one session: one state key, claimed with SET NX by /launch (a second launch
is refused at once) and kept alive by the task's heartbeat (a crashed worker's claim expires
after STATE_TTL_S). Requests to the task (stop, resume) go through a list it polls.

State document (written by the task, read here): id, arm, state (starting, armed,
streaming, idle, ending), app_id, app_name, client {fingerprint, name, uuid}, width, height, fps,
bitrate_kbps, packet_size, min_fec, codec, encoder {backend, gpu_id} (GET /gpus `active`), t_start.
"""

from __future__ import annotations

import json
import logging
import time

from hostmgmt import redis_client
from streaming import gpus

log = logging.getLogger("streaming.sessions")

PREFIX = "hostmgmt:stream"
STATE_KEY = f"{PREFIX}:session"
CTL_KEY = f"{PREFIX}:ctl"
STATE_TTL_S = 15
RESULT_TTL_S = 60


def _redis():
    return redis_client.client()


def result_key(arm: str) -> str:
    return f"{PREFIX}:result:{arm}"


# -- the state record ------------------------------------------------------------------------
def current() -> dict | None:
    try:
        raw = _redis().get(STATE_KEY)
    except Exception as exc:  # noqa: BLE001 - no Redis: no session can be running either
        log.warning("session state unavailable (%s)", exc.__class__.__name__)
        return None
    if not raw:
        return None
    try:
        return json.loads(raw)
    except ValueError:
        return None


def claim(state: dict) -> bool:
    """Take the one session slot; False when a session holds it."""
    return bool(_redis().set(STATE_KEY, json.dumps(state), nx=True, ex=STATE_TTL_S))


def publish(state: dict) -> bool:
    """The task's heartbeat: rewrite the record while it is still ours."""
    r = _redis()
    raw = r.get(STATE_KEY)
    if not raw or json.loads(raw).get("id") != state["id"]:
        return False
    r.set(STATE_KEY, json.dumps(state), ex=STATE_TTL_S)
    return True


def release(session_id: int) -> None:
    r = _redis()
    raw = r.get(STATE_KEY)
    if raw and json.loads(raw).get("id") == session_id:
        r.delete(STATE_KEY, CTL_KEY)


# -- requests to the task --------------------------------------------------------------------
def _push(message: dict) -> None:
    r = _redis()
    r.rpush(CTL_KEY, json.dumps(message))
    r.expire(CTL_KEY, STATE_TTL_S * 4)


def pop_requests() -> list[dict]:
    r = _redis()
    out = []
    while (raw := r.lpop(CTL_KEY)) is not None:
        try:
            out.append(json.loads(raw))
        except ValueError:
            continue
    return out


def request_stop(reason: str, deliberate: bool = True, wait_s: float = 0.0) -> bool:
    """Ask the running session to end; True when one was running. Optionally wait for it."""
    state = current()
    if state is None:
        return False
    _push({"op": "stop", "id": state["id"], "reason": reason, "deliberate": deliberate})
    deadline = time.monotonic() + wait_s
    while wait_s and time.monotonic() < deadline:
        now = current()
        if now is None or now.get("id") != state["id"]:
            break
        time.sleep(0.05)
    return True


def request_resume(arm: dict) -> None:
    state = current()
    if state is not None:
        _push({"op": "resume", "id": state["id"], **arm})


def report(arm: str, status: int, message: str = "") -> None:
    """The task tells the waiting /launch or /resume how arming went."""
    r = _redis()
    r.rpush(result_key(arm), json.dumps({"status": status, "message": message}))
    r.expire(result_key(arm), RESULT_TTL_S)


def wait_report(arm: str, timeout_s: float) -> dict | None:
    r = _redis()
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        item = r.blpop([result_key(arm)], timeout=1)
        if item:
            return json.loads(item[1])
    return None


# -- what other apps look up by name ---------------------------------------------------------
def current_game() -> int:
    """The app id /serverinfo reports (0 = none)."""
    state = current()
    if not state:
        return 0
    try:
        return int(state.get("app_id") or 0)
    except ValueError:
        return 0


def end_client_sessions(fingerprints: list[str] | None) -> None:
    """Pairing's hook: unpair / disable / unpair-all cut the client's running stream, on
    either plane (a native peer also re-checks its authorization every second)."""
    from streaming.native import sessions as native

    wanted = None if fingerprints is None else [f.lower() for f in fingerprints]
    native.end(wanted)
    state = current()
    if state is None:
        return
    fp = (state.get("client") or {}).get("fingerprint", "")
    if fingerprints is None or fp.lower() in {f.lower() for f in fingerprints}:
        request_stop("unpaired", deliberate=True, wait_s=5)


def runtime_status() -> dict:
    """The sessions part of GET /api/v1/status (mgmt-api-records §1.3 RuntimeStatus): the
    compat session if any, else the first native one; counts and games from both planes."""
    from streaming.native import sessions as native

    status = _compat_status()
    live_native = native.runtime_status()
    rows = live_native["sessions"]
    status["active_sessions"] += live_native["active_sessions"]
    status["video_streaming"] = status["video_streaming"] or live_native["video_streaming"]
    status["audio_streaming"] = status["audio_streaming"] or live_native["audio_streaming"]
    if status["session"] is None and rows:
        width, height, fps = _parse_mode(rows[0]["mode"])
        status["session"] = {"width": width, "height": height, "fps": fps}
    # A native session's game is the lifecycle layer's record (already in `games`, once);
    # a session it has none for (Desktop, an app it does not track) gets a plain row.
    tracked = {g.get("session_id") for g in status["games"] if g.get("plane") == "native"}
    status["games"] += [
        {
            "session_id": row.get("session_id"),
            "client": row["client"],
            "app_id": row["app"],
            "title": row.get("app_title") or row["app"],
            "plane": "native",
            "state": "running",
        }
        for row in rows
        if row.get("session_id") is None or row.get("session_id") not in tracked
    ]
    return status


def _parse_mode(mode: str) -> tuple[int, int, int]:
    """`WxH@fps` → (W, H, fps); zeros for anything else."""
    try:
        size, fps = mode.split("@", 1)
        width, height = size.lower().split("x", 1)
        return int(width), int(height), int(fps)
    except ValueError:
        return 0, 0, 0


def end_all_sessions(reason: str, wait_s: float) -> None:
    """A deliberate stop of every session on both planes (DELETE /session, /api/apps/close)."""
    from streaming.native import sessions as native

    native.end(None)
    request_stop(reason, deliberate=True, wait_s=wait_s)


def _compat_status() -> dict:
    state = current()
    if not state:
        return {"video_streaming": False, "audio_streaming": False, "active_sessions": 0,
                "session": None, "stream": None, "games": _lifecycle_games(None)}  # fmt: skip
    streaming = state.get("state") == "streaming"
    size = {"width": state["width"], "height": state["height"], "fps": state["fps"]}
    stream = None
    if streaming:
        stream = {
            **size,
            "bitrate_kbps": int(state.get("bitrate_kbps") or 0),
            "packet_size": int(state.get("packet_size") or 0),
            "min_fec": int(state.get("min_fec") or 0),
            "codec": state.get("codec") or "h264",
            "time_to_first_frame_ms": None,
            "last_resize_ms": None,
        }
    game = {
        "session_id": state["id"],
        "client": (state.get("client") or {}).get("name", ""),
        "title": state.get("app_name", ""),
        "plane": "compat",
        "state": "running" if state.get("state") in ("armed", "streaming", "idle") else "launching",
    }
    return {
        "video_streaming": streaming,
        "audio_streaming": streaming,
        "active_sessions": 1 if streaming else 0,
        "session": size,
        "stream": stream,
        "games": [game, *_lifecycle_games(state["id"])],
    }


def _lifecycle_games(session_id) -> list[dict]:
    """Games the lifecycle layer knows beyond the live session's own: kept ones, and the
    ones waiting out their grace window (ActiveGame records)."""
    try:
        from streaming.game import lifecycle

        games = lifecycle.active_games()
    except Exception:  # noqa: BLE001 - status must answer even with a broken games file
        log.warning("game records unavailable", exc_info=True)
        return []
    return [g for g in games if g.get("state") != "exited"
            and (session_id is None or g.get("session_id") != session_id)]  # fmt: skip


def kept_displays() -> int:
    from streaming.models import VirtualDisplay

    return VirtualDisplay.objects.filter(state__in=("lingering", "pinned")).count()


def live_encoders() -> list[dict]:
    """One `{"backend", "gpu_id"}` per live encode session: the compat session while its
    stream sends video (state `streaming`; not while armed, idle or ending), and every
    native session (its encoder process runs for the session's life; libx264 unless its
    record says otherwise). Unreachable Redis: none (the GPU list still answers)."""
    from streaming.native import sessions as native

    out: list[dict] = []
    state = current()
    if state and state.get("state") == "streaming":
        out.append(state.get("encoder") or dict(gpus.SOFTWARE))
    try:
        records = native.registry().values()
    except Exception:  # noqa: BLE001 - no Redis: no native session can be live either
        records = []
    out += [r.get("encoder") or dict(gpus.SOFTWARE) for r in records]
    return out
