"""A stand-in fleet member: a real TLS server speaking the member's `GET /api/v1/events` SSE
format (ids = seqs, `Last-Event-ID` resume, keep-alives) and `GET /api/v1/health`, with events
held in memory, and (`refresh=True`) the routes the fleet host's join and refresh ask
(`/api/v1/fleet/whoami` with role `fleet`, `/host`, `/status`, `/gpus`, `/display/state`,
`/library`; the shapes of tests/fleet/fake_member.py). For the relay's fault tests (`mode`:
`garbage` sends a line that is no SSE field, `flood` sends events as fast as the socket takes
them, `bigline` one endless line) and for `bench/fleet.py`, where ten real hosts do not fit on
the machine.
"""

from __future__ import annotations

import http.server
import json
import ssl
import tempfile
import threading
import time
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from fleet import pinned
from tests.support.certs import identity, pem

TOKEN = "cd" * 32


def refresh_answers(name: str) -> dict[str, object]:
    """What a fleet-token holder reads of a small member: one GPU, one display, two titles."""
    return {
        "/api/v1/fleet/whoami": {"role": "fleet", "reach": []},
        "/api/v1/host": {"hostname": name, "version": "9.9.9", "encoder": "nvenc"},
        "/api/v1/status": {"active_sessions": 0, "max_sessions": 2, "sessions": []},
        "/api/v1/library": [
            {"id": "steam:570", "title": "Dota 2", "store": "steam"},
            {"id": "custom:1", "title": "Bench Title", "store": "custom"},
        ],
        "/api/v1/gpus": {
            "gpus": [{"id": "10de-2684-0", "name": "RTX", "vendor": "nvidia", "vram_mb": 24}],
            "selected": {"id": "10de-2684-0"},
            "active": None,
        },
        "/api/v1/display/state": {"displays": [{"state": "active"}]},
    }


class FakeMember:
    def __init__(
        self, mode: str = "normal", n: int = 11, keepalive_s: float = 1.0, refresh: bool = False
    ):
        """`refresh`: also answer the join's and the refresh's routes (else they are 404)."""
        self.mode = mode
        self.token = TOKEN
        self.keepalive_s = keepalive_s
        self.events: list[tuple[int, str]] = []  # (seq, frame)
        self.seq = 0
        self.cond = threading.Condition()
        self.closing = False
        self.requests = 0
        self.answers = refresh_answers(f"stand-in-{n}") if refresh else {}
        key, cert = identity(n)
        tmp = Path(tempfile.mkdtemp(prefix="fake-member-"))
        (tmp / "c.pem").write_bytes(pem(cert))
        (tmp / "k.pem").write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        self.fingerprint = pinned.certificate_fingerprint(
            cert.public_bytes(serialization.Encoding.DER)
        )
        member = self

        class Handler(http.server.BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            # Headers and body go out in two writes: without this each answer waits out the
            # peer's delayed ACK (~40 ms), which a real host's daphne does not.
            disable_nagle_algorithm = True

            def do_GET(self):
                member.requests += 1
                if self.headers.get("Authorization") != f"Bearer {member.token}":
                    return self._json(401, {"error": "invalid or missing bearer token"})
                if self.path == "/api/v1/health":
                    return self._json(200, {"status": "ok"})
                if self.path in member.answers:
                    return self._json(200, member.answers[self.path])
                if self.path != "/api/v1/events":
                    return self._json(404, {"error": "not found"})
                self.send_response(200)
                self.send_header("Content-Type", "text/event-stream")
                self.send_header("Connection", "close")
                self.end_headers()
                self.close_connection = True
                try:
                    member._serve(self.wfile, self.headers.get("Last-Event-ID"))
                except OSError:
                    pass

            def _json(self, status, body):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, *args):
                pass

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(tmp / "c.pem", tmp / "k.pem")
        self.server.socket = context.wrap_socket(self.server.socket, server_side=True)
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    @property
    def url(self) -> str:
        return f"https://127.0.0.1:{self.server.server_address[1]}"

    def emit(self, kind: str, payload: dict | None = None) -> int:
        with self.cond:
            self.seq += 1
            event = {"seq": self.seq, "ts_ms": int(time.time() * 1000), "schema": 1, "kind": kind}
            event.update(payload or {})
            frame = f"id: {self.seq}\nevent: {kind}\ndata: {json.dumps(event)}\n\n"
            self.events.append((self.seq, frame))
            self.cond.notify_all()
            return self.seq

    def _serve(self, out, last_event_id: str | None) -> None:
        out.write(b": stream open\n\n")
        if self.mode == "garbage":
            out.write(b"this is not server-sent events\n\n")
            out.flush()
            time.sleep(1)
            return
        if self.mode == "bigline":
            out.write(b"data: ")
            while not self.closing:
                out.write(b"x" * 65536)
            return
        if self.mode == "flood":
            seq = 0
            while not self.closing:
                chunk = []
                for _ in range(200):
                    seq += 1
                    data = json.dumps({"seq": seq, "ts_ms": 0, "schema": 1, "kind": "game.running"})
                    chunk.append(f"id: {seq}\nevent: game.running\ndata: {data}\n\n")
                out.write("".join(chunk).encode())
            return
        cursor = int(last_event_id) if last_event_id and last_event_id.isdigit() else 0
        while not self.closing:
            with self.cond:
                fresh = [f for s, f in self.events if s > cursor]
                if not fresh:
                    self.cond.wait(self.keepalive_s)
                    fresh = [f for s, f in self.events if s > cursor]
                if fresh:
                    cursor = self.events[-1][0]
            out.write("".join(fresh).encode() if fresh else b": keep-alive\n\n")
            out.flush()

    def close(self) -> None:
        self.closing = True
        with self.cond:
            self.cond.notify_all()
        self.server.shutdown()
        self.server.server_close()
