"""A member stand-in for fleet tests: a real TLS HTTP server on loopback that answers the routes
a fleet host asks (and `DELETE /api/v1/session?id=` for its live sessions), records every
request, and can be slow or refuse."""

from __future__ import annotations

import http.server
import json
import ssl
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from cryptography.hazmat.primitives import serialization

from fleet import pinned
from tests.support.certs import identity, pem


@dataclass
class FakeMember:
    url: str
    fingerprint: str
    token: str
    role: str = "fleet"
    name: str = "member-a"
    delay_s: float = 0.0
    seen: list[tuple[str, str | None]] = field(default_factory=list)
    sessions: list[dict] = field(
        default_factory=lambda: [
            {
                "id": "0000abcd",
                "plane": "webrtc",
                "client": "Den TV",
                "app_title": "Dota 2",
                "mode": "1920x1080@60",
                "state": "streaming",
            }
        ]
    )
    ended: list[str] = field(default_factory=list)
    server: http.server.ThreadingHTTPServer | None = None

    def answers(self) -> dict[str, object]:
        return {
            "/api/v1/fleet/whoami": {"role": self.role, "reach": []},
            "/api/v1/host": {"hostname": self.name, "version": "9.9.9", "encoder": "nvenc"},
            "/api/v1/status": {
                "active_sessions": len(self.sessions),
                "max_sessions": 2,
                "sessions": list(self.sessions),
            },
            "/api/v1/library": [{"id": "steam:570", "title": "Dota 2", "store": "steam"}],
            "/api/v1/gpus": {
                "gpus": [{"id": "10de-2684-0", "name": "RTX", "vendor": "nvidia", "vram_mb": 24}],
                "selected": {"id": "10de-2684-0"},
                "active": None,
            },
            "/api/v1/display/state": {"displays": [{"state": "active"}, {"state": "pinned"}]},
        }

    def stop(self) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


def serve_tls(handler, tmp: Path, seed: int = 7):
    """A threaded HTTPS server on loopback with test certificate `seed`, serving `handler`;
    (server, the certificate's SHA-256 fingerprint)."""
    key, cert = identity(seed)
    (tmp / f"c{seed}.pem").write_bytes(pem(cert))
    (tmp / f"k{seed}.pem").write_bytes(
        key.private_bytes(
            serialization.Encoding.PEM,
            serialization.PrivateFormat.TraditionalOpenSSL,
            serialization.NoEncryption(),
        )
    )
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    server.daemon_threads = True
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    context.load_cert_chain(tmp / f"c{seed}.pem", tmp / f"k{seed}.pem")
    server.socket = context.wrap_socket(server.socket, server_side=True)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    der = cert.public_bytes(serialization.Encoding.DER)
    return server, pinned.certificate_fingerprint(der)


def start(tmp: Path, token: str, seed: int = 7, **kw) -> FakeMember:
    member = FakeMember("", "", token, **kw)

    class Handler(http.server.BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def do_GET(self):
            member.seen.append((self.path, self.headers.get("Authorization")))
            if member.delay_s:
                time.sleep(member.delay_s)
            if self.headers.get("Authorization") != f"Bearer {member.token}":
                status, body = 401, {"error": "invalid or missing bearer token"}
            elif self.path in member.answers():
                status, body = 200, member.answers()[self.path]
            else:
                status, body = 404, {"error": "not found"}
            self._answer(status, body)

        def do_DELETE(self):
            member.seen.append((f"DELETE {self.path}", self.headers.get("Authorization")))
            live = [s["id"] for s in member.sessions]
            session_id = self.path.removeprefix("/api/v1/session?id=")
            if self.headers.get("Authorization") != f"Bearer {member.token}":
                return self._answer(401, {"error": "invalid or missing bearer token"})
            if not self.path.startswith("/api/v1/session?id=") or session_id not in live:
                return self._answer(404, {"error": "no such session"})
            member.sessions = [s for s in member.sessions if s["id"] != session_id]
            member.ended.append(session_id)
            self._answer(204, None)

        def _answer(self, status, body):
            data = b"" if body is None else json.dumps(body).encode()
            try:
                self.send_response(status)
                if body is not None:
                    self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)
            except OSError:
                pass

        def log_message(self, *args):
            pass

    server, member.fingerprint = serve_tls(Handler, tmp, seed)
    member.server = server
    member.url = f"https://127.0.0.1:{server.server_address[1]}"
    return member
