"""Operator approval from the console, in headless Chromium against the live host.

A new browser on /play waits; the operator, logged in to the console, sees it on the clients
page and approves it there, and the player plays; another browser is denied from the same
page and told so; the PIN control arms and disarms a self-pairing PIN. The page calls the
`/api/v1/native` routes with its session: they refuse a browser without the console session
(401) or without the CSRF token (403, JSON).
"""

from __future__ import annotations

import re

import httpx
import pytest
from playwright.sync_api import expect, sync_playwright

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.native.browserkit import ARGS, CHROMIUM, page_wait, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

TIMEOUT_MS = 20_000


@pytest.fixture(scope="module")
def browser():
    pw = sync_playwright().start()
    b = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    yield b
    b.close()
    pw.stop()


def player(browser, host, name: str):
    ctx = browser.new_context(ignore_https_errors=True, base_url=host.url)
    page = ctx.new_page()
    page.goto("/play")
    page.fill("#name", name)
    page.select_option("#mode", "1280x720")
    page.click("#start")
    return ctx, page


def operator(browser, host):
    ctx = browser.new_context(ignore_https_errors=True, base_url=host.url)
    ctx.set_default_timeout(TIMEOUT_MS)
    page = ctx.new_page()
    page.goto("/login?next=/clients")
    page.fill("input[name=username]", ADMIN_USER)
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/clients$"))
    return ctx, page


def test_console_approves_and_denies_browsers(live_host, browser):
    api = live_host.mgmt()
    op_ctx, op = operator(browser, live_host)
    fp = None
    try:
        # 1. A new browser waits; the console lists it and the operator approves it there.
        p_ctx, play = player(browser, live_host, "console tv")
        page_wait(play, "() => window.nativePlayer.state === 'pending'", 15)
        row = op.locator("#native-pending tbody tr", has_text="console tv")
        expect(row).to_be_visible()
        fp = row.get_attribute("data-fingerprint")
        assert fp and re.fullmatch(r"[0-9a-f]{64}", fp)
        row.locator("button.approve").click()
        expect(op.locator("#flash")).to_contain_text("Approved console tv")
        expect(row).to_have_count(0)
        page_wait(
            play,
            "() => window.nativePlayer.state === 'playing' && "
            "document.getElementById('video').videoWidth === 1280",
            30,
        )
        assert {"name": "console tv", "fingerprint": fp} in api.get("/api/v1/native/clients").json()
        expect(op.locator("#clients tbody tr", has_text="console tv")).to_be_visible()

        # 2. Another browser (its own certificate) is denied from the console and told so.
        d_ctx, denied = player(browser, live_host, "console stranger")
        drow = op.locator("#native-pending tbody tr", has_text="console stranger")
        expect(drow).to_be_visible()
        drow.locator("button.deny").click()
        expect(op.locator("#flash")).to_contain_text("Denied console stranger")
        page_wait(denied, "() => window.nativePlayer.state === 'refused'", 10)
        assert "denied" in denied.inner_text("#status")
        d_ctx.close()

        # 3. The PIN control arms a PIN the API agrees on, and disarms it.
        op.select_option("#native-pin-ttl", "60")
        op.click("#native-arm")
        expect(op.locator("#native-pin-state")).to_contain_text(re.compile(r"PIN \d{4}"))
        shown = re.search(r"PIN (\d{4})", op.inner_text("#native-pin-state")).group(1)
        status = api.get("/api/v1/native/pair").json()
        assert status["armed"] and status["pin"] == shown and status["expires_in_secs"] <= 60
        op.click("#native-disarm")
        expect(op.locator("#native-pin-state")).to_have_text("No PIN armed.")
        assert api.get("/api/v1/native/pair").json()["armed"] is False

        # 4. The API routes take the console session instead of the token, and Django's CSRF
        #    token for writes (JSON either way); the console has no copy of them.
        with live_host.client() as anon:
            r = anon.get("/api/v1/native/pending")
            assert r.status_code == 401 and r.json()["error"]
            assert anon.get("/console/native/pending").status_code == 404
        session = {c["name"]: c["value"] for c in op_ctx.cookies()}
        with live_host.client(cookies={"sessionid": session["sessionid"]}) as stolen:
            r = stolen.get("/api/v1/native/pending")
            assert r.status_code == 200 and r.headers["Cache-Control"] == "no-store"
            r = stolen.post(
                "/api/v1/native/pair/arm",
                json={"ttl_secs": 60},
                headers={"Origin": "https://evil.example"},
            )
            assert r.status_code == 403 and "CSRF" in r.json()["error"]
        assert api.get("/api/v1/native/pair").json()["armed"] is False
        r = op.evaluate(
            "async () => (await fetch('/api/v1/native/pending/999999/approve', {method: 'POST',"
            " headers: {'X-CSRFToken': document.cookie.match(/csrftoken=([^;]+)/)[1]}})).status"
        )
        assert r == 404
        p_ctx.close()
    finally:
        op_ctx.close()
        if fp:
            api.delete(f"/api/v1/native/clients/{fp}")
        for p in api.get("/api/v1/native/pending").json():
            api.post(f"/api/v1/native/pending/{p['id']}/deny")
        api.close()
    wait_for(
        lambda: (
            not any(
                d["client"] == "console tv" and d["state"] == "active"
                for d in httpx.Client(
                    base_url=live_host.url,
                    verify=live_host.ssl_context(),
                    headers={"Authorization": f"Bearer {live_host.mgmt_token}"},
                )
                .get("/api/v1/display/state")
                .json()["displays"]
            )
        ),
        what="the console-approved session released",
    )


