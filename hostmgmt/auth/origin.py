"""Where a caller sits (`pc`, `lan`, `wan`) and which browser origins may write."""

from __future__ import annotations

import ipaddress
from urllib.parse import urlsplit

from django.conf import settings

from hostmgmt.config import store

_LAN_NETS = [
    ipaddress.ip_network(n)
    for n in (
        "10.0.0.0/8",
        "172.16.0.0/12",
        "192.168.0.0/16",
        "100.64.0.0/10",
        "169.254.0.0/16",
        "fc00::/7",
        "fe80::/10",
    )
]
_RANK = {"pc": 0, "lan": 1, "wan": 2}


def classify(ip: str) -> str:
    try:
        addr = ipaddress.ip_address(ip.split("%", 1)[0])
    except ValueError:
        return "wan"
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped:
        addr = addr.ipv4_mapped
    if addr.is_loopback:
        return "pc"
    if any(addr in net for net in _LAN_NETS):
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
