"""The pictures of a live session against a real host while a real Moonlight client streams:
the thumbnail route gives a JPEG of what is painted into the session's display (decoded here:
red over the whole screen, then red over blue once a second window covers the lower half),
and in headless Chromium the dashboard's Live sessions row shows that thumbnail beside
sparklines of fps, bitrate and latency, and the Now streaming card shows the thumbnail.
Screenshots: `tests.support.console_live.artifacts()`."""

from __future__ import annotations

import re
import time

import cv2
import numpy as np
import pytest
from playwright.sync_api import expect

from tests.console.test_streaming_page import stream
from tests.native.test_player import Painter
from tests.support.console_live import PASSWORD, USER, console, shot
from tests.support.moonlight import Moonlight, post_pin

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

RED, BLUE = (230, 20, 20), (20, 40, 230)  # the upper and lower half of the display


def thumbnail(api, session_id: str) -> np.ndarray:
    r = api.get(f"/api/v1/streams/{session_id}/thumbnail")
    assert r.status_code == 200, r.text
    assert r.headers["content-type"] == "image/jpeg" and r.headers["cache-control"] == "no-store"
    image = cv2.imdecode(np.frombuffer(r.content, np.uint8), cv2.IMREAD_COLOR)
    assert image is not None, "the thumbnail is no image"
    return image


def colour(image: np.ndarray, top: float, bottom: float) -> tuple[int, int, int]:
    """The mean (R, G, B) of the middle half of the rows from `top` to `bottom` (fractions)."""
    h, w = image.shape[:2]
    part = image[int(h * top) : int(h * bottom), w // 4 : 3 * w // 4]
    b, g, r = (int(v) for v in part.mean((0, 1)))
    return r, g, b


def near(got: tuple[int, int, int], want: tuple[int, int, int]) -> bool:
    return max(abs(a - b) for a, b in zip(got, want, strict=True)) <= 24  # JPEG


def shows(api, session_id: str, top_rgb, bottom_rgb, timeout: float = 10) -> np.ndarray:
    """The thumbnail once its upper half is `top_rgb` and its lower half `bottom_rgb`."""
    deadline = time.monotonic() + timeout
    while True:
        image = thumbnail(api, session_id)
        upper, lower = colour(image, 0.1, 0.4), colour(image, 0.6, 0.9)
        if near(upper, top_rgb) and near(lower, bottom_rgb):
            return image
        assert time.monotonic() < deadline, f"thumbnail {upper} over {lower}"
        time.sleep(0.5)


def test_a_live_session_has_a_thumbnail_of_its_screen_and_sparklines(tmp_path):
    with console(state_dir=tmp_path / "state") as (host, page):
        ml = Moonlight(host, tmp_path / "moonlight")
        ml.start_pairing("1357")
        assert post_pin(host, (USER, PASSWORD), "1357", "Deck")["status"] is True
        ml.wait_paired()
        client = stream(host, tmp_path / "moonlight", 90)
        painter = lower = None
        try:
            with host.mgmt() as api:
                deadline = time.monotonic() + 30
                while True:  # the session streams on its display (an Xvfb of the host's)
                    sessions = api.get("/api/v1/streams").json()["sessions"]
                    displays = api.get("/api/v1/display/state").json()["displays"]
                    named = [d["x_display"] for d in displays if d["x_display"] and d["running"]]
                    if sessions and sessions[0]["state"] == "streaming" and named:
                        break
                    assert time.monotonic() < deadline, (sessions, displays)
                    time.sleep(0.5)
                (live,), (x_name,) = sessions, named
                painter = Painter(x_name)
                painter.paint(RED)
                image = shows(api, live["id"], RED, RED)
                assert image.shape[:2] == (240, 320)  # 640x480 at most 320 wide
                time.sleep(1.1)  # the next second: a new capture, not the stored one
                lower = Painter(x_name)  # a second window over the lower half
                lower.win.configure(y=lower.h // 2, height=lower.h // 2)
                lower.paint(BLUE)
                shows(api, live["id"], RED, BLUE)
                r = api.get("/api/v1/streams/ffffffff/thumbnail")
                assert r.status_code == 404
                assert r.json() == {"error": "no live session with that id"}
                with host.client() as anonymous:
                    assert (
                        anonymous.get(f"/api/v1/streams/{live['id']}/thumbnail").status_code == 401
                    )

            page.goto("/")
            row = page.locator(f"#live-sessions tr[data-session='{live['id']}']")
            expect(row).to_be_visible()
            thumb = row.locator("img.live-thumb")
            expect(thumb).to_be_visible()
            expect(thumb).to_have_attribute("alt", "Screen of Desktop on Deck")
            page.wait_for_function(
                "() => document.querySelector('#live-sessions img.live-thumb')?.naturalWidth > 0"
            )
            sparks = row.locator("svg.sparkline")
            expect(sparks).to_have_count(3)
            fps = sparks.nth(0)
            expect(fps).to_have_attribute(
                "aria-label", re.compile(r"^fps last minute: \d+–\d+ fps, now \d+ fps$"),
                timeout=20_000)  # fmt: skip
            expect(fps.locator("polyline")).to_have_count(1)
            expect(sparks.nth(1)).to_have_attribute(
                "aria-label", re.compile(r"^bitrate last minute: ")
            )
            expect(sparks.nth(2)).to_have_attribute("aria-label", re.compile(r"^latency "))
            cells = row.locator("td").all_inner_texts()
            assert cells[:5] == ["Deck", "Desktop", "compat", "640x480@30", "streaming"], cells
            page.wait_for_timeout(2500)  # a few more points on the lines
            shot(page, "pictures-dashboard")

            page.goto("/streaming")
            card = page.locator("article.stream")
            expect(card).to_have_count(1)
            card_thumb = card.locator("img.live-thumb")
            expect(card_thumb).to_be_visible()
            page.wait_for_function(
                "() => document.querySelector('article.stream img.live-thumb')?.naturalWidth > 0"
            )
            shot(page, "pictures-streaming")
        finally:
            for window in (painter, lower):
                if window is not None:
                    window.close()
            if client.poll() is None:
                client.kill()
                client.wait()
