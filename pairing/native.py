"""Native-plane pairing: a browser knocks, the operator approves or denies it (or arms a
self-pairing PIN), and unpairing revokes it. What the `/api/v1/native` views (the console's
clients page included) and the player's offer call.

Identity is the DTLS certificate fingerprint the browser puts in its SDP offer (the native
plane extracts it; DTLS itself later proves the peer holds that certificate). Waiting devices
and the armed PIN live in Redis (`pairing/native_pending.py`), paired ones in `PairedClient`.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass

from django.db import transaction
from django.utils import timezone

from common import redis_client
from common.errors import Forbidden, Invalid, NotFound, TooMany
from common.names import sanitize_name
from pairing.models import PLANE_NATIVE, PairedClient
from pairing.native_pending import MAX_WRONG_PINS, PendingQueue, QueueFull
from pairing.services import emit_device
from pairing.signals import announce_revocation

log = logging.getLogger("pairing.native")

ARM_TTL_DEFAULT, ARM_TTL_MIN, ARM_TTL_MAX = 120, 15, 600
FP_RE = re.compile(r"^[0-9a-f]{64}$")
NO_PENDING = "no pending device with that id (unknown or expired)"
CLOSED_BY_WRONG_PINS = (
    f"the pairing PIN was closed after {MAX_WRONG_PINS} wrong PINs; "
    "ask the operator to arm a new one"
)


def queue() -> PendingQueue:
    return PendingQueue(redis_client.client())


@dataclass
class Knock:
    state: str  # "paired" | "pending"
    client: PairedClient | None = None
    pending_id: int | None = None


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


def pair_vouched(fingerprint: str, name: str) -> bool:
    """Pair a device another host vouched for (a fleet placement), as an operator approval
    would: True when it was paired here; False when a record exists (paired, disabled or on
    the compat plane), which the vouching never changes."""
    if PairedClient.objects.filter(fingerprint=fingerprint).exists():
        return False
    queue().drop(fingerprint)
    store(fingerprint, clean_name(name, fingerprint))
    return True


def knock(fingerprint: str, name: str, ip: str, pin: str | None = None) -> Knock:
    """A browser offers a session: paired, newly paired by PIN, pending, or refused (403, 429)."""
    client = PairedClient.objects.filter(fingerprint=fingerprint).first()
    if client is not None:
        if client.plane != PLANE_NATIVE:
            raise Forbidden("this certificate is paired on the compat plane")
        if not client.enabled:
            raise Forbidden("this device is disabled by the operator")
        PairedClient.objects.filter(pk=client.pk).update(last_seen=timezone.now())
        return Knock("paired", client=client)
    q = queue()
    if q.pop_denied(fingerprint):
        raise Forbidden("the operator denied this device; reload to ask again")
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
            raise Forbidden(f"wrong PIN ({more} the pairing window)")
        if check.outcome == "closed-now":
            log.warning("native pairing PIN closed after %d wrong PINs", MAX_WRONG_PINS)
            raise Forbidden("wrong PIN; " + CLOSED_BY_WRONG_PINS)
        if check.outcome == "closed":
            raise Forbidden(CLOSED_BY_WRONG_PINS)
        # not armed, or bound to another device: the PIN means nothing, ask the operator
    try:
        entry, new = q.knock(fingerprint, name, ip)
    except QueueFull as exc:
        raise TooMany(str(exc)) from None
    # A decision can land after this knock's checks above and before its queueing, its claim
    # mark already released (a knock delayed on a loaded host): look again, so a device just
    # approved or denied is never queued once more.
    if PairedClient.objects.filter(fingerprint=fingerprint).exists() or q.denied(fingerprint):
        q.drop(fingerprint)
        return knock(fingerprint, name, ip)
    if new:
        emit_device("pairing.pending", name, fingerprint, PLANE_NATIVE)
    return Knock("pending", pending_id=entry.id)


def pending() -> list[dict]:
    return [e.record() for e in queue().entries()]


def approve(pending_id: int, name=None) -> PairedClient:
    """Pair the waiting device (optionally under another name); NotFound when it is gone."""
    q = queue()
    entry = q.claim(pending_id)
    if entry is None:
        raise NotFound(NO_PENDING)
    try:
        label = (
            clean_name(name, entry.fingerprint) if isinstance(name, str) and name.strip() else ""
        )
        return store(entry.fingerprint, label or entry.name)
    finally:
        q.release(entry.fingerprint)


def deny(pending_id: int) -> None:
    """Refuse the waiting device once (its next knock learns it); NotFound when it is gone."""
    q = queue()
    entry = q.claim(pending_id)
    if entry is None:
        raise NotFound(NO_PENDING)
    try:
        q.mark_denied(entry.fingerprint)
    finally:
        q.release(entry.fingerprint)
    emit_device("pairing.denied", entry.name, entry.fingerprint, PLANE_NATIVE)


def clamp_ttl(value) -> int:
    if value is None:
        return ARM_TTL_DEFAULT
    if isinstance(value, bool) or not isinstance(value, int):
        raise Invalid("ttl_secs must be an integer")
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
    """Arm a one-use PIN for `ttl_secs` (clamped), optionally bound to one fingerprint."""
    if fingerprint is not None and not isinstance(fingerprint, str):
        raise Invalid("fingerprint must be a string")
    ttl = clamp_ttl(ttl_secs)
    fp = fingerprint.strip().lower() if fingerprint and fingerprint.strip() else None
    queue().arm(ttl, fp)
    return pair_status()


def disarm() -> None:
    queue().disarm()


def unpair(fingerprint: str) -> None:
    """Forget the device and announce the revocation (its live session ends now)."""
    fp = fingerprint.lower()
    if not FP_RE.match(fp):
        raise Invalid("fingerprint must be 64 hex characters")
    deleted, _ = native_clients().filter(fingerprint=fp).delete()
    if not deleted:
        raise NotFound("no paired native client with that fingerprint")
    announce_revocation([fp])


def authorized(fingerprint: str) -> bool:
    return native_clients().filter(fingerprint=fingerprint, enabled=True).exists()
