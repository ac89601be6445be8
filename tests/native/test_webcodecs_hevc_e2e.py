"""A browser-plane client that decodes HEVC gets HEVC when the modes allow.

Headless Chromium here has no HEVC decoder (tests/streaming/test_codecs_host_e2e.py takes
what it decodes), so the client is a program that speaks the page's protocol: an aiortc peer
(its DTLS identity, the `input` data channel) whose offer says `transport: webcodecs` and
`decodes: [h264, hevc]`, then the relay's WebSocket (token as a subprotocol, same origin) over
TLS, read frame by frame. PyAV's HEVC decoder shows the colours painted into the session's
display. With `hevc_mode = 1` the same client gets H.264: the mode is the host's word.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import struct

import av
import pytest

from tests.native import test_dtls_proof as dtls
from tests.native.helpers import Knocker, approved_answer
from tests.native.test_player import Painter

Device, fingerprint_of, until = dtls.Device, dtls.fingerprint_of, dtls.until
loopback_ice = dtls.loopback_ice  # the test peer's loopback ICE candidate (a fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]

NAME = "hevc decoder"
HEADER = 17  # keyframe u8, capture time f64, encode ms f64 (native/wsvideo.py)


class RelayReader:
    """The relay's WebSocket as the page opens it, on a blocking TLS socket: binary messages."""

    def __init__(self, host, token: str):
        key = base64.b64encode(os.urandom(16)).decode()
        raw = socket.create_connection(("127.0.0.1", host.mgmt_port), timeout=10)
        self.tls = host.ssl_context().wrap_socket(raw, server_hostname="127.0.0.1")
        self.tls.sendall(
            (
                f"GET /native/ws HTTP/1.1\r\nHost: 127.0.0.1:{host.mgmt_port}\r\n"
                f"Upgrade: websocket\r\nConnection: Upgrade\r\nSec-WebSocket-Key: {key}\r\n"
                f"Sec-WebSocket-Protocol: hostmgmt.video, token.{token}\r\n"
                f"Sec-WebSocket-Version: 13\r\nOrigin: {host.url}\r\n\r\n"
            ).encode()
        )
        head = b""
        while b"\r\n\r\n" not in head:
            head += self.tls.recv(1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _exact(self, n: int) -> bytes:
        out = b""
        while len(out) < n:
            got = self.tls.recv(n - len(out))
            if not got:
                raise EOFError
            out += got
        return out

    def message(self) -> bytes:
        """The next binary message (server frames are unmasked and, from the relay, whole)."""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                (n,) = struct.unpack(">H", self._exact(2))
            elif n == 127:
                (n,) = struct.unpack(">Q", self._exact(8))
            payload = self._exact(n)
            if b0 & 0x0F == 0x2:
                return payload

    def close(self) -> None:
        self.tls.close()


def _offer_body(sdp: str) -> dict:
    return {"sdp": sdp, "name": NAME, "app": "desktop", "width": 640, "height": 360, "fps": 30,
            "transport": "webcodecs", "decodes": ["h264", "hevc"]}  # fmt: skip


async def _play(host, want: str) -> tuple[str, list]:
    """One session of the HEVC-decoding client: (the codec the answer named, the centre pixel
    of each picture decoded after each colour was painted)."""
    api, knocker, device = host.mgmt(), Knocker(host), Device()
    told: list[dict] = []
    device.channel.on("message", lambda m: told.append(json.loads(m)))
    reader = painter = fp = None
    try:
        sdp = await device.offer()
        fp = fingerprint_of(sdp)
        first = await asyncio.to_thread(knocker.post, _offer_body(sdp))
        if first.status_code == 202:
            answer = await approved_answer(knocker, api, _offer_body(sdp))
        else:
            assert first.status_code == 200, first.text
            answer = first.json()
        await device.answer(answer["sdp"])
        ws = await until(lambda: next((m for m in told if m.get("t") == "ws"), None), 30, "token")
        assert ws["codec"] == answer["codec"] == want, (ws, answer)
        x_name = next(
            d["x_display"]
            for d in api.get("/api/v1/display/state").json()["displays"]
            if d["client"] == NAME and d["state"] == "active"
        )
        painter = Painter(x_name)
        reader = await asyncio.to_thread(RelayReader, host, ws["token"])
        decoder = av.CodecContext.create(want, "r")
        seen = []
        for rgb in ((255, 0, 0), (0, 0, 255)):
            painter.paint(rgb)
            await asyncio.sleep(1.0)
            for _ in range(90):  # the picture since the paint, within three seconds
                payload = await asyncio.to_thread(reader.message)
                for pic in decoder.decode(av.Packet(payload[HEADER:])):
                    seen.append((rgb, pic.to_ndarray(format="rgb24")[180, 320].tolist()))
        return answer["codec"], seen
    finally:
        if reader is not None:
            reader.close()
        if painter is not None:
            painter.close()
        await device.close()
        knocker.close()
        if fp:
            api.delete(f"/api/v1/native/clients/{fp}")
        api.close()


def _close(px, rgb, tol=40) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(px, rgb, strict=True))


@pytest.mark.parametrize(
    ("modes", "want"), [("hevc_mode = 2\n", "hevc"), ("hevc_mode = 1\n", "h264")]
)
def test_a_client_that_decodes_hevc_gets_hevc_when_the_modes_allow(live_host, loopback_ice, modes,
                                                                   want):  # fmt: skip
    conf = live_host.state_dir / "host.conf"
    base = conf.read_text() if conf.exists() else None
    conf.write_text((base or "") + modes)
    try:
        codec, seen = asyncio.run(_play(live_host, want))
    finally:
        if base is None:
            conf.unlink()
        else:
            conf.write_text(base)
    assert codec == want
    for rgb in ((255, 0, 0), (0, 0, 255)):
        mine = [px for painted, px in seen if painted == rgb]
        assert mine and _close(mine[-1], rgb), (rgb, mine[-3:])
