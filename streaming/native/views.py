"""The player page and its signalling endpoint, on the host's HTTPS port (same origin).

`/play` is open to any browser on the network: who may play is decided per device by the
operator (pending -> approve), not by a login. `POST /native/offer` is CSRF-protected by
Django's cookie + `X-CSRFToken` check (same-origin pages only; a refusal is a JSON 403 the page
can show), accepts JSON only and is rate-limited per address and per device (429).
"""

from __future__ import annotations

import json
import logging

from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from hostmgmt import redis_client
from streaming.displays.machine import parse_mode
from streaming.launchconfig import capped_fps
from streaming.native import launch, services, sessions
from streaming.native.ratelimit import Limited, OfferLimiter
from streaming.native.web import csrf_json, json_error

log = logging.getLogger("streaming.native")

MAX_OFFER_BYTES = 64 * 1024
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; media-src 'self' blob:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
MODES = ["1280x720", "1920x1080", "2560x1440", "3840x2160"]
RATES = [30, 60, 120]


@require_GET
@ensure_csrf_cookie
def play(request):
    ctx = {"apps": launch.choices(), "modes": MODES, "rates": RATES}
    response = render(request, "native/play.html", ctx)
    response["Content-Security-Policy"] = CSP
    response["Cache-Control"] = "no-store"
    return response


_error = json_error


def _limit(kind: str, who: str) -> JsonResponse | None:
    try:
        OfferLimiter(redis_client.client()).hit(kind, who)
    except Limited as exc:
        return json_error(429, str(exc), Retry_After=str(exc.retry_after))
    return None


@require_POST
@csrf_json
def offer(request):
    """`{sdp, name, app, width, height, fps, pin?}` -> 200 answer | 202 pending | 4xx."""
    ip = request.META.get("REMOTE_ADDR", "") or "unknown"
    limited = _limit("ip", ip)
    if limited is not None:
        return limited
    if request.content_type != "application/json":
        return _error(415, "send JSON")
    if len(request.body) > MAX_OFFER_BYTES:
        return _error(413, "offer too large")
    try:
        body = json.loads(request.body)
        sdp = body["sdp"]
        width, height, fps = int(body["width"]), int(body["height"]), int(body["fps"])
        parse_mode(f"{width}x{height}@{fps}")
        if not isinstance(sdp, str) or not sdp.startswith("v=0"):
            raise ValueError("sdp must be an SDP offer")
    except (ValueError, KeyError, TypeError) as exc:
        return _error(400, f"malformed offer: {exc}")
    except Exception as exc:  # noqa: BLE001 - DisplayError from parse_mode
        return _error(400, str(exc))
    fps = capped_fps(fps)  # the host's `max_fps`
    if "m=video" not in sdp:
        return _error(400, "the offer has no video to receive")
    transport = body.get("transport", "webrtc")
    if transport not in ("webrtc", "webcodecs"):
        return _error(400, "transport must be webrtc or webcodecs")
    try:
        fp = services.sdp_fingerprint(sdp)
    except services.Refused as exc:
        return _error(exc.status, str(exc))
    limited = _limit("dev", fp)
    if limited is not None:
        return limited
    app = body.get("app") if isinstance(body.get("app"), str) else "desktop"
    chosen = launch.resolve(app)
    if chosen is None:
        return _error(404, f"no app {app[:64]!r} in the catalog or library")
    try:
        name = services.clean_name(body.get("name"), fp)
        pin = services.clean_pin(body.get("pin"))
        decision = services.knock(fp, name, ip, pin)
    except services.Refused as exc:
        return _error(exc.status, str(exc))
    if decision.state == "pending":
        return JsonResponse(
            {
                "status": "pending",
                "id": decision.pending_id,
                "fingerprint": fp,
                "message": "waiting for the operator to approve this device",
            },
            status=202,
        )
    record = {
        "sdp": sdp,
        "fingerprint": fp,
        "name": decision.client.name or name,
        "app": chosen.key,
        "app_title": chosen.title,
        "width": width,
        "height": height,
        "fps": fps,
        "transport": transport,
        "remote": ip,
        "loopback": ip.startswith("127.") or ip == "::1",
    }
    try:
        answer = sessions.start(record)
    except sessions.SessionError as exc:
        return _error(exc.status, str(exc))
    return JsonResponse(
        {
            "status": "paired",
            "fingerprint": fp,
            "sdp": answer["sdp"],
            "type": "answer",
            "mode": answer["mode"],
            "transport": transport,
        }
    )
