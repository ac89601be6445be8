"""The native plane over a lossy link: the stream recovers from lost packets.

A real aiortc player (as in test_dtls_proof) plays Desktop on the live host while a noise
window moves across the session's display (every frame carries picture data, several packets
of it). On the player's side of the link, a seeded 5 % of the host's RTP packets (video and
audio; never DTLS, RTCP or the data channel) are dropped before its stack sees them: what a
lossy Wi-Fi hop does. The host's WebRTC sender must answer the player's NACKs and PLIs so the
picture keeps coming: decoded frames at most MAX_FREEZE_S apart, every PLI followed by a decoded
keyframe within a second, and the frame rate near the mode's (aiortc's receiver, the test's
player, bounds the freeze: see MAX_FREEZE_S).

The loss is injected in the client's receive path rather than with netns + `tc netem`: the
host's ICE candidates are its own addresses, so a relay in between (the compat plane's
netem_relay) would need the SDP rewritten, and these machines may not allow network
namespaces. What the host sees is the same: packets that never arrive, and the receiver's
RTCP about them.
"""

from __future__ import annotations

import asyncio
import random
import time

import pytest

from native.media import IDR_EVERY_S
from tests.native import test_dtls_proof as dtls
from tests.native.helpers import Knocker, approved_answer
from tests.native.test_dtls_proof import Device, fingerprint_of, until

loopback_ice = dtls.loopback_ice  # the test peer's loopback ICE candidate (a fixture)

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]

MODE = {"width": 1280, "height": 720, "fps": 30}
LOSS = 0.05
WATCH_S = 15.0
# Lost packets come back by NACK and retransmission; a frame whose retransmission is lost too
# waits until aiortc's jitter buffer (512 packets: about a second of this stream at ~550 RTP
# packets/s) gives up on it and sends a PLI, which the host answers with a keyframe within a
# frame or two. Seen: 0.37, 0.52 and 0.89 s on the quiet VM, 1.61 s once in a full CI run (a
# slower packet rate on a loaded box fills the buffer later). What holds the host to its part
# is the PLI check below (every PLI answered by a keyframe within 1 s); this bound only says
# no freeze outlasted the host's periodic IDR interval.
MAX_FREEZE_S = IDR_EVERY_S


def is_rtp(data: bytes) -> bool:
    """RTP, not RTCP (RFC 5761 demultiplexing: RTCP packet types 192-223) nor DTLS (20-63)."""
    return len(data) > 12 and 128 <= data[0] <= 191 and not 192 <= data[1] <= 223


class LossyPlayer(Device):
    """The test player, with a seeded share of incoming RTP dropped, and a log of when it
    asked for a keyframe (PLI) and when it decoded one."""

    def __init__(self, loss: float, seed: int = 21):
        super().__init__()
        self.rng = random.Random(seed)
        self.loss = loss
        self.lossy = False  # switched on once the stream runs
        self.rtp = self.dropped = 0
        self.plis: list[float] = []
        self.nacks = 0
        self.keyframes: list[float] = []
        self.frame_times: list[float] = []
        self.impair()

    def impair(self) -> None:
        """Wrap the receive path of every transport and the PLI of every receiver, once
        (after the answer too: BUNDLE may move the receivers onto one transport)."""
        for transceiver in self.pc.getTransceivers():
            self._impair_transport(transceiver.receiver.transport.transport)
            self._count_plis(transceiver.receiver)

    def _impair_transport(self, ice) -> None:
        if getattr(ice, "_impaired", False):
            return
        ice._impaired = True
        recv = ice._recv

        async def lossy_recv():
            while True:
                data = await recv()
                if self.lossy and is_rtp(data):
                    self.rtp += 1
                    if self.rng.random() < self.loss:
                        self.dropped += 1
                        continue
                return data

        ice._recv = lossy_recv

    def _count_plis(self, receiver) -> None:
        if getattr(receiver, "_plis_counted", False):
            return
        receiver._plis_counted = True
        send_pli = receiver._send_rtcp_pli

        async def counted_pli(media_ssrc):
            if self.lossy:
                self.plis.append(time.monotonic())
            await send_pli(media_ssrc)

        receiver._send_rtcp_pli = counted_pli
        send_nack = receiver._send_rtcp_nack

        async def counted_nack(media_ssrc, lost):
            if self.lossy:
                self.nacks += 1
            await send_nack(media_ssrc, lost)

        receiver._send_rtcp_nack = counted_nack

    async def _count(self, track):
        from aiortc.mediastreams import MediaStreamError

        try:
            while True:
                frame = await track.recv()
                self.frames += 1
                now = time.monotonic()
                if self.lossy:
                    self.frame_times.append(now)
                    if frame.key_frame:
                        self.keyframes.append(now)
        except MediaStreamError:
            pass


def test_native_stream_recovers_from_five_percent_loss(live_host, loopback_ice):
    asyncio.run(_lossy(live_host))


async def _lossy(live_host):
    from bench.stream import Drawer

    api = live_host.mgmt()
    knocker = Knocker(live_host)
    player = LossyPlayer(LOSS)
    fp, drawer = None, None
    try:
        sdp = await player.offer()
        fp = fingerprint_of(sdp)
        body = {"sdp": sdp, "name": "lossy tv", "app": "desktop", **MODE}
        await player.answer((await approved_answer(knocker, api, body))["sdp"])
        player.impair()
        await until(lambda: player.frames > 10, 30, "the first frames")
        (disp,) = [d for d in api.get("/api/v1/display/state").json()["displays"]
                   if d["state"] == "active" and d["client"] == "lossy tv"]  # fmt: skip
        drawer = Drawer(disp["x_display"], MODE["width"], MODE["height"])
        drawer.start()
        await asyncio.sleep(1)

        player.lossy = True
        t0 = time.monotonic()
        await asyncio.sleep(WATCH_S)
        player.lossy = False
        t1 = time.monotonic()

        times = [t0, *player.frame_times, t1]
        gaps = [b - a for a, b in zip(times, times[1:], strict=False)]
        fps = len(player.frame_times) / (t1 - t0)
        answered = [any(p < k <= p + 1.0 for k in player.keyframes) for p in player.plis]
        late = [p for p, ok in zip(player.plis, answered, strict=True) if p < t1 - 1 and not ok]
        print(f"\nnative at {LOSS:.0%} loss: {player.dropped}/{player.rtp} RTP dropped, "
              f"{player.nacks} NACKs, {len(player.plis)} PLIs, {len(player.keyframes)} "
              f"keyframes, {fps:.1f} fps decoded, longest gap {max(gaps):.2f} s")  # fmt: skip
        assert player.dropped > 0.03 * player.rtp > 20, (player.dropped, player.rtp)
        assert player.nacks > 0, "the player never asked for a retransmission"
        assert late == [], f"PLIs not answered by a keyframe within 1 s: {late}"
        assert max(gaps) < MAX_FREEZE_S, f"the picture froze for {max(gaps):.2f} s"
        assert fps > 0.8 * MODE["fps"], fps
        assert player.pc.connectionState == "connected"
    finally:
        if drawer is not None:
            drawer.stop.set()
            drawer.join(2)
        await player.close()
        if fp:
            api.delete(f"/api/v1/native/clients/{fp}")
        knocker.close()
        api.close()
