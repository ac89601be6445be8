"""A real host with two daphne processes on the supervisor's socket (HOST_WEB_PROCESSES=2):
connections spread over both; one killed with SIGKILL under an open SSE stream is restarted on
its own while the other's stream carries on, and a stream that resumes with Last-Event-ID
misses nothing; what one process writes or counts (config, CSRF tokens, failed logins) the
other sees on the next connection."""

from __future__ import annotations

import os
import signal
import socket
import ssl
import time

import httpx
import psutil
import pytest

from tests.hooks.helpers import Emitter, SSEClient
from tests.support.livehost import running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ADMIN = ("admin", "Adm1n-web-processes")


@pytest.fixture(scope="module")
def host():
    env = {"HOST_WEB_PROCESSES": "2", "HOST_SSE_KEEPALIVE_S": "0.5"}
    with running_host(ADMIN, env=env) as live:
        yield live


def daphnes(host) -> list[psutil.Process]:
    """The host's live daphne processes."""
    out = []
    for proc in psutil.Process(host.proc.pid).children(recursive=True):
        try:
            if "hostmgmt.daphne_main" in proc.cmdline() and proc.status() != "zombie":
                out.append(proc)
        except psutil.NoSuchProcess:
            pass
    return out


def owner(host, client_port: int) -> int | None:
    """The pid of the daphne holding the connection from local port `client_port`."""
    for proc in daphnes(host):
        for conn in proc.net_connections("tcp"):
            ours = conn.laddr and conn.laddr.port == host.mgmt_port
            if ours and conn.raddr and conn.raddr.port == client_port:
                return proc.pid
    return None


def client_port(response: httpx.Response) -> int:
    return response.extensions["network_stream"].get_extra_info("client_addr")[1]


def stream_port(sse: SSEClient) -> int:
    return client_port(sse._response)


def test_two_processes_share_the_port_and_connections_spread(host):
    procs = daphnes(host)
    assert len(procs) == 2, [p.cmdline() for p in procs]
    log = host.log_path.read_text(errors="replace")
    assert "started daphne-0 (pid" in log and "started daphne-1 (pid" in log
    clients = [host.client() for _ in range(24)]
    try:
        holders = []
        for c in clients:
            r = c.get("/api/v1/health")
            assert r.status_code == 200
            holders.append(owner(host, client_port(r)))
    finally:
        for c in clients:
            c.close()
    assert set(holders) == {p.pid for p in procs}, holders


def test_a_write_is_read_fresh_and_a_csrf_token_passes_on_any_process(host):
    auth = httpx.BasicAuth(*ADMIN)
    for round_ in range(6):  # a new connection each time: both processes write and read
        name = f"web-processes-{round_}"
        with host.client(auth=auth) as c:
            assert c.post("/api/config", json={"sunshine_name": name}).status_code == 200
        with host.client(auth=auth) as c:
            assert c.get("/api/config").json()["sunshine_name"] == name
        with host.client(auth=auth) as c:
            token = c.get("/api/csrf-token").json()["csrf_token"]
        headers = {"Origin": "https://elsewhere.example", "X-CSRF-Token": token}
        with host.client(auth=auth, headers=headers) as c:
            r = c.post("/api/config", json={"sunshine_name": name})
            assert r.status_code == 200, r.text


