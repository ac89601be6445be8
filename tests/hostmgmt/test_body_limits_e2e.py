"""Unauthenticated huge bodies against the running host: daphne's listener (TLS) and the compat
plane's nvhttp listeners (HTTP and HTTPS) answer 413 while the body is still arriving, and
neither the listening process's memory nor its temp files grow by more than a few MiB.

The attacker declares a 2 GiB `Content-Length`, or streams a chunked body that never ends, and
keeps sending until an answer arrives; what it sends is capped at 64 MiB, so a host that reads
the body first (what Twisted did before: spool it all, then answer) fails here in seconds
instead of filling the disk. The host runs with a temp directory of its own, and the
listener's open files are read from /proc, so a spooled body is seen even when its temp file is
already unlinked.
"""

from __future__ import annotations

import os
import re
import select
import socket
import ssl
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path

import pytest

from tests.support.livehost import running_host

pytestmark = [pytest.mark.e2e]

MiB = 1024 * 1024
DECLARED = 2 * 1024 * MiB  # the Content-Length the attacker announces
SEND_CAP = 64 * MiB  # the most this test ever sends in one attack
PIECE = 64 * 1024
GROWTH_MAX = 8 * MiB  # "a few MiB": RSS noise of a Python process, far below any body


@dataclass
class Outcome:
    status: int | None
    body: bytes
    sent: int
    seconds: float


@pytest.fixture(scope="module")
def body_host():
    tmp = Path(tempfile.mkdtemp(prefix="bodylimit-tmp-"))
    with running_host(env={"TMPDIR": str(tmp)}) as host:
        host.tmpdir = tmp
        yield host


def child_pid(host, marker: bytes) -> int:
    """The host's child process whose command line contains `marker`."""
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()
            cmdline = Path(f"/proc/{entry}/cmdline").read_bytes()
        except OSError:
            continue
        if int(stat[1]) == host.proc.pid and marker in cmdline:
            return int(entry)
    raise AssertionError(f"no child of the host runs {marker!r}")


def rss(pid: int) -> int:
    status = Path(f"/proc/{pid}/status").read_text()
    return int(re.search(r"VmRSS:\s+(\d+) kB", status).group(1)) * 1024


def open_file_bytes(pid: int) -> int:
    """Bytes in the regular files the process holds open (a spooled body, unlinked or not)."""
    total = 0
    fd_dir = Path(f"/proc/{pid}/fd")
    for fd in os.listdir(fd_dir):
        try:
            st = os.stat(fd_dir / fd)
        except OSError:
            continue
        if (st.st_mode & 0o170000) == 0o100000:
            total += st.st_size
    return total


def dir_bytes(path: Path) -> int:
    return sum(f.stat().st_size for f in path.rglob("*") if f.is_file())


def connect(port: int, tls: bool) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", port), timeout=10)
    if not tls:
        return sock
    ctx = ssl.create_default_context()
    ctx.check_hostname = False
    ctx.verify_mode = ssl.CERT_NONE  # the attacker trusts nothing and presents no certificate
    return ctx.wrap_socket(sock)


def try_read(sock: socket.socket) -> bytes:
    """Whatever answer bytes are there now, without waiting ('' when none yet)."""
    ready = select.select([sock], [], [], 0)[0]
    if not ready and not (isinstance(sock, ssl.SSLSocket) and sock.pending()):
        return b""
    sock.settimeout(0.05)
    try:
        return sock.recv(65536)
    except (TimeoutError, ssl.SSLWantReadError):
        return b""  # readable for TLS housekeeping (session tickets), not an answer
    except OSError:
        return b""


def read_answer(sock: socket.socket, first: bytes, timeout: float = 5) -> bytes:
    data = first
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        head, sep, rest = data.partition(b"\r\n\r\n")
        match = re.search(rb"content-length: *(\d+)", head, re.IGNORECASE)
        if sep and match and len(rest) >= int(match.group(1)):
            break
        sock.settimeout(max(deadline - time.monotonic(), 0.01))
        try:
            more = sock.recv(65536)
        except OSError:
            break
        if not more:
            break
        data += more
    return data


def attack(port: int, tls: bool, path: str, chunked: bool, probe=None) -> Outcome:
    """POST a body that is too large, sending until the host answers (or SEND_CAP); `probe`
    runs while the connection is still open, right after the answer (or the cap)."""
    sock = connect(port, tls)
    head = f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
    head += "Transfer-Encoding: chunked\r\n" if chunked else f"Content-Length: {DECLARED}\r\n"
    piece = b"{" * PIECE
    if chunked:
        piece = f"{PIECE:x}\r\n".encode() + piece + b"\r\n"
    t0 = time.monotonic()
    sent, answer = 0, b""
    try:
        sock.sendall((head + "\r\n").encode())
        sock.settimeout(5)
        while sent < SEND_CAP:
            answer = try_read(sock)
            if answer:
                break
            try:
                sock.sendall(piece)
            except (TimeoutError, OSError):
                break  # the host stopped reading or closed: look for its answer
            sent += PIECE
        seconds = time.monotonic() - t0
        if probe is not None:
            probe()
        answer = read_answer(sock, answer)
    finally:
        sock.close()
    status = re.match(rb"HTTP/1\.[01] (\d{3})", answer)
    body = answer.partition(b"\r\n\r\n")[2]
    return Outcome(int(status.group(1)) if status else None, body, sent, seconds)


