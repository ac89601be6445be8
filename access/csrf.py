"""CSRF tokens of the admin API: 32 random bytes, one per client, valid for one hour.

Browsers writing from an allowed origin pass on Origin/Referer; callers that send neither are
not browsers and are exempt; everyone else must echo a minted token.

The tokens live in Redis: the host runs several web processes, and the request that mints a
token and the one that echoes it may land on different ones. Each keeps its wall-clock expiry
beside it (so an expired token still reads "expired"), and Redis drops it a TTL later.
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
import time

from access import identity
from access.origin import allowed_origins, origin_matches
from common import redis_client

TTL_S = 3600.0


def _key(client_id: str) -> str:
    """Keyed by a digest of the id: bounded length, no two ids share a key, no name in Redis."""
    digest = hashlib.sha256(client_id.encode("utf-8", "replace")).hexdigest()
    return f"hostmgmt:{identity.unique_id()}:csrf:{digest}"


def mint(client_id: str) -> str:
    token = secrets.token_urlsafe(32)
    expiry = time.time() + TTL_S
    redis_client.client().set(_key(client_id), f"{token} {expiry}", ex=int(2 * TTL_S))
    return token


def _stored(client_id: str) -> tuple[str, float] | None:
    raw = redis_client.client().get(_key(client_id))
    if raw is None:
        return None
    token, _, expiry = raw.decode().partition(" ")
    return token, float(expiry)


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
    stored = _stored(client_id)
    if stored is None:
        return "invalid CSRF token"
    token, expiry = stored
    if not hmac.compare_digest(token.encode(), presented.encode("utf-8", "replace")):
        return "invalid CSRF token"
    if expiry <= time.time():
        return "CSRF token expired"
    return None
