"""/launch, /resume and /cancel on the compat plane's HTTPS listener (reference B.7).

The listener only validates and hands over: the session itself runs in its own process
(`streaming.sessions.runtime.spawn`, the session manager's), which acquires the display, starts
the app and binds the stream ports, then answers on the spawn socket (its first line, as a
native session answers its offer). The request waits for that answer, so `sessionUrl0` is only
sent once the RTSP port listens; a /resume waits for the running session's report through
Redis (`streaming.services.report`). The dispatcher
has already refused unpaired, unpaired-since and disabled clients (401) before these run.

Several clients stream at once (`max_sessions`, both planes together): each request concerns
the caller's own session, found by its certificate fingerprint. A /launch takes a place and a
port slot k (`streaming.sessions.admission`); the session streams on the stream ports + 20*k,
and `sessionUrl0` names that slot's RTSP port (the SETUP replies name its media ports).

Errors are the usual XML documents: 400 missing or malformed parameter, a stream the host does
not make (`hdrMode=1`: it streams 8-bit SDR only; an odd `mode` size, which no 4:2:0 encoder
takes) or the caller's own app already running, 403 encryption required
(`lan_/wan_encryption_mode` 2 for the client's network) and the client sent no `corever >= 1`,
404 unknown app id, 503 no place left ("The host is already streaming to N clients
(max_sessions = M)"), no running app of the caller's (/resume) or the engine could not start.
`sessionUrl0` is `rtspenc://` when the policy encrypts RTSP.
"""

from __future__ import annotations

import logging
import re
import secrets
import time

from django.conf import settings

from compat import launchconfig
from compat.engine import encryption
from compat.nvhttp.dispatch import NvRequest, NvResponse, xml
from library import catalog
from media.audio import layouts
from streaming import services, session_play
from streaming.sessions import admission, registry, runtime

log = logging.getLogger("compat")

ARM_WAIT_S = 25.0  # display + prep + app start + port bind; MLP waits longer (LAUNCH_TIMEOUT)
MODE_RE = re.compile(r"^(\d{1,6})x(\d{1,6})x(\d{1,4})$")
MIN_W, MAX_W, MIN_H, MAX_H, MIN_FPS, MAX_FPS = 320, 7680, 200, 4320, 10, 240
DEFAULT_MODE = (1920, 1080, 60)
MISSING = "Missing a required launch parameter"


