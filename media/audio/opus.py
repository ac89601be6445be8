"""Opus encoding of session audio with libopus and the `host_opus_*` knobs.

48 kHz, one Opus packet per 5, 10 or 20 ms frame (the client's `packetDuration`). Stereo goes
through PyAV's libopus; 5.1 and 7.1 through libopus's multistream encoder with the exact
streams, coupled streams and mapping the client was told (`media.audio.layouts`,
`media.audio.multistream`), since PyAV's encoder would pick a mapping of its own.
The encoder keeps a small sample buffer, so the caller may hand it blocks of any length (the
capture reads 5 ms at a time, the chain works on 10 ms) and gets back whole packets.

GameStream audio FEC needs every packet of a 4-packet block to have one size, which only CBR
guarantees (reference B.13). `host_opus_vbr` other than 0 is honoured, because a host owner
asked for it, but logged: the client then drops audio FEC for the session.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import av
import numpy as np

from hostconfig import store
from hostconfig.schema import OPUS_KEYS
from media.audio.chain import setting
from media.audio.layouts import STEREO, OpusConfig
from media.audio.multistream import MultistreamEncoder

log = logging.getLogger("media.audio")

RATE = 48_000
CHANNELS = 2
FRAME_MS = (5, 10, 20)
APPLICATIONS = {0: "lowdelay", 1: "voip", 2: "audio"}
VBR_MODES = {0: "off", 1: "constrained", 2: "on"}
# libopus cutoffs: 8 kHz is wideband (16 kHz sampling), 20 kHz fullband.
WIDEBAND_HZ = 8000
FULLBAND_HZ = 20000


@dataclass(frozen=True)
class OpusSettings:
    application: int = 0
    vbr: int = 0
    complexity: int = 10
    fec: bool = True
    expected_loss_pct: int = 0
    bandwidth_extension: bool = True

    @classmethod
    def from_config(cls, values: Mapping[str, Any]) -> OpusSettings:
        """From `host_opus_*` values; out-of-range numbers clamped, missing keys default."""
        v = {name: setting(values, name) for name in OPUS_KEYS}
        return cls(
            application=v["host_opus_application"],
            vbr=v["host_opus_vbr"],
            complexity=v["host_opus_complexity"],
            fec=v["host_opus_fec"],
            expected_loss_pct=v["host_opus_expected_loss_pct"],
            bandwidth_extension=v["host_opus_bandwidth_extension"],
        )

    @classmethod
    def from_store(cls) -> OpusSettings:
        return cls.from_config({name: store.get(name) for name in OPUS_KEYS})

    def codec_options(self, frame_ms: int) -> dict[str, str]:
        """The libopus private options (ffmpeg names) for these settings."""
        return {
            "application": APPLICATIONS[self.application],
            "vbr": VBR_MODES[self.vbr],
            "frame_duration": str(frame_ms),
            "fec": "1" if self.fec else "0",
            "packet_loss": str(self.expected_loss_pct),
        }


class OpusEncoder:
    """One session's encoder: PCM blocks in, Opus packets (bytes) out."""

    def __init__(
        self,
        settings: OpusSettings | None = None,
        *,
        frame_ms: int = 5,
        bitrate: int = 96_000,
        layout: OpusConfig | None = None,
    ):
        """`layout`: the multistream config (`media.audio.layouts`); None is stereo."""
        if frame_ms not in FRAME_MS:
            raise ValueError(f"frame_ms must be one of {FRAME_MS}, not {frame_ms!r}")
        self.settings = settings or OpusSettings()
        self.frame_ms = frame_ms
        self.frame_samples = RATE * frame_ms // 1000
        self.layout = layout or STEREO.normal
        self.channels = self.layout.channels
        if self.settings.vbr != 0:
            log.warning("Opus VBR is on: packet sizes vary and clients disable audio FEC")
        self._pending = np.zeros((0, self.channels), dtype=np.int16)
        self._pts = 0
        self._ms: MultistreamEncoder | None = None
        if self.channels != CHANNELS:
            s = self.settings
            self._ms = MultistreamEncoder(
                self.channels,
                self.layout.streams,
                self.layout.coupled,
                self.layout.mapping,
                bitrate=int(bitrate),
                frame_samples=self.frame_samples,
                application=s.application,
                vbr=s.vbr,
                complexity=s.complexity,
                fec=s.fec,
                expected_loss_pct=s.expected_loss_pct,
                fullband=s.bandwidth_extension,
            )
            return
        ctx = av.CodecContext.create("libopus", "w")
        ctx.sample_rate = RATE
        ctx.layout = "stereo"
        ctx.format = "s16"
        ctx.bit_rate = int(bitrate)
        # Generic codec options, not libopus private ones: complexity and the bandwidth cutoff.
        ctx.options = {
            **self.settings.codec_options(frame_ms),
            "compression_level": str(self.settings.complexity),
            "cutoff": str(FULLBAND_HZ if self.settings.bandwidth_extension else WIDEBAND_HZ),
        }
        ctx.open()
        self._ctx = ctx
        # PyAV's `encode` pushes every frame through a filter graph (abuffer -> aformat ->
        # abuffersink) to cut it to the encoder's frame size, about 64 us per 5 ms packet here
        # (1.3 % of a core per session at 200 packets/s). The frames here already are that
        # size, format and layout, so they go to the encoder straight, through the method
        # `encode` ends in (PyAV 18, pinned); the same bytes (tests/media/test_opus.py).
        self._send = getattr(ctx, "_send_frame_and_recv", ctx.encode)

    def encode(self, block: np.ndarray) -> list[bytes]:
        """Packets for every whole frame now buffered; float32 [-1, 1] or int16, shape
        (frames, channels) in the layout's channel order."""
        pcm = _to_int16(block)
        if pcm.ndim != 2 or pcm.shape[1] != self.channels:
            raise ValueError(f"expected (frames, {self.channels}) samples, got {pcm.shape}")
        buf = np.concatenate((self._pending, pcm)) if self._pending.size else pcm
        n = self.frame_samples
        whole = buf.shape[0] // n
        packets: list[bytes] = []
        for i in range(whole):
            if self._ms is not None:
                packets.append(self._ms.encode(buf[i * n : (i + 1) * n]))
                continue
            frame = av.AudioFrame.from_ndarray(
                np.ascontiguousarray(buf[i * n : (i + 1) * n]).reshape(1, -1),
                format="s16",
                layout="stereo",
            )
            frame.sample_rate = RATE
            frame.pts = self._pts
            self._pts += n
            packets.extend(bytes(p) for p in self._send(frame))
        self._pending = buf[whole * n :].copy()
        return packets


class OpusDecoder:
    """Decodes packets back to int16 (frames, 2): for tests, and the tone latency bench."""

    def __init__(self):
        ctx = av.CodecContext.create("libopus", "r")
        ctx.sample_rate = RATE
        ctx.layout = "stereo"
        self._ctx = ctx

    def decode(self, packet: bytes) -> np.ndarray:
        out = [_frame_pcm(f) for f in self._ctx.decode(av.Packet(packet))]
        if not out:
            return np.zeros((0, CHANNELS), dtype=np.int16)
        return np.concatenate(out)


def _frame_pcm(frame: av.AudioFrame) -> np.ndarray:
    """int16 (frames, channels) whatever sample format the decoder chose."""
    a = frame.to_ndarray()
    # Planar formats come back one row per channel, packed ones as one interleaved row.
    a = a.T if frame.format.is_planar else a.reshape(-1, CHANNELS)
    return a if a.dtype == np.int16 else _to_int16(a)


def _to_int16(block: np.ndarray) -> np.ndarray:
    if block.dtype == np.int16:
        return block
    return np.clip(np.rint(np.asarray(block, dtype=np.float32) * 32768.0), -32768, 32767).astype(
        np.int16
    )
