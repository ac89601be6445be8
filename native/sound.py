"""Sound for the native plane: the session's own PulseAudio null sink (the launched app's
default sink, through `app_env()`), captured by parec, through the `host_audio_*` chain and
Opus-encoded with the `host_opus_*` settings, all from `media.audio` (docs/playable.md),
so a browser hears what a compat client hears.

Why pre-encoded packets handed to aiortc: its own Opus encoder ignores the host's settings
(voip, fixed bitrate). aiortc only packetizes an `av.Packet` (RTP timestamp from its pts).
Capture and encoding run in a thread (parec reads block); the track keeps at most
`MAX_QUEUED` packets so a late or slow consumer never builds delay: sound older than that is
dropped (a gap is better than late sound in a game). Without a sound server (or with
`stream_audio = false`) the track sends encoded silence at the clock's pace.
"""

from __future__ import annotations

import asyncio
import fractions
import logging
import threading
import time

import av
import numpy as np
from aiortc.mediastreams import MediaStreamTrack

from common import realtime
from media.audio.capture import SessionAudio
from media.audio.chain import Chain
from media.audio.opus import OpusEncoder, OpusSettings

log = logging.getLogger("native")

RATE = 48_000
BLOCK = 480  # 10 ms, the chain's block
FRAME_MS = 20
BITRATE = 96_000
MAX_QUEUED = 3  # packets (60 ms)


def open_capture(values: dict, session_id: str):
    """The started `SessionAudio`, or None (audio off, or no sound server: logged)."""
    try:
        audio = SessionAudio.from_config(values, session_id)
        if audio is not None:
            audio.start()
        return audio
    except Exception as exc:  # a session never fails for sound
        log.warning("native session %s streams silence: %s", session_id, exc)
        return None


class OpusTrack(MediaStreamTrack):
    """Opus packets of the session's sound (or of silence), 20 ms each."""

    kind = "audio"

    def __init__(self, capture, values: dict):
        super().__init__()
        self.capture = capture
        self.chain = Chain.from_config(values)
        self.encoder = OpusEncoder(
            OpusSettings.from_config(values), frame_ms=FRAME_MS, bitrate=BITRATE
        )
        self.loop = asyncio.get_running_loop()
        self.queue: asyncio.Queue = asyncio.Queue()
        self.packets = self.dropped = 0
        self.peak = 0.0  # loudest captured sample so far, 0..1 (for the tests and the log)
        self._pts = 0
        self._halt = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True, name="native-audio")
        self._thread.start()

    def _blocks(self):
        """10 ms int16 stereo blocks: captured, or silence paced by the monotonic clock."""
        silence = np.zeros((BLOCK, 2), np.int16)
        next_t = time.monotonic()
        while not self._halt.is_set():
            block = self.capture.read(BLOCK, timeout=0.5) if self.capture else None
            if block is not None:
                yield block
                continue
            next_t = max(next_t + BLOCK / RATE, time.monotonic() - 0.1)
            time.sleep(max(0.0, next_t - time.monotonic()))
            yield silence

    def _run(self) -> None:
        realtime.promote("the native session's audio")
        try:
            for block in self._blocks():
                if block.size:
                    self.peak = max(self.peak, float(np.abs(block).max()) / 32768.0)
                for packet in self.encoder.encode(self.chain.process(block)):
                    self.loop.call_soon_threadsafe(self._offer, packet)
        except RuntimeError:  # the loop closed under us: the session is over
            pass
        except Exception:  # sound stops, the picture goes on
            log.exception("native audio thread failed")

    def _offer(self, packet: bytes) -> None:
        if self.queue.qsize() > 50:  # nobody listens yet (ICE/DTLS still running)
            self.queue.get_nowait()
        self.queue.put_nowait(packet)

    async def recv(self):
        packet = await self.queue.get()
        pts = self._pts
        self._pts += RATE * FRAME_MS // 1000
        while self.queue.qsize() > MAX_QUEUED:  # behind: jump to the newest sound
            packet = self.queue.get_nowait()
            self._pts += RATE * FRAME_MS // 1000
            self.dropped += 1
            pts = self._pts - RATE * FRAME_MS // 1000
        out = av.Packet(packet)
        out.pts = pts
        out.time_base = fractions.Fraction(1, RATE)
        self.packets += 1
        return out

    def close(self) -> None:
        self._halt.set()
        self._thread.join(3)
        if self.capture is not None:
            self.capture.close()
