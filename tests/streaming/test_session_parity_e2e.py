"""Both planes go through the one session lifecycle (streaming/sessions/lifecycle.py): a compat
session (moonlight-python) and a native session (an aiortc peer, as a browser plays) on the
same live host produce the same event payloads, history record fields, stream webhooks (to a
real HTTP receiver) and `/api/stream/latency` figures, and show up alike in /api/v1/status."""

from __future__ import annotations

import asyncio
import re
import time

import pytest

from streaming.sessions.watch import END_REASONS
from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.native.helpers import Knocker, approved_answer
from tests.native.test_dtls_proof import Device, fingerprint_of, loopback_ice, until
from tests.streaming.conftest import client_result, events, pair, run_client, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

__all__ = ["loopback_ice"]  # a fixture, used by name
W, H, FPS = 1280, 720, 30
KINDS = ("session.started", "session.ended", "stream.started", "stream.stopped",
         "client.connected", "client.disconnected")  # fmt: skip
SESSION_ID = re.compile(r"^[0-9a-f]{8}$")


def admin(host):
    return host.client(auth=(ADMIN_USER, ADMIN_PASSWORD))


def latency_now(host) -> dict | None:
    """/api/stream/latency once both windows have a second's worth of frames (the session
    process publishes them about once a second; the first frame's capture includes setup)."""
    with admin(host) as c:
        got = c.get("/api/stream/latency").json()
    return got if got["capture_ms"]["samples"] > 30 and got["encode_ms"]["samples"] > 30 else None


def plane_events(host, plane: str) -> dict[str, dict]:
    """The newest event of each session kind of `plane` (once all of them have come)."""

    def of_plane(ev: dict) -> bool:
        ref = ev.get("session") or ev.get("stream") or ev.get("client") or {}
        return ref.get("plane") == plane

    seen = events(host, "client.*,session.*,stream.*",
                  lambda evs: set(KINDS) <= {e["kind"] for e in evs if of_plane(e)})  # fmt: skip
    return {e["kind"]: e for e in seen if of_plane(e)}


def newest_record(host) -> dict:
    with admin(host) as c:
        return c.get("/api/sessions?limit=1").json()["sessions"][0]


def payload_shape(evs: dict[str, dict]) -> dict[str, set]:
    """Per kind: the event's top-level keys and its ref object's keys."""
    out = {}
    for kind, ev in evs.items():
        ref = ev[kind.split(".")[0]]
        out[kind] = (set(ev) - {"seq", "ts_ms"}, set(ref))
    return out


def compat_session(host, tmp_path) -> dict:
    ml = pair(host, tmp_path / "ml", name="Parity compat")
    proc = run_client(host, tmp_path / "ml", W, H, FPS, 6, "quit", draw=False)
    latency = wait_for(lambda: latency_now(host), 30)
    assert latency, "no /api/stream/latency figures while the compat session streamed"
    client_result(proc)
    assert wait_for(lambda: newest_record(host)["client_name"] == "Parity compat", 15)
    return {"fp": ml.fingerprint, "name": "Parity compat", "latency": latency}


async def native_session(host) -> dict:
    api, knocker, device = host.mgmt(), Knocker(host), Device()
    try:
        sdp = await device.offer()
        fp = fingerprint_of(sdp)
        body = {"sdp": sdp, "name": "Parity native", "app": "desktop",
                "width": W, "height": H, "fps": FPS}  # fmt: skip
        await device.answer((await approved_answer(knocker, api, body))["sdp"])
        await until(lambda: device.frames > 30, 60, "the native device's first frames")
        status = api.get("/api/v1/status").json()
        assert status["session"] == {"width": W, "height": H, "fps": FPS}, status
        rows = [g for g in status["games"] if g["plane"] == "native"]
        assert [(g["client"], g["title"]) for g in rows] == [("Parity native", "Desktop")], rows
        assert SESSION_ID.match(rows[0]["session_id"]), rows
        latency = None
        deadline = time.monotonic() + 20
        while latency is None and time.monotonic() < deadline:
            latency = await asyncio.to_thread(latency_now, host)
            await asyncio.sleep(0.5)
        assert latency, "no /api/stream/latency figures while the native session streamed"
        await asyncio.sleep(2)  # a few per-second samples for the record
        r = await asyncio.to_thread(api.delete, "/api/v1/session")
        assert r.status_code in (200, 204), r.text
        assert api.get("/api/v1/status").json()["session"] is None
        return {"fp": fp, "name": "Parity native", "latency": latency}
    finally:
        await device.close()
        knocker.close()
        api.close()


