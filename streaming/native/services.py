"""Native-plane pairing decisions and paired browsers: what the API views and the offer
endpoint call. Identity is the DTLS certificate fingerprint the browser puts in its SDP
(`a=fingerprint:sha-256`); DTLS itself proves the peer holds that certificate.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from hostmgmt import redis_client
from pairing.models import PLANE_NATIVE, PairedClient
from pairing.services import emit_device
from streaming.compat.nvhttp.names import sanitize_name
from streaming.native import sessions
from streaming.native.pending import MAX_WRONG_PINS, PendingQueue, QueueFull

log = logging.getLogger("streaming.native")

ARM_TTL_DEFAULT, ARM_TTL_MIN, ARM_TTL_MAX = 120, 15, 600
FP_RE = re.compile(r"^[0-9a-f]{64}$")
SDP_FP_RE = re.compile(r"^a=fingerprint:sha-256 ([0-9A-Fa-f:]{95})\s*$", re.M)
PIN_RE = re.compile(r"[0-9]{4}")  # not \d: that matches every script's digits


def queue() -> PendingQueue:
    return PendingQueue(redis_client.client())


class Refused(Exception):
    def __init__(self, status: int, message: str):
        super().__init__(message)
        self.status = status


@dataclass
class Knock:
    state: str  # "paired" | "pending"
    client: PairedClient | None = None
    pending_id: int | None = None


def sdp_fingerprint(sdp: str) -> str:
    """The browser's DTLS identity from its offer: lowercase hex, no colons. Refused (400)
    when the offer has no SHA-256 fingerprint or two different ones."""
    found = {m.replace(":", "").lower() for m in SDP_FP_RE.findall(sdp or "")}
    if len(found) != 1:
        raise Refused(400, "the offer must carry exactly one a=fingerprint:sha-256 line")
    return found.pop()


def clean_pin(raw) -> str | None:
    """The offer's `pin`: None when absent or blank, else 4 ASCII digits (Refused 400)."""
    if raw is None:
        return None
    if not isinstance(raw, str):
        raise Refused(400, "pin must be a string of 4 digits")
    pin = raw.strip()
    if not pin:
        return None
    if not PIN_RE.fullmatch(pin):
        raise Refused(400, "pin must be 4 digits (0-9)")
    return pin


CLOSED_BY_WRONG_PINS = (
    f"the pairing PIN was closed after {MAX_WRONG_PINS} wrong PINs; "
    "ask the operator to arm a new one"
)


def clean_name(raw, fingerprint: str) -> str:
    return sanitize_name(raw if isinstance(raw, str) else "", fallback_seed=fingerprint)


def native_clients():
    return PairedClient.objects.filter(plane=PLANE_NATIVE)


def client_record(client: PairedClient) -> dict:
    return {"name": client.name, "fingerprint": client.fingerprint}


def store(fingerprint: str, name: str) -> PairedClient:
    with transaction.atomic():
        client, created = PairedClient.objects.get_or_create(
            fingerprint=fingerprint, defaults={"cert_pem": "", "name": name, "plane": PLANE_NATIVE}
        )
        if not created:
            client.name, client.enabled, client.paired_at = name, True, timezone.now()
            client.save(update_fields=["name", "enabled", "paired_at"])
    emit_device("pairing.completed", name, fingerprint, PLANE_NATIVE)
    return client


def knock(fingerprint: str, name: str, ip: str, pin: str | None = None) -> Knock:
    """A browser offers a session: paired, newly paired by PIN, pending, or refused."""
    client = PairedClient.objects.filter(fingerprint=fingerprint).first()
    if client is not None:
        if client.plane != PLANE_NATIVE:
            raise Refused(403, "this certificate is paired on the compat plane")
        if not client.enabled:
            raise Refused(403, "this device is disabled by the operator")
        PairedClient.objects.filter(pk=client.pk).update(last_seen=timezone.now())
        return Knock("paired", client=client)
    q = queue()
    if q.pop_denied(fingerprint):
        raise Refused(403, "the operator denied this device; reload to ask again")
    if pin is not None:
        check = q.consume_pin(pin, fingerprint)
        if check.outcome == "paired":
            q.drop(fingerprint)
            return Knock("paired", client=store(fingerprint, name))
        if check.outcome == "wrong":
            more = (
                "1 more wrong PIN closes"
                if check.left == 1
                else f"{check.left} more wrong PINs close"
            )
            raise Refused(403, f"wrong PIN ({more} the pairing window)")
        if check.outcome == "closed-now":
            log.warning("native pairing PIN closed after %d wrong PINs", MAX_WRONG_PINS)
            raise Refused(403, "wrong PIN; " + CLOSED_BY_WRONG_PINS)
        if check.outcome == "closed":
            raise Refused(403, CLOSED_BY_WRONG_PINS)
        # not armed, or bound to another device: the PIN means nothing, ask the operator
    try:
        entry, new = q.knock(fingerprint, name, ip)
    except QueueFull as exc:
        raise Refused(429, str(exc)) from None
    if new:
        emit_device("pairing.pending", name, fingerprint, PLANE_NATIVE)
    return Knock("pending", pending_id=entry.id)


def pending() -> list[dict]:
    return [e.record() for e in queue().entries()]


def approve(pending_id: int, name=None) -> PairedClient | None:
    q = queue()
    entry = q.claim(pending_id)
    if entry is None:
        return None
    try:
        label = (
            clean_name(name, entry.fingerprint) if isinstance(name, str) and name.strip() else ""
        )
        return store(entry.fingerprint, label or entry.name)
    finally:
        q.release(entry.fingerprint)


def deny(pending_id: int) -> bool:
    q = queue()
    entry = q.claim(pending_id)
    if entry is None:
        return False
    try:
        q.mark_denied(entry.fingerprint)
    finally:
        q.release(entry.fingerprint)
    emit_device("pairing.denied", entry.name, entry.fingerprint, PLANE_NATIVE)
    return True


def clamp_ttl(value) -> int:
    if value is None:
        return ARM_TTL_DEFAULT
    if isinstance(value, bool) or not isinstance(value, int):
        raise ValueError("ttl_secs must be an integer")
    return max(ARM_TTL_MIN, min(ARM_TTL_MAX, value))


def pair_status() -> dict:
    """NativePairStatus, plus `wrong_pins` (counted against the armed window) and
    `closed_by_wrong_pins` (the last window was closed by wrong PINs, not re-armed since)."""
    q = queue()
    state = q.armed()
    left = None
    if state:
        left = max(0, int(state["expires_at"] - q.clock()))
    return {
        "enabled": True,
        "armed": state is not None,
        "pin": state["pin"] if state else None,
        "expires_in_secs": left,
        "paired_clients": native_clients().count(),
        "wrong_pins": int(state.get("wrong", 0)) if state else 0,
        "closed_by_wrong_pins": state is None and q.closed_by_wrong_pins(),
    }


def arm(ttl_secs, fingerprint=None) -> dict:
    ttl = clamp_ttl(ttl_secs)
    fp = (
        fingerprint.strip().lower()
        if isinstance(fingerprint, str) and fingerprint.strip()
        else None
    )
    queue().arm(ttl, fp or None)
    return pair_status()


def disarm() -> None:
    queue().disarm()


def unpair(fingerprint: str) -> bool:
    fp = fingerprint.lower()
    deleted, _ = native_clients().filter(fingerprint=fp).delete()
    if deleted:
        sessions.end([fp])
    return bool(deleted)


def authorized(fingerprint: str) -> bool:
    return native_clients().filter(fingerprint=fingerprint, enabled=True).exists()
