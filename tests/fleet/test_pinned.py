"""The member client against a real TLS server: the pin is checked before the token is sent."""

from __future__ import annotations

import http.server

import pytest

from fleet import pinned
from tests.fleet.fake_member import serve_tls

TOKEN = "ab" * 32


@pytest.fixture
def tls_server(tmp_path):
    seen: list[str | None] = []

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            seen.append(self.headers.get("Authorization"))
            body = b'{"ok": true}' if self.path != "/big" else b"x" * (pinned.MAX_ANSWER_BYTES + 5)
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, *args):
            pass

    server, fingerprint = serve_tls(Handler, tmp_path, seed=7)
    yield f"https://127.0.0.1:{server.server_address[1]}", fingerprint, seen
    server.shutdown()
    server.server_close()


def test_pinned_request_sends_the_token_and_reuses_the_connection(tls_server):
    url, fingerprint, seen = tls_server
    client = pinned.MemberClient(url, fingerprint, TOKEN)
    assert client.get_json("/a") == {"ok": True}
    conn = client._conn
    assert client.get_json("/b") == {"ok": True}
    assert client._conn is conn  # keep-alive: one TLS handshake for a refresh's requests
    assert seen == [f"Bearer {TOKEN}"] * 2
    client.close()


def test_a_wrong_fingerprint_is_refused_before_any_request(tls_server):
    url, fingerprint, seen = tls_server
    wrong = ("0" if fingerprint[0] != "0" else "1") + fingerprint[1:]
    client = pinned.MemberClient(url, wrong, TOKEN)
    with pytest.raises(pinned.FingerprintMismatch) as caught:
        client.get_json("/a")
    assert seen == []  # the token never left this host
    assert TOKEN not in str(caught.value)


def test_an_oversized_answer_is_refused(tls_server):
    url, fingerprint, _ = tls_server
    client = pinned.MemberClient(url, fingerprint, TOKEN)
    with pytest.raises(pinned.MemberError, match="larger than"):
        client.request("GET", "/big")


@pytest.mark.parametrize(
    "value",
    [
        "http://h:1",
        "https://u:p@h:1",
        "https://h:1/api",
        "https://h:1?x=1",
        "https://h:99999",
        "https://",
        "https://h\n:1",
        5,
        "https://h;rm:1",
    ],
)
def test_bad_urls_are_refused(value):
    with pytest.raises(ValueError):
        pinned.normalise_url(value)


def test_urls_and_fingerprints_are_normalised():
    assert pinned.normalise_url("https://Box.lan") == "https://box.lan:443"
    assert pinned.normalise_url("https://[::1]:47990/") == "https://[::1]:47990"
    fp = "AB:" * 31 + "AB"
    assert pinned.normalise_fingerprint(fp) == "ab" * 32
    with pytest.raises(ValueError):
        pinned.normalise_fingerprint("ab" * 31)