def test_compat_and_native_sessions_produce_the_same_records(stream_host, tmp_path, loopback_ice):
    host = stream_host
    compat = compat_session(host, tmp_path)
    compat_record = newest_record(host)
    native = asyncio.run(native_session(host))
    assert wait_for(lambda: newest_record(host)["client_name"] == "Parity native", 15)
    native_record = newest_record(host)

    # Events: the same kinds, the same keys at the top and in each ref, the same kind of values.
    by_plane = {p: plane_events(host, p) for p in ("compat", "native")}
    assert payload_shape(by_plane["compat"]) == payload_shape(by_plane["native"]), by_plane
    for plane, want in (("compat", compat), ("native", native)):
        evs = by_plane[plane]
        session = evs["session.started"]["session"]
        assert SESSION_ID.match(session["id"]), session
        assert evs["session.ended"]["session"]["id"] == session["id"]
        assert session["client"] == want["name"] and session["client_id"] == want["fp"][:12]
        assert session["mode"] == f"{W}x{H}@{FPS}" and session["plane"] == plane
        stream = evs["stream.started"]["stream"]
        assert (stream["client"], stream["client_id"], stream["app"]) == (
            want["name"],
            want["fp"][:12],
            "Desktop",
        ), stream
        client = evs["client.connected"]["client"]
        assert (client["name"], client["fingerprint"]) == (want["name"], want["fp"]), client
        # One vocabulary of end reasons (streaming.sessions.watch) on both planes.
        assert evs["session.ended"]["reason"] in END_REASONS, evs["session.ended"]
        assert evs["client.disconnected"]["reason"] == "quit", evs["client.disconnected"]
    # Moonlight quit the app (/cancel); the operator ended the browser's (DELETE /api/v1/session).
    assert by_plane["compat"]["session.ended"]["reason"] == "cancel", by_plane["compat"]
    assert by_plane["native"]["session.ended"]["reason"] == "api", by_plane["native"]

    # History: the same fields, filled on both planes.
    assert set(compat_record) == set(native_record)
    for rec, want, plane in ((compat_record, compat, "compat"), (native_record, native, "native")):
        assert (rec["app_name"], rec["client_name"]) == ("Desktop", want["name"]), rec
        assert (rec["width"], rec["height"], rec["fps"]) == (W, H, FPS), rec
        assert rec["avg_bitrate_kbps"] > 0 and rec["avg_encode_ms"] > 0, (plane, rec)
        assert rec["client_address"], (plane, rec)

    # Stream webhooks: start and end for each session, the same body keys.
    bodies = wait_for(lambda: len(host.webhooks.bodies) >= 4 and host.webhooks.bodies, 20)
    assert bodies, f"stream webhooks: {host.webhooks.bodies}"
    hooks = {(b["client_name"], b["event"]): b for b in bodies}
    for want in (compat, native):
        start, end = hooks[(want["name"], "stream.start")], hooks[(want["name"], "stream.end")]
        assert set(start) == set(end) == set(hooks[(compat["name"], "stream.end")])
        assert end["app_name"] == "Desktop" and end["width"] == W and end["avg_bitrate_kbps"] > 0
    assert (
        hooks[(native["name"], "stream.end")]["avg_bitrate_kbps"]
        == (native_record["avg_bitrate_kbps"])
    )

    # /api/stream/latency: figures from both planes, in the same shape and plausible.
    assert set(compat["latency"]) == set(native["latency"])
    for want in (compat, native):
        lat = want["latency"]
        print(f"\n{want['name']}: /api/stream/latency capture {lat['capture_ms']}, "
              f"encode {lat['encode_ms']}")  # fmt: skip
        assert set(lat["capture_ms"]) == set(lat["encode_ms"]) == {"min", "max", "avg", "samples"}
        # as the compat e2e test has it (a shared 2-core VM)
        assert 0 < lat["capture_ms"]["avg"] < 50 and 0 < lat["encode_ms"]["avg"] < 100, lat
