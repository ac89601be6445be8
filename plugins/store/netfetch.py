"""HTTPS downloads for the store: TLS verified (system CAs plus HOST_STORE_CA_FILE), redirects
never followed, a size cap and a timeout, and an address rule enforced on the address actually
dialled (the socket is opened to the checked IP; TLS still verifies the URL's host name).

The address rule (docs/security.md, "Plugin store"):
- https only, no credentials in the URL;
- link-local (169.254.0.0/16 with the cloud metadata address, fe80::/10) and unspecified
  addresses are always refused;
- loopback is allowed only where the operator asked for it: a source URL the operator typed
  that names a loopback host (a catalog server on the host itself, as the tests run one), and
  a wheel URL of a catalog that came from such a source. A catalog from elsewhere can never
  point the host at its own loopback services;
- private (LAN) addresses are allowed: a catalog on the operator's own network is a normal case.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from urllib.parse import urlsplit

from common import netranges
from hooks import ssrf
from plugins.store import conf

USER_AGENT = "hostmgmt-store/1"


class FetchError(Exception):
    """The download failed; the message says why (never a secret: URLs carry none)."""


def check_url(url: str, *, allow_loopback: bool) -> tuple[str, int]:
    """Textual check (no DNS): (host, port); raises ssrf.UrlRefused."""
    scheme, host, port = ssrf.url_host(url)
    if scheme != "https":
        raise ssrf.UrlRefused("must be an https:// URL")
    if netranges.is_localhost_name(host) and not allow_loopback:
        raise ssrf.UrlRefused("must not point at localhost")
    addr = ssrf.parse_literal(host)
    if addr is not None:
        _check_addr(addr, allow_loopback)
    return host, port


def is_loopback_url(url: str) -> bool:
    try:
        _, host, _ = ssrf.url_host(url)
    except ssrf.UrlRefused:
        return False
    if netranges.is_localhost_name(host):
        return True
    addr = ssrf.parse_literal(host)
    return addr is not None and netranges.is_loopback(addr)


def _check_addr(addr, allow_loopback: bool) -> None:
    if netranges.is_outbound_refused(addr, allow_loopback=True):
        raise ssrf.UrlRefused("must not point at a link-local or unspecified address")
    if netranges.is_outbound_refused(addr, allow_loopback=allow_loopback):
        raise ssrf.UrlRefused("must not point at a loopback address")


def ssl_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    extra = conf.ca_file()
    if extra:
        ctx.load_verify_locations(cafile=extra)
    return ctx


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    """Connects to the address that was checked, verifying TLS against the URL's host."""

    def __init__(self, host, port, info, timeout, context):
        super().__init__(host, port, timeout=timeout, context=context)
        self._info = info
        self._ctx = context

    def connect(self):
        family, socktype, proto, _, sockaddr = self._info
        raw = socket.socket(family, socktype, proto)
        try:
            raw.settimeout(self.timeout)
            raw.connect(sockaddr)
            self.sock = self._ctx.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


def get(url: str, max_bytes: int, *, allow_loopback: bool, timeout: float | None = None) -> bytes:
    """The body of a 200 answer to GET `url`, at most `max_bytes`; raises FetchError."""
    timeout = timeout or conf.FETCH_TIMEOUT_S
    try:
        host, port = check_url(url, allow_loopback=allow_loopback)
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        for info in infos:
            addr = netranges.parse(info[4][0])
            if addr is None:
                raise ValueError(f"{info[4][0]!r} is not an address")
            _check_addr(addr, allow_loopback)
    except ssrf.UrlRefused as exc:
        raise FetchError(f"URL refused: {exc}") from None
    except (socket.gaierror, ValueError) as exc:
        raise FetchError(f"host does not resolve ({exc})") from None
    parts = urlsplit(url)
    target = (parts.path or "/") + (f"?{parts.query}" if parts.query else "")
    last: Exception | None = None
    for info in infos[:4]:
        conn = _PinnedHTTPSConnection(host, port, info, timeout, ssl_context())
        try:
            conn.request("GET", target, headers={"User-Agent": USER_AGENT, "Accept": "*/*"})
            resp = conn.getresponse()
            if resp.status != 200:
                raise FetchError(f"HTTP {resp.status} (redirects are not followed)")
            length = resp.getheader("Content-Length")
            if length and length.isdigit() and int(length) > max_bytes:
                raise FetchError(f"larger than {max_bytes} bytes")
            return _read_bounded(resp, max_bytes, time.monotonic() + 4 * timeout)
        except FetchError:
            raise
        except ssl.SSLError as exc:
            raise FetchError(f"TLS failed: {exc.reason or exc}") from None
        except (OSError, http.client.HTTPException) as exc:
            last = exc
        finally:
            conn.close()
    raise FetchError(f"could not download: {last}")


def _read_bounded(resp, max_bytes: int, deadline: float) -> bytes:
    """The body, refusing more than `max_bytes` or a sender slower than the deadline (a read
    timeout alone lets a server drip one byte per interval forever)."""
    chunks, total = [], 0
    while True:
        if time.monotonic() > deadline:
            raise FetchError("download took too long")
        chunk = resp.read(min(65536, max_bytes + 1 - total))
        if not chunk:
            return b"".join(chunks)
        chunks.append(chunk)
        total += len(chunk)
        if total > max_bytes:
            raise FetchError(f"larger than {max_bytes} bytes")
