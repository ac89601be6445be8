"""The native plane's offer: what `POST /native/offer` calls once its body is valid.

A browser's SDP offer names its DTLS certificate (`a=fingerprint:sha-256`): that fingerprint is
the device's identity (DTLS later proves the peer holds the certificate). Pairing decides
whether the device may play (`pairing.native.knock`); a paired one gets a peer process and
its answer (`native.sessions.start`).
"""

from __future__ import annotations

import re

from common import redis_client
from common.errors import Invalid, NotFound
from fleet import place as fleet
from fleet import tickets
from native import sessions
from native.ratelimit import OfferLimiter
from pairing import native as pairing
from streaming.session_play import capped_fps
from streaming.sessions import apps

SDP_FP_RE = re.compile(r"^a=fingerprint:sha-256 ([0-9A-Fa-f:]{95})\s*$", re.M)


def authorized(fingerprint: str) -> bool:
    """The device is still paired and enabled (its peer asks every second)."""
    return pairing.authorized(fingerprint)


def limit(kind: str, who: str) -> None:
    """Count one offer from an address (`ip`) or a device (`dev`); `Limited` (429) past it."""
    OfferLimiter(redis_client.client()).hit(kind, who)


def sdp_fingerprint(sdp: str) -> str:
    """The browser's DTLS identity from its offer: lowercase hex, no colons. Invalid (400)
    when the offer has no SHA-256 fingerprint or two different ones."""
    found = {m.replace(":", "").lower() for m in SDP_FP_RE.findall(sdp or "")}
    if len(found) != 1:
        raise Invalid("the offer must carry exactly one a=fingerprint:sha-256 line")
    return found.pop()


def vouched(cookie, fingerprint: str, app: str) -> bool:
    """A fleet placement's approval (the `fleet_approval` cookie, fleet/tickets.py) used by
    this offer: the device is paired as by an operator's approval, once. False, and the
    offer goes on as any other (pending), when there is no valid approval for this app."""
    if not cookie:
        return False
    held = tickets.take(cookie, app)
    if held is None:
        return False
    pairing.pair_vouched(fingerprint, held.name)
    return True


def _knock(o: dict, ip: str):
    """The device asks to play here (an offer, or a placement this host vouches for):
    `(name, decision, None)`, or the `pending` answer while the operator decides."""
    fp = o["fingerprint"]
    name = pairing.clean_name(o["name"], fp)
    decision = pairing.knock(fp, name, ip, o["pin"])
    if decision.state != "pending":
        return name, decision, None
    return (
        name,
        decision,
        {
            "status": "pending",
            "id": decision.pending_id,
            "fingerprint": fp,
            "message": "waiting for the operator to approve this device",
        },
    )


def offer(o: dict, ip: str) -> dict:
    """A validated offer (`OfferSerializer`) from `ip`: `{"status": "pending", ...}` while the
    operator decides, `{"status": "paired", "sdp", ...}` with the peer's answer once paired.
    Domain errors: 403 refused, 404 no such app, 429 too many offers, 4xx/5xx no session."""
    fp = o["fingerprint"]
    limit("dev", fp)
    chosen = apps.resolve(o["app"])
    if chosen is None:
        raise NotFound(f"no app {o['app'][:64]!r} in the catalog or library")
    name, decision, waiting = _knock(o, ip)
    if waiting:
        return waiting
    answer = sessions.start(
        {
            "sdp": o["sdp"],
            "fingerprint": fp,
            "name": decision.client.name or name,
            "app": chosen.key,
            "app_title": chosen.title,
            "width": o["width"],
            "height": o["height"],
            "fps": capped_fps(o["fps"]),  # the host's `max_fps`
            "transport": o["transport"],
            "decodes": o["decodes"],
            "remote": ip,
            "loopback": ip.startswith("127.") or ip == "::1",
        }
    )
    return {
        "status": "paired",
        "fingerprint": fp,
        "sdp": answer["sdp"],
        "type": "answer",
        "mode": answer["mode"],
        "codec": answer["codec"],
        "transport": o["transport"],
    }


def place(o: dict, ip: str) -> dict:
    """A validated placement (`PlaceSerializer`) from `ip`: this host vouches only for a device
    it has paired, so the device knocks here as an offer does (`pending` while the operator
    decides; a PIN pairs it), then `fleet.place` finds it a member: `{"status": "placed",
    member, handoff, skipped}`. The fingerprint is the page's claim (no DTLS follows here),
    as an offer's is until its DTLS proof: docs/fleet.md says what that allows."""
    limit("dev", o["fingerprint"])
    name, decision, waiting = _knock(o, ip)
    if waiting:
        return waiting
    placed = fleet.place(o["app"], o["title"], decision.client.name or name)
    return {"status": "placed", **placed}
