"""Ed25519 keys as the store writes them (`ed25519:<base64 of the 32 raw bytes>`) and the
detached signature of a catalog (`catalog.json.sig`: base64 of the 64-byte signature over the
exact bytes of `catalog.json`). `scripts/sign_catalog.py` uses the signing half."""

from __future__ import annotations

import base64
import binascii

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives import serialization
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey, Ed25519PublicKey

PREFIX = "ed25519:"


class BadKey(ValueError):
    pass


def parse_public_key(text: str) -> Ed25519PublicKey:
    """`ed25519:<base64>` -> key; raises BadKey with the reason."""
    if not isinstance(text, str) or not text.startswith(PREFIX):
        raise BadKey("must be ed25519:<base64 of 32 bytes>")
    try:
        raw = base64.b64decode(text[len(PREFIX) :], validate=True)
    except (binascii.Error, ValueError):
        raise BadKey("is not valid base64") from None
    if len(raw) != 32:
        raise BadKey("must be 32 bytes once decoded")
    return Ed25519PublicKey.from_public_bytes(raw)


def format_public_key(key: Ed25519PublicKey) -> str:
    raw = key.public_bytes(serialization.Encoding.Raw, serialization.PublicFormat.Raw)
    return PREFIX + base64.b64encode(raw).decode()


def verify(public_key: str, data: bytes, signature_file: bytes) -> bool:
    """Whether `signature_file` (base64 text, surrounding whitespace allowed) signs `data`."""
    try:
        sig = base64.b64decode(signature_file.strip(), validate=True)
        parse_public_key(public_key).verify(sig, data)
    except (BadKey, binascii.Error, ValueError, InvalidSignature):
        return False
    return True


def new_private_key() -> Ed25519PrivateKey:
    return Ed25519PrivateKey.generate()


def private_key_pem(key: Ed25519PrivateKey) -> bytes:
    return key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )


def load_private_key(pem: bytes) -> Ed25519PrivateKey:
    key = serialization.load_pem_private_key(pem, password=None)
    if not isinstance(key, Ed25519PrivateKey):
        raise BadKey("not an Ed25519 private key")
    return key


def sign(key: Ed25519PrivateKey, data: bytes) -> bytes:
    """The detached signature file's content for `data`."""
    return base64.b64encode(key.sign(data)) + b"\n"
