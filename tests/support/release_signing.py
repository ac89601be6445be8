"""A release manifest signed as the updater reads one (console/updater.py), for tests."""

from __future__ import annotations

import base64
import json

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey


def signed(payload: dict, key: Ed25519PrivateKey) -> bytes:
    raw = json.dumps(payload).encode()
    return json.dumps(
        {
            "payload": base64.b64encode(raw).decode(),
            "signature": base64.b64encode(key.sign(raw)).decode(),
        }
    ).encode()
