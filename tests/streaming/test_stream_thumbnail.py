"""GET /api/v1/streams/{id}/thumbnail in process, on the tests' Redis: who may call it, its
headers, its errors, the one-capture-a-second throttle and the backends it refuses. The picture
of a real session's display: tests/console/test_thumbnail_e2e.py."""

from __future__ import annotations

import time

import cv2
import numpy as np
import pytest
from django.test import Client

from access import credentials, tokens
from displays.models import VirtualDisplay
from streaming import thumbnail
from streaming.sessions import registry
from tests.streaming.test_session_registry import rec

pytestmark = pytest.mark.django_db

ADMIN_TOKEN = "1" * 64
PLUGIN_TOKEN = "2" * 64
SID = "aaaa0001"
URL = f"/api/v1/streams/{SID}/thumbnail"


@pytest.fixture
def host(redis_db, tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    monkeypatch.setenv("HOST_MGMT_TOKEN", ADMIN_TOKEN)
    monkeypatch.setenv("HOST_PLUGIN_TOKEN", PLUGIN_TOKEN)
    tokens._cache.clear()
    return redis_db


@pytest.fixture
def grabs(monkeypatch):
    """The capture replaced by a counter that paints a known colour (BGRA)."""
    calls = []

    def fake(display, width, height):
        calls.append((display["slot"], width, height))
        frame = np.zeros((height, width, 4), np.uint8)
        frame[:, :] = (255, 0, 0, 255)  # blue
        return frame

    monkeypatch.setattr(thumbnail, "grab", fake)
    return calls


def live_session(slot: int | None = 3, **extra) -> None:
    if slot is not None:
        VirtualDisplay.objects.create(slot=slot, backend="xvfb", width=1280, height=720, refresh=60,
                                      x_display=":93", identity_key="k")  # fmt: skip
    registry.put(rec(SID, "compat", display_slot=slot, **extra))


def get(path=URL, token=ADMIN_TOKEN, client=None):
    client = client or Client()
    headers = {"HTTP_AUTHORIZATION": f"Bearer {token}"} if token else {}
    return client.get(path, **headers)


def test_the_operator_gets_a_small_jpeg_never_cached(host, grabs):
    live_session()
    r = get()
    assert r.status_code == 200, r.content
    assert r["Content-Type"] == "image/jpeg" and r["Cache-Control"] == "no-store"
    assert grabs == [(3, 320, 180)]  # 1280x720 at most 320 wide, aspect kept
    image = cv2.imdecode(np.frombuffer(r.content, np.uint8), cv2.IMREAD_COLOR)
    assert image.shape == (180, 320, 3)
    b, g, r_ = image[90, 160]
    assert b > 200 and g < 40 and r_ < 40, image[90, 160]


def test_only_the_operator_may_look(host, grabs):
    live_session()
    assert get(token=None).status_code == 401
    assert get(token="3" * 64).status_code == 401
    refused = get(token=PLUGIN_TOKEN)  # the plugin token's scope has no screen in it
    assert refused.status_code == 403 and "error" in refused.json()
    assert grabs == []
    credentials.set_credentials("admin", "s3cret")
    console = Client()
    assert console.post("/login", {"username": "admin", "password": "s3cret"}).status_code == 302
    r = get(token=None, client=console)
    assert r.status_code == 200 and r["Cache-Control"] == "no-store"
    assert r["Content-Type"] == "image/jpeg"


def test_one_capture_a_second_and_the_others_get_the_last(host, grabs, monkeypatch):
    live_session()
    first = get()
    again = [get() for _ in range(3)]
    assert len(grabs) == 1
    assert all(r.status_code == 200 and r.content == first.content for r in again)
    assert all(r["Cache-Control"] == "no-store" for r in again)
    time.sleep(thumbnail.MIN_INTERVAL_S + 0.1)
    assert get().status_code == 200 and len(grabs) == 2


def test_a_request_within_anothers_capture_waits_for_its_picture(host, grabs):
    live_session()
    # Another web process holds this second's lock and has not stored its picture yet.
    host.set(thumbnail._lock_key(SID), b"1", px=1000)
    assert get().status_code == 409  # nothing stored within WAIT_S: say so, take none
    assert grabs == []


def test_no_session_is_404_and_no_picture_is_409_with_the_reason(host, grabs, monkeypatch):
    for bad in ("ffffffff", "AAAA0001", "..", "x" * 300):
        r = get(f"/api/v1/streams/{bad}/thumbnail")
        assert r.status_code == 404 and r.json() == {"error": "no live session with that id"}
    assert get("/api/v1/streams/..%2F..%2Fetc/thumbnail").status_code == 404  # no route
    live_session(slot=None)
    r = get()
    assert r.status_code == 409
    assert r.json() == {"error": "the session has no display to take a picture of"}
    assert r["Cache-Control"] == "no-store"
    assert grabs == []


def test_an_error_is_throttled_too(host, monkeypatch):
    calls = []

    def failing(display, width, height):
        calls.append(display["slot"])
        raise thumbnail.NoThumbnail(409, "the capture of X display :93 took no frame")

    monkeypatch.setattr(thumbnail, "grab", failing)
    live_session()
    for _ in range(3):
        r = get()
        assert r.status_code == 409
        assert r.json() == {"error": "the capture of X display :93 took no frame"}
    assert calls == [3]


@pytest.mark.parametrize("backend", ["gnome", "kwin", "portal"])
def test_pipewire_displays_are_refused_without_a_screencast(backend):
    with pytest.raises(thumbnail.NoThumbnail) as caught:
        thumbnail.grab({"backend": backend, "running": True}, 320, 180)
    assert caught.value.status == 409 and backend in caught.value.message


def test_a_stopped_display_is_refused():
    with pytest.raises(thumbnail.NoThumbnail) as caught:
        thumbnail.grab({"backend": "xvfb", "running": False, "x_display": ":93"}, 320, 180)
    assert caught.value.status == 409


def test_sizes_are_bounded_and_keep_the_aspect():
    assert thumbnail.size(1920, 1080) == (320, 180)
    assert thumbnail.size(640, 480) == (320, 240)
    assert thumbnail.size(200, 100) == (200, 100)  # never enlarged
    assert thumbnail.size(0, 0) == (1, 1)
