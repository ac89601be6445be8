"""Helpers for native-plane tests: a browser-less client of /native/offer and event reading."""

from __future__ import annotations

import json
import os
import queue
import secrets
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from tests.hooks.helpers import SSEClient


@contextmanager
def catalog_app(host, admin_auth, name: str, cmd: str, marks: Path) -> Iterator[Path]:
    """A catalog app for one test, whose prep step leaves `do` / `undo` in `marks`; removed
    from the catalog afterwards."""
    app = {
        "index": -1,
        "name": name,
        "cmd": cmd,
        "prep-cmd": [{"do": f"touch {marks}/do", "undo": f"touch {marks}/undo"}],
        "exit-timeout": 2,
    }
    with host.client(auth=admin_auth) as admin:
        r = admin.post("/api/apps", json=app)
        assert r.status_code == 200 and r.json()["status"] is True, r.text
        yield marks
        apps = admin.get("/api/apps").json()["apps"]
        admin.delete(f"/api/apps/{next(i for i, a in enumerate(apps) if a['name'] == name)}")


def fake_fp() -> str:
    return secrets.token_hex(32)


def offer_sdp(fp: str, video: bool = True) -> str:
    colons = ":".join(fp[i : i + 2] for i in range(0, 64, 2)).upper()
    lines = ["v=0", "o=- 1 1 IN IP4 127.0.0.1", "s=-", "t=0 0", f"a=fingerprint:sha-256 {colons}"]
    if video:
        lines.append("m=video 9 UDP/TLS/RTP/SAVPF 96")
    return "\r\n".join(lines) + "\r\n"


class Knocker:
    """Talks to /native/offer the way the page does (CSRF cookie + header, same origin)."""

    def __init__(self, host, source: str | None = None):
        """`source`: another loopback address (127.0.0.x) to come from, for its own buckets."""
        self.host = host
        if source:
            import httpx

            transport = httpx.HTTPTransport(local_address=source, verify=host.ssl_context())
            self.c = host.client(transport=transport)
        else:
            self.c = host.client()
        r = self.c.get("/play")
        assert r.status_code == 200, r.text
        self.token = self.c.cookies["csrftoken"]

    def post(self, body, **headers):
        hdrs = {"X-CSRFToken": self.token, "Referer": f"{self.host.url}/play"}
        hdrs.update(headers)
        data = body if isinstance(body, bytes) else json.dumps(body).encode()
        hdrs.setdefault("Content-Type", "application/json")
        return self.c.post("/native/offer", content=data, headers=hdrs)

    def knock(self, fp: str, name: str = "tv", **extra):
        body = {"sdp": offer_sdp(fp), "name": name, "width": 1280, "height": 720, "fps": 60}
        body.update(extra)
        return self.post(body)

    def close(self):
        self.c.close()


async def approved_answer(knocker: Knocker, api, body: dict) -> dict:
    """A new device's offer the way a player page and its operator make it: the first knock
    is held pending (202), the operator approves it, the second knock gets the answer (200);
    returns the answer's JSON."""
    import asyncio

    r = await asyncio.to_thread(knocker.post, body)
    assert r.status_code == 202, r.text
    r = api.post(f"/api/v1/native/pending/{r.json()['id']}/approve")
    assert r.status_code == 200, r.text
    r = await asyncio.to_thread(knocker.post, body)
    assert r.status_code == 200, r.text
    return r.json()


def device_events(host, since: int, kinds: str, fp: str, timeout: float = 3.0) -> list[str]:
    """Kinds of the events since `since` (replayed) whose device/client fingerprint is `fp`."""
    sse = SSEClient(host, f"/api/v1/events?since={since}&kinds={kinds}")
    out = []
    try:
        while True:
            try:
                frame = sse.next(timeout)
            except queue.Empty:
                return out
            data = frame.json()
            ref = data.get("device") or data.get("client") or {}
            if ref.get("fingerprint") == fp:
                assert ref.get("plane") == "native", data
                out.append(frame.event)
    finally:
        sse.close()


def last_seq(host) -> int:
    """The newest event seq now (0 if none), so a test reads only its own events."""
    sse = SSEClient(host, "/api/v1/events?since=0")
    seq = 0
    try:
        while True:
            try:
                frame = sse.next(1.0)
            except queue.Empty:
                return seq
            if frame.id:
                seq = max(seq, int(frame.id))
    finally:
        sse.close()


class LiveEvents:
    """One live event stream held open for a whole test, read as an operator's client reads it:
    opened at `since` (default: the newest event now, so only what happens from here on), every
    frame taken as it arrives. Each frame must carry a seq above the one before it (in order,
    none twice) and no `dropped` marker may come: the test fails on either.

    `wait(until)` reads until `until(events)` holds; `events` is everything read so far."""

    def __init__(self, host, kinds: str, since: int | None = None):
        since = last_seq(host) if since is None else since
        self.sse = SSEClient(host, f"/api/v1/events?since={since}&kinds={kinds}")
        assert self.sse.status == 200, (self.sse.status, self.sse.body)
        self.events: list[dict] = []
        self.last = since

    def _read(self, timeout: float) -> bool:
        try:
            frame = self.sse.next(timeout)
        except queue.Empty:
            return False
        assert frame.id is not None, f"the stream reported lost events: {frame}"
        seq = int(frame.id)
        assert seq > self.last, f"seq {seq} after {self.last}: out of order or repeated"
        self.last = seq
        data = frame.json()
        assert data["kind"] == frame.event and data["seq"] == seq, data
        self.events.append(data)
        return True

    def wait(self, until, timeout: float = 20.0, what: str = "events"):
        """Read until `until(events)` is truthy and return its value; fail after `timeout`."""
        deadline = time.monotonic() + timeout
        while True:
            value = until(self.events)
            if value:
                return value
            left = deadline - time.monotonic()
            if left <= 0 or (not self._read(left) and self.sse.closed.is_set()):
                kinds = [e["kind"] for e in self.events]
                raise AssertionError(f"timed out waiting for {what}; the stream gave {kinds}")

    def drain(self, quiet: float = 0.5) -> list[dict]:
        """Read whatever arrives until nothing has come for `quiet` seconds."""
        while self._read(quiet):
            pass
        return self.events

    def close(self) -> None:
        self.sse.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def pids_named(argv0: str) -> list[int]:
    """Processes whose argv[0] is `argv0` (a test game started as `exec -a NAME ...`)."""
    found = []
    for p in os.listdir("/proc"):
        try:
            if Path(f"/proc/{p}/cmdline").read_bytes().startswith(argv0.encode() + b"\0"):
                found.append(int(p))
        except (OSError, ValueError):
            continue
    return found


class FakeClock:
    """A clock the test moves by hand (`clock.t += 5`), for the Redis-backed queues."""

    def __init__(self):
        self.t = 1_000_000.0

    def __call__(self):
        return self.t
