"""The SSE stream of a real host over TLS: replay, live, filter, resume, dropped, keep-alive,
cap, slow consumers, bad parameters."""

from __future__ import annotations

import queue
import socket
import ssl
import threading
import time

import pytest

from tests.hooks.helpers import SSEClient

pytestmark = pytest.mark.e2e


def _until_event(client: SSEClient, kind: str, timeout: float = 15):
    deadline = time.monotonic() + timeout
    while True:
        frame = client.next(max(0.1, deadline - time.monotonic()))
        if frame.event == kind:
            return frame


def test_replay_live_filter_and_resume(hooks_host, emit_in):
    sse = SSEClient(hooks_host, "/api/v1/events?kinds=library.*,host.*")
    try:
        assert sse.status == 200
        first = sse.next()
        assert first.event == "host.started" and first.id == str(first.json()["seq"])
        assert first.json()["version"] and isinstance(first.json()["gamestream"], bool)
        emit_in(
            "stream.started",
            {"stream": {"mode": "1x1@1", "hdr": False, "client": "", "plane": "native"}},
        )
        emit_in("library.changed", {"source": "manual"}, count=3)
        live = sse.events(3)
    finally:
        sse.close()
    assert [f.event for f in live] == ["library.changed"] * 3  # stream.* filtered server-side
    seqs = [int(f.id) for f in live]
    assert seqs == sorted(seqs) and seqs[0] > int(first.id)

    emit_in("library.changed", {"source": "while-away"}, count=2)
    emit_in("host.stopping", {})
    again = SSEClient(
        hooks_host,
        "/api/v1/events?since=1&kinds=library.*,host.*",
        headers={"Last-Event-ID": str(seqs[-1])},  # wins over ?since
    )
    try:
        resumed = again.events(3)
        assert [f.event for f in resumed] == ["library.changed", "library.changed", "host.stopping"]
        assert all(int(f.id) > seqs[-1] for f in resumed)
        assert [f.json().get("source") for f in resumed[:2]] == ["while-away"] * 2
        with pytest.raises(queue.Empty):
            again.next(timeout=1)  # no duplicates after the replay
    finally:
        again.close()


def test_streams_joining_during_a_burst_get_each_event_once_in_order(hooks_host, emit_in):
    """A stream catches up from the ring and its queue (its own task), then goes live (the hub
    writes to it directly): events emitted across that switch arrive once each, in order."""
    marker = SSEClient(hooks_host, "/api/v1/events?kinds=library.*")
    try:
        emit_in("library.changed", {"source": "marker"})
        frame = _until_event(marker, "library.changed")
        while frame.json()["source"] != "marker":  # the ring's earlier ones come first
            frame = _until_event(marker, "library.changed")
        start = int(frame.id)
    finally:
        marker.close()
    n = 200
    burst = threading.Thread(
        target=lambda: [emit_in("library.changed", {"source": f"burst-{i}"}) for i in range(n)]
    )
    streams = []
    burst.start()
    try:
        for _ in range(6):  # joining at different points of the burst
            streams.append(SSEClient(hooks_host, f"/api/v1/events?kinds=library.*&since={start}"))
            time.sleep(0.05)
        burst.join(60)
        for sse in streams:
            got = sse.events(n, timeout=30)
            assert [f.json()["source"] for f in got] == [f"burst-{i}" for i in range(n)]
            seqs = [int(f.id) for f in got]
            assert seqs == sorted(set(seqs)) and seqs[0] > start
            with pytest.raises(queue.Empty):
                sse.next(timeout=0.5)  # nothing twice after the last one
    finally:
        burst.join(60)
        for sse in streams:
            sse.close()


def test_keepalive_comment_with_short_interval(hooks_host):
    sse = SSEClient(hooks_host, "/api/v1/events?kinds=update.applied")
    try:
        started = time.monotonic()
        frame = sse.next(timeout=5, comments=True)
        while frame.data == ": stream open":
            frame = sse.next(timeout=5, comments=True)
        assert frame.comment and frame.data.startswith(":")
        assert time.monotonic() - started < 3  # 0.5 s configured; 15 s by default
    finally:
        sse.close()


