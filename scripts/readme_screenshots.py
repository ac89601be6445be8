"""Take the README's console screenshots from the real pages of a live test host.

Starts a throwaway host (the test suite's live host, its own state dir), signs in, pairs a
real Moonlight client and streams from it (colour bars painted on the session's screen, so its
thumbnail shows a captured frame), and saves docs/images/console-dashboard.png,
console-phone-pin.png and console-streaming.png (palette PNGs, small enough for a README).

    .venv/bin/python scripts/readme_screenshots.py
"""

from __future__ import annotations

import os
import re
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # run as a script: the test support modules live in the repo

from PIL import Image  # noqa: E402
from playwright.sync_api import expect  # noqa: E402
from Xlib import display as xdisplay  # noqa: E402

from tests.support.console_live import PASSWORD, USER, console  # noqa: E402
from tests.support.moonlight import Moonlight, post_pin  # noqa: E402

OUT = ROOT / "docs" / "images"
CLIENT = ROOT / "tests" / "support" / "client.py"


def save(page, name: str, **kwargs) -> Path:
    """A screenshot, quantized to a 128-colour palette (UI flats compress well that way)."""
    path = OUT / name
    page.screenshot(path=str(path), **kwargs)
    Image.open(path).convert("RGB").quantize(colors=128).save(path, optimize=True)
    sys.stdout.write(f"{path.relative_to(ROOT)}: {path.stat().st_size // 1024} KiB\n")
    return path


# Colour bars (75 % SMPTE-like) and a dark lower band: what the session's screen shows in the
# pictures, so the thumbnails show a real frame the host captured instead of an empty display.
BARS = [(191, 191, 191), (191, 191, 0), (0, 191, 191), (0, 191, 0), (191, 0, 191), (191, 0, 0),
        (0, 0, 191)]  # fmt: skip


def paint_test_card(x_name: str):
    """A full-screen X window with colour bars on the session's display; returns its display
    connection (closing it takes the window away)."""
    d = xdisplay.Display(x_name)
    screen = d.screen()
    w, h = screen.width_in_pixels, screen.height_in_pixels
    win = screen.root.create_window(
        0, 0, w, h, 0, screen.root_depth, background_pixel=0x101820, override_redirect=True
    )
    win.map()
    d.sync()
    gc = win.create_gc()
    bar_w = -(-w // len(BARS))
    for i, (r, g, b) in enumerate(BARS):
        gc.change(foreground=(r << 16) | (g << 8) | b)
        win.fill_rectangle(gc, i * bar_w, 0, bar_w, h * 2 // 3)
    for i, grey in enumerate((16, 64, 128, 235)):
        gc.change(foreground=(grey << 16) | (grey << 8) | grey)
        win.fill_rectangle(gc, i * w // 8, h * 3 // 4, w // 8, h // 6)
    d.sync()
    return d


def session_display(host) -> str:
    """The X display of the one live session."""
    with host.mgmt() as api:
        for _ in range(100):
            names = [d["x_display"] for d in api.get("/api/v1/display/state").json()["displays"]
                     if d.get("x_display")]  # fmt: skip
            if names:
                return names[0]
            time.sleep(0.2)
    raise RuntimeError("the session's display never appeared")


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    with (
        tempfile.TemporaryDirectory() as tmp,
        console(state_dir=Path(tmp) / "state") as (host, page),
    ):
        page.set_viewport_size({"width": 1280, "height": 800})

        # A Moonlight client starts pairing: the phone's /pin page lists it, waiting for its PIN.
        ml = Moonlight(host, Path(tmp) / "moonlight")
        ml.start_pairing("5173")
        phone = page.context.browser.new_context(
            ignore_https_errors=True,
            base_url=host.url,
            viewport={"width": 390, "height": 844},
            is_mobile=True,
            has_touch=True,
            storage_state=page.context.storage_state(),
        )
        pin = phone.new_page()
        pin.goto("/pin")
        expect(pin.locator("main li")).to_have_count(1, timeout=20_000)
        pin.fill("input[name=name]", "Living-room TV")
        save(pin, "console-phone-pin.png")
        phone.close()
        assert post_pin(host, (USER, PASSWORD), "5173", "Living-room TV")["status"] is True
        ml.wait_paired()

        args = [sys.executable, str(CLIENT), str(host.base_port), str(Path(tmp) / "moonlight"),
                "1280", "720", "30", "60", "quit"]  # fmt: skip
        env = {**os.environ, "PYTHONPATH": str(ROOT)}
        client = subprocess.Popen(
            args, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL
        )
        card_display = None
        try:
            card_display = paint_test_card(session_display(host))
            page.goto("/streaming")
            card = page.locator("article.stream")
            expect(card.locator("[data-figure=fps]")).to_have_text(
                re.compile(r"^\d+\.\d of 30$"), timeout=30_000
            )
            page.wait_for_timeout(8000)  # some seconds of charts
            save(page, "console-streaming.png")
            # The dashboard with the session live: its row, screen thumbnail and sparklines.
            page.goto("/")
            expect(page.locator("[data-field=active_sessions]")).to_have_text("1")
            expect(page.locator("#live-sessions img")).to_have_count(1, timeout=20_000)
            page.wait_for_timeout(4000)  # a few load samples on the chart
            save(page, "console-dashboard.png", full_page=True)
        finally:
            if card_display is not None:
                card_display.close()
            client.terminate()
            client.wait(timeout=30)


if __name__ == "__main__":
    main()
