"""The native plane in a real browser: decoded fps, glass-to-glass latency, input echo.

Run by hand:  .venv/bin/python bench/browser_play.py [--mode 1280x720] [--fps 60] [--samples 40]

Starts a throwaway host, opens /play in Debian's headless Chromium, approves the browser through
the API and plays Desktop. Then:
1. Decoded fps from `requestVideoFrameCallback` over 5 s; the frame interval is the floor.
2. Glass-to-glass: the bench paints a new colour into the virtual display (python-xlib) and
   polls the <video> through a canvas until the centre pixel shows it; p50/p99 over N paints.
   The poll itself (a CDP round trip, ~2-5 ms) is included, so these are upper bounds.
3. Input echo: a data-channel ping answered by the host's peer process, p50.
4. The encoder process's CPU share (psutil, % of one core) while playing.
Browser and host share this machine's cores. # GAP: the WebCodecs mode is not built, so only
the WebRTC row is printed.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from tests.livehost import start_host  # noqa: E402
from tests.native.test_player import (  # noqa: E402
    ARGS,
    CHROMIUM,
    FRAMES_JS,
    PIXEL_JS,
    Painter,
    close_to,
    page_wait,
    wait_for,
)

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255)]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="1280x720")
    ap.add_argument("--fps", type=int, default=60)
    ap.add_argument("--samples", type=int, default=40)
    args = ap.parse_args()
    host = start_host()
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    try:
        api = host.mgmt()
        page = browser.new_context(ignore_https_errors=True, base_url=host.url).new_page()
        page.goto("/play")
        page.fill("#name", "bench")
        page.select_option("#mode", args.mode)
        page.select_option("#fps", str(args.fps))
        page.click("#start")
        entry = wait_for(lambda: api.get("/api/v1/native/pending").json(), what="pending")[0]
        api.post(f"/api/v1/native/pending/{entry['id']}/approve", json={})
        width = int(args.mode.split("x")[0])
        page_wait(
            page,
            f"() => window.nativePlayer.state === 'playing' && "
            f"document.getElementById('video').videoWidth === {width}",
            30,
        )
        x_name = api.get("/api/v1/display/state").json()["displays"][0]["x_display"]
        peer = next(
            p
            for p in psutil.process_iter(["cmdline"])
            if "streaming.native.peer" in " ".join(p.info["cmdline"] or [])
        )
        encoder = next(c for c in peer.children() if "spawn_main" in " ".join(c.cmdline()))
        painter = Painter(x_name)
        time.sleep(2)
        encoder.cpu_percent()
        fps = page.evaluate(FRAMES_JS, 5000)
        cpu = encoder.cpu_percent()
        g2g = []
        for i in range(args.samples):
            rgb = COLOURS[i % len(COLOURS)]
            t0 = time.monotonic()
            painter.paint(rgb)
            wait_for(
                lambda rgb=rgb: close_to(page.evaluate(PIXEL_JS), rgb),
                timeout=10,
                interval=0.001,
                what="colour",
            )
            g2g.append((time.monotonic() - t0) * 1000)
            time.sleep(0.05)
        echo = [page.evaluate("() => window.nativePlayer.ping()") for _ in range(args.samples)]
        stats = page.evaluate("() => window.nativePlayer.stats")
        painter.close()
        print(f"mode {args.mode}@{args.fps}, floor = frame interval {1000 / args.fps:.1f} ms")
        print("plane    fps_decoded  g2g_p50_ms  g2g_p99_ms  echo_p50_ms  encoder_cpu_%  kbps")
        print(
            f"webrtc   {fps:11.1f}  {statistics.median(g2g):10.1f}  {pct(g2g, 0.99):10.1f}  "
            f"{statistics.median(echo):11.2f}  {cpu:13.0f}  {stats.get('kbps', 0):.0f}"
        )
        print("webcodecs  (not built)")
    finally:
        browser.close()
        pw.stop()
        host.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
