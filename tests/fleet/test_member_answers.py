"""What the fleet host makes of a member that lies: a real TLS server plays the member and
answers a hostile status and a hostile ticket refusal; placement and the sessions listing show
only bounded, printable text and never the token."""

from __future__ import annotations

import http.server
import json

import pytest

from common.errors import Unavailable
from fleet import member_sessions, member_tokens
from fleet import place as fleet_place
from fleet.models import Member
from tests.fleet.fake_member import serve_tls
from tests.fleet.fleetkit import view

TOKEN = "cd" * 32
HOSTILE = "evil\u202e\x07" + "x" * 500


@pytest.fixture
def lying_member(tmp_path, monkeypatch, db):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def _answer(self, status: int, body: object) -> None:
            data = json.dumps(body).encode()
            self.send_response(status)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def do_GET(self):
            good = {"id": "0123abcd", "plane": "native", "client": HOSTILE, "app_title": HOSTILE}
            rows = [good, {"id": "../../x"}, "junk", *[dict(good) for _ in range(100)]]
            self._answer(200, {"sessions": rows})

        def do_POST(self):
            self.rfile.read(int(self.headers.get("Content-Length") or 0))
            self._answer(400, {"error": "your token " + TOKEN + " " + HOSTILE})

        def log_message(self, *args):
            pass

    server, fp = serve_tls(Handler, tmp_path, seed=9)
    member = Member.objects.create(
        url=f"https://127.0.0.1:{server.server_address[1]}",
        fingerprint=fp,
        name="liar",
        reachable=True,
        view=view(),
    )
    member_tokens.put(member.id, TOKEN)
    yield member
    server.shutdown()
    server.server_close()


def test_a_lying_members_sessions_are_cut_to_printable_bounded_text(lying_member):
    rows = member_sessions.live(lying_member.id)
    assert len(rows) == member_sessions.MAX_LISTED - 2  # the two malformed rows dropped
    row = rows[0]
    assert row["id"] == "0123abcd"
    assert row["client"] == ("evil" + "x" * 60) and len(row["app_title"]) == 120
    assert all(ch.isprintable() for r in rows for v in r.values() for ch in v)


def test_a_refusal_is_shown_bounded_and_without_the_token(lying_member):
    with pytest.raises(Unavailable) as caught:
        fleet_place.place("desktop", "Desktop", "tv")
    message = caught.value.message
    assert message.startswith("no member with Desktop could take the player: liar: refused")
    assert "(400: your token [token] evil??xxx" in message  # no control characters, cut
    assert TOKEN not in message and len(message) < 300
