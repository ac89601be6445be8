"""`python -m hostmgmt.daphne_main <daphne arguments>`: daphne, with the request-body limits
enforced in Twisted's HTTP parser (hostmgmt/lib/bodylimit.py) instead of after daphne has read
the whole body. The supervisor starts daphne through this module.

Daphne builds its listening factory in `Server.run` from the `HTTPFactory` name of its server
module; this module points that name at a subclass whose requests carry the limits (the one
hook daphne offers short of copying `Server.run`). The ASGI guard in `hostmgmt/asgi.py` stays
as a second line for anything that reaches the application another way.
"""

from __future__ import annotations

import json

from daphne import server as daphne_server
from daphne.cli import CommandLineInterface
from daphne.http_protocol import HTTPFactory, WebRequest

from hostmgmt.lib.bodylimit import BodyLimitedRequest

TOO_LARGE = "request body too large"


class LimitedWebRequest(BodyLimitedRequest, WebRequest):
    """Daphne's request with the host's limits: 4 MiB under /api/v1, 1 MiB elsewhere."""

    def body_limit(self, path: str) -> int:
        from django.conf import settings

        from hostmgmt.api.errors import is_v1_path

        if is_v1_path(path):
            return settings.MGMT_MAX_REQUEST_BODY
        return settings.MAX_REQUEST_BODY

    def body_refusal(self, path: str) -> tuple[bytes, bytes]:
        from hostmgmt.api.errors import error_body

        return b"application/json", json.dumps(error_body(path, 413, TOO_LARGE)).encode()


class LimitedHTTPFactory(HTTPFactory):
    def buildProtocol(self, addr):  # noqa: N802 - Twisted's name
        protocol = super().buildProtocol(addr)
        protocol.requestFactory = LimitedWebRequest
        return protocol

    def acceptableProtocols(self):  # noqa: N802 - Twisted's name
        # HTTP/1.1 only: an HTTP/2 stream (were the h2 package ever installed) takes its body
        # through another path than the one limited here.
        return [b"http/1.1"]


def main() -> None:
    daphne_server.HTTPFactory = LimitedHTTPFactory
    CommandLineInterface.entrypoint()


if __name__ == "__main__":
    main()
