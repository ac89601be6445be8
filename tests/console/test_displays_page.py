"""The Displays page in a real headless Chromium against a real host with real Xvfb
displays: states with a ticking countdown, pin, unpin, release one and all, the keep-alive
form with its field error. Screenshots: `tests.support.console_live.artifacts()`."""

from __future__ import annotations

import json
import shutil

import pytest
from playwright.sync_api import expect

from tests.support.console_live import console, host_shell, shot

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.slow,
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb"),
]

SEED = """
import json
from displays import machine, policy
policy.save({**policy.DEFAULT_POLICY, "keep_alive": {"mode": "duration", "seconds": 300}})
kept = machine.acquire("living-room-tv", "640x480@60")
machine.disconnect(kept["slot"])
live = machine.acquire("desk", "800x600@30")
print(json.dumps({"kept": kept["slot"], "live": live["slot"]}))
"""


def row(page, slot):
    return page.locator(f'#displays tr[data-slot="{slot}"]')


def test_displays_page_pins_unpins_and_releases(tmp_path):
    with console(state_dir=tmp_path / "state") as (host, page):
        page.goto("/displays")
        expect(page.locator("#no-displays")).to_be_visible()
        expect(page.locator("#release-all")).to_be_disabled()
        shot(page, "displays-empty")

        slots = json.loads(host_shell(host, SEED).strip().splitlines()[-1])
        kept, live = row(page, slots["kept"]), row(page, slots["live"])
        expect(kept).to_have_attribute("data-state", "lingering")  # the 2 s poll found them
        expect(live).to_have_attribute("data-state", "active")
        first = kept.locator(".countdown").inner_text()
        assert "min" in first, first
        page.wait_for_timeout(1300)
        assert kept.locator(".countdown").inner_text() != first  # it ticks
        expect(live.locator("button.release")).to_have_count(0)  # active: session control only
        # The policy form follows a change made elsewhere (the seed's 300 s) while untouched.
        expect(page.locator("#keep-seconds")).to_have_value("300", timeout=15_000)
        shot(page, "displays-lingering")

        # Pin the lingering one from the keyboard: its countdown stops.
        kept.locator("button.pin").focus()
        page.keyboard.press("Enter")
        expect(kept).to_have_attribute("data-state", "pinned")
        expect(kept).to_contain_text("kept until released")
        expect(page.locator("#flash")).to_contain_text("is pinned")
        # Pin the active one: pinned when its last session leaves.
        live.locator("button.pin").click()
        expect(live).to_contain_text("pinned when its last session leaves")
        host_shell(host, f"from displays import machine; machine.disconnect({slots['live']})")
        expect(live).to_have_attribute("data-state", "pinned")
        shot(page, "displays-pinned")

        # Unpin: back to the policy's five-minute countdown.
        kept.locator("button.unpin").click()
        expect(kept).to_have_attribute("data-state", "lingering")
        expect(kept.locator(".countdown")).to_contain_text("min")

        # The keep-alive form: a refused value is shown at its field, then a good one saved.
        page.select_option("#keep-mode", "duration")
        page.fill("#keep-seconds", "5")
        page.click("#keep-alive button[type=submit]")
        expect(page.locator("#keep-error")).to_contain_text("Seconds must be an integer 10")
        expect(page.locator("#keep-seconds")).to_have_attribute("aria-invalid", "true")
        shot(page, "displays-policy-error")
        page.select_option("#keep-mode", "off")
        expect(page.locator("#keep-seconds")).to_be_disabled()
        page.click("#keep-alive button[type=submit]")
        expect(page.locator("#flash")).to_contain_text("Keep-alive policy saved")
        with host.mgmt() as api:
            state = api.get("/api/v1/display/settings").json()
        assert state["effective"]["keep_alive"] == {"mode": "off"}

        # Unpin under "at once": torn down.
        live.locator("button.unpin").click()
        expect(live).to_have_count(0)
        expect(page.locator("#flash")).to_contain_text("torn down")

        # Release one: asked first, and a dismissed question changes nothing.
        page.once("dialog", lambda d: d.dismiss())
        kept.locator("button.release").click()
        page.wait_for_timeout(500)
        expect(kept).to_have_attribute("data-state", "lingering")
        # Release all (confirmed): nothing is left.
        page.once("dialog", lambda d: d.accept())
        page.click("#release-all")
        expect(kept).to_have_count(0)
        expect(page.locator("#flash")).to_contain_text("Released 1 display(s)")
        expect(page.locator("#no-displays")).to_be_visible()
        shot(page, "displays-released")
        with host.mgmt() as api:
            assert api.get("/api/v1/display/state").json() == {"displays": []}
