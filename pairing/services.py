"""Pairing and paired clients: the one place both APIs, the /pin page and the compat plane's
listener change or read who may talk to the host.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import logging
import re

from cryptography import x509
from django.db import transaction
from django.db.models import Max
from django.utils import timezone

from common import dbversion, netranges
from common.errors import Invalid
from common.names import sanitize_name
from hooks import events
from hostconfig import store
from pairing import crypto
from pairing.models import PLANE_COMPAT, PLANE_NATIVE, PairedClient, PinRequest
from pairing.signals import announce_revocation

log = logging.getLogger(__name__)

FINGERPRINT_RE = re.compile(r"^[0-9a-fA-F]{64}$")
LAST_SEEN_EVERY = dt.timedelta(seconds=60)


class PinError(Invalid, ValueError):
    """The PIN or name an operator typed is not acceptable."""


# -- records -------------------------------------------------------------------------------------
def _unix(value: dt.datetime | None) -> int | None:
    return int(value.timestamp()) if value else None


def cert_facts(pem: str) -> dict:
    """Subject and validity of a stored certificate; nulls when it does not parse."""
    try:
        cert = x509.load_pem_x509_certificate(pem.encode())
    except (ValueError, TypeError):
        return {"subject": None, "not_before_unix": None, "not_after_unix": None}
    return {
        "subject": cert.subject.rfc4514_string(),
        "not_before_unix": _unix(cert.not_valid_before_utc),
        "not_after_unix": _unix(cert.not_valid_after_utc),
    }


def client_record(client: PairedClient) -> dict:
    """The management API's paired-client record."""
    return {
        "fingerprint": client.fingerprint,
        "name": client.name,
        "uuid": client.uuid,
        "enabled": client.enabled,
        "plane": client.plane,
        **cert_facts(client.cert_pem),
        "paired_at_unix": _unix(client.paired_at),
        "last_seen_unix": _unix(client.last_seen),
    }


def named_cert(client: PairedClient) -> dict:
    """The admin API's `named_certs` entry (`cert` is the fingerprint, never the PEM)."""
    return {
        "name": client.name,
        "uuid": client.uuid,
        "enabled": client.enabled,
        "cert": client.fingerprint,
    }


def compat_clients():
    return PairedClient.objects.filter(plane=PLANE_COMPAT)


def list_clients() -> list[PairedClient]:
    """Both planes: native (browser) clients are listed, renamed, disabled and unpaired here too."""
    return list(PairedClient.objects.all())


def client_records() -> list[dict]:
    """`GET /api/v1/clients`: every client's record, built again only when the database moved."""
    return dbversion.cached(
        "pairing.client_records", lambda: [client_record(c) for c in list_clients()]
    )


def _counts() -> dict:
    return {
        "paired_clients": compat_clients().count(),
        "native_paired_clients": PairedClient.objects.filter(plane=PLANE_NATIVE).count(),
        # The latest expiry of a PIN still waiting: pending while that lies ahead.
        "pin_expires": PinRequest.objects.filter(key_hex="").aggregate(t=Max("expires_at"))["t"],
    }


def runtime_counts() -> dict:
    """The pairing part of `GET /api/v1/status` (queried again only when the database moved)."""
    counts = dbversion.cached("pairing.counts", _counts)
    expires = counts["pin_expires"]
    return {
        "paired_clients": counts["paired_clients"],
        "native_paired_clients": counts["native_paired_clients"],
        "pin_pending": expires is not None and expires > timezone.now(),
    }


# -- removal and enable switch ---------------------------------------------------------------------
def valid_fingerprint(value: str) -> bool:
    return bool(FINGERPRINT_RE.match(value or ""))


def unpair_fingerprint(fingerprint: str) -> bool:
    """Remove one client by fingerprint (any case). False when there is none."""
    fp = fingerprint.lower()
    deleted, _ = PairedClient.objects.filter(fingerprint=fp).delete()
    if deleted:
        log.info("unpaired client %s", fp[:12])
        announce_revocation([fp])
    return bool(deleted)


def unpair_uuid(uuid: str) -> bool:
    client = PairedClient.objects.filter(uuid__iexact=uuid).first()
    if client is None:
        return False
    return unpair_fingerprint(client.fingerprint)


def unpair_all() -> int:
    with transaction.atomic():
        count, _ = PairedClient.objects.all().delete()
    log.info("unpaired all %d clients", count)
    announce_revocation(None)
    return count


def set_enabled(uuid: str, enabled: bool) -> bool:
    client = PairedClient.objects.filter(uuid__iexact=uuid).first()
    if client is None:
        return False
    PairedClient.objects.filter(pk=client.pk).update(enabled=enabled)
    log.info("client %s %s", client.fingerprint[:12], "enabled" if enabled else "disabled")
    if not enabled:
        announce_revocation([client.fingerprint])
    return True


