"""Each session's own live figures (`SessionCore.live_point`, published in its registry
record) and the routes the "Now streaming" page reads: GET /api/v1/streams and
DELETE /api/v1/streams/{id}, on the tests' Redis."""

from __future__ import annotations

import time

import pytest
from rest_framework.test import APIClient

from streaming import live
from streaming.sessions import lifecycle, registry
from tests.streaming.test_session_registry import rec


@pytest.fixture
def v1(settings, redis_db, tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    settings.HOST_NO_MGMT_TOKEN = True
    return APIClient(HTTP_X_REQUESTED_WITH="tests")


def core():
    client = {"name": "Deck", "fingerprint": "cd" * 32}
    return lifecycle.SessionCore("compat", "0badf00d", client, 1280, 720, 60, "1", "Desktop")


def test_a_session_measures_its_own_frame_rate_and_figures(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    c = core()
    c._second["t0"] = time.monotonic() - 1.0  # the second began a second ago
    for _ in range(30):  # 30 frames in that second: 30 fps though the client asked for 60
        c.latency(2.0, 4.0)
    c.sample(18_000.0, 3.5, 4.0, target_kbps=20_000)
    point = c.record()["live"][-1]
    assert 27 <= point["fps"] <= 30.5, point
    assert point["bitrate_kbps"] == 18000.0 and point["target_kbps"] == 20000.0
    assert point["capture_ms"] == 2.0 and point["encode_ms"] == 4.0 and point["rtt_ms"] == 3.5
    assert point["loss_pct"] is None  # not measured by this plane: never a made-up 0
    # The next second with no frame: 0 fps, no capture figure.
    c._second["t0"] = time.monotonic() - 1.0
    c.sample(0.0, None, None)
    last = c.record()["live"][-1]
    assert last["fps"] == 0 and last["capture_ms"] is None and last["rtt_ms"] is None
    for _ in range(lifecycle.LIVE_POINTS + 5):
        c.sample(1.0, 1.0, 1.0, loss_pct=0.5)
    assert len(c.record()["live"]) == lifecycle.LIVE_POINTS
    assert c.record()["live"][-1]["loss_pct"] == 0.5


def test_streams_lists_every_live_session_with_its_figures(v1):
    assert v1.get("/api/v1/streams").json() == {"sessions": []}
    point = {"ts_ms": 1, "fps": 59.8, "bitrate_kbps": 18000.0, "target_kbps": 20000.0,
             "loss_pct": None, "rtt_ms": 3.2, "encode_ms": 4.1, "capture_ms": 1.9}  # fmt: skip
    registry.put(rec("aaaa0001", "compat", codec="hevc", encoder={"backend": "nvenc"},
                     live=[point], rikey="secret", arm="x"))  # fmt: skip
    registry.put(rec("aaaa0002", "native", fp="ef" * 32, ws_token="secret",
                     live=[{"fps": "lots", "ts_ms": 2}, "junk"]))  # fmt: skip
    r = v1.get("/api/v1/streams")
    assert r.status_code == 200 and r["Cache-Control"] == "no-store"
    first, second = r.json()["sessions"]
    assert first["id"] == "aaaa0001" and first["plane"] == "compat"
    assert (first["codec"], first["encoder"], first["client"]) == ("hevc", "nvenc", "Deck")
    assert first["now"] == point and first["live"] == [point]
    assert second["codec"] == "h264" and second["encoder"] == "software"
    assert second["now"]["fps"] is None and len(second["live"]) == 1  # junk dropped
    assert "secret" not in r.content.decode()


def test_stop_one_session_and_refusals(v1, monkeypatch):
    monkeypatch.setattr(live, "STOP_WAIT_S", 0.2)
    registry.put(rec("aaaa0001", "compat"))
    registry.put(rec("aaaa0002", "native"))
    for bad in ("ffffffff", "AAAA0001", "aaaa000", "x" * 300):
        r = v1.delete(f"/api/v1/streams/{bad}")
        assert r.status_code == 404 and r.json() == {"error": "no live session with that id"}
    assert registry.pop("aaaa0001") == [] and registry.pop("aaaa0002") == []
    r = v1.delete("/api/v1/streams/aaaa0002")
    assert r.status_code == 204
    assert registry.pop("aaaa0002") == [{"op": "stop", "reason": "api", "deliberate": True}]
    assert registry.pop("aaaa0001") == []  # the other session is untouched


def test_the_routes_need_a_token_or_the_console_session(v1, settings):
    settings.HOST_NO_MGMT_TOKEN = False
    assert APIClient().get("/api/v1/streams").status_code == 401
    assert APIClient().delete("/api/v1/streams/aaaa0001").status_code == 401


def test_an_unreachable_registry_is_a_503(v1, monkeypatch):
    from redis.exceptions import ConnectionError as RedisDown

    from apikit.errors import REDIS_DOWN

    def down(*a, **k):
        raise RedisDown("no redis")

    monkeypatch.setattr(registry, "live", down)
    r = v1.get("/api/v1/streams")
    assert r.status_code == 503 and r.json() == {"error": REDIS_DOWN}
    assert r["Retry-After"]
    assert v1.delete("/api/v1/streams/aaaa0001").status_code == 503
