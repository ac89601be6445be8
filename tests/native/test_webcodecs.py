"""The low-latency mode in headless Chromium: video over a WebSocket, decoded by WebCodecs.

The page (a secure context: HTTPS on 127.0.0.1) self-pairs with a PIN, ticks "Low latency"
and plays Desktop at 1280x720@60; colours painted into the display come back out of the
<canvas>; decoded fps is measured; a stall of the page's main thread makes the decode queue
grow and the page skips to the next keyframe (asked for over the data channel), after which
the picture is current again; a click and a key arrive; a WebSocket with a wrong token, or
with the right token from another origin, is refused.
"""

from __future__ import annotations

import base64
import os
import socket

import pytest

from tests.native.browserkit import (
    CANVAS_PIXEL_JS,
    DECODED_FPS_JS,
    click_and_key_arrive,
    close_to,
    paint_to_page_ms,
    self_paired,
    wait_for,
)
from tests.native.test_player import COLOURS, Painter

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]

NAME = "webcodecs player"

STALL_JS = """() => { const t = performance.now(); while (performance.now() - t < 1500) {} }"""

WS_JS = """([url, protocols]) => new Promise((res) => {
  const ws = new WebSocket(url, protocols);
  ws.onopen = () => { ws.close(); res('open'); };
  ws.onclose = (e) => res('closed ' + e.code);
})"""


def handshake(host, token: str, origin: str | None, path: str = "/native/ws") -> str:
    """A raw WebSocket upgrade to the relay; the status line of the answer."""
    key = base64.b64encode(os.urandom(16)).decode()
    request = (
        f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{host.mgmt_port}\r\n"
        f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
        f"Sec-WebSocket-Protocol: hostmgmt.video, token.{token}\r\n"
        f"Sec-WebSocket-Version: 13\r\n" + (f"Origin: {origin}\r\n" if origin else "") + "\r\n"
    )
    raw = socket.create_connection(("127.0.0.1", host.mgmt_port), timeout=10)
    with host.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1") as tls:
        tls.sendall(request.encode())
        return tls.recv(4096).decode("latin-1").split("\r\n")[0]


def test_webcodecs_mode(live_host):
    with self_paired(live_host, NAME, fps="60") as player:
        page, api = player.page, player.api
        assert page.evaluate("window.isSecureContext && 'VideoDecoder' in window")
        assert page.is_enabled("#lowlat")
        page.check("#lowlat")
        player.start(
            "() => window.nativePlayer.state === 'playing' && "
            "window.nativePlayer.transport === 'webcodecs' && "
            "document.getElementById('canvas').width === 1280"
        )
        assert page.evaluate("document.getElementById('video').hidden")
        x_name = next(
            d["x_display"]
            for d in api.get("/api/v1/display/state").json()["displays"]
            if d["client"] == NAME
        )
        painter = Painter(x_name)
        try:
            lat = paint_to_page_ms(page, painter, CANVAS_PIXEL_JS, COLOURS)
            fps = page.evaluate(DECODED_FPS_JS, 3000)
            lat.sort()
            print(
                f"\nwebcodecs 1280x720@60: {fps:.1f} fps decoded, paint-to-canvas p50 "
                f"{lat[len(lat) // 2]:.0f} ms, max {lat[-1]:.0f} ms"
            )
            assert fps >= 15, f"only {fps:.1f} fps decoded"

            # A stalled page catches up at the next keyframe instead of lagging behind.
            before = page.evaluate("({...window.nativePlayer.wc})")
            page.evaluate(STALL_JS)
            painter.paint((0, 255, 255))
            wait_for(
                lambda: close_to(page.evaluate(CANVAS_PIXEL_JS), (0, 255, 255)),
                timeout=10,
                interval=0.01,
                what="the picture current again after the stall",
            )
            after = page.evaluate("({...window.nativePlayer.wc})")
            print(f"stall: {before} -> {after}")
            assert after["catchups"] > before["catchups"], after
            assert after["skipped"] > before["skipped"], after

            # Input goes over the data channel as in the WebRTC mode.
            click_and_key_arrive(page, painter, "#canvas")
        finally:
            painter.close()

        # The relay refuses a wrong token (and the session's own video still flows).
        ws = f"wss://127.0.0.1:{live_host.mgmt_port}/native/ws"
        token = page.evaluate("window.nativePlayer.wsToken")
        wrong = ["hostmgmt.video", "token.nope"]
        assert page.evaluate(WS_JS, [ws, wrong]) == "closed 1006"
        assert page.evaluate(WS_JS, [ws + f"?token={token}", ["hostmgmt.video"]]) == "closed 1006"
        other = ws.replace("/native/ws", "/other/ws")
        assert page.evaluate(WS_JS, [other, ["hostmgmt.video"]]).startswith("closed")
        assert handshake(live_host, token, "https://evil.example").startswith("HTTP/1.1 403")
        assert handshake(live_host, token, None).startswith("HTTP/1.1 403")
        # Another path is refused (403), not an error of the router (500).
        own = f"https://127.0.0.1:{live_host.mgmt_port}"
        assert handshake(live_host, token, own, "/other/ws").startswith("HTTP/1.1 403")
        n = page.evaluate("window.nativePlayer.wc.decoded")
        wait_for(
            lambda: page.evaluate("window.nativePlayer.wc.decoded") > n + 10, what="video flows"
        )
