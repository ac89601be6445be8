"""The console as a person meets it, in a real headless Chromium against a real host: every page
passes axe-core (no serious or critical violation) in the light and the dark theme; the phone
pages fit 390x844 without sideways scrolling; pairing by PIN works with the keyboard alone.
Screenshots: `tests.support.console_live.artifacts()`."""

from __future__ import annotations

import re

import pytest
from axe_playwright_python.sync_playwright import Axe
from playwright.sync_api import expect, sync_playwright

from tests.support.browser import ARGS, CHROMIUM
from tests.support.console_live import PASSWORD, TIMEOUT_MS, USER, shot
from tests.support.livehost import running_host
from tests.support.moonlight import Moonlight

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

CONSOLE_PAGES = ["/", "/streaming", "/displays", "/pair", "/clients", "/apps", "/library",
                 "/hooks", "/store", "/config", "/sessions", "/tokens", "/fleet", "/logs",
                 "/plugins",
                 "/pin"]  # fmt: skip
PHONE_PAGES = CONSOLE_PAGES  # /pin, /pair, approvals, the dashboard and Now streaming above all
PHONE = {"width": 390, "height": 844}
BLOCKING = {"serious", "critical"}
THEMES = ("light", "dark")


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    """(host, browser, axe): a fresh host (no admin yet, so /welcome is reachable) and Chromium."""
    expect.set_options(timeout=TIMEOUT_MS / 2)
    state = tmp_path_factory.mktemp("design") / "state"
    with running_host(state_dir=state) as host:
        pw = sync_playwright().start()
        try:
            browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                yield host, browser, Axe()
            finally:
                browser.close()
        finally:
            pw.stop()


def new_page(site, **context_kwargs):
    host, browser, _ = site
    context = browser.new_context(ignore_https_errors=True, base_url=host.url, **context_kwargs)
    context.set_default_timeout(TIMEOUT_MS)
    return context.new_page()


def log_in(page, host) -> None:
    """Sign the page in (setting the admin first when no earlier test did, through /welcome)."""
    page.goto("/")
    if page.url.endswith("/welcome"):
        host.set_first_admin(USER, PASSWORD)
    page.goto("/login")
    page.fill("input[name=username]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))


def blocking(axe, page) -> list[str]:
    """axe-core's serious and critical violations on the page, one line each."""
    found = axe.run(page).response["violations"]
    return [f"{v['id']} ({v['impact']}): {len(v['nodes'])} nodes, e.g. {v['nodes'][0]['target']}"
            for v in found if v["impact"] in BLOCKING]  # fmt: skip


def settle(page) -> None:
    """Give the page's scripts their first API answers (the pages poll: never network-idle)."""
    page.wait_for_timeout(700)


def test_every_page_passes_axe_in_both_themes(site):
    host, _, axe = site
    page = new_page(site, viewport={"width": 1280, "height": 860})
    problems = {}
    # First run: /welcome, before any admin exists; saving it signs the admin in.
    for theme in THEMES:
        page.emulate_media(color_scheme=theme)
        page.goto("/welcome")
        expect(page.locator("h1")).to_have_text("Welcome")
        problems[f"/welcome {theme}"] = blocking(axe, page)
        shot(page, f"design-welcome-{theme}")
    page.emulate_media(color_scheme="light")
    page.fill("input[name=username]", USER)
    page.fill("input[name=password]", PASSWORD)
    page.fill("input[name=confirm]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/$"))
    for path in CONSOLE_PAGES:
        for theme in THEMES:
            page.emulate_media(color_scheme=theme)
            page.goto(path)
            settle(page)
            problems[f"{path} {theme}"] = blocking(axe, page)
            shot(page, f"design-{path.strip('/') or 'dashboard'}-{theme}")
    page.context.close()
    page = new_page(site)
    page.goto("/login")
    for theme in THEMES:
        page.emulate_media(color_scheme=theme)
        problems[f"/login {theme}"] = blocking(axe, page)
    page.context.close()
    failing = [f"{where}: {line}" for where, found in problems.items() for line in found]
    assert not failing, "axe-core found serious or critical violations:\n" + "\n".join(failing)


def test_phone_pages_fit_the_screen_with_touch_sized_controls(site):
    page = new_page(site, viewport=PHONE, is_mobile=True, has_touch=True)
    log_in(page, site[0])
    wide, small = {}, {}
    for path in PHONE_PAGES:
        for theme in THEMES:
            page.emulate_media(color_scheme=theme)
            page.goto(path)
            settle(page)
            width = page.evaluate("document.documentElement.scrollWidth")
            if width > PHONE["width"]:
                wide[f"{path} {theme}"] = width
            shot(page, f"design-phone-{path.strip('/') or 'dashboard'}-{theme}")
        # Every visible button, field and the menu button: at least 44 px tall.
        small[path] = page.evaluate(
            """() => [...document.querySelectorAll(
                    'button, select, input:not([type=hidden]):not([type=checkbox])')]
                .filter((el) => el.offsetParent !== null)
                .filter((el) => el.getBoundingClientRect().height < 44)
                .map((el) => el.outerHTML.slice(0, 80))"""
        )
    page.context.close()
    assert not wide, f"pages wider than the phone: {wide}"
    assert not any(small.values()), {p: s for p, s in small.items() if s}


