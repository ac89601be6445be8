"""A compat session's figures: its counters across its streams (a /resume starts a new
`StreamSession` with new counters, the record wants the session's) and, while a stream is
live, each frame's capture and encode time and each second's sample, handed to the session
core (`/api/stream/*`, the history record, the live chart)."""

from __future__ import annotations

from compat.engine import adaptive


def _plus(a: tuple[int, float], b: tuple[int, float]) -> tuple[int, float]:
    return a[0] + b[0], a[1] + b[1]


class Figures:
    def __init__(self, core):
        self.core = core
        self.frames = 0
        self.bytes = 0
        # Finished streams' (count, sum) of RTT and encode samples, for the record's averages.
        self.rtt: tuple[int, float] = (0, 0.0)
        self.encode_ms: tuple[int, float] = (0, 0.0)
        self.cursor: dict = {}

    def armed(self, capture) -> None:
        """A new stream: its frame i is the capture's frame `cap_base + i`."""
        self.cursor = {"cap_base": capture.capture_ms.count, "enc": 0, "bytes": 0, "frames": 0}

    def fold(self, stream) -> None:
        """Keep a finished stream's counters for the record (a resume starts new ones)."""
        s = stream.stats
        self.frames += s.frames_sent
        self.bytes += s.bytes_sent
        self.rtt = _plus(self.rtt, s.rtt_ms.tally())
        self.encode_ms = _plus(self.encode_ms, s.encode_ms.tally())

    def totals(self, stream) -> tuple[int, int, tuple, tuple]:
        """The session's counters for the record (a live stream's are not folded in yet):
        frames, bytes, and the (count, sum) of encode and RTT samples."""
        frames, nbytes, enc, rtt = self.frames, self.bytes, self.encode_ms, self.rtt
        if stream is not None:
            s = stream.stats
            frames, nbytes = frames + s.frames_sent, nbytes + s.bytes_sent
            enc, rtt = _plus(enc, s.encode_ms.tally()), _plus(rtt, s.rtt_ms.tally())
        return frames, nbytes, enc, rtt

    def feed_latency(self, stream, capture) -> None:
        """Frame i of this stream: capture i (since arming) and encode i, for /stream/latency."""
        cur, cap, enc = self.cursor, capture.capture_ms, stream.stats.encode_ms
        for i in range(max(cur["enc"], enc.first), enc.count):
            j = cur["cap_base"] + i
            if j < cap.count:
                capture_ms, encode_ms = cap.at(j), enc.at(i)
                if capture_ms is not None and encode_ms is not None:
                    self.core.latency(capture_ms, encode_ms)
        cur["enc"] = enc.count

    def sample(self, stream, dt: float, streaming: bool) -> None:
        """One second: the negotiated parameters for the record, and once the stream has
        started (`streaming`), its bitrate, RTT, encode time and loss."""
        core, s, sent = self.core, stream.stats, self.cursor
        kbps = (s.bytes_sent - sent["bytes"]) * 8 / 1000 / dt
        new_enc = s.encode_ms.since(sent["frames"])
        sent["bytes"], sent["frames"] = s.bytes_sent, s.encode_ms.count
        rtt = s.rtt_ms.last
        params = stream.rtsp.params
        if params is not None:
            core.extra.update(
                bitrate_kbps=stream.launch.video_kbps(params.bitrate_kbps),
                packet_size=params.packet_size,
                min_fec=params.min_fec_packets,
            )
            core.follow_encoder(s.codec, s.encoder, s.encoder_options)
        if not streaming:
            return
        encode = sum(new_enc) / len(new_enc) if new_enc else None
        sent_n, lost_n, _ = stream.loss.snapshot()  # 0x5502 reports against datagrams sent
        loss = adaptive.loss_pct(sent_n - sent.get("sent", 0), lost_n - sent.get("lost", 0))
        sent["sent"], sent["lost"] = sent_n, lost_n
        target = s.target_kbps or (params.bitrate_kbps if params else None)
        core.sample(kbps, rtt, encode, target_kbps=target, loss_pct=loss)