def test_wrong_pins_close_the_window_in_page_and_console(live_host, browser):
    """A guesser burns the armed PIN: the player's page says why it was refused, and the
    operator's clients page says the PIN was closed by wrong PINs, until a new one is armed."""
    from tests.native.helpers import Knocker, fake_fp

    op_ctx, op = operator(browser, live_host)
    p_ctx = None
    guesser = Knocker(live_host, source="127.0.0.9")
    try:
        op.click("#native-arm")
        expect(op.locator("#native-pin-state")).to_contain_text(re.compile(r"PIN \d{4}"))
        pin = re.search(r"PIN (\d{4})", op.inner_text("#native-pin-state")).group(1)
        wrong = [f"{(int(pin) + 1 + i) % 10000:04d}" for i in range(5)]

        p_ctx = browser.new_context(ignore_https_errors=True, base_url=live_host.url)
        play = p_ctx.new_page()
        play.goto("/play")
        play.fill("#name", "guessing tv")
        play.fill("#pin", wrong[0])
        play.click("#start")
        page_wait(play, "() => window.nativePlayer.state === 'refused'", 15)
        assert "wrong PIN (4 more wrong PINs close the pairing window)" in play.inner_text(
            "#status"
        )
        expect(op.locator("#native-pin-state")).to_contain_text("1 wrong PIN(s) so far")
        for guess in wrong[1:]:
            assert guesser.knock(fake_fp(), pin=guess).status_code == 403

        expect(op.locator("#native-pin-state")).to_have_text(
            "PIN closed after too many wrong PINs. Arm a new one to pair."
        )
        play.fill("#pin", pin)  # the right PIN, too late
        play.click("#start")
        page_wait(play, "() => window.nativePlayer.state === 'refused'", 15)
        assert "closed after 5 wrong PINs" in play.inner_text("#status")

        op.click("#native-arm")  # a new window starts clean
        expect(op.locator("#native-pin-state")).to_contain_text(re.compile(r"^PIN \d{4} — "))
        op.click("#native-disarm")
        expect(op.locator("#native-pin-state")).to_have_text("No PIN armed.")
    finally:
        guesser.close()
        if p_ctx is not None:
            p_ctx.close()
        op_ctx.close()
