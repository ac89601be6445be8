"""Host identity: a stable unique id, the host name, and the TLS certificate and key.

The certificate is self-signed (RSA-2048, SHA-256) and serves the web UI, both APIs and the
GameStream HTTPS side; GameStream clients pin it during pairing.
"""

from __future__ import annotations

import datetime as dt
import ipaddress
import json
import socket
import uuid
from pathlib import Path

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import rsa
from cryptography.x509.oid import NameOID

from hostmgmt.lib.files import atomic_write
from hostmgmt.lib.statedir import IDENTITY_FILE, TLS_CERT_FILE, TLS_KEY_FILE, state_dir

CERT_DAYS = 20 * 365


def cert_path() -> Path:
    return state_dir() / TLS_CERT_FILE


def key_path() -> Path:
    return state_dir() / TLS_KEY_FILE


def ensure_identity() -> dict:
    """The persisted identity record, created on first start."""
    path = state_dir() / IDENTITY_FILE
    try:
        record = json.loads(path.read_text())
        if isinstance(record, dict) and record.get("uniqueid"):
            return record
    except (FileNotFoundError, json.JSONDecodeError):
        pass
    record = {"uniqueid": str(uuid.uuid4()).upper()}
    atomic_write(path, json.dumps(record), mode=0o600)
    return record


_unique_id: dict[str, str] = {}


def unique_id() -> str:
    """The host's unique id; it never changes once created, so read it once per state dir."""
    key = str(state_dir())
    if key not in _unique_id:
        _unique_id[key] = ensure_identity()["uniqueid"]
    return _unique_id[key]


def host_name() -> str:
    from hostmgmt.config import store

    return store.get("sunshine_name") or socket.gethostname()


def tls_material_valid() -> bool:
    try:
        cert = x509.load_pem_x509_certificate(cert_path().read_bytes())
        key = serialization.load_pem_private_key(key_path().read_bytes(), password=None)
    except (FileNotFoundError, ValueError):
        return False
    now = dt.datetime.now(dt.UTC)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        return False
    return cert.public_key().public_numbers() == key.public_key().public_numbers()


def ensure_tls() -> tuple[Path, Path]:
    """Create the self-signed certificate and key unless a valid pair is already there."""
    if tls_material_valid():
        return cert_path(), key_path()
    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "Streaming Host")])
    now = dt.datetime.now(dt.UTC)
    alt_names: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("::1")),
    ]
    hostname = socket.gethostname()
    if hostname and hostname != "localhost":
        alt_names.append(x509.DNSName(hostname))
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=CERT_DAYS))
        .add_extension(x509.SubjectAlternativeName(alt_names), critical=False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    key_pem = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL,
        serialization.NoEncryption(),
    )
    atomic_write(key_path(), key_pem, mode=0o600)
    atomic_write(cert_path(), cert.public_bytes(serialization.Encoding.PEM), mode=0o644)
    return cert_path(), key_path()
