"""Where a webhook may not go: loopback, `localhost` and link-local, in every spelling.

Checked twice: textually when a hook document or config key is validated (no DNS), and on every
send against each address the name resolves to (the sender then connects to the checked
address, so DNS rebinding between check and connect cannot slip through).
"""

from __future__ import annotations

import ipaddress
import socket
from urllib.parse import urlsplit

from common import netranges


class UrlRefused(ValueError):
    """The URL is not an allowed webhook target; the message says why (no secrets in it)."""


def parse_literal(host: str) -> ipaddress.IPv4Address | ipaddress.IPv6Address | None:
    """The address a host string spells, in any form the C resolver accepts, else None.

    Covers dotted quads, the legacy numeric forms (`2130706433`, `0x7f.1`, `0177.0.0.1`,
    `127.1`), bracketed and zoned IPv6 and IPv4-mapped IPv6.
    """
    host = host.strip("[]")
    if "%" in host:
        host = host.split("%", 1)[0]
    try:
        return ipaddress.ip_address(host)
    except ValueError:
        pass
    if host and all(c in "0123456789abcdefxABCDEFX." for c in host):
        try:
            return ipaddress.IPv4Address(socket.inet_aton(host))
        except OSError:
            return None
    return None


def url_host(url: str) -> tuple[str, str, int]:
    """(scheme, lowercase host without brackets or trailing dot, port) of an http(s) URL."""
    if not isinstance(url, str) or not url.strip():
        raise UrlRefused("must be an http(s):// URL")
    if any(ord(c) < 33 or ord(c) == 127 for c in url):
        raise UrlRefused("must not contain spaces or control characters")
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        raise UrlRefused("is not a valid URL") from None
    scheme = parts.scheme.lower()
    if scheme not in ("http", "https"):
        raise UrlRefused("must be an http(s):// URL")
    if "@" in parts.netloc:
        raise UrlRefused("must not carry credentials")
    host = (parts.hostname or "").strip().rstrip(".").lower()
    if not host:
        raise UrlRefused("must name a host")
    return scheme, host, port or (443 if scheme == "https" else 80)


def check_url(url: str) -> tuple[str, str, int]:
    """Textual check (no DNS). Returns (scheme, host, port); raises UrlRefused."""
    scheme, host, port = url_host(url)
    if netranges.is_localhost_name(host):
        raise UrlRefused("must not point at localhost")
    addr = parse_literal(host)
    if addr is not None and netranges.is_outbound_refused(addr):
        raise UrlRefused("must not point at a loopback or link-local address")
    return scheme, host, port


def resolve_checked(host: str, port: int) -> list[tuple]:
    """getaddrinfo results for host, all of them checked; raises UrlRefused when any is
    loopback or link-local (a name that also resolves to 127.0.0.1 is refused outright)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except socket.gaierror as exc:
        raise UrlRefused(f"host does not resolve ({exc.strerror})") from None
    if not infos:
        raise UrlRefused("host does not resolve")
    for info in infos:
        addr = parse_literal(info[4][0])
        if addr is None or netranges.is_outbound_refused(addr):
            raise UrlRefused("host resolves to a loopback or link-local address")
    return infos
