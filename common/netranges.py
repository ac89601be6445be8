"""The address ranges the host tells apart, and one predicate per question a caller asks.

- loopback: this machine (127.0.0.0/8, ::1);
- LAN: the operator's own network, which the console, encryption policy and pairing trust
  more than the internet: RFC 1918, CGNAT (100.64.0.0/10, Tailscale and carrier LANs),
  link-local and IPv6 unique-local;
- link-local (with the cloud metadata address 169.254.169.254) and unspecified (0.0.0.0/8 and
  ::, which reach this host on Linux): never a target of a request the host makes for someone
  else (webhooks, store downloads), see `is_outbound_refused`.

An IPv4-mapped IPv6 address (what a dual-stack socket reports) is judged as its IPv4 address.
"""

from __future__ import annotations

import ipaddress

Address = ipaddress.IPv4Address | ipaddress.IPv6Address

LOOPBACK = tuple(ipaddress.ip_network(n) for n in ("127.0.0.0/8", "::1/128"))
LINK_LOCAL = tuple(ipaddress.ip_network(n) for n in ("169.254.0.0/16", "fe80::/10"))
UNSPECIFIED = tuple(ipaddress.ip_network(n) for n in ("0.0.0.0/8", "::/128"))
LAN = (
    *(ipaddress.ip_network(n) for n in ("10.0.0.0/8", "172.16.0.0/12", "192.168.0.0/16")),
    ipaddress.ip_network("100.64.0.0/10"),
    *LINK_LOCAL,
    ipaddress.ip_network("fc00::/7"),
)


def parse(text: str) -> Address | None:
    """The address `text` spells (an IPv6 zone `%eth0` dropped), IPv4-mapped made IPv4; None
    when it is no address."""
    try:
        addr = ipaddress.ip_address(text.split("%", 1)[0])
    except ValueError:
        return None
    return _plain(addr)


def _plain(addr: Address) -> Address:
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def _address(addr: Address | str) -> Address | None:
    return parse(addr) if isinstance(addr, str) else _plain(addr)


def in_networks(addr: Address | str, nets) -> bool:
    """`addr` lies in one of `nets` (an operator's list as much as the tables here)."""
    addr = _address(addr)
    return addr is not None and any(addr.version == n.version and addr in n for n in nets)


def is_loopback(addr: Address | str) -> bool:
    return in_networks(addr, LOOPBACK)


def is_lan(addr: Address | str) -> bool:
    """On the operator's own network (not loopback)."""
    return in_networks(addr, LAN)


def is_loopback_or_lan(addr: Address | str) -> bool:
    return in_networks(addr, LOOPBACK + LAN)


def is_loopback_host(host: str) -> bool:
    """`localhost` or a loopback address: a host name or bind address that stays on this
    machine (no DNS: any other name counts as remote)."""
    return host.lower() == "localhost" or is_loopback(host)


def is_localhost_name(host: str) -> bool:
    """`localhost` or a name under it (RFC 6761 lets resolvers answer loopback for all of them):
    refused as an outbound target without asking DNS."""
    host = host.lower().rstrip(".")
    return host == "localhost" or host.endswith(".localhost")


def is_outbound_refused(addr: Address | str, *, allow_loopback: bool = False) -> bool:
    """Whether a request the host makes for someone else (a webhook, a store download) must not
    go to `addr`: link-local, unspecified, and loopback unless `allow_loopback` (the operator
    asked for it). LAN addresses are allowed. A deprecated IPv4-compatible IPv6 address
    (`::a.b.c.d`, still routed by some stacks) is judged as its IPv4 address too."""
    addr = _address(addr)
    if addr is None:
        return False
    if isinstance(addr, ipaddress.IPv6Address) and int(addr) >> 32 == 0 and int(addr) > 1:
        addr = ipaddress.IPv4Address(int(addr) & 0xFFFFFFFF)
    refused = LINK_LOCAL + UNSPECIFIED + (() if allow_loopback else LOOPBACK)
    return in_networks(addr, refused)
