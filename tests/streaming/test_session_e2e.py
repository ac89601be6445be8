"""End to end on a real host: a paired moonlight-python client launches Desktop at 1280x720@60,
sees the pattern drawn into the virtual display, quits; events, record, status, cleanup."""

from __future__ import annotations

import time

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import (
    client_result,
    events,
    owned_processes,
    pair,
    run_client,
    wait_for,
)
from tests.support.client import BLUE_BGR, GREEN_BGR

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]

W, H, FPS = 1280, 720, 60


def close(bgr, want, tol=16) -> bool:
    return max(abs(a - b) for a, b in zip(bgr, want, strict=True)) <= tol


def test_desktop_720p60_shows_the_display_then_quits_cleanly(stream_host, tmp_path):
    host = stream_host
    ml = pair(host, tmp_path / "ml")
    proc = run_client(host, tmp_path / "ml", W, H, FPS, 5, "quit")

    def live_status():
        with host.mgmt() as c:
            s = c.get("/api/v1/status").json()
        return s if s["video_streaming"] else None

    status = wait_for(live_status, timeout=30)
    assert status, "the session never showed up in /api/v1/status"
    assert status["session"] == {"width": W, "height": H, "fps": FPS}
    assert status["active_sessions"] == 1 and status["games"][0]["title"] == "Desktop"
    time.sleep(1.5)  # stats publish once a second
    with host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
        latency = c.get("/api/stream/latency").json()
    assert latency["capture_ms"]["samples"] > 30 and latency["encode_ms"]["samples"] > 30
    assert 0 < latency["capture_ms"]["avg"] < 50 and 0 < latency["encode_ms"]["avg"] < 100

    r = client_result(proc)
    assert r["session_url"] == f"rtsp://127.0.0.1:{host.base_port + 21}"
    assert r["serverinfo_busy"] and r["currentgame"] == r["desktop_id"], r
    assert r["decoded"] == r["frames"] and r["frames"] > 100
    assert r["fps"] > 40, r  # sustained, on a shared 2-core VM
    assert r["shape"] == [H, W, 3]
    assert close(r["box_bgr"], GREEN_BGR), r
    assert close(r["corner_bgr"], BLUE_BGR), r
    assert max(r["background_bgr"]) < 16, r
    assert r["serverinfo_after"] == 0  # /cancel ended the session

    kinds = {"client.connected", "client.disconnected", "session.started", "session.ended",
             "stream.started", "stream.stopped", "display.created"}  # fmt: skip
    seen = events(host, "client.*,session.*,stream.*,display.*",
                  lambda ev: kinds <= {e["kind"] for e in ev})  # fmt: skip
    order = [e["kind"] for e in seen if e["kind"] in kinds]
    assert order == ["display.created", "session.started", "client.connected", "stream.started",
                     "client.disconnected", "stream.stopped", "session.ended"], order  # fmt: skip
    by_kind = {e["kind"]: e for e in seen}
    assert by_kind["client.connected"]["client"]["fingerprint"] == ml.fingerprint
    assert by_kind["client.disconnected"]["reason"] == "quit"
    assert by_kind["stream.started"]["stream"]["mode"] == f"{W}x{H}@{FPS}"
    assert by_kind["display.created"]["mode"] == f"{W}x{H}@{FPS}"

    with host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
        rec = c.get("/api/sessions?limit=1").json()["sessions"][0]
    assert rec["app_name"] == "Desktop" and rec["client_name"] == "Streamer"
    assert (rec["width"], rec["height"], rec["fps"]) == (W, H, FPS)
    assert rec["avg_bitrate_kbps"] > 0 and rec["avg_encode_ms"] > 0 and rec["avg_rtt_ms"] >= 0
    hooks = wait_for(lambda: len(host.webhooks.bodies) >= 2 and host.webhooks.bodies, 15)
    assert hooks, f"no stream webhooks at {host.webhooks.url}: {host.webhooks.bodies}"
    assert [b["event"] for b in hooks] == ["stream.start", "stream.end"], hooks
    assert hooks[1]["app_name"] == "Desktop" and hooks[1]["width"] == W
    assert hooks[1]["avg_bitrate_kbps"] == rec["avg_bitrate_kbps"]
    with host.mgmt() as c:
        assert c.get("/api/v1/status").json()["session"] is None
        displays = c.get("/api/v1/display/state").json()["displays"]
    assert displays == []  # /cancel is deliberate: no linger
    assert wait_for(lambda: not owned_processes(host.state_dir), 5), owned_processes(host.state_dir)
