"""The body-limit mixin inside Twisted's real HTTP parser (no host): what it answers, when, and
that a refused request never reaches the application. The attack on the running host is in
test_body_limits_e2e.py."""

from __future__ import annotations

import json
import socket

import pytest
from django.test import override_settings
from twisted.internet.testing import StringTransport
from twisted.web import http, resource

from common.bodylimit import BodyLimitedRequest

LIMIT = 1000


class Limited(BodyLimitedRequest, http.Request):
    processed: list = []

    def body_limit(self, path: str) -> int:
        return LIMIT * 4 if path.startswith("/big/") else LIMIT

    def body_refusal(self, path: str) -> tuple[bytes, bytes]:
        return b"application/json", json.dumps({"error": "too large", "path": path}).encode()

    def process(self):
        Limited.processed.append((self.path, self.content.read()))
        self.setResponseCode(204)
        self.finish()


@pytest.fixture
def channel():
    Limited.processed = []
    chan = http.HTTPChannel()
    chan.requestFactory = Limited
    transport = StringTransport()
    chan.makeConnection(transport)
    yield chan, transport
    chan.connectionLost(None)


def head(method: str, path: str, *headers: str) -> bytes:
    lines = [f"{method} {path} HTTP/1.1", "Host: x", *headers, "", ""]
    return "\r\n".join(lines).encode()


def test_content_length_over_the_limit_is_a_413_before_any_body_byte(channel):
    chan, transport = channel
    chan.dataReceived(head("POST", "/x?q=1", f"Content-Length: {2 * 1024**3}"))
    out = transport.value()
    assert out.startswith(b"HTTP/1.1 413 ")
    assert out.endswith(b'{"error": "too large", "path": "/x"}')
    assert transport.disconnecting and Limited.processed == []
    chan.dataReceived(b"x" * 65536)  # what was already in flight is dropped
    assert transport.value() == out and Limited.processed == []


def test_expect_100_continue_gets_the_413_and_no_invitation(channel):
    chan, transport = channel
    chan.dataReceived(head("PUT", "/x", "Expect: 100-continue", f"Content-Length: {LIMIT + 1}"))
    out = transport.value()
    assert out.startswith(b"HTTP/1.1 413 ") and b"100 Continue" not in out


def test_a_chunked_body_is_cut_off_at_the_limit_and_never_processed(channel):
    chan, transport = channel
    chan.dataReceived(head("POST", "/x", "Transfer-Encoding: chunked"))
    chunk = b"258\r\n" + b"y" * 600 + b"\r\n"
    chan.dataReceived(chunk)
    assert transport.value() == b""  # 600 bytes: still within the limit
    chan.dataReceived(chunk)
    assert transport.value().startswith(b"HTTP/1.1 413 ") and transport.disconnecting
    chan.dataReceived(chunk + b"0\r\n\r\n")  # even a body that then ends is not processed
    assert Limited.processed == []


@pytest.mark.parametrize("path,size", [("/x", LIMIT), ("/big/x", LIMIT * 4)])
def test_bodies_within_the_limit_reach_the_application(channel, path, size):
    chan, transport = channel
    chan.dataReceived(head("POST", path, f"Content-Length: {size}") + b"z" * size)
    assert Limited.processed == [(path.encode(), b"z" * size)]
    assert transport.value().startswith(b"HTTP/1.1 204 ")


@pytest.mark.parametrize(
    "path,limit,shape",
    [
        ("/api/v1/hooks", 4 * 1024 * 1024, {"error": "request body too large"}),
        (
            "/api/password",
            1024 * 1024,
            {"status": False, "status_code": 413, "error": "request body too large"},
        ),
        (
            "/admin/login/",
            1024 * 1024,
            {"status": False, "status_code": 413, "error": "request body too large"},
        ),
    ],
)
def test_daphne_limits_and_bodies_follow_the_api_of_the_path(path, limit, shape):
    from hostmgmt.daphne_main import LimitedHTTPFactory, LimitedWebRequest

    assert LimitedWebRequest.body_limit(None, path) == limit
    content_type, body = LimitedWebRequest.body_refusal(None, path)
    assert content_type == b"application/json" and json.loads(body) == shape
    assert LimitedHTTPFactory.acceptableProtocols(None) == [b"http/1.1"]


def test_the_supervisor_starts_daphne_through_the_limited_entry_point():
    from supervisor.main import Supervisor

    sup = Supervisor.__new__(Supervisor)
    sup.ports = type("Ports", (), {"base": 47000, "mgmt": 47001})()
    sup.bind, sup.started_at, sup.no_mgmt_token = "127.0.0.1", 0, False
    sup.web_socket = None  # one web process, binding the port itself
    daphne = next(c for c in sup.child_specs() if c.name == "daphne")
    assert daphne.argv[1:3] == ["-m", "hostmgmt.daphne_main"]
    with socket.socket() as listener, override_settings(WEB_PROCESSES=2):
        sup.web_socket = listener  # several, on the supervisor's socket: each one limited too
        web = [c for c in sup.child_specs() if c.name.startswith("daphne")]
        assert [c.name for c in web] == ["daphne-0", "daphne-1"]
        assert all(c.argv[1:3] == ["-m", "hostmgmt.daphne_main"] for c in web)


def test_nvhttp_refuses_any_body_on_both_listeners():
    from compat.nvhttp import transport as nv

    class Ok(resource.Resource):
        isLeaf = True

        def render_GET(self, request):
            return b"ok"

    site = nv._Site(Ok())
    for body_header in ("Content-Length: 1", "Transfer-Encoding: chunked"):
        chan = site.buildProtocol(None)
        t = StringTransport()
        chan.makeConnection(t)
        chan.dataReceived(head("GET", "/pair?x=1", body_header) + b"1\r\nx\r\n")
        assert t.value().startswith(b"HTTP/1.1 413 "), t.value()
        assert b'status_code="413"' in t.value() and t.disconnecting
        chan.connectionLost(None)
    chan = site.buildProtocol(None)
    t = StringTransport()
    chan.makeConnection(t)
    chan.dataReceived(head("GET", "/serverinfo", "Content-Length: 0"))
    assert t.value().startswith(b"HTTP/1.1 200 ") and t.value().endswith(b"ok")
    chan.connectionLost(None)
