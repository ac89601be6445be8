"""What a joining operator needs to pin this host: its management URL(s) and the SHA-256 of
the certificate its TLS listeners serve (`manage.py fleet_identity`, the Fleet page,
`GET /api/v1/fleet/identity`). The same fingerprint refuses a join of this host to itself."""

from __future__ import annotations

import socket

from cryptography import x509
from cryptography.hazmat.primitives import serialization
from django.conf import settings

from access import identity
from fleet.pinned import certificate_fingerprint
from host.hostinfo import local_ip


def fingerprint() -> str | None:
    """SHA-256 (hex) of the served certificate's DER; None when there is none yet."""
    try:
        cert = x509.load_pem_x509_certificate(identity.cert_path().read_bytes())
    except (OSError, ValueError):
        return None
    return certificate_fingerprint(cert.public_bytes(serialization.Encoding.DER))


def urls() -> list[str]:
    """The management URLs another host may reach this one at (LAN address and host name)."""
    port = settings.PORTS.mgmt
    hosts = []
    for name in (_safe(local_ip), _safe(socket.gethostname)):
        if name and name not in hosts and name.isprintable() and " " not in name:
            hosts.append(name)
    return [f"https://{f'[{h}]' if ':' in h else h}:{port}" for h in hosts]


def _safe(fn) -> str | None:
    try:
        value = fn()
    except OSError:
        return None
    return value if isinstance(value, str) else None


def describe() -> dict:
    return {"fingerprint": fingerprint(), "urls": urls()}
