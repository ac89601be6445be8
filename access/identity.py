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

from common.files import atomic_write
from common.statedir import IDENTITY_FILE, TLS_CERT_FILE, TLS_KEY_FILE, state_dir
from hostconfig import store

CERT_DAYS = 20 * 365


class TlsConfigError(ValueError):
    """The operator's `cert` / `pkey` cannot be served; the message names the key."""


def operator_pair() -> tuple[Path, Path] | None:
    """The configured `cert` and `pkey` paths (host.conf), or None when neither is set."""
    cert, key = store.get("cert"), store.get("pkey")
    if not cert and not key:
        return None
    return Path(cert) if cert else None, Path(key) if key else None


def cert_path() -> Path:
    """The certificate every TLS listener serves: the operator's `cert`, else the generated one."""
    pair = operator_pair()
    return pair[0] if pair and pair[0] else state_dir() / TLS_CERT_FILE


def key_path() -> Path:
    pair = operator_pair()
    return pair[1] if pair and pair[1] else state_dir() / TLS_KEY_FILE


def check_pair(cert_file: str | Path | None, key_file: str | Path | None) -> None:
    """TlsConfigError naming the key unless the two files are a usable pair: a PEM certificate
    valid now, an unencrypted PEM RSA key of at least 2048 bits (GameStream clients pin
    RSA/SHA-256 during pairing), and the key that matches the certificate."""
    if not cert_file or not key_file:
        missing = "pkey" if cert_file else "cert"
        raise TlsConfigError(f"{missing}: cert and pkey must be set together")
    try:
        cert = x509.load_pem_x509_certificate(Path(cert_file).read_bytes())
    except OSError as exc:
        raise TlsConfigError(f"cert: {cert_file} cannot be read ({exc.strerror})") from None
    except ValueError:
        raise TlsConfigError(f"cert: {cert_file} is not a PEM certificate") from None
    try:
        key = serialization.load_pem_private_key(Path(key_file).read_bytes(), password=None)
    except OSError as exc:
        raise TlsConfigError(f"pkey: {key_file} cannot be read ({exc.strerror})") from None
    except (ValueError, TypeError):
        raise TlsConfigError(f"pkey: {key_file} is not an unencrypted PEM private key") from None
    if not isinstance(key, rsa.RSAPrivateKey) or key.key_size < 2048:
        raise TlsConfigError("pkey: must be an RSA key of at least 2048 bits")
    now = dt.datetime.now(dt.UTC)
    if not cert.not_valid_before_utc <= now <= cert.not_valid_after_utc:
        raise TlsConfigError(f"cert: {cert_file} is not valid now (expired or not yet valid)")
    if cert.public_key().public_numbers() != key.public_key().public_numbers():
        raise TlsConfigError("cert: does not match the key in pkey")


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
    """The operator's pair (`cert`, `pkey`) checked, else the self-signed certificate and key,
    created unless a valid pair is already there. TlsConfigError stops the start before any
    listener opens when the operator's pair cannot be served."""
    pair = operator_pair()
    if pair is not None:
        check_pair(*pair)
        return pair[0], pair[1]
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