# -- the compat plane's view -----------------------------------------------------------------------
def authorized(fingerprint: str) -> PairedClient | None:
    """The paired, enabled client with this certificate, or None. Refreshes `last_seen`."""
    client = compat_clients().filter(fingerprint=fingerprint, enabled=True).first()
    if client is None:
        return None
    now = timezone.now()
    if client.last_seen is None or now - client.last_seen > LAST_SEEN_EVERY:
        PairedClient.objects.filter(pk=client.pk).update(last_seen=now)
    return client


def store_client(cert: x509.Certificate, name: str, plane: str = PLANE_COMPAT) -> PairedClient:
    """Trust a certificate (re-pairing a known one keeps its uuid, renames and enables it)."""
    fp = crypto.fingerprint(cert)
    pem = crypto.cert_pem(cert)
    with transaction.atomic():
        client, created = PairedClient.objects.get_or_create(
            fingerprint=fp,
            defaults={"cert_pem": pem, "name": name, "plane": plane},
        )
        if not created:
            client.cert_pem, client.name, client.enabled = pem, name, True
            client.paired_at = timezone.now()
            client.save(update_fields=["cert_pem", "name", "enabled", "paired_at"])
    return client


# -- PIN entry -------------------------------------------------------------------------------------
def normalize_pin(value) -> str:
    if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 9999:
        return f"{value:04d}"
    if isinstance(value, str):
        pin = value.strip()
        if len(pin) == 4 and pin.isascii() and pin.isdigit():
            return pin
    raise PinError("pin must be 4 digits, 0000 to 9999")


def normalize_name(value) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise PinError("name must be a string")
    return sanitize_name(value)


def pending_requests() -> list[PinRequest]:
    return list(PinRequest.objects.filter(key_hex="", expires_at__gt=timezone.now()))


def submit_pin(pin, name=None) -> bool:
    """Hand the PIN to the oldest waiting handshake. False when none waits.

    The key is derived here and stored for the listener to pick up; the PIN is not stored.
    """
    pin = normalize_pin(pin)
    name = normalize_name(name)
    for req in pending_requests()[:8]:
        try:
            key = crypto.derive_key(bytes.fromhex(req.salt_hex), pin)
        except ValueError:
            continue
        claimed = PinRequest.objects.filter(pk=req.pk, key_hex="").update(
            key_hex=key.hex(), client_name=name
        )
        if claimed:
            log.info("PIN entered for the pairing request of %s", req.fingerprint[:12])
            return True
    return False


# -- trusted subnets -------------------------------------------------------------------------------
TRUE_WORDS = {"true", "yes", "on", "enable", "enabled", "1"}


def raw_config() -> dict[str, str]:
    return store.read_raw()


def parse_subnets(raw) -> list[ipaddress.IPv4Network | ipaddress.IPv6Network]:
    """CIDR list from `a,b`, `[a, b]`, a JSON list or one per line; bad entries are skipped."""
    if isinstance(raw, list):
        items = [str(x) for x in raw]
    else:
        items = re.split(r"[\s,]+", str(raw or "").strip().strip("[]"))
    nets = []
    for item in items:
        item = item.strip().strip("'\"")
        if not item:
            continue
        try:
            nets.append(ipaddress.ip_network(item, strict=False))
        except ValueError:
            log.warning("trusted_subnets: ignoring %r (not a CIDR)", item)
    return nets


def trusted_network() -> tuple[bool, list]:
    raw = raw_config()
    auto = raw.get("trusted_subnet_auto_pairing", "").strip().lower() in TRUE_WORDS
    return auto, parse_subnets(raw.get("trusted_subnets", ""))


def in_trusted_subnet(remote: str) -> bool:
    """True when auto-pairing is on and `remote` lies in one of the trusted subnets."""
    auto, nets = trusted_network()
    if not auto or not nets:
        return False
    return netranges.in_networks(remote, nets)


# -- events ----------------------------------------------------------------------------------------
def emit_device(kind: str, name: str, fingerprint: str, plane: str = PLANE_COMPAT) -> None:
    events.emit(kind, {"device": {"name": name, "fingerprint": fingerprint, "plane": plane}})


def pin_form(post=None) -> tuple[dict, int]:
    """The PIN form's context and status, for the bare /pin page and the console's "Pair a
    device" alike; `post` is the submitted form (None: a GET)."""
    message, error, status, name = "", "", 200, ""
    if post is not None:
        name = post.get("name", "")
        try:
            if submit_pin(post.get("pin", ""), name):
                message, name = "PIN accepted. Finish pairing on the device.", ""
            else:
                error, status = "No device is waiting for a PIN. Start pairing on the device.", 409
        except PinError:
            error, status = "The PIN must be 4 digits (0000 to 9999).", 400
    ctx = {"message": message, "error": error, "name": name, "pending": pending_requests()}
    return ctx, status
