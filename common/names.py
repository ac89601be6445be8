"""Device names come from clients and operators: make them safe to store, log and show."""

from __future__ import annotations

import hashlib
import unicodedata

MAX_NAME_BYTES = 64


def sanitize_name(raw: str | None, fallback_seed: str = "") -> str:
    """Strip control and bidi characters, collapse whitespace, cap at 64 UTF-8 bytes.

    An empty result becomes `device <8 hex>` (derived from `fallback_seed`) or `""`.
    """
    text = "".join(
        " " if ch.isspace() else ch
        for ch in (raw or "")
        if ch.isspace() or unicodedata.category(ch) not in ("Cc", "Cf", "Cs", "Co", "Cn")
    )
    text = " ".join(text.split())
    encoded = text.encode("utf-8")
    if len(encoded) > MAX_NAME_BYTES:
        text = encoded[:MAX_NAME_BYTES].decode("utf-8", "ignore").rstrip()
    if not text and fallback_seed:
        return "device " + hashlib.sha256(fallback_seed.encode()).hexdigest()[:8]
    return text
