"""Real test parts: a CA and server certificate, HTTP(S) receivers, an SSE client, and a way to
emit events from another process of a running host."""

from __future__ import annotations

import datetime
import hashlib
import hmac
import http.server
import ipaddress
import json
import os
import queue
import socket
import ssl
import subprocess
import sys
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


# -- addresses and certificates -----------------------------------------------------------


def receiver_ip() -> str:
    """A non-loopback IPv4 address of this machine that we can bind (the SSRF rule refuses
    loopback), else 127.0.0.1 (the host then needs the test-only escape hatch)."""
    import psutil

    for addrs in psutil.net_if_addrs().values():
        for addr in addrs:
            if addr.family != socket.AF_INET:
                continue
            ip = ipaddress.ip_address(addr.address)
            if ip.is_loopback or ip.is_link_local:
                continue
            try:
                with socket.socket() as s:
                    s.bind((addr.address, 0))
                return addr.address
            except OSError:
                continue
    return "127.0.0.1"


@dataclass
class TlsMaterial:
    ca_path: Path
    cert_path: Path
    key_path: Path
    ip: str


def make_ca_and_cert(directory: Path) -> TlsMaterial:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    ip = receiver_ip()
    now = datetime.datetime.now(datetime.UTC)
    ca_key = ec.generate_private_key(ec.SECP256R1())
    ca_name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "hooks test CA")])
    ca = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(True, False, False, False, False, True, True, False, False), True
        )
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), False)
        .sign(ca_key, hashes.SHA256())
    )
    key = ec.generate_private_key(ec.SECP256R1())
    cert = (
        x509.CertificateBuilder()
        .subject_name(x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, ip)]))
        .issuer_name(ca_name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(minutes=5))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(
            x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address(ip))]), False
        )
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), True)
        .add_extension(
            x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()), False
        )
        .add_extension(x509.ExtendedKeyUsage([x509.oid.ExtendedKeyUsageOID.SERVER_AUTH]), False)
        .sign(ca_key, hashes.SHA256())
    )
    pem = serialization.Encoding.PEM
    (directory / "ca.pem").write_bytes(ca.public_bytes(pem))
    (directory / "cert.pem").write_bytes(cert.public_bytes(pem))
    (directory / "key.pem").write_bytes(
        key.private_bytes(pem, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return TlsMaterial(directory / "ca.pem", directory / "cert.pem", directory / "key.pem", ip)


# -- receivers -------------------------------------------------------------------------------


@dataclass
class Received:
    path: str
    headers: dict
    body: bytes


@dataclass
class Receiver:
    """A real HTTP(S) server in a thread that records every POST."""

    server: http.server.ThreadingHTTPServer
    scheme: str
    requests: queue.Queue = field(default_factory=queue.Queue)
    statuses: list[int] = field(default_factory=list)  # answers in order, then 200
    redirect_to: str | None = None

    @property
    def url(self) -> str:
        host, port = self.server.server_address[:2]
        return f"{self.scheme}://{host}:{port}/hook"

    def get(self, timeout: float = 10.0) -> Received:
        return self.requests.get(timeout=timeout)

    def none_within(self, seconds: float) -> bool:
        try:
            self.requests.get(timeout=seconds)
        except queue.Empty:
            return True
        return False

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


def start_receiver(ip: str, tls: TlsMaterial | None = None, **kwargs) -> Receiver:
    holder: dict = {}

    class Handler(http.server.BaseHTTPRequestHandler):
        def do_POST(self):  # http.server API
            length = int(self.headers.get("Content-Length") or 0)
            body = self.rfile.read(length)
            rec: Receiver = holder["r"]
            rec.requests.put(Received(self.path, dict(self.headers.items()), body))
            if rec.redirect_to:
                self.send_response(307)
                self.send_header("Location", rec.redirect_to)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            status = rec.statuses.pop(0) if rec.statuses else 200
            self.send_response(status)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, *args):
            pass

    server = http.server.ThreadingHTTPServer((ip, 0), Handler)
    server.daemon_threads = True
    scheme = "http"
    if tls:
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(tls.cert_path, tls.key_path)
        server.socket = ctx.wrap_socket(server.socket, server_side=True)
        scheme = "https"
    rec = Receiver(server, scheme, **kwargs)
    holder["r"] = rec
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return rec


def verify_signature(secret: bytes, body: bytes, header: str) -> bool:
    expected = "sha256=" + hmac.new(secret, body, hashlib.sha256).hexdigest()
    return hmac.compare_digest(expected, header or "")


# -- the running host ------------------------------------------------------------------------


def host_env(host) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.pop("REDIS_URL", None)
    env.update(
        {
            "HOST_STATE_DIR": str(host.state_dir),
            "HOST_PORT": str(host.base_port),
            "DJANGO_SETTINGS_MODULE": "hostmgmt.settings",
            "HOST_LOG_LEVEL": "WARNING",
        }
    )
    env.update(host.extra_env)  # every process of a host shares the environment it started with
    return env


def emit_via_command(host, kind: str, payload: dict, count: int = 1) -> None:
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "emit_event", kind, json.dumps(payload),
         "--count", str(count)],
        cwd=ROOT, env=host_env(host), check=True, timeout=60,
    )  # fmt: skip


