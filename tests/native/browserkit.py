"""Shared pieces of the native browser tests: Debian's headless Chromium and polling helpers."""

from __future__ import annotations

import contextlib
import time

from tests.support.browser import CHROMIUM, PLAYER_ARGS

ARGS = PLAYER_ARGS
__all__ = ["ARGS", "CHROMIUM", "close_to", "page_wait", "paint_to_page_ms", "wait_for"]


# The centre pixel of the low-latency mode's canvas, and its decoded frames per second.
CANVAS_PIXEL_JS = """() => {
  const c = document.getElementById('canvas');
  if (!c.width || c.hidden) return null;
  return Array.from(c.getContext('2d').getImageData(c.width / 2, c.height / 2, 1, 1)
    .data.slice(0, 3));
}"""
DECODED_FPS_JS = """async (ms) => {
  const wc = window.nativePlayer.wc, n0 = wc.decoded, t0 = performance.now();
  await new Promise((r) => setTimeout(r, ms));
  return (wc.decoded - n0) / ((performance.now() - t0) / 1000);
}"""


def close_to(px, rgb, tol=40) -> bool:
    return px is not None and all(abs(a - b) <= tol for a, b in zip(px, rgb, strict=True))


def paint_to_page_ms(page, painter, pixel_js: str, colours, interval=0.005, pause=0.0):
    """Paint each colour into the virtual display and time until the page's centre pixel shows
    it: glass-to-glass in milliseconds, one figure per colour."""
    out = []
    for rgb in colours:
        t0 = time.monotonic()
        painter.paint(rgb)
        wait_for(
            lambda rgb=rgb: close_to(page.evaluate(pixel_js), rgb),
            timeout=10,
            interval=interval,
            what=f"colour {rgb} on the page",
        )
        out.append((time.monotonic() - t0) * 1000)
        if pause:
            time.sleep(pause)
    return out


def wait_for(fn, timeout=30.0, interval=0.2, what="condition"):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = fn()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out waiting for {what}")


def click_and_key_arrive(page, painter, surface: str) -> None:
    """A click in the middle of `surface` (a selector) and a press of "a" reach the session's
    X display: the painter's window sees ButtonPress and KeyPress."""
    from Xlib import X

    painter.events()  # what came before does not count
    box = page.locator(surface).bounding_box()
    page.mouse.click(box["x"] + box["width"] / 2, box["y"] + box["height"] / 2)
    page.keyboard.press("a")
    seen = []
    wait_for(
        lambda: (
            seen.extend(painter.events()) or ({X.ButtonPress, X.KeyPress} <= {e.type for e in seen})
        ),
        timeout=10,
        what="click and key in the display",
    )


# What the player knew when a wait ran out: the transport, the codec the host named, the
# low-latency counters (frames received, decoded, skipped) and the canvas's size.
PLAYER_STATE_JS = """() => {
  const p = window.nativePlayer || {}, c = document.getElementById('canvas');
  return {state: p.state, transport: p.transport, codec: p.codec, video_token: !!p.wsToken,
          wc: p.wc, canvas: c ? [c.width, c.height] : null};
}"""


def page_wait(page, js: str, timeout: float) -> None:
    """Poll with evaluate: the page's CSP forbids the eval that wait_for_function uses."""
    try:
        wait_for(lambda: page.evaluate(js), timeout=timeout, interval=0.1, what=js)
    except AssertionError:
        raise AssertionError(
            f"{js} never held; page says: {page.inner_text('#status')}; "
            f"player: {page.evaluate(PLAYER_STATE_JS)}"
        ) from None


class Player:
    """A /play page in its own Chromium, self-paired with an armed PIN (see `self_paired`)."""

    def __init__(self, api, page):
        self.api = api
        self.page = page
        self.fingerprint: str | None = None  # set once playing; unpaired at the end if still set

    def start(self, until: str = "() => window.nativePlayer.state === 'playing'") -> None:
        self.page.click("#start")
        page_wait(self.page, until, 30)
        self.fingerprint = self.page.evaluate("window.nativePlayer.fingerprint")


@contextlib.contextmanager
def self_paired(host, name: str, app: str | None = None, fps: str | None = None):
    """Open /play with the form filled in (name, an armed PIN, 1280x720, optional app and fps);
    the test clicks Start through `Player.start`. Afterwards the device is unpaired (unless the
    test did it and cleared `fingerprint`) and the browser closed."""
    from playwright.sync_api import Error as PlaywrightError
    from playwright.sync_api import sync_playwright

    api = host.mgmt()
    pin = api.post("/api/v1/native/pair/arm", json={"ttl_secs": 60}).json()["pin"]
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    player = None
    try:
        ctx = browser.new_context(ignore_https_errors=True, base_url=host.url)
        page = ctx.new_page()
        page.goto("/play")
        page.fill("#name", name)
        page.fill("#pin", pin)  # self-pairing with the armed PIN: no approval step
        page.select_option("#mode", "1280x720")
        if fps:
            page.select_option("#fps", fps)
        if app:
            page.select_option("#app", label=app)
        player = Player(api, page)
        yield player
        with contextlib.suppress(PlaywrightError):  # a test may have killed the browser
            ctx.close()
    finally:
        if player is not None and player.fingerprint:
            api.delete(f"/api/v1/native/clients/{player.fingerprint}")
        with contextlib.suppress(PlaywrightError):
            browser.close()
        pw.stop()
        api.close()