CASES = [
    # (listener, TLS, path, expected body)
    ("daphne", True, "/api/v1/hooks", rb'{"error": "request body too large"}'),
    ("daphne", True, "/api/password", rb'"status_code": 413'),
    ("nvhttp", False, "/pair", rb'status_code="413"'),
    ("nvhttp-tls", True, "/pair", rb'status_code="413"'),
]


@pytest.mark.parametrize("chunked", [False, True], ids=["content-length", "chunked"])
@pytest.mark.parametrize("listener,tls,path,expected", CASES, ids=[c[0] + c[2] for c in CASES])
def test_a_2_gib_body_is_refused_while_it_arrives(body_host, listener, tls, path, expected,
                                                  chunked):  # fmt: skip
    host = body_host
    port = {"daphne": host.mgmt_port, "nvhttp": host.base_port,
            "nvhttp-tls": host.base_port - 5}[listener]  # fmt: skip
    pid = child_pid(host, b"daphne" if listener == "daphne" else b"run_compat_plane")
    with host.client() as c:  # warm: the process has served a request before it is measured
        assert c.get("/api/v1/health").status_code == 200
    rss_before, files_before = rss(pid), open_file_bytes(pid)
    during = {}

    def probe():
        during["rss"], during["files"] = rss(pid), open_file_bytes(pid)
        during["tmpdir"] = dir_bytes(host.tmpdir)

    out = attack(port, tls, path, chunked, probe)
    print(f"\n{listener} {path} chunked={chunked}: 413 after {out.seconds * 1000:.0f} ms, "
          f"{out.sent // 1024} KiB sent, RSS +{(during['rss'] - rss_before) // 1024} KiB, "
          f"open files +{(during['files'] - files_before) // 1024} KiB, "
          f"TMPDIR {during['tmpdir'] // 1024} KiB")  # fmt: skip
    assert out.status == 413, (out, host.log_tail())
    assert expected in out.body, out.body
    # Answered while the body was arriving: long before the 64 MiB this test would send.
    assert out.sent < 24 * MiB and out.seconds < 5, out
    assert during["rss"] - rss_before < GROWTH_MAX, (during, rss_before)
    assert during["files"] - files_before < GROWTH_MAX, (during, files_before)
    assert during["tmpdir"] < GROWTH_MAX, during
    time.sleep(0.3)
    assert rss(pid) - rss_before < GROWTH_MAX
    with host.client() as c:  # and the host still serves
        assert c.get("/api/v1/health").status_code == 200


def test_a_content_length_over_the_limit_is_answered_before_any_body_byte(body_host):
    """The 413 comes from the headers alone: the host never waits for (or reads) the body."""
    host = body_host
    for port, tls, path in ((host.mgmt_port, True, "/api/v1/hooks"),
                            (host.base_port, False, "/pair"),
                            (host.base_port - 5, True, "/pair")):  # fmt: skip
        sock = connect(port, tls)
        try:
            sock.sendall(
                f"PUT {path} HTTP/1.1\r\nHost: x\r\nExpect: 100-continue\r\n"
                f"Content-Length: {DECLARED}\r\n\r\n".encode()
            )
            answer = read_answer(sock, b"")
        finally:
            sock.close()
        # Straight to the 413: no "100 Continue" invites the body first.
        assert answer.startswith(b"HTTP/1.1 413 "), (port, answer[:200])


def test_bodies_within_the_limits_still_reach_the_application(body_host):
    host = body_host
    with host.mgmt() as c:  # 2 MiB under /api/v1 (4 MiB limit): Django reads and judges it
        json_type = {"Content-Type": "application/json"}
        r = c.put("/api/v1/hooks", content=b"[" * (2 * MiB), headers=json_type)
        assert r.status_code == 400, r.text
    with host.client() as c:  # just over 1 MiB elsewhere: refused
        r = c.post("/api/password", content=b"x" * (MiB + 1),
                   headers={"Content-Type": "application/json"})  # fmt: skip
        assert r.status_code == 413 and r.json()["status_code"] == 413
    # nvhttp: a plain GET (no body) is served.
    with socket.create_connection(("127.0.0.1", host.base_port), timeout=10) as sock:
        sock.sendall(b"GET /serverinfo HTTP/1.1\r\nHost: x\r\n\r\n")
        answer = read_answer(sock, b"")
    assert answer.startswith(b"HTTP/1.1 200"), answer[:200]


@pytest.mark.parametrize("port_of", [lambda h: h.mgmt_port, lambda h: h.base_port - 5],
                         ids=["daphne", "nvhttp-tls"])  # fmt: skip
def test_a_client_that_keeps_streaming_after_the_413_is_cut_off(body_host, port_of):
    """A TLS close waits for the peer's close_notify; a peer that never sends one and keeps
    streaming is dropped within seconds, not served for as long as it likes."""
    sock = connect(port_of(body_host), tls=True)
    sock.sendall(b"POST /x HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = f"{PIECE:x}\r\n".encode() + b"y" * PIECE + b"\r\n"
    t0, sent, cut = time.monotonic(), 0, None
    sock.settimeout(1)
    try:
        while time.monotonic() - t0 < 10 and sent < SEND_CAP:
            try:
                sock.sendall(piece)
            except (TimeoutError, OSError):
                cut = time.monotonic() - t0
                break
            sent += PIECE
            time.sleep(0.005)  # a steady stream, not a burst the socket buffers absorb
    finally:
        sock.close()
    assert cut is not None and cut < 5, (cut, sent)
