"""The compat plane's nvhttp listener reaches the host through this one object: paired-client
checks, PIN requests, app catalog and covers, host facts and events.

Every method is called from a listener worker thread and reads the database or files afresh,
so a change made by another process (unpair, disable, PIN, config) counts on the next request.
"""

from __future__ import annotations

import datetime as dt
import logging
import socket

import psutil
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django.conf import settings
from django.db import close_old_connections
from django.utils import timezone

from access import identity
from compat.codecs import Offer
from compat.nvhttp.coordinator import PinGone
from compat.nvhttp.dispatch import App, ClientInfo
from compat.nvhttp.handshake import HostIdentity
from library import catalog
from media import encoders
from pairing import conf, services
from pairing.models import PinRequest
from streaming.sessions import encoding

log = logging.getLogger(__name__)


def warm_probe() -> None:
    """/serverinfo's codec offer reads the encoder probe: the listener runs it at start, in a
    thread (cached in the state dir afterwards), so a client's first /serverinfo need not wait."""
    try:
        encoders.available()
    except Exception:  # /serverinfo falls back to H.264 on its own
        log.exception("encoder probe failed")


class NvhttpBackend:
    def __init__(self):
        self._identity: HostIdentity | None = None
        # The streaming side replaces this to report a client's running app id in /serverinfo.
        self.current_game_provider = None

    # -- host facts ------------------------------------------------------------------------------
    def host_identity(self) -> HostIdentity:
        if self._identity is None:
            pem = identity.cert_path().read_bytes()
            key = serialization.load_pem_private_key(identity.key_path().read_bytes(), None)
            cert = x509.load_pem_x509_certificate(pem)
            self._identity = HostIdentity(pem, key, cert.signature)
        return self._identity

    def server_facts(self, client_name: str = "") -> dict:
        raw = services.raw_config()
        offer = Offer(encoding.offered_or_h264(client_name))  # serverinfo must answer
        return {
            "hostname": identity.host_name(),
            "uniqueid": identity.unique_id(),
            "http_port": settings.PORTS.http,
            "https_port": settings.PORTS.https,
            "external_ip": raw.get("external_ip", "").strip(),
            "codec_mode_support": offer.codec_mode_support,
            "max_luma_pixels_hevc": offer.max_luma_pixels_hevc,
        }

    def current_game(self, fingerprint: str | None) -> int:
        """The app id of this client's own session (0: none)."""
        provider = self.current_game_provider
        if provider is None or not fingerprint:
            return 0
        try:
            return int(provider(fingerprint) or 0)
        except Exception:  # serverinfo must answer even if the engine is sick
            log.exception("current game lookup failed")
            return 0

    def mac_address(self, local: str) -> str:
        for addrs in psutil.net_if_addrs().values():
            if any(a.family == socket.AF_INET and a.address == local for a in addrs):
                for a in addrs:
                    if a.family == psutil.AF_LINK and a.address:
                        return a.address
        return "00:00:00:00:00:00"

    # -- clients ---------------------------------------------------------------------------------
    def authorized_client(self, fingerprint: str) -> ClientInfo | None:
        # Each pool thread keeps its own SQLite connection: reconnecting per request cost more
        # than the query itself.
        client = services.authorized(fingerprint)
        if client is None:
            return None
        return ClientInfo(client.fingerprint, client.name, client.uuid, client.cert_pem)

    def unpair_client(self, fingerprint: str) -> bool:
        return services.unpair_fingerprint(fingerprint)

    def store_client(self, cert, fingerprint: str, name: str) -> None:
        services.store_client(cert, name)

    def tofu_offered(self, remote: str) -> bool:
        return services.in_trusted_subnet(remote)

    def auto_pair(self, remote: str, params: dict[str, str]) -> bool:
        """Trusted-subnet auto-pairing, only for clients that opt in with `trustedpair=1`."""
        return params.get("trustedpair") == "1" and services.in_trusted_subnet(remote)

    # -- PIN requests ----------------------------------------------------------------------------
    def open_pin_request(self, *, device: str, fingerprint: str, salt: bytes, remote: str) -> int:
        close_old_connections()
        now = timezone.now()
        req = PinRequest.objects.create(
            fingerprint=fingerprint,
            device_name=device,
            remote_addr=remote,
            salt_hex=salt.hex(),
            created_at=now,
            expires_at=now + dt.timedelta(seconds=conf.pin_timeout_s()),
        )
        return req.pk

    def poll_pin(self, request_id: int):
        row = PinRequest.objects.filter(pk=request_id).values("key_hex", "client_name").first()
        if row is None:
            return PinGone()
        if not row["key_hex"]:
            return None
        return bytes.fromhex(row["key_hex"]), row["client_name"]

    def close_pin_request(self, request_id: int) -> None:
        PinRequest.objects.filter(pk=request_id).delete()

    @staticmethod
    def clear_stale_requests() -> int:
        """Requests left by a listener that died; nobody will ever answer them."""
        deleted, _ = PinRequest.objects.all().delete()
        return deleted

    # -- catalog ---------------------------------------------------------------------------------
    def list_apps(self) -> list[App]:
        apps = []
        for app in catalog.list_apps():
            try:
                apps.append(App(int(app.id), app.name))
            except (TypeError, ValueError):
                continue
        return apps

    def cover_png(self, app_id: int) -> bytes | None:
        app = catalog.find_app(str(app_id))
        if app is None:
            return None
        return catalog.cover_png(app) or catalog.box_png()

    # -- events ----------------------------------------------------------------------------------
    def emit(self, kind: str, name: str, fingerprint: str) -> None:
        services.emit_device(kind, name, fingerprint)
