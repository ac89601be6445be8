"""Token primitives shared by both APIs: format checks and constant-time comparison."""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets

TOKEN_RE = re.compile(r"^[0-9a-f]{64}$")


def new_token() -> str:
    """32 random bytes as 64 lowercase hex."""
    return secrets.token_hex(32)


def is_token_shaped(value: str) -> bool:
    return bool(TOKEN_RE.match(value))


def tokens_equal(presented: str, expected: str) -> bool:
    """Compare digests, so neither the length nor a prefix of `expected` leaks through timing."""
    a = hashlib.sha256(presented.encode("utf-8", "surrogateescape")).digest()
    b = hashlib.sha256(expected.encode("utf-8", "surrogateescape")).digest()
    return hmac.compare_digest(a, b)


def parse_bearer(header: bytes) -> str | None:
    """The token of an `Authorization: Bearer <token>` header, or None for any other shape."""
    try:
        text = header.decode("ascii")
    except UnicodeDecodeError:
        return None
    parts = text.split()
    if len(parts) != 2 or parts[0].lower() != "bearer":
        return None
    return parts[1]
