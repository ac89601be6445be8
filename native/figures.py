"""A native session's figures, once a second: from the browser's RTCP reports (RTT, loss, when
it was last heard from) and the encoder child's (capture and encode ms per frame), to the
page's overlay, `/api/stream/*` and the history record (through the session core)."""

from __future__ import annotations

import asyncio
import json
import time

# A connection that closes after the browser has sent nothing for this long was not closed by
# the browser (that comes with its RTCP still flowing) but given up on: ICE consent expired
# (aioice: about 30 s without an answer), i.e. the peer vanished -> reason `timeout`.
SILENT_S = 5.0


class Figures:
    def __init__(self):
        # When the browser last sent anything on the transport (RTCP reports, SCTP, DTLS).
        self.rx_packets, self.rx_at = 0, time.monotonic()
        self.loss_pct: float | None = None  # from the browser's RTCP receiver reports
        self.frames = self.bytes = 0
        self.last = 0.0  # when the last second closed

    def totals(self, video, core) -> tuple[int, int, tuple, tuple]:
        """The session's counters for the record: frames, bytes, and the (count, sum) of the
        per-second encode and RTT samples (the core's tallies)."""
        frames, nbytes = (video.frames, video.bytes) if video is not None else (0, 0)
        return frames, nbytes, core.encode_tally, core.rtt_tally

    def heard(self) -> None:
        self.rx_at = time.monotonic()

    def silent(self) -> bool:
        return time.monotonic() - self.rx_at > SILENT_S

    async def rtt_ms(self, pc) -> float | None:
        """The video sender's RTT from the browser's RTCP receiver reports (LSR/DLSR); notes
        when the browser was last heard from, on the way."""
        try:
            report = await pc.getStats()
        except Exception:  # closing under us
            return None
        received = sum(s.packetsReceived for s in report.values() if s.type == "transport")
        if received != self.rx_packets:
            self.rx_packets, self.rx_at = received, time.monotonic()
        for s in report.values():
            if s.type == "remote-inbound-rtp" and s.kind == "video":
                # The browser's receiver report also says what share of packets it lost
                # since its last report (RFC 3550 fraction lost: an 8-bit fixed point).
                lost = s.fractionLost
                self.loss_pct = round(lost / 256 * 100, 2) if lost is not None else None
                if s.roundTripTime:
                    return round(s.roundTripTime * 1000, 2)
        return None

    async def second(self, peer) -> None:
        """One second of the live `NativePeer`'s figures."""
        core, encoder, video = peer.core, peer.encoder, peer.video
        rtt = await self.rtt_ms(peer.pc)
        now = time.monotonic()
        await asyncio.to_thread(
            core.follow_encoder, peer.codec, encoder.opened(), encoder.options()
        )
        frames, nbytes = video.frames, video.bytes
        for capture_ms, encode_ms in encoder.drain_figures():
            core.latency(capture_ms, encode_ms)
        if self.last:
            dt = now - self.last
            sample = core.sample(
                (nbytes - self.bytes) * 8 / dt / 1000,
                rtt,
                video.encode_ms,
                loss_pct=self.loss_pct,
                fps=round((frames - self.frames) / dt, 1),
                audio_packets=peer.audio.packets,
            )
            channel = peer.channel
            if channel is not None and channel.readyState == "open":
                # `t` last: the sample's own `t` (its index) must not hide the message type.
                overlay = {**sample, "t": "stats", "kbps": sample["bitrate_kbps"]}
                channel.send(json.dumps(overlay))
        self.frames, self.bytes, self.last = frames, nbytes, now
