"""Session sound for the engine: captured PCM -> processing chain -> Opus packets.

Why two objects: the capture and the chain live as long as the session (one sink, one parec,
the AGC's state carried across a /resume), while the Opus encoder belongs to one stream (the
client's packet duration and quality come with each RTSP ANNOUNCE). No Django here: the
session task builds `SessionSound` from the config and hands `SessionSound.stream` to
`StreamSession` as its audio source; without one the engine sends CBR silence.

Clock: a null sink renders on the system clock, so the capture itself paces the audio thread
(10 ms blocks); when the capture stalls or dies, silence goes out at the monotonic clock's
pace, so the client's audio timeline never stops. Captured sound older than
`MAX_BACKLOG_MS` (a client that connects late, a stall) is dropped: late sound is worse
than a gap in a game.

Channels: the sink has the layout the launch asked for (`media.audio.layouts`); a stream whose
ANNOUNCE asks for another channel count gets the sound converted (`media.audio.remix`: a
standard downmix, or an upmix onto the matching channels), after the chain.
"""

from __future__ import annotations

import array
import contextlib
import fcntl
import logging
import termios
import time

import numpy as np

from media.audio.layouts import OpusConfig
from media.audio.opus import OpusEncoder
from media.audio.remix import Remix

log = logging.getLogger("media.audio")

RATE = 48_000
BLOCK = 480  # 10 ms: the chain's block
BLOCK_S = BLOCK / RATE
MAX_BACKLOG_MS = 60
READ_TIMEOUT_S = 0.03


class SessionSound:
    """One session's capture (`media.audio.capture.SessionAudio`, started) and chain."""

    def __init__(self, capture, chain, opus_settings):
        self.capture = capture
        self.chain = chain
        self.opus_settings = opus_settings
        self.blocks = 0  # captured blocks sent
        self.silent_blocks = 0  # blocks of silence sent for a stalled capture
        self.dropped_ms = 0.0  # backlog dropped to keep latency down

    @property
    def channels(self) -> int:
        """The sink's channel count (its capture's; 2 for a capture that does not say)."""
        return int(getattr(self.capture, "channels", 2))

    def stream(self, packet_ms: int, bitrate: int, layout: OpusConfig | None = None) -> AudioStream:
        """The engine's audio source for one stream (called by StreamSession's audio thread);
        `layout` is the stream's Opus config (None: stereo)."""
        return AudioStream(self, packet_ms, bitrate, layout)

    def backlog_frames(self) -> int:
        """Frames captured but not read yet: parec's pipe plus the reader's buffer."""
        cap = getattr(self.capture, "capture", None)
        proc = getattr(cap, "proc", None)
        if proc is None or proc.stdout is None:
            return 0
        n = array.array("i", [0])
        try:
            fcntl.ioctl(proc.stdout.fileno(), termios.FIONREAD, n)
        except OSError:
            return 0
        return (n[0] + len(cap._buf)) // (2 * self.channels)  # s16le

    def trim(self, keep_ms: float = 10.0) -> None:
        """Drop captured sound beyond `keep_ms` so what is sent next is current."""
        extra = self.backlog_frames() - int(keep_ms * RATE / 1000)
        while extra >= BLOCK:
            if self.capture.read(BLOCK, timeout=0.005) is None:
                break
            extra -= BLOCK
            self.dropped_ms += BLOCK_S * 1000

    def read_block(self) -> np.ndarray | None:
        if self.backlog_frames() > MAX_BACKLOG_MS * RATE // 1000:
            self.trim()
        return self.capture.read(BLOCK, timeout=READ_TIMEOUT_S)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.capture.close()


class AudioStream:
    """Opus packets of the session's sound at one stream's packet duration and bitrate."""

    def __init__(
        self, sound: SessionSound, packet_ms: int, bitrate: int, layout: OpusConfig | None = None
    ):
        self.sound = sound
        self.encoder = OpusEncoder(
            sound.opus_settings, frame_ms=packet_ms, bitrate=bitrate, layout=layout
        )
        self.remix = Remix(sound.channels, self.encoder.channels)
        if not self.remix.identity:
            log.info(
                "the session's %d-channel sound goes out as %d channels (%s)",
                self.remix.src, self.remix.dst, "downmix" if self.remix.src > self.remix.dst
                else "upmix",
            )  # fmt: skip
        sound.trim()  # sound captured before the client listened is stale
        self._last = time.monotonic()
        self._silence = np.zeros((BLOCK, sound.channels), dtype=np.int16)

    def next_packets(self) -> list[bytes]:
        """The packets for the next captured block (blocks up to ~30 ms), or for the silence
        the clock owes when the capture gave nothing."""
        block = self.sound.read_block()
        now = time.monotonic()
        if block is not None:
            self._last = now
            self.sound.blocks += 1
            return self.encoder.encode(self.remix(self.sound.chain.process(block)))
        owed = int((now - self._last) / BLOCK_S)
        if owed == 0:  # parec is gone (EOF at once): pace ourselves
            time.sleep(BLOCK_S)
            owed = 1
        owed = min(owed, 10)
        self._last += owed * BLOCK_S
        if now - self._last > 0.1:
            self._last = now
        self.sound.silent_blocks += owed
        packets: list[bytes] = []
        for _ in range(owed):
            packets += self.encoder.encode(self.remix(self.sound.chain.process(self._silence)))
        return packets