class BadLaunch(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status, self.message = status, message


def parse_mode(raw: str | None) -> tuple[int, int, int]:
    """`WIDTHxHEIGHTxFPS`; absent or 0x0x0 means the host default."""
    if raw is None or raw.strip() in ("", "0x0x0"):
        return DEFAULT_MODE
    m = MODE_RE.match(raw.strip())
    if not m:
        raise BadLaunch(400, "mode must be WIDTHxHEIGHTxFPS")
    w, h, fps = (int(g) for g in m.groups())
    if not (MIN_W <= w <= MAX_W and MIN_H <= h <= MAX_H and MIN_FPS <= fps <= MAX_FPS):
        raise BadLaunch(
            400, f"mode must be {MIN_W}-{MAX_W} x {MIN_H}-{MAX_H} x {MIN_FPS}-{MAX_FPS}"
        )
    if w % 2 or h % 2:  # every encoder here takes 4:2:0 video (media.encoder)
        raise BadLaunch(400, f"mode {w}x{h} cannot be encoded: 4:2:0 video needs an even size")
    return w, h, fps


def parse_keys(q: dict[str, str]) -> dict:
    rikey, rikeyid = q.get("rikey"), q.get("rikeyid")
    if rikey is None or rikeyid is None:
        raise BadLaunch(400, MISSING)
    if not re.fullmatch(r"[0-9A-Fa-f]{32}", rikey):
        raise BadLaunch(400, "rikey must be 32 hex digits")
    try:
        keyid = int(rikeyid)
    except ValueError:
        raise BadLaunch(400, "rikeyid must be a signed 32-bit integer") from None
    if not -(2**31) <= keyid < 2**31:
        raise BadLaunch(400, "rikeyid must be a signed 32-bit integer")
    return {"rikey": rikey.lower(), "rikeyid": keyid}


HDR_REFUSED = "HDR is not available: this host streams 8-bit SDR only"


def parse_options(q: dict[str, str]) -> dict:
    """Audio and HDR options: checked, then recorded (the session's sink takes the
    surroundAudioInfo layout). HDR is refused: every capture source is 8-bit SDR and no 10-bit
    mode is offered (compat.codecs), so it is never streamed."""
    out = {}
    for name, allowed in (("localAudioPlayMode", {0, 1}), ("hdrMode", {0, 1}), ("sops", {0, 1})):
        if name in q and q[name] != "":
            try:
                value = int(q[name])
            except ValueError:
                raise BadLaunch(400, f"{name} must be 0 or 1") from None
            if value not in allowed:
                raise BadLaunch(400, f"{name} must be 0 or 1")
            out[name] = value
    raw = q.get("surroundAudioInfo")
    if raw:
        try:
            info = int(raw)
        except ValueError:
            raise BadLaunch(400, "surroundAudioInfo must be an integer") from None
        if info < 0 or (info & 0xFFFF) not in (2, 6, 8):
            raise BadLaunch(400, "surroundAudioInfo must name 2, 6 or 8 channels")
        try:  # the mask must be the layout's (stereo 0x3, 5.1 0x3F, 7.1 0x63F)
            layouts.from_surround_info(info)
        except layouts.LayoutError as exc:
            raise BadLaunch(400, f"surroundAudioInfo: {exc}") from None
        out["surroundAudioInfo"] = info
    if out.get("hdrMode") == 1:
        raise BadLaunch(400, HDR_REFUSED)
    return out


def _url(req: NvRequest, slot: int, encrypted: bool = False) -> str:
    local = req.local or "127.0.0.1"
    host = f"[{local}]" if ":" in local else local
    return f"{'rtspenc' if encrypted else 'rtsp'}://{host}:{settings.PORTS.stream_ports(slot).rtsp}"


def _encryption(req: NvRequest):
    """The launch's encryption policy; BadLaunch(403) when required and unsupported."""
    try:
        return launchconfig.encryption_policy(req.remote, req.query.get("corever"))
    except encryption.Refused as exc:
        raise BadLaunch(403, str(exc)) from None


def _wait(arm: str) -> tuple[int, str]:
    """A running session's answer to a /resume (through Redis)."""
    result = services.wait_report(arm, ARM_WAIT_S)
    if result is None:
        return 503, "The streaming engine did not resume the session in time"
    return int(result["status"]), result.get("message", "")


def launch(req: NvRequest) -> NvResponse:
    q = req.query
    try:
        if "appid" not in q or "localAudioPlayMode" not in q:
            raise BadLaunch(400, MISSING)
        try:
            app_id = int(q["appid"])
        except ValueError:
            raise BadLaunch(400, "appid must be a decimal app id") from None
        keys = parse_keys(q)
        width, height, fps = parse_mode(q.get("mode"))
        fps = session_play.capped_fps(fps)  # the host's `max_fps`
        options = parse_options(q)
        app = catalog.find_app(str(app_id)) if app_id > 0 else None
        if app is None:
            raise BadLaunch(404, "App not found")
        policy = _encryption(req)
    except BadLaunch as exc:
        return xml(exc.status, exc.message, {"gamesession": 0})
    client = req.client
    if services.current(client.fingerprint) is not None:  # GameStream: resume, or quit first
        return xml(400, admission.ALREADY_RUNNING, {"gamesession": 0})
    arm = secrets.token_hex(8)
    spec = {
        "id": registry.new_id(),
        "arm": arm,
        "app_id": app_id,
        "app_name": app.name,
        "client": {"fingerprint": client.fingerprint, "name": client.name, "uuid": client.uuid},
        "remote": req.remote,
        "width": width,
        "height": height,
        "fps": fps,
        "options": options,
        "corever": q.get("corever", ""),
        **keys,
    }
    record = {
        "id": spec["id"],
        "client": client.name,
        "client_id": registry.client_id(client.fingerprint),
        "fingerprint": client.fingerprint,
        "mode": f"{width}x{height}@{fps}",
        "width": width,
        "height": height,
        "fps": fps,
        "app": str(app_id),
        "app_title": app.name,
        "app_id": app_id,
        "arm": arm,
        "t_start": time.time(),
    }
    try:
        slot = services.claim(record)
    except admission.Refused as exc:
        log.info("launch by %s refused: %s", client.fingerprint[:12], exc.message)
        return xml(exc.status, exc.message, {"gamesession": 0})
    spec["port_slot"] = slot
    try:  # the session's first line is the /launch answer, once it is armed
        answer = runtime.spawn("compat", spec, timeout_s=ARM_WAIT_S)
    except runtime.SpawnError as exc:
        services.release(spec["id"], slot)  # a late session finds its claim gone and exits
        log.warning("compat session not started: %s", exc)
        late = exc.status == 504
        message = "did not start the session in time" if late else "could not start the session"
        return xml(503, f"The streaming engine {message}", {"gamesession": 0})
    status, message = int(answer.get("status") or 500), str(answer.get("message") or "")
    if status != 200:
        return xml(status, message, {"gamesession": 0})
    log.info("launch of %s by %s armed on slot %d", app.name, client.fingerprint[:12], slot)
    return xml(
        200, "", [("sessionUrl0", _url(req, slot, policy.rtsp_encrypted)), ("gamesession", 1)]
    )


def resume(req: NvRequest) -> NvResponse:
    try:
        keys = parse_keys(req.query)
        parse_options(req.query)
        policy = _encryption(req)
    except BadLaunch as exc:
        return xml(exc.status, exc.message, {"resume": 0})
    state = services.current(req.client.fingerprint)  # the caller's own session only
    if state is None or state.get("state") in ("starting", "ending"):
        return xml(503, "No running app to resume", {"resume": 0})
    arm = secrets.token_hex(8)
    # The resuming client's address: the new stream listens to it alone (compat.endpoint).
    corever = req.query.get("corever", "")
    services.request_resume(
        state["id"], {"arm": arm, "remote": req.remote, "corever": corever, **keys}
    )
    status, message = _wait(arm)
    if status != 200:
        return xml(status, message, {"resume": 0})
    slot = int(state.get("port_slot") or 0)
    return xml(200, "", [("sessionUrl0", _url(req, slot, policy.rtsp_encrypted)), ("resume", 1)])


def cancel(req: NvRequest) -> NvResponse:
    """Ends the caller's own session; another client's streams on."""
    services.request_stop(req.client.fingerprint, "cancel", deliberate=True, wait_s=10)
    return xml(200, "", {"cancel": 1})


def install(dispatcher, backend) -> None:
    dispatcher.register("launch", launch)
    dispatcher.register("resume", resume)
    dispatcher.register("cancel", cancel)
    backend.current_game_provider = services.current_game
