"""POSTing a JSON body to an operator's URL: TLS verified, redirects never followed, no host
credentials, and the SSRF rule enforced on the resolved address that is actually dialled.

stdlib `http.client` with the socket opened by us to the checked IP (TLS still verifies the
certificate against the URL's host name through SNI), so a DNS answer that changes between the
check and the connect cannot redirect the request to loopback.
"""

from __future__ import annotations

import http.client
import socket
import ssl
import time
from dataclasses import dataclass
from urllib.parse import urlsplit

from hooks import conf, ssrf

USER_AGENT = "hostmgmt-webhook/1"
MAX_RESPONSE_READ = 64 * 1024


@dataclass
class PostResult:
    status: int | None
    duration_ms: int
    error: str = ""


def ssl_context() -> ssl.SSLContext:
    ctx = ssl.create_default_context()
    extra = conf.webhook_ca_bundle()
    if extra:
        ctx.load_verify_locations(cafile=extra)
    return ctx


class _PinnedHTTPConnection(http.client.HTTPConnection):
    def __init__(self, host, port, addr, timeout):
        super().__init__(host, port, timeout=timeout)
        self._addr = addr

    def connect(self):
        self.sock = _dial(self._addr, self.timeout)


class _PinnedHTTPSConnection(http.client.HTTPSConnection):
    def __init__(self, host, port, addr, timeout, context):
        super().__init__(host, port, timeout=timeout, context=context)
        self._addr = addr
        self._ctx = context

    def connect(self):
        raw = _dial(self._addr, self.timeout)
        try:
            self.sock = self._ctx.wrap_socket(raw, server_hostname=self.host)
        except BaseException:
            raw.close()
            raise


def _dial(info: tuple, timeout: float) -> socket.socket:
    family, socktype, proto, _, sockaddr = info
    sock = socket.socket(family, socktype, proto)
    try:
        sock.settimeout(timeout)
        sock.connect(sockaddr)
    except BaseException:
        sock.close()
        raise
    return sock


def post_json(
    url: str, body: bytes, headers: dict[str, str], timeout_s: float, *, guard: bool = True
) -> PostResult:
    """One POST attempt. Raises ssrf.UrlRefused when the target is not allowed; network
    errors come back as PostResult(status=None, error=...).

    `guard=False` skips only the loopback/link-local rule (the admin API's stream webhooks
    allow any http(s) target); the scheme rule, TLS verification and no-redirects stay.
    """
    started = time.monotonic()
    if guard:
        scheme, host, port = ssrf.check_url(url)
        infos = ssrf.resolve_checked(host, port)
    else:
        scheme, host, port = ssrf.url_host(url)
        try:
            infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
        except socket.gaierror as exc:
            raise ssrf.UrlRefused(f"host does not resolve ({exc.strerror})") from None
    parts = urlsplit(url)
    path = parts.path or "/"
    if parts.query:
        path += "?" + parts.query
    deadline = started + timeout_s
    last_error = ""
    for info in infos[:4]:
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            break
        if scheme == "https":
            conn = _PinnedHTTPSConnection(host, port, info, remaining, ssl_context())
        else:
            conn = _PinnedHTTPConnection(host, port, info, remaining)
        try:
            conn.putrequest("POST", path, skip_accept_encoding=True)
            conn.putheader("Content-Type", "application/json")
            conn.putheader("Content-Length", str(len(body)))
            conn.putheader("User-Agent", USER_AGENT)
            for key, value in headers.items():
                conn.putheader(key, value)
            conn.endheaders(body)
            response = conn.getresponse()
            response.read(MAX_RESPONSE_READ)
            elapsed = int((time.monotonic() - started) * 1000)
            return PostResult(response.status, elapsed)
        except ssl.SSLCertVerificationError as exc:
            last_error = f"TLS verification failed: {exc.verify_message}"
            break
        except (OSError, http.client.HTTPException) as exc:
            last_error = f"{exc.__class__.__name__}: {exc}"[:300]
        finally:
            conn.close()
    return PostResult(None, int((time.monotonic() - started) * 1000), last_error or "timed out")