_EMITTER_CODE = """
import json, sys
import django
django.setup()
from hooks import events
for line in sys.stdin:
    kind, payload, count = json.loads(line)
    for _ in range(count):
        events.emit(kind, payload)
    print("ok", flush=True)
"""


class Emitter:
    """A separate long-lived process of the host that emits on request (one Django start-up
    for the whole session instead of one per emit)."""

    def __init__(self, host):
        self.proc = subprocess.Popen(
            [sys.executable, "-c", _EMITTER_CODE],
            cwd=ROOT, env=host_env(host), stdin=subprocess.PIPE, stdout=subprocess.PIPE,
            text=True,
        )  # fmt: skip
        self.lock = threading.Lock()

    def emit(self, kind: str, payload: dict, count: int = 1) -> None:
        with self.lock:
            self.proc.stdin.write(json.dumps([kind, payload, count]) + "\n")
            self.proc.stdin.flush()
            assert self.proc.stdout.readline().strip() == "ok"

    def close(self) -> None:
        self.proc.stdin.close()
        self.proc.wait(10)


def run_in_host(host, code: str) -> str:
    """Run Python inside a Django process of the host (its state dir, Redis and Celery)."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "shell", "-c", code],
        cwd=ROOT, env=host_env(host), check=True, timeout=60, capture_output=True, text=True,
    )  # fmt: skip
    return out.stdout


# -- SSE client ------------------------------------------------------------------------------


@dataclass
class Frame:
    id: str | None
    event: str | None
    data: str | None
    comment: bool = False

    def json(self) -> dict:
        return json.loads(self.data)


class SSEClient:
    """A real SSE client over TLS: reads frames in a thread so tests wait with timeouts."""

    def __init__(self, host, path: str, headers: dict | None = None, token: str | None = None):
        token = token or host.mgmt_token
        self.client = host.client(headers={"Authorization": f"Bearer {token}", **(headers or {})})
        self.frames: queue.Queue = queue.Queue()
        self.status: int | None = None
        self.body: bytes = b""
        self.ready = threading.Event()
        self.closed = threading.Event()
        self._stop = False
        self._thread = threading.Thread(target=self._run, args=(path,), daemon=True)
        self._thread.start()
        self.ready.wait(15)

    def _run(self, path: str) -> None:
        try:
            with self.client.stream("GET", path, timeout=httpx.Timeout(30, read=60)) as r:
                self._response = r
                self.status = r.status_code
                if r.status_code != 200:
                    self.body = r.read()
                    self.ready.set()
                    return
                self.ready.set()
                cur: dict = {}
                for line in r.iter_lines():
                    if self._stop:
                        return
                    if line == "":
                        if cur:
                            self.frames.put(Frame(cur.get("id"), cur.get("event"), cur.get("data")))
                        cur = {}
                    elif line.startswith(":"):
                        self.frames.put(Frame(None, None, line, comment=True))
                    else:
                        name, _, value = line.partition(":")
                        cur[name] = value[1:] if value.startswith(" ") else value
        except Exception:  # the test sees `closed`
            pass
        finally:
            self.ready.set()
            self.closed.set()

    def next(self, timeout: float = 10.0, comments: bool = False) -> Frame:
        deadline = time.monotonic() + timeout
        while True:
            frame = self.frames.get(timeout=max(0.01, deadline - time.monotonic()))
            if comments or not frame.comment:
                return frame

    def events(self, n: int, timeout: float = 15.0) -> list[Frame]:
        return [self.next(timeout) for _ in range(n)]

    def close(self) -> None:
        """Wake the reader with EOF, let it finish, and only then free the socket.

        Closing the socket under the reader thread frees its descriptor number while OpenSSL
        in that thread still polls and reads it: the next connection this process opens gets
        the number, and the stale reader steals its bytes (the client then fails with "bad
        record MAC" or "wrong version number"). `shutdown` ends the stream without freeing it.
        """
        self._stop = True
        response = getattr(self, "_response", None)
        sock = None
        if response is not None:
            stream = response.extensions.get("network_stream")
            sock = stream.get_extra_info("socket") if stream is not None else None
        if sock is not None:
            try:
                socket.socket.shutdown(sock, socket.SHUT_RDWR)  # the raw socket, not SSL's
            except OSError:
                pass  # already closed by the server
        if not self.closed.wait(5):
            raise AssertionError("the SSE reader thread did not stop")
        if response is not None:
            try:
                response.close()
            except Exception:  # already closed by the server
                pass
        self.client.close()
