"""Pair a device in the console layout, in a real headless Chromium against a real host: a
real Moonlight client (moonlight-python) pairs with the PIN typed on /pair; the refusals are
shown in place; a browser waiting on /play is approved from the prompt on another console
page and denied from /pair's own list. Screenshots: `tests.support.console_live.artifacts()`."""

from __future__ import annotations

import pytest
from playwright.sync_api import expect

from tests.support.console_live import console, shot
from tests.support.moonlight import Moonlight

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def waiting_browser(page, host, name: str):
    """A browser with no login opening /play: it waits for the operator's approval."""
    browser = page.context.browser
    ctx = browser.new_context(ignore_https_errors=True, base_url=host.url)
    play = ctx.new_page()
    play.goto("/play")
    play.fill("#name", name)
    play.click("#start")
    play.wait_for_function("() => window.nativePlayer.state === 'pending'", timeout=15_000)
    return ctx


def test_pair_page_pins_a_moonlight_client_and_approves_browsers(tmp_path):
    with console(state_dir=tmp_path / "state") as (host, page):
        page.goto("/pair")
        expect(page.locator("nav [aria-current=page]")).to_have_text("Pair a device")
        expect(page.locator("#pin-waiting")).to_contain_text("No device is waiting")
        expect(page.locator("#no-native-pending")).to_be_visible()
        expect(page.locator("#native-approval")).to_have_count(0)  # /pair lists them itself

        # A PIN with no device waiting: refused in place, nothing paired.
        page.fill("input[name=pin]", "1234")
        page.click("#pin-form button[type=submit]")
        expect(page.locator("#pin-result")).to_contain_text("No device is waiting")
        expect(page.locator("input[name=pin]")).to_have_attribute("aria-invalid", "true")
        shot(page, "pair-no-device")

        # A real Moonlight client starts pairing: the list follows it without a reload.
        ml = Moonlight(host, tmp_path / "moonlight")
        ml.start_pairing("4821")
        expect(page.locator("#pin-waiting li")).to_have_count(1, timeout=20_000)
        shot(page, "pair-waiting")
        page.fill("input[name=pin]", "4821")
        page.fill("input[name=name]", "den-tv")
        page.keyboard.press("Enter")
        expect(page.locator("#pin-result")).to_contain_text("PIN accepted")
        ml.wait_paired()
        assert ml.error is None, ml.error
        with host.mgmt() as api:
            clients = api.get("/api/v1/clients").json()
        assert [c["name"] for c in clients if c["fingerprint"] == ml.fingerprint] == ["den-tv"]
        expect(page.locator("#pin-waiting")).to_contain_text("No device is waiting", timeout=10_000)
        shot(page, "pair-accepted")

        # A browser waits: the prompt shows on another console page; approve it there.
        player = waiting_browser(page, host, "kitchen tablet")
        try:
            page.goto("/displays")
            prompt = page.locator("#native-approval")
            expect(prompt).to_be_visible()
            expect(prompt).to_contain_text("kitchen tablet")
            shot(page, "approval-prompt")
            prompt.locator("button.approve").focus()
            page.keyboard.press("Enter")
            expect(page.locator("#flash")).to_contain_text("Approved kitchen tablet")
            expect(prompt).to_be_hidden()
        finally:
            player.close()
        with host.mgmt() as api:
            natives = api.get("/api/v1/native/clients").json()
        assert [n["name"] for n in natives] == ["kitchen tablet"]

        # Another waits while the operator is on /pair: denied from its list.
        player = waiting_browser(page, host, "hall tablet")
        try:
            page.goto("/pair")
            row = page.locator("#native-pending tbody tr", has_text="hall tablet")
            expect(row).to_be_visible()
            shot(page, "pair-browser-waiting")
            row.locator("button.deny").click()
            expect(page.locator("#flash")).to_contain_text("Denied hall tablet")
            expect(row).to_have_count(0)
        finally:
            player.close()
