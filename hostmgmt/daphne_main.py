"""`python -m hostmgmt.daphne_main <daphne arguments>`: daphne, with the request-body limits
enforced in Twisted's HTTP parser (common/bodylimit.py) instead of after daphne has read
the whole body. The supervisor starts daphne through this module.

Daphne builds its listening factory in `Server.run` from the `HTTPFactory` name of its server
module; this module points that name at a subclass whose requests carry the limits (the one
hook daphne offers short of copying `Server.run`). The ASGI guard in `hostmgmt/asgi.py` stays
as a second line for anything that reaches the application another way.

With `HOST_WEB_FD` in its environment (several web processes, supervisor/web_listener.py) it
serves on that inherited listening socket instead of binding the `ssl:` endpoint's port: the
endpoint string is still parsed by Twisted, so the certificate, key and TLS options are the
ones it builds today, and the adopted port is wrapped the way `listenSSL` wraps its own.
"""

from __future__ import annotations

import json
import os
import sys

from daphne import server as daphne_server
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest
from django.conf import settings
from twisted.internet import defer, endpoints
from twisted.protocols.tls import TLSMemoryBIOFactory

from apikit.errors import error_body, is_v1_path
from common.bodylimit import BodyLimitedRequest
from supervisor.web_listener import FD_ENV, adopted_family

TOO_LARGE = "request body too large"


class LimitedWebRequest(BodyLimitedRequest, WebRequest):
    """Daphne's request with the host's limits: 4 MiB under /api/v1, 1 MiB elsewhere."""

    def body_limit(self, path: str) -> int:
        if is_v1_path(path):
            return settings.MGMT_MAX_REQUEST_BODY
        return settings.MAX_REQUEST_BODY

    def body_refusal(self, path: str) -> tuple[bytes, bytes]:
        return b"application/json", json.dumps(error_body(path, 413, TOO_LARGE)).encode()


class LimitedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr):  # Twisted's name
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = LimitedWebRequest
        return protocol

    def acceptableProtocols(self):  # Twisted's name
        # HTTP/1.1 only: an HTTP/2 stream (were the h2 package ever installed) takes its body
        # through another path than the one limited here.
        return [b"http/1.1"]


class AdoptedTLSEndpoint:
    """A server endpoint on an inherited listening socket, TLS as `SSL4ServerEndpoint`'s."""

    def __init__(self, reactor, fd: int, context_factory):
        self.reactor = reactor
        self.fd = fd
        self.context_factory = context_factory

    def listen(self, factory):
        tls_factory = TLSMemoryBIOFactory(self.context_factory, False, factory)
        try:
            # Twisted accepts until EAGAIN: on a blocking socket the reactor would stop in
            # accept. (The flag is the open socket's, shared with the other processes.)
            os.set_blocking(self.fd, False)
            port = self.reactor.adoptStreamPort(self.fd, adopted_family(self.fd), tls_factory)
        except Exception:
            return defer.fail()
        port._type = "TLS"  # as listenSSL names its port in logs
        os.close(self.fd)  # the port holds its own duplicate
        return defer.succeed(port)


def adopting_server_from_string(fd: int):
    """daphne's `serverFromString`, answering its `ssl:` endpoint with the inherited socket."""

    def server_from_string(reactor, description: str):
        endpoint = endpoints.serverFromString(reactor, description)
        if not isinstance(endpoint, endpoints.SSL4ServerEndpoint):
            raise ValueError(f"{FD_ENV} serves only an ssl: endpoint, got {description!r}")
        return AdoptedTLSEndpoint(reactor, fd, endpoint._sslContextFactory)

    return server_from_string


# How long a thread holding the GIL may keep it while another waits. A request crosses from
# the event loop to a view thread and back, and each syscall on the way (a socket write, a
# stat, a SQLite or Redis read) releases the GIL; with CPython's default of 5 ms, a thread
# coming back from one waits out a busy neighbour's whole interval, so requests queued behind
# each other on a loaded machine (measured in bench/soak.py with a 720p60 stream beside the
# API: p50 67-107 ms, p99 520-640 ms, 71 requests over the backlog limit in 3 minutes). At
# 1 ms: p50 46 ms, p99 320 ms, 4; daphne's CPU did not grow.
GIL_SWITCH_INTERVAL_S = 0.001


def main() -> None:
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    daphne_server.HTTPFactory = LimitedHTTPFactory
    fd = os.environ.pop(FD_ENV, "")
    if fd:
        daphne_server.serverFromString = adopting_server_from_string(int(fd))
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
