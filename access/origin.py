"""Where a caller sits (`pc`, `lan`, `wan`) and which browser origins may write."""

from __future__ import annotations

from urllib.parse import urlsplit

from django.conf import settings

from common import netranges
from hostconfig import store

_RANK = {"pc": 0, "lan": 1, "wan": 2}


def classify(ip: str) -> str:
    if netranges.is_loopback(ip):
        return "pc"
    if netranges.is_lan(ip):
        return "lan"
    return "wan"


def allowed(ip: str) -> bool:
    limit = store.get("origin_web_ui_allowed")
    return _RANK[classify(ip)] <= _RANK.get(limit, 1)


def allowed_origins(request_host: str | None = None) -> list[str]:
    port = settings.PORTS.mgmt
    origins = []
    for host in ("localhost", "127.0.0.1", "[::1]"):
        origins += [f"https://{host}", f"https://{host}:{port}"]
    if request_host:
        origins.append(f"https://{request_host}")
    for extra in store.get("csrf_allowed_origins"):
        if extra.startswith("https://") and len(extra) > 8:
            origins.append(extra.rstrip("/"))
    return origins


def origin_matches(url: str, origins: list[str]) -> bool:
    """True when `url` is one of `origins` or a path below one (the next char is `/` or end)."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return False
    if not parts.scheme or not parts.netloc:
        return False
    origin = f"{parts.scheme}://{parts.netloc}".lower()
    return origin in {o.lower() for o in origins}
