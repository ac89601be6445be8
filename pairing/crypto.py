"""Cryptographic primitives of GameStream PIN pairing (host side).

AES-128-ECB without padding keyed from SHA-256(salt || PIN), SHA-256 hashes over challenge
material, RSA PKCS#1 v1.5 signatures with SHA-256. A certificate's "signature" is the raw
signatureValue of the X.509 structure, which both sides mix into their hashes to bind the
handshake to the certificates they exchanged.
"""

from __future__ import annotations

import hashlib

from cryptography import x509
from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import padding, rsa
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

SALT_LEN = 16
KEY_LEN = 16
BLOCK = 16
HASH_LEN = 32  # SHA-256: the hash clients use against an appversion major >= 7


class CertificateError(ValueError):
    """The bytes are not a usable client certificate."""


def derive_key(salt: bytes, pin: str) -> bytes:
    """The AES key both sides derive from the salt the client sent and the PIN it displays."""
    return hashlib.sha256(salt + pin.encode("ascii")).digest()[:KEY_LEN]


def _check_blocks(data: bytes) -> None:
    if not data or len(data) % BLOCK:
        raise ValueError("length must be a non-zero multiple of 16 bytes")


def aes_ecb_encrypt(key: bytes, data: bytes) -> bytes:
    _check_blocks(data)
    enc = Cipher(algorithms.AES(key), modes.ECB()).encryptor()
    return enc.update(data) + enc.finalize()


def aes_ecb_decrypt(key: bytes, data: bytes) -> bytes:
    _check_blocks(data)
    dec = Cipher(algorithms.AES(key), modes.ECB()).decryptor()
    return dec.update(data) + dec.finalize()


def sha256(data: bytes) -> bytes:
    return hashlib.sha256(data).digest()


def sign(private_key: rsa.RSAPrivateKey, data: bytes) -> bytes:
    return private_key.sign(data, padding.PKCS1v15(), hashes.SHA256())


def verify(cert: x509.Certificate, signature: bytes, data: bytes) -> bool:
    try:
        cert.public_key().verify(signature, data, padding.PKCS1v15(), hashes.SHA256())
    except (InvalidSignature, ValueError, TypeError):
        return False
    return True


def load_client_cert(pem: bytes) -> x509.Certificate:
    """A client certificate from PEM bytes; it must carry an RSA key (signatures are RSA)."""
    try:
        cert = x509.load_pem_x509_certificate(pem)
        key = cert.public_key()
        _ = cert.signature
    except (ValueError, TypeError) as exc:
        raise CertificateError(f"certificate does not parse: {exc}") from None
    if not isinstance(key, rsa.RSAPublicKey):
        raise CertificateError("certificate key is not RSA")
    return cert


def cert_der(cert: x509.Certificate) -> bytes:
    return cert.public_bytes(serialization.Encoding.DER)


def cert_pem(cert: x509.Certificate) -> str:
    return cert.public_bytes(serialization.Encoding.PEM).decode("ascii")


def fingerprint_der(der: bytes) -> str:
    """The identity of a client everywhere in the host: lowercase hex SHA-256 of the DER."""
    return hashlib.sha256(der).hexdigest()


def fingerprint(cert: x509.Certificate) -> str:
    return fingerprint_der(cert_der(cert))