def test_cursor_ahead_of_ring_gets_dropped(hooks_host, emit_in):
    sse = SSEClient(
        hooks_host, "/api/v1/events?kinds=plugins.*", headers={"Last-Event-ID": str(10**15)}
    )
    try:
        frame = sse.next()
        assert frame.event == "dropped" and frame.id is None and frame.json() == {"dropped": True}
        emit_in("plugins.changed", {"id": "after-drop"})
        live = sse.next()
        assert live.event == "plugins.changed" and live.json()["id"] == "after-drop"
    finally:
        sse.close()


@pytest.mark.slow
def test_cursor_behind_ring_gets_dropped_then_the_ring(hooks_host, emit_in):
    emit_in("display.released", {"count": 1}, count=1100)
    sse = SSEClient(hooks_host, "/api/v1/events?since=1")
    try:
        assert sse.next().event == "dropped"
        frames = sse.events(1024, timeout=20)
        ids = [int(f.id) for f in frames]
        assert ids == list(range(ids[0], ids[0] + 1024))
    finally:
        sse.close()


@pytest.mark.parametrize(
    "query",
    ["since=-1", "since=abc", "since=1.5", f"since={2**63}", "kinds=nope", "kinds=stream.*,zzz.*"],
)
def test_bad_parameters_are_400(hooks_host, query):
    with hooks_host.mgmt() as c:
        r = c.get(f"/api/v1/events?{query}")
    assert r.status_code == 400 and "error" in r.json()


def test_auth(hooks_host, emit_in):
    with hooks_host.client() as c:
        r = c.get("/api/v1/events")
        assert r.status_code == 401 and r.json()["error"]
        assert r.headers["WWW-Authenticate"].startswith("Bearer")
    sse = SSEClient(hooks_host, "/api/v1/events?kinds=store.*", token=hooks_host.plugin_token)
    try:
        assert sse.status == 200
        emit_in("store.changed", {})
        assert sse.next().event == "store.changed"
    finally:
        sse.close()


def _open_retrying(host, path: str, timeout: float = 10) -> SSEClient:
    """Open a stream, retrying while slots of earlier tests' streams are still being freed."""
    deadline = time.monotonic() + timeout
    while True:
        s = SSEClient(host, path)
        if s.status == 200 or time.monotonic() > deadline:
            return s
        s.close()
        time.sleep(0.3)


@pytest.mark.slow
def test_stream_cap_then_slot_freed(hooks_host):
    """The cap is per web process: the host serves 32 on each (a stream refused by a full one
    retries on a new connection, which another may take), and none beyond."""
    cap = 32 * int(hooks_host.extra_env.get("HOST_WEB_PROCESSES", "1"))  # test hosts run one
    streams = []
    try:
        for _ in range(cap):
            streams.append(_open_retrying(hooks_host, "/api/v1/events?kinds=update.*", 30))
        assert [s.status for s in streams] == [200] * cap
        with hooks_host.mgmt() as c:
            r = c.get("/api/v1/events")
        assert r.status_code == 503 and "error" in r.json()
    finally:
        for s in streams:
            s.close()
    s = _open_retrying(hooks_host, "/api/v1/events?kinds=update.*")
    s.close()
    assert s.status == 200  # disconnects gave their slots back


@pytest.mark.slow
def test_consumer_that_stops_reading_is_disconnected(hooks_host, emit_in):
    ctx = ssl.create_default_context(cafile=str(hooks_host.cert_path))
    raw = socket.create_connection(("127.0.0.1", hooks_host.mgmt_port))
    raw.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 16384)
    sock = ctx.wrap_socket(raw, server_hostname="127.0.0.1")
    request = (
        "GET /api/v1/events?kinds=library.* HTTP/1.1\r\nHost: 127.0.0.1\r\n"
        f"Authorization: Bearer {hooks_host.mgmt_token}\r\nAccept: text/event-stream\r\n\r\n"
    )
    sock.sendall(request.encode())
    assert b"200" in sock.recv(64)
    big = "x" * 8000
    emit_in("library.changed", {"source": big}, count=2000)  # ~16 MB we never read
    time.sleep(1.0)
    sock.settimeout(20)
    received = 0
    try:
        while chunk := sock.recv(1 << 20):
            received += len(chunk)
    except (ConnectionResetError, ssl.SSLError):
        pass  # cut off: what we did not read is gone, not buffered for us
    finally:
        sock.close()
    # The server ended the connection instead of buffering everything for us.
    assert received < 2000 * 8000
    assert "too slow" in hooks_host.log_tail(400) or "not reading" in hooks_host.log_tail(400)
