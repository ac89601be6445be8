"""The player page and its signalling endpoint, on the host's HTTPS port (same origin).

`/play` is open to any browser on the network: who may play is decided per device by the
operator (pending -> approve), not by a login. `POST /native/offer` is CSRF-protected by
Django's cookie + `X-CSRFToken` check (same-origin pages only) and accepts JSON only.
"""

from __future__ import annotations

import json
import logging

from django.http import JsonResponse
from django.shortcuts import render
from django.views.decorators.csrf import csrf_protect, ensure_csrf_cookie
from django.views.decorators.http import require_GET, require_POST

from streaming.displays.machine import parse_mode
from streaming.native import services, sessions

log = logging.getLogger("streaming.native")

MAX_OFFER_BYTES = 64 * 1024
CSP = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; media-src 'self' blob:; object-src 'none'; base-uri 'none'; "
    "frame-ancestors 'none'"
)
MODES = ["1280x720", "1920x1080", "2560x1440", "3840x2160"]
RATES = [30, 60, 120]


def _apps() -> list[dict]:
    apps = [{"id": "desktop", "title": "Desktop"}]
    try:
        from library import services as library

        apps += [{"id": e["id"], "title": e["title"]} for e in library.list_library()[:200]]
    except Exception:  # noqa: BLE001 - the picker still offers Desktop
        log.exception("library listing for /play failed")
    return apps


@require_GET
@ensure_csrf_cookie
def play(request):
    ctx = {"apps": _apps(), "modes": MODES, "rates": RATES}
    response = render(request, "native/play.html", ctx)
    response["Content-Security-Policy"] = CSP
    response["Cache-Control"] = "no-store"
    return response


def _error(status: int, message: str) -> JsonResponse:
    return JsonResponse({"error": message}, status=status)


@require_POST
@csrf_protect
def offer(request):
    """`{sdp, name, app, width, height, fps, pin?}` -> 200 answer | 202 pending | 4xx."""
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
    if "m=video" not in sdp:
        return _error(400, "the offer has no video to receive")
    try:
        fp = services.sdp_fingerprint(sdp)
        name = services.clean_name(body.get("name"), fp)
        ip = request.META.get("REMOTE_ADDR", "") or "unknown"
        pin = body.get("pin") if isinstance(body.get("pin"), str) else None
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
    app = body.get("app") if isinstance(body.get("app"), str) else "desktop"
    title = next((a["title"] for a in _apps() if a["id"] == app), "Desktop")
    record = {
        "sdp": sdp,
        "fingerprint": fp,
        "name": decision.client.name or name,
        "app": app[:128],
        "app_title": title,
        "width": width,
        "height": height,
        "fps": fps,
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
        }
    )
