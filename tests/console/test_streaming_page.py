"""Now streaming in a real headless Chromium against a real host while a real Moonlight
client (moonlight-python, `tests/support/client.py`) streams: the session's card with its
client, app and codec, the host-measured frame rate, charts that move, and the stop button
ending that session. Screenshots: `tests.support.console_live.artifacts()`."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest
from playwright.sync_api import expect

from tests.support.console_live import PASSWORD, USER, console, shot
from tests.support.livehost import ROOT
from tests.support.moonlight import Moonlight, post_pin

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CLIENT = str(ROOT / "tests/support/client.py")
# The client asks for 30 fps of a still 640x480 desktop. Measured on the page on this 2-core
# machine: 26.1 at a moderate load, 16.8 and 9.5 with eight parallel test runs (load average
# near 20). 5 is the floor that still says "it streams and the host measures it"; 0 fails.
MIN_FPS = 5.0


def stream(host, config_dir, seconds: int) -> subprocess.Popen:
    args = [sys.executable, CLIENT, str(host.base_port), str(config_dir), "640", "480", "30",
            str(seconds), "quit"]  # fmt: skip
    return subprocess.Popen(args, cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                            text=True, env={**os.environ, "PYTHONPATH": str(ROOT)})  # fmt: skip


def test_streaming_page_shows_a_live_session_and_stops_it(tmp_path):
    with console(state_dir=tmp_path / "state") as (host, page):
        page.goto("/streaming")
        expect(page.locator("#no-streams")).to_be_visible()
        shot(page, "streaming-empty")

        ml = Moonlight(host, tmp_path / "moonlight")
        ml.start_pairing("2468")
        assert post_pin(host, (USER, PASSWORD), "2468", "Deck")["status"] is True
        ml.wait_paired()
        client = stream(host, tmp_path / "moonlight", 60)
        try:
            card = page.locator("article.stream")
            expect(card).to_have_count(1, timeout=30_000)
            expect(page.locator("#no-streams")).to_be_hidden()
            expect(card.locator("h2 .title")).to_have_text("Desktop on Deck")
            expect(card.locator("[data-field=video]")).to_contain_text("640x480@30 · H264")
            expect(card.locator("[data-field=client]")).to_contain_text("Moonlight")
            expect(card.locator("[data-field=state]")).to_have_text("streaming", timeout=30_000)
            fps = card.locator("[data-figure=fps]")
            expect(fps).to_have_text(re.compile(r"^\d+\.\d of 30$"), timeout=20_000)
            page.wait_for_timeout(3000)  # a few points in
            measured = float(fps.inner_text().split()[0])
            assert measured >= MIN_FPS, measured
            chart = card.locator("canvas.chart-bitrate")
            before = chart.evaluate("c => c.toDataURL()")
            # The chart moves: a new telemetry point (one each 2 s) is drawn within a few polls.
            # Waited for, not slept on: on a loaded machine a point may come late.
            moved = False
            for _ in range(40):
                page.wait_for_timeout(250)
                if chart.evaluate("c => c.toDataURL()") != before:
                    moved = True
                    break
            assert moved, "the bitrate chart drew nothing new for 10 s of a live stream"
            expect(card.locator("[data-figure=bitrate]")).to_contain_text("Mbps")
            expect(card.locator("[data-figure=encode]")).to_contain_text("ms")
            # Moonlight's FEC status reports (0x5502) give the compat plane a real loss figure.
            expect(card.locator("[data-field=loss]")).to_have_text(re.compile(r"^\d+\.\d\d %$"))
            shot(page, "streaming-live")
            print(f"measured fps on the page: {measured}")

            page.once("dialog", lambda d: d.accept())
            card.locator("button.stop").click()
            expect(page.locator("#flash")).to_contain_text("Stopped Desktop on Deck")
            expect(card).to_have_count(0, timeout=15_000)
            expect(page.locator("#no-streams")).to_be_visible()
            shot(page, "streaming-stopped")
            with host.mgmt() as api:
                assert api.get("/api/v1/streams").json() == {"sessions": []}
            out, _ = client.communicate(timeout=120)
            result = json.loads(out.strip().splitlines()[-1]) if out.strip() else {}
            assert result.get("termination") is not None, result  # the host ended it
        finally:
            if client.poll() is None:
                client.kill()
                client.wait()
