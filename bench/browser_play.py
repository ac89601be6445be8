"""The native plane in a real browser: decoded fps, glass-to-glass latency, input echo.

Run by hand:  .venv/bin/python bench/browser_play.py [--mode 1280x720] [--fps 60] [--samples 40]

Starts a throwaway host, opens /play in Debian's headless Chromium, approves the browser through
the API and plays Desktop, first over WebRTC, then in the low-latency mode (WebSocket +
WebCodecs; the page is a secure context: HTTPS on 127.0.0.1). For each:
1. Decoded fps over 5 s (`requestVideoFrameCallback` on the <video>; the decoder's output
   count on the WebCodecs canvas); the frame interval is the floor.
2. Glass-to-glass: the bench paints a new colour into the virtual display (python-xlib) and
   polls the <video> / <canvas> until the centre pixel shows it; p50/p99 over N paints.
   The poll itself (a CDP round trip, ~2-5 ms) is included, so these are upper bounds.
3. Input echo: a data-channel ping answered by the host's peer process, p50.
4. The encoder process's CPU share (psutil, % of one core) while playing.
Browser and host share this machine's cores.
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

from tests.native.browserkit import (  # noqa: E402
    ARGS,
    CANVAS_PIXEL_JS,
    CHROMIUM,
    DECODED_FPS_JS,
    page_wait,
    paint_to_page_ms,
    wait_for,
)
from tests.native.test_player import FRAMES_JS, PIXEL_JS, Painter  # noqa: E402
from tests.support.livehost import start_host  # noqa: E402

# The browser's own counters for the received video (WebRTC only): decoded vs shown frames and
# the jitter buffer's delay say where frames go missing (host pacing or the page's renderer).
RTP_JS = """async () => {
  const rep = await window.nativePlayer.pc.getStats();
  let out = null;
  rep.forEach((s) => { if (s.type === 'inbound-rtp' && s.kind === 'video') out = {
    received: s.framesReceived || 0, decoded: s.framesDecoded || 0, dropped: s.framesDropped || 0,
    jb: s.jitterBufferDelay || 0, jbn: s.jitterBufferEmittedCount || 0,
    lost: s.packetsLost || 0, t: performance.now() }; });
  return out;
}"""

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255)]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def measure(page, api, width: int, samples: int, webcodecs: bool) -> tuple:
    """(fps, g2g ms list, echo ms list, encoder cpu %, kbps) for the session now playing."""
    surface = "canvas').width" if webcodecs else "video').videoWidth"
    page_wait(
        page,
        f"() => window.nativePlayer.state === 'playing' && "
        f"document.getElementById('{surface} === {width}",
        30,
    )
    displays = api.get("/api/v1/display/state").json()["displays"]
    x_name = next(d["x_display"] for d in displays if d.get("state", "active") == "active")
    managers = [  # the session manager forks one process per session
        p
        for p in psutil.process_iter(["cmdline"])
        if "streaming.sessions.manager" in " ".join(p.info["cmdline"] or [])
    ]
    # The newest session's encoder (a spawned child of its peer process): a replaced
    # session's process may still be on its way out, and a peer has other children too.
    encoder = wait_for(
        lambda: max(
            (c for m in managers for c in m.children(recursive=True)
             if "spawn_main" in " ".join(c.cmdline())),
            key=lambda c: c.create_time(),
            default=None,
        ),
        what="the encoder process",
    )  # fmt: skip
    painter = Painter(x_name)
    time.sleep(2)
    encoder.cpu_percent()
    before = None if webcodecs else page.evaluate(RTP_JS)
    fps = page.evaluate(DECODED_FPS_JS if webcodecs else FRAMES_JS, 5000)
    cpu = encoder.cpu_percent()
    if before is not None:
        after = page.evaluate(RTP_JS)
        dt = (after["t"] - before["t"]) / 1000
        emitted = max(1, after["jbn"] - before["jbn"])
        delta = {k: after[k] - before[k] for k in ("received", "decoded", "dropped", "lost")}
        print(
            f"webrtc inbound over {dt:.1f} s: received {delta['received'] / dt:.1f} fps, "
            f"decoded {delta['decoded'] / dt:.1f} fps, dropped {delta['dropped']}, packets lost "
            f"{delta['lost']}, jitter buffer {(after['jb'] - before['jb']) / emitted * 1000:.1f} "
            "ms per frame"
        )
    pixel = CANVAS_PIXEL_JS if webcodecs else PIXEL_JS
    colours = [COLOURS[i % len(COLOURS)] for i in range(samples)]
    g2g = paint_to_page_ms(page, painter, pixel, colours, interval=0.001, pause=0.05)
    echo = [page.evaluate("() => window.nativePlayer.ping()") for _ in range(samples)]
    stats = page.evaluate("() => window.nativePlayer.stats")
    painter.close()
    return fps, g2g, echo, cpu, stats.get("kbps", 0)


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="1280x720")
    ap.add_argument("--fps", type=int, default=60)
    ap.add_argument("--samples", type=int, default=40)
    args = ap.parse_args()
    host = start_host()
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    rows = []
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
        rows.append(("webrtc", *measure(page, api, width, args.samples, False)))
        page.click("#stop")
        page.check("#lowlat")
        page.click("#start")
        time.sleep(1)  # the new session replaces the old one (its display is released)
        rows.append(("webcodecs", *measure(page, api, width, args.samples, True)))
        print(f"mode {args.mode}@{args.fps}, floor = frame interval {1000 / args.fps:.1f} ms")
        print("plane      fps_decoded  g2g_p50_ms  g2g_p99_ms  echo_p50_ms  encoder_cpu_%  kbps")
        for name, fps, g2g, echo, cpu, kbps in rows:
            print(
                f"{name:9}  {fps:11.1f}  {statistics.median(g2g):10.1f}  {pct(g2g, 0.99):10.1f}  "
                f"{statistics.median(echo):11.2f}  {cpu:13.0f}  {kbps:.0f}"
            )
    finally:
        browser.close()
        pw.stop()
        host.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
