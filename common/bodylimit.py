"""Request-body limits enforced inside Twisted's HTTP parser, for every Twisted listener of the
host (daphne's, and the compat plane's nvhttp over HTTP and HTTPS).

Twisted reads a whole request body (into memory, or a temp file above 100 kB) before any
application code sees the request, so a limit checked by the application comes after an
unauthenticated client has already filled memory or disk. `BodyLimitedRequest` acts where the
parser hands the body over: a `Content-Length` above the limit is answered at once, before one
byte of the body is read; a chunked body is counted as it arrives and cut off as soon as it
passes the limit. Either way the answer is the listener's own 413 and the connection is closed;
nothing of the body is kept, and the request never reaches the application.

Plain module (Twisted only): each listener supplies its limit and its 413 body.
"""

from __future__ import annotations

import io
from urllib.parse import unquote

from twisted.internet import reactor

# After the 413 the connection is closed; a TLS close waits for the peer's close_notify, which
# a client still streaming its body never sends, so the connection is dropped after this.
ABORT_AFTER_S = 2.0

SECURITY_HEADERS = (
    (b"X-Frame-Options", b"DENY"),
    (b"Content-Security-Policy", b"frame-ancestors 'none'"),
)


def target_path(target: bytes) -> str:
    """The decoded path of a request-target (no query), as the application would see it."""
    path = target.split(b"?", 1)[0]
    return unquote(path.decode("latin-1"))


class BodyLimitedRequest:
    """Mixin for a `twisted.web.http.Request` subclass (list it first).

    Subclasses define `body_limit(path)` (bytes allowed for a request to that path) and
    `body_refusal(path)` (content type and body of the 413).
    """

    _body_limit = 0
    _body_seen = 0
    _body_refused = False

    def body_limit(self, path: str) -> int:
        raise NotImplementedError

    def body_refusal(self, path: str) -> tuple[bytes, bytes]:
        raise NotImplementedError

    def _body_path(self) -> str:
        # HTTPChannel keeps the request-target of the request being parsed in `_path` until the
        # body is complete; `Request.path` is only set after that. Unknown: the strictest limit.
        target = getattr(self.channel, "_path", None)
        return target_path(target) if isinstance(target, bytes) else ""

    def gotLength(self, length):  # Twisted's name
        path = self._body_path()
        self._body_limit = self.body_limit(path)
        self._body_seen = 0
        if length is not None and length > self._body_limit:
            self.content = io.BytesIO()
            self._refuse_body(path)
            return
        super().gotLength(length)

    def handleContentChunk(self, data):  # Twisted's name
        if self._body_refused:
            return  # already answered: what is still arriving is dropped
        self._body_seen += len(data)
        if self._body_seen > self._body_limit:
            self._refuse_body(self._body_path())
            return
        super().handleContentChunk(data)

    def requestReceived(self, command, path, version):  # Twisted's name
        if self._body_refused:
            return  # the body ended after the 413 was sent: the request is not processed
        super().requestReceived(command, path, version)

    def _refuse_body(self, path: str) -> None:
        self._body_refused = True
        channel = self.channel
        if channel is None or channel.transport is None:
            return
        # No "100 Continue" after the answer: the channel sends one for `Expect` once this
        # returns, unless the header is gone.
        self.requestHeaders.removeHeader(b"Expect")
        channel.persistent = False
        content_type, body = self.body_refusal(path)
        head = [
            b"HTTP/1.1 413 Request Entity Too Large",
            b"Content-Type: " + content_type,
            b"Content-Length: " + str(len(body)).encode(),
            b"Connection: close",
        ]
        head += [name + b": " + value for name, value in SECURITY_HEADERS]
        transport = channel.transport
        transport.write(b"\r\n".join(head) + b"\r\n\r\n" + body)
        channel.loseConnection()
        reactor.callLater(ABORT_AFTER_S, _abort, transport)


def _abort(transport) -> None:
    abort = getattr(transport, "abortConnection", None)
    if abort is not None and getattr(transport, "connected", True):
        try:
            abort()
        except Exception:  # already gone is the goal
            pass