def test_a_killed_process_restarts_alone_and_streams_miss_nothing(host):
    emitter = Emitter(host)
    streams: dict[int, SSEClient] = {}
    opened: list[SSEClient] = []
    try:
        for _ in range(30):  # one stream on each process
            sse = SSEClient(host, "/api/v1/events?kinds=library.*")
            opened.append(sse)
            assert sse.status == 200
            streams.setdefault(owner(host, stream_port(sse)), sse)
            if len(streams) == 2:
                break
        assert len(streams) == 2 and None not in streams, streams.keys()
        victim, survivor = list(streams)
        emitter.emit("library.changed", {"source": "before"})
        last_seen = {}
        for pid, sse in streams.items():
            frame = sse.next()
            while frame.event != "library.changed":
                frame = sse.next()
            last_seen[pid] = int(frame.id)

        os.kill(victim, signal.SIGKILL)
        emitter.emit("library.changed", {"source": "during"}, count=5)
        kept = [streams[survivor].next() for _ in range(5)]
        assert [f.json()["source"] for f in kept] == ["during"] * 5
        assert streams[victim].closed.wait(10)

        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            pids = {p.pid for p in daphnes(host)}
            if len(pids) == 2 and victim not in pids:
                break
            time.sleep(0.2)
        assert len(pids) == 2 and survivor in pids and victim not in pids, pids
        assert "daphne-" in host.log_path.read_text(errors="replace").split("exited with")[-2]

        resumed = SSEClient(
            host,
            "/api/v1/events?kinds=library.*",
            headers={"Last-Event-ID": str(last_seen[victim])},
        )
        opened.append(resumed)
        again = resumed.events(5)
        assert [f.json()["source"] for f in again] == ["during"] * 5
        assert [int(f.id) for f in again] == [int(f.id) for f in kept]
    finally:
        for sse in opened:
            sse.close()
        emitter.close()


def test_the_login_throttle_counts_failures_on_every_process(host):
    statuses, holders = [], set()
    for _ in range(11):  # a new connection each: they land on both processes
        with host.client(auth=httpx.BasicAuth(ADMIN[0], "wrong")) as c:
            r = c.get("/api/config")
            statuses.append(r.status_code)
            holders.add(owner(host, client_port(r)))
    assert len(holders) == 2, holders
    assert statuses[:10] == [401] * 10 and statuses[10] == 429, statuses
    with host.client(auth=httpx.BasicAuth(*ADMIN)) as c:
        assert c.get("/api/config").status_code == 429  # the address is blocked on both


def slow_stream(host) -> ssl.SSLSocket:
    """An event stream that never reads: a small receive buffer, the request sent, nothing
    read after it, so the server's writes to it back up."""
    raw = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
    raw.connect(("127.0.0.1", host.mgmt_port))
    ctx = ssl.create_default_context(cafile=str(host.state_dir / "tls-cert.pem"))
    ctx.check_hostname = False
    conn = ctx.wrap_socket(raw)
    conn.sendall(
        b"GET /api/v1/events HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        + f"Authorization: Bearer {host.mgmt_token}\r\n\r\n".encode()
    )
    return conn


def test_a_slow_stream_on_one_process_never_delays_another(host):
    """Events flood a stream that reads nothing on one process; a stream on the other gets
    every one, in order, each within moments of its emit."""
    emitter = Emitter(host)
    emitter.emit("library.changed", {"warm": True})  # its Django start is not the host's delay
    slow, opened = [], []
    try:
        for _ in range(30):
            conn = slow_stream(host)
            slow.append(conn)
            if owner(host, conn.getsockname()[1]) is not None:
                break
        stalled = owner(host, slow[-1].getsockname()[1])
        assert stalled is not None
        reader = None
        for _ in range(30):
            sse = SSEClient(host, "/api/v1/events?kinds=library.*")
            opened.append(sse)
            if owner(host, stream_port(sse)) not in (None, stalled):
                reader = sse
                break
        assert reader is not None, "no stream landed on the other process"

        pad = "x" * 4000  # 400 events of 4 KB: far past what the stalled socket buffers
        for batch in range(40):
            emitter.emit("library.changed", {"batch": batch, "t": time.time(), "pad": pad}, 10)
        late, batches = [], []
        for _ in range(400):
            frame = reader.next(timeout=20)
            while frame.event != "library.changed" or "batch" not in frame.json():
                frame = reader.next(timeout=20)  # the host's own library events pass by
            body = frame.json()
            late.append(time.time() - body["t"])
            batches.append(body["batch"])
        assert batches == sorted(batches) and set(batches) == set(range(40))
        late.sort()
        assert late[-1] < 2.0, f"slowest event took {late[-1]:.2f} s (median {late[200]:.3f})"
    finally:
        for conn in slow:
            conn.close()
        for sse in opened:
            sse.close()
        emitter.close()
