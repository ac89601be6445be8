"""Twisted carriage for the dispatcher: plain HTTP and TLS that asks for a client certificate.

The TLS context requests a certificate and accepts whatever the client presents (Moonlight
certificates are self-signed); whether the certificate is paired and enabled is decided per
request by the dispatcher, never by the TLS session. Handlers run in the reactor's thread pool
because they touch the database and because `getservercert` blocks until a PIN arrives.
"""

from __future__ import annotations

import logging

from OpenSSL import SSL, crypto
from twisted.internet import reactor, threads
from twisted.internet.interfaces import IOpenSSLContextFactory
from twisted.web import resource, server
from zope.interface import implementer

from common.bodylimit import BodyLimitedRequest
from compat.nvhttp.dispatch import Dispatcher, NvRequest, NvResponse, parse_query, xml

log = logging.getLogger(__name__)

MAX_URI = 8192
# GameStream requests are GETs without a body: any body at all is refused (413) as the headers
# arrive, before Twisted reads or spools a byte of it.
MAX_BODY = 0


@implementer(IOpenSSLContextFactory)
class _ServerContextFactory:
    """pyOpenSSL context with the host identity; TLS >= 1.2; client certificate requested."""

    def __init__(self, cert_path: str, key_path: str):
        ctx = SSL.Context(SSL.TLS_METHOD)
        ctx.set_min_proto_version(SSL.TLS1_2_VERSION)
        ctx.use_certificate_chain_file(cert_path)
        ctx.use_privatekey_file(key_path)
        ctx.check_privatekey()
        ctx.set_verify(SSL.VERIFY_PEER, _accept_any)
        ctx.set_session_id(b"hostmgmt-nvhttp")
        self._ctx = ctx

    def getContext(self) -> SSL.Context:  # Twisted's interface name
        return self._ctx


def _accept_any(conn, cert, errno, depth, ok) -> bool:
    return True


def _peer_der(request) -> bytes | None:
    transport = getattr(request.channel, "transport", None)
    get = getattr(transport, "getPeerCertificate", None)
    if get is None:
        return None
    try:
        cert = get()
    except Exception:  # no certificate is an answer, not an error
        return None
    if cert is None:
        return None
    return crypto.dump_certificate(crypto.FILETYPE_ASN1, cert)


def _address(addr) -> str:
    host = getattr(addr, "host", "") or ""
    return host[7:] if host.startswith("::ffff:") else host


class NvResource(resource.Resource):
    isLeaf = True

    def __init__(self, dispatcher: Dispatcher, https: bool):
        super().__init__()
        self.dispatcher = dispatcher
        self.https = https

    def render(self, request):
        # One request per connection, as GameStream hosts do: Twisted closes after replying.
        request.channel.persistent = False
        request.setHeader(b"Connection", b"close")
        if request.method not in (b"GET", b"HEAD"):
            return self._write(request, self._error(405, "Only GET is supported"))
        uri = request.uri or b""
        if len(uri) > MAX_URI:
            return self._write(request, self._error(414, "Request URI too long"))
        path, _, raw_query = uri.partition(b"?")
        try:
            query = parse_query(raw_query)
        except ValueError:
            return self._write(request, self._error(400, "Malformed query string"))
        nvreq = NvRequest(
            path=path.decode("latin-1"),
            query=query,
            https=self.https,
            remote=_address(request.getClientAddress()),
            local=_address(request.getHost()),
            peer_der=_peer_der(request) if self.https else None,
        )
        finished = request.notifyFinish()
        finished.addErrback(lambda _f: nvreq.cancelled.set())
        d = threads.deferToThread(self.dispatcher.handle, nvreq)
        d.addCallback(lambda resp: self._finish(request, nvreq, resp))
        d.addErrback(self._failed, request, nvreq)
        return server.NOT_DONE_YET

    def _error(self, status: int, message: str) -> NvResponse:
        return xml(status, message)

    def _write(self, request, resp: NvResponse) -> bytes:
        request.setHeader(b"Content-Type", resp.content_type.encode())
        return resp.body

    def _finish(self, request, nvreq: NvRequest, resp: NvResponse) -> None:
        if nvreq.cancelled.is_set():
            return
        request.setHeader(b"Content-Type", resp.content_type.encode())
        request.setHeader(b"Content-Length", str(len(resp.body)).encode())
        request.write(resp.body)
        request.finish()

    def _failed(self, failure, request, nvreq: NvRequest) -> None:
        log.error("nvhttp handler crashed: %s", failure.getErrorMessage())
        if not nvreq.cancelled.is_set():
            self._finish(request, nvreq, self._error(500, "Internal error"))


class _LimitedRequest(BodyLimitedRequest, server.Request):
    def body_limit(self, path: str) -> int:
        return MAX_BODY

    def body_refusal(self, path: str) -> tuple[bytes, bytes]:
        resp = xml(413, "Request body too large")
        return resp.content_type.encode(), resp.body


class _Site(server.Site):
    requestFactory = _LimitedRequest  # Twisted's name

    # Request lines can carry pairing material; the host logs its own events instead.
    def log(self, request) -> None:
        pass


def listen(
    dispatcher: Dispatcher,
    *,
    bind: str,
    http_port: int,
    https_port: int,
    cert_path: str,
    key_path: str,
    threads_max: int = 32,
) -> list:
    """Open both listeners on the running reactor; returns the listening ports."""
    reactor.suggestThreadPoolSize(threads_max)
    http_site = _Site(NvResource(dispatcher, https=False))
    https_site = _Site(NvResource(dispatcher, https=True))
    for site in (http_site, https_site):
        site.displayTracebacks = False
        site.timeOut = 60  # idle time between requests; Twisted pauses it while one is handled
    ctx = _ServerContextFactory(cert_path, key_path)
    return [
        reactor.listenTCP(http_port, http_site, interface=bind),
        reactor.listenSSL(https_port, https_site, ctx, interface=bind),
    ]