NAV_ROWS_JS = """() => {
  const links = [...document.querySelectorAll('nav[aria-label=Console] a')];
  return new Set(links.map((a) => Math.round(a.getBoundingClientRect().top))).size;
}"""


def test_the_navigation_is_one_row_of_links_or_a_menu_never_two_rows(site):
    """Every console page's link is in the bar: on a wide screen in one row, narrower behind
    the menu button (a bar that wraps into two rows is what the fold is for)."""
    page = new_page(site, viewport={"width": 1920, "height": 900})
    log_in(page, site[0])
    menu = page.locator("button.menu-button")
    for width, folded in ((1920, False), (1366, False), (1280, False), (1200, True)):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto("/")
        if folded:
            expect(menu).to_be_visible()
            expect(page.locator("nav[aria-label=Console]")).to_be_hidden()
        else:
            expect(menu).to_be_hidden()
            assert page.evaluate(NAV_ROWS_JS) == 1, f"the navigation wraps at {width} px"
    shot(page, "design-nav-folded")
    page.context.close()


def test_the_phone_menu_opens_and_closes_with_the_keyboard(site):
    page = new_page(site, viewport=PHONE, is_mobile=True, has_touch=True)
    log_in(page, site[0])
    page.goto("/pair")
    menu = page.locator("button.menu-button")
    nav = page.locator("nav[aria-label=Console]")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()
    tab_to(page, "button.menu-button")
    page.keyboard.press("Enter")
    expect(menu).to_have_attribute("aria-expanded", "true")
    expect(nav).to_be_visible()
    expect(nav.locator("[aria-current=page]")).to_have_text("Pair a device")
    shot(page, "design-phone-menu-open")
    page.keyboard.press("Escape")
    expect(menu).to_have_attribute("aria-expanded", "false")
    expect(nav).to_be_hidden()
    assert page.evaluate("document.activeElement.classList.contains('menu-button')")
    page.context.close()


def tab_to(page, selector: str, limit: int = 60) -> None:
    """Press Tab until the element matching `selector` has the focus (or fail)."""
    for _ in range(limit):
        if page.evaluate(
            "(s) => document.activeElement && document.activeElement.matches(s)", selector
        ):
            return
        page.keyboard.press("Tab")
    raise AssertionError(f"Tab never reached {selector}")


def test_pair_a_moonlight_client_by_pin_with_the_keyboard_alone(site, tmp_path):
    host = site[0]
    page = new_page(site, viewport=PHONE, is_mobile=True, has_touch=True)
    log_in(page, site[0])
    ml = Moonlight(host, tmp_path / "moonlight")
    ml.start_pairing("7305")
    for _ in range(40):  # /pin is rendered once: reload until the device waits (its thread runs)
        page.goto("/pin")
        if page.locator("main li").count():
            break
        page.wait_for_timeout(500)
    expect(page.locator("main li")).to_have_count(1)
    expect(page.locator("main li .badge")).to_have_text("waiting")
    page.evaluate("document.activeElement && document.activeElement.blur()")
    tab_to(page, "input[name=pin]")
    page.keyboard.type("7305")
    tab_to(page, "input[name=name]")
    page.keyboard.type("keyboard-tv")
    tab_to(page, "form button[type=submit]")
    focus_ring = page.evaluate("getComputedStyle(document.activeElement).outlineStyle")
    assert focus_ring != "none", "the focused button shows no focus ring"
    page.keyboard.press("Enter")
    expect(page.locator("main [role=status]")).to_contain_text("PIN accepted")
    shot(page, "design-phone-pin-accepted")
    ml.wait_paired()
    assert ml.error is None, ml.error
    with host.mgmt() as api:
        clients = api.get("/api/v1/clients").json()
    assert [c["name"] for c in clients if c["fingerprint"] == ml.fingerprint] == ["keyboard-tv"]
    page.context.close()


def test_approve_a_waiting_browser_on_a_phone_with_the_keyboard(site):
    """A browser waits on /play: the prompt fits the phone on any console page, its lists fit
    /pair, and Approve is reached and pressed with Tab and Enter."""
    host, browser, _ = site
    player = browser.new_context(ignore_https_errors=True, base_url=host.url)
    try:
        play = player.new_page()
        play.goto("/play")
        play.fill("#name", "phone-approved tablet")
        play.click("#start")
        play.wait_for_function("() => window.nativePlayer.state === 'pending'", timeout=15_000)
        page = new_page(site, viewport=PHONE, is_mobile=True, has_touch=True)
        log_in(page, host)
        for theme in THEMES:
            page.emulate_media(color_scheme=theme)
            page.goto("/pair")
            row = page.locator("#native-pending tbody tr", has_text="phone-approved tablet")
            expect(row).to_be_visible()
            assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
            shot(page, f"design-phone-pair-browser-waiting-{theme}")
        page.goto("/displays")
        prompt = page.locator("#native-approval")
        expect(prompt).to_contain_text("phone-approved tablet")
        assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
        shot(page, "design-phone-approval-prompt")
        tab_to(page, "#native-approval button.approve")
        page.keyboard.press("Enter")
        expect(page.locator("#flash")).to_contain_text("Approved phone-approved tablet")
        expect(prompt).to_be_hidden()
        page.context.close()
    finally:
        player.close()
    with host.mgmt() as api:
        natives = api.get("/api/v1/native/clients").json()
    assert "phone-approved tablet" in [n["name"] for n in natives]
