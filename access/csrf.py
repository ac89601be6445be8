"""CSRF tokens of the admin API: 32 random bytes, one per client, valid for one hour.

Browsers writing from an allowed origin pass on Origin/Referer; callers that send neither are
not browsers and are exempt; everyone else must echo a minted token.
"""

from __future__ import annotations

import hmac
import secrets
import threading
import time

from access.origin import allowed_origins, origin_matches

TTL_S = 3600.0
_tokens: dict[str, tuple[str, float]] = {}
_lock = threading.Lock()


def mint(client_id: str) -> str:
    token = secrets.token_urlsafe(32)
    now = time.monotonic()
    with _lock:
        for key in [k for k, (_, exp) in _tokens.items() if exp <= now]:
            del _tokens[key]
        _tokens[client_id] = (token, now + TTL_S)
    return token


def check(request, client_id: str) -> str | None:
    """None when the request passes, else the reason it fails."""
    origin = request.headers.get("Origin")
    referer = request.headers.get("Referer")
    origins = allowed_origins(request.get_host())
    if origin and origin != "null" and origin_matches(origin, origins):
        return None
    if not origin and referer and origin_matches(referer, origins):
        return None
    if not origin and not referer:
        return None
    presented = request.headers.get("X-CSRF-Token") or request.GET.get("csrf_token")
    if not presented:
        return "missing CSRF token"
    with _lock:
        stored = _tokens.get(client_id)
    if stored is None:
        return "invalid CSRF token"
    token, expiry = stored
    if not hmac.compare_digest(token.encode(), presented.encode("utf-8", "replace")):
        return "invalid CSRF token"
    if expiry <= time.monotonic():
        return "CSRF token expired"
    return None
