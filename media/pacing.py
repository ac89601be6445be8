"""How fast the video sender may push a frame: the link's speed, a fraction of it, a ceiling.

`rate_cap_pct` (host config, 50..95) is the share of the link speed of the interface that routes
to the client; `max_send_mbps` (launch) is an absolute ceiling. The tighter one wins; with
neither (loopback, virtual interfaces and unknown speeds report none) a frame goes out as one
burst. Linux only: the route comes from /proc/net/route (IPv4; the local table is not in
it, so 127/8 is loopback by rule) and the speed from /sys/class/net/<iface>/speed (Mbit/s,
-1 or EINVAL when the driver does not know).
"""

from __future__ import annotations

import ipaddress
import logging
import sys

from common import netranges

log = logging.getLogger("media")

PROC_ROUTE = "/proc/net/route"
SYS_NET = "/sys/class/net"
RTF_UP = 0x0001


def route_interface(dest: str, route_file: str = PROC_ROUTE) -> str | None:
    """The interface the kernel's main IPv4 table sends `dest` out of (longest prefix, then
    lowest metric); None when nothing routes it or it is not an IPv4 address."""
    try:
        addr = ipaddress.IPv4Address(dest)
    except ValueError:
        try:  # an IPv4-mapped IPv6 address (dual-stack sockets report those)
            addr = ipaddress.IPv6Address(dest).ipv4_mapped
        except ValueError:
            return None
        if addr is None:
            return None
    if netranges.is_loopback(addr):
        return "lo"
    target = int(addr)
    best: tuple[int, int, str] | None = None  # (-prefix length, metric, iface)
    try:
        with open(route_file, encoding="ascii") as f:
            lines = f.read().splitlines()[1:]
    except (OSError, UnicodeDecodeError):
        return None
    for line in lines:
        fields = line.split()
        if len(fields) < 8:
            continue
        try:
            # Destination and mask are the in-memory (network order) u32 printed as a host-order
            # number ("000200C0" is 192.0.2.0 on x86/arm): back to bytes, read big-endian.
            dst = int.from_bytes(int(fields[1], 16).to_bytes(4, sys.byteorder), "big")
            mask = int.from_bytes(int(fields[7], 16).to_bytes(4, sys.byteorder), "big")
            flags, metric = int(fields[3], 16), int(fields[6])
        except (ValueError, OverflowError):
            continue
        if not flags & RTF_UP or target & mask != dst:
            continue
        key = (-bin(mask).count("1"), metric, fields[0])
        if best is None or key < best:
            best = key
    return best[2] if best else None


def link_speed_mbps(iface: str | None, sys_net: str = SYS_NET) -> int | None:
    """The negotiated speed of `iface` in Mbit/s; None when unknown (loopback, virtual, down)."""
    if not iface or "/" in iface or iface in (".", ".."):
        return None
    try:
        with open(f"{sys_net}/{iface}/speed", encoding="ascii") as f:
            speed = int(f.read().strip())
    except (OSError, ValueError, UnicodeDecodeError):  # EINVAL on lo, missing on some drivers
        return None
    return speed if speed > 0 else None


def send_cap_mbps(max_send_mbps: float, rate_cap_pct: int, link_mbps: int | None) -> float:
    """The pacer's rate: the tighter of `max_send_mbps` and `rate_cap_pct` % of the link;
    0.0 when neither applies (send each frame as one burst)."""
    caps = []
    if max_send_mbps and max_send_mbps > 0:
        caps.append(float(max_send_mbps))
    if link_mbps and rate_cap_pct and rate_cap_pct > 0:
        caps.append(link_mbps * rate_cap_pct / 100)
    return min(caps) if caps else 0.0


def pacing_for(client_ip: str, max_send_mbps: float, rate_cap_pct: int) -> float:
    """`send_cap_mbps` for a client at `client_ip`, its link found from this host's routes."""
    iface = route_interface(client_ip) if rate_cap_pct else None
    speed = link_speed_mbps(iface)
    rate = send_cap_mbps(max_send_mbps, rate_cap_pct, speed)
    log.info(
        "video pacing for %s: interface %s, link %s Mbit/s, rate_cap_pct %s, max_send_mbps %s"
        " -> %s",
        client_ip,
        iface,
        speed,
        rate_cap_pct,
        max_send_mbps,
        f"{rate:.0f} Mbit/s" if rate else "no cap (one burst per frame)",
    )
    return rate
