"""Client identities for pairing tests: RSA keys are slow to make, so a few are made once."""

from __future__ import annotations

import datetime as dt
import functools

from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec, rsa
from cryptography.x509.oid import NameOID


@functools.cache
def identity(n: int = 0, kind: str = "rsa"):
    """(private key, certificate) number `n`: self-signed like Moonlight's client certificate."""
    if kind == "ec":
        key = ec.generate_private_key(ec.SECP256R1())
    else:
        key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, f"NVIDIA GameStream Client {n}")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(n + 1)
        .not_valid_before(now - dt.timedelta(days=1))
        .not_valid_after(now + dt.timedelta(days=3650))
        .sign(key, hashes.SHA256())
    )
    return key, cert


def pem(cert) -> bytes:
    return cert.public_bytes(serialization.Encoding.PEM)
