"""Video for the native plane: an encoder process (the session's frame source, as on the compat
plane -> media.encoder.VideoEncoder on the session's encoder plan -> Annex-B H.264/HEVC or AV1
OBUs) and the aiortc track that hands H.264 access units to the RTP sender.

Why its own process: next to the asyncio loop that runs DTLS/SRTP, PyAV's encode time grew
from 2.4 ms to 11.5 ms (measured); the GIL is the reason. Why pre-encoded: aiortc's own H.264
encoder runs at the medium preset with a 3 Mbit/s cap and 30 fps pacing. Keyframes: the RTP
sender's PLI/FIR handler is pointed at `request_keyframe`, and an IDR also goes out every
`IDR_EVERY_S` so a browser that lost packets without asking still recovers. No Django here.
"""

from __future__ import annotations

import asyncio
import fractions
import json
import multiprocessing as mp
import queue
import struct
import threading
import time

import av
from aiortc import codecs, rtp
from aiortc.mediastreams import MediaStreamError, MediaStreamTrack
from aiortc.rtcrtpparameters import RTCRtpHeaderExtensionParameters

from common import realtime
from media.encoder import EncoderFailed, VideoEncoder
from streaming.session_display import open_capture

# keyframe, capture time (CLOCK_MONOTONIC: system-wide, so one clock for every process), encode ms
HEADER = struct.Struct("<?dd")
# RTP header extension (webrtc.org experiment) through which a sender tells the browser's
# receiver how much playout delay it wants: 12-bit min and max in 10 ms units.
PLAYOUT_DELAY_URI = "http://www.webrtc.org/experiments/rtp-hdrext/playout-delay"
PLAYOUT_DELAY_MS = (0, 0)
IDR_EVERY_S = 2.0
OPENED_BYTES = 4096  # the shared array the child names its encoder in
CLOCK = 90_000
# What the encoder child needs of the session's display (plain values: it is spawned).
SOURCE_KEYS = ("backend", "x_display", "region", "wayland_display", "output")


def encoder_main(
    conn,
    keyframe,
    stop,
    display: dict,
    width: int,
    height: int,
    fps: int,
    kbps: int,
    tuning: int = -1,
    lost=None,
    figures=None,
    candidates: list[str] | None = None,
    config: dict | None = None,
    opened=None,
) -> None:
    """Child process: capture at `fps`, encode, send (header + access unit) per frame. The
    encoder is the first of `candidates` that opens, with `config` (the session's
    `streaming.sessions.encoding.Plan`); its name goes to `opened` (a shared byte array), or
    `!` and the reason when none opens. `display`:
    the session's display as `machine.acquire` gave it; the frame source is the compat
    plane's (`session_display.open_capture`: wlr-screencopy of a wlroots output, else an X
    grab of the display or the attached monitor's region). When every grab has failed for
    framesource.LOST_AFTER_S, `lost` is set and the child ends (the session: display_lost).
    `figures` gets (capture ms, encode ms) per frame, for `/api/stream/latency` (dropped
    when the session is behind reading them)."""
    try:
        enc = VideoEncoder(width, height, fps=fps, bitrate_kbps=kbps, tuning=tuning,
                           candidates=candidates, config=config)  # fmt: skip
    except (EncoderFailed, ValueError) as exc:  # none opens, or not at this size
        _tell(opened, f"!{exc}")
        conn.close()
        return
    _tell(opened, _opened_text(enc))
    name_told = enc.codec_name
    capture = open_capture(display)
    interval = 1.0 / fps
    next_t = time.monotonic()
    last_idr = 0.0
    captured = 0
    try:
        while not stop.is_set():
            now = time.monotonic()
            if now < next_t:
                time.sleep(next_t - now)
            next_t = max(next_t + interval, time.monotonic() - interval)
            t_cap = time.monotonic()
            frame = capture(width, height)  # BGRA, at the stream's size
            times = capture.capture_ms
            capture_ms = times.last if times.count != captured else None  # this grab's own
            captured = times.count
            if capture.lost():
                if lost is not None:
                    lost.set()
                break
            if keyframe.is_set() or time.monotonic() - last_idr > IDR_EVERY_S:
                keyframe.clear()
                enc.request_idr()
                last_idr = time.monotonic()
            try:
                out = enc.encode(frame)
            except EncoderFailed as exc:  # the last encoder of the plan failed too
                _tell(opened, f"!{exc}")
                break
            if enc.codec_name != name_told:  # an encoder failed mid-stream and handed over
                _tell(opened, _opened_text(enc))
                name_told = enc.codec_name
            if out is None:
                continue
            if figures is not None and capture_ms is not None:
                try:
                    figures.put_nowait((capture_ms, out.encode_ms))
                except queue.Full:
                    pass
            try:
                conn.send_bytes(HEADER.pack(out.keyframe, t_cap, out.encode_ms) + out.data)
            except (BrokenPipeError, OSError):
                break
    finally:
        if figures is not None:
            figures.cancel_join_thread()  # never wait on a reader that stopped reading
        enc.close()
        capture.close()
        conn.close()


def _opened_text(enc) -> str:
    """The open encoder as the session reads it: its name and the options it was given (the
    name alone when they do not fit `OPENED_BYTES`)."""
    text = json.dumps({"name": enc.codec_name, "options": enc.options})
    if len(text.encode()) >= OPENED_BYTES:
        text = json.dumps({"name": enc.codec_name})
    return text


def _tell(opened, text: str) -> None:
    """Write `text` (`_opened_text`, or `!` and why none opened) where the session reads it."""
    if opened is not None:
        raw = text.encode("utf-8", "replace")[: len(opened) - 1]
        with opened.get_lock():
            opened.value = raw


def playout_delay_value(min_ms: int, max_ms: int) -> bytes:
    """The extension's 3 bytes: min and max playout delay, 12 bits each, in 10 ms units."""
    lo, hi = min(min_ms // 10, 0xFFF), min(max_ms // 10, 0xFFF)
    return bytes(((lo >> 4) & 0xFF, ((lo & 0xF) << 4) | (hi >> 8), hi & 0xFF))


def use_playout_delay(min_ms: int = PLAYOUT_DELAY_MS[0], max_ms: int = PLAYOUT_DELAY_MS[1]):
    """Offer the playout-delay extension on video and stamp (min, max) on every video packet.

    Why: without it Chrome's receiver smooths a live stream like a call: its jitter buffer
    waits to render each frame at the time its RTP timestamp predicts, and two frames that land
    in one display refresh cost one shown frame. That held WebRTC at 46-53 fps and ~48 ms at
    720p60 where WebCodecs (decode and draw at once) showed 60 fps at ~17 ms.
    (0, 0) asks for what WebCodecs does: render each frame as soon as it is decoded (Chrome's
    low-latency renderer; the frame is still shown in order). aiortc knows neither the URI nor
    the field, so this adds both: the URI to the video capabilities it answers with (the id is
    the browser's, from its offer; a browser that does not offer it gets nothing new), and a
    `HeaderExtensionsMap` that appends the value to the extensions it writes. Idempotent; call
    before `setRemoteDescription`."""
    video = codecs.HEADER_EXTENSIONS["video"]
    if not any(e.uri == PLAYOUT_DELAY_URI for e in video):
        video.append(RTCRtpHeaderExtensionParameters(id=len(video) + 10, uri=PLAYOUT_DELAY_URI))
    cls = rtp.HeaderExtensionsMap
    cls.playout_delay = playout_delay_value(min_ms, max_ms)
    if getattr(cls, "_playout_patched", False):
        return
    configure, write = cls.configure, cls.set

    def configure_with(self, parameters) -> None:
        configure(self, parameters)
        self.playout_delay_id = next(
            (e.id for e in parameters.headerExtensions if e.uri == PLAYOUT_DELAY_URI), 0
        )

    def set_with(self, values) -> tuple[int, bytes]:
        profile, value = write(self, values)
        x_id = getattr(self, "playout_delay_id", 0)
        if not x_id:
            return profile, value
        found = rtp.unpack_header_extensions(profile, value) if profile else []
        return rtp.pack_header_extensions([*found, (x_id, self.playout_delay)])

    cls.configure, cls.set, cls._playout_patched = configure_with, set_with, True


class EncoderProcess:
    """Owns the child process and the pipe; `frames()` feeds an asyncio queue from a thread."""

    def __init__(
        self,
        display: dict,
        width: int,
        height: int,
        fps: int,
        kbps: int,
        tuning: int = -1,
        candidates: list[str] | None = None,
        config: dict | None = None,
    ):
        """`display`: `machine.acquire`'s answer (backend, x_display, region, wayland_display,
        output); `lost` is set when its capture has failed for good. `candidates` and `config`:
        the session's encoder plan (`streaming.sessions.encoding.Plan`) for its codec."""
        ctx = mp.get_context("spawn")  # no fork of a process holding Django, sockets and a loop
        self._recv, send = ctx.Pipe(duplex=False)
        self.keyframe, self.stop_event, self.lost = ctx.Event(), ctx.Event(), ctx.Event()
        self.figures = ctx.Queue(maxsize=1200)  # (capture ms, encode ms) per frame
        # The encoder open now (`_opened_text`), or "!" and why none opened.
        self._opened = ctx.Array("c", OPENED_BYTES)
        display = {k: display.get(k) for k in SOURCE_KEYS}
        self.proc = ctx.Process(
            target=encoder_main,
            args=(
                send,
                self.keyframe,
                self.stop_event,
                display,
                width,
                height,
                fps,
                kbps,
                tuning,
                self.lost,
                self.figures,
                candidates,
                config,
                self._opened,
            ),
            daemon=True,
            name="native-encoder",
        )
        self.proc.start()
        send.close()

    def _open_now(self) -> dict:
        text = self._opened.value.decode("utf-8", "replace")
        if not text or text.startswith("!"):
            return {}
        try:
            found = json.loads(text)
        except ValueError:
            return {}
        return found if isinstance(found, dict) else {}

    def opened(self) -> str:
        """The encoder open now ("" while the child is still opening one)."""
        return str(self._open_now().get("name") or "")

    def options(self) -> dict:
        """The FFmpeg options the open encoder was given ({} before it opened)."""
        found = self._open_now().get("options")
        return found if isinstance(found, dict) else {}

    def failure(self) -> str:
        """Why no encoder of the plan opens, or the last one failed mid-stream ("" if none)."""
        text = self._opened.value.decode("utf-8", "replace")
        return text[1:] if text.startswith("!") else ""

    def wait_opened(self, timeout: float) -> str:
        """The encoder that opened; EncoderFailed (media.encoder) when none did, when the child
        died first, or after `timeout` seconds."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if name := self.opened():
                return name
            if why := self.failure():
                raise EncoderFailed(why)
            if not self.proc.is_alive():
                raise EncoderFailed(f"the encoder process exited ({self.proc.exitcode})")
            time.sleep(0.02)
        raise EncoderFailed(f"no encoder opened within {timeout:.0f} s")

    def pump(self, loop: asyncio.AbstractEventLoop, frames: asyncio.Queue) -> None:
        def run():
            realtime.promote("the native encoder pipe")
            while True:
                try:
                    raw = self._recv.recv_bytes()
                except (EOFError, OSError):
                    break
                loop.call_soon_threadsafe(_put_latest, frames, raw)
            loop.call_soon_threadsafe(_put_latest, frames, None)

        self._pump = threading.Thread(target=run, daemon=True, name="native-encoder-pipe")
        self._pump.start()

    def drain_figures(self) -> list[tuple[float, float]]:
        """The per-frame (capture ms, encode ms) pairs since the last call."""
        out = []
        while True:
            try:
                out.append(self.figures.get_nowait())
            except (queue.Empty, OSError, ValueError):
                return out

    def close(self) -> None:
        self.stop_event.set()
        self.proc.join(3)
        if self.proc.is_alive():
            self.proc.kill()
            self.proc.join(2)
        # The encoder is gone, so the pump reads EOF and ends. Wait for that before freeing the
        # descriptor: a reader still polling a closed number reads whatever reuses it.
        pump = getattr(self, "_pump", None)
        if pump is not None:
            pump.join(2)
        if pump is None or not pump.is_alive():
            self._recv.close()


def _put_latest(frames: asyncio.Queue, item) -> None:
    frames.put_nowait(item)


# Encoded frames waiting for the RTP sender before it gives up on them: when a starved peer
# process falls this far behind (100 ms at 60 fps), the queued frames are skipped up to the
# next keyframe, which is requested at once, as the WebCodecs relay does. Without the bound,
# latency grew to 400-600 ms at load 30 and never came back.
MAX_BEHIND = 6
# The same bound in time, for the backlog the queue cannot count: a starved peer's pump thread
# leaves frames in the pipe from the encoder, so frames sent with 3-4 in the queue had waited
# up to 450 ms since their encode (bench/browser_play.py --starve, 32 busy processes on the
# peer's core: age at send p99 432 ms; with this bound 101 ms). A P-frame that waited longer
# than this is skipped the same way; a keyframe is sent however late, so a peer starved for
# good still shows a picture now and then.
MAX_WAIT_S = 0.1


class EncodedVideoTrack(MediaStreamTrack):
    """A track whose `recv()` yields `av.Packet`s (aiortc then only packetizes them)."""

    kind = "video"

    def __init__(self, encoder: EncoderProcess, feed: bool = True):
        """`feed=False`: the WebCodecs mode takes the frames (wsvideo); RTP video stays idle."""
        super().__init__()
        self.encoder = encoder
        self.queue: asyncio.Queue = asyncio.Queue()
        self.frames = self.bytes = self.skipped = 0
        self.encode_ms = 0.0
        self._t0: float | None = None
        self._want_key = False
        if feed:
            encoder.pump(asyncio.get_running_loop(), self.queue)

    def request_keyframe(self) -> None:
        self.encoder.keyframe.set()

    async def recv(self):
        while True:
            raw = await self.queue.get()
            if raw is None:
                self.stop()
                raise MediaStreamError
            keyframe, t_cap, encode_ms = HEADER.unpack_from(raw)
            # t_cap: the monotonic time before the capture, in the encoder process (Linux's
            # CLOCK_MONOTONIC is system-wide, and a wall-clock step cannot skip frames), so
            # waited = capture + pipe + queue
            waited = time.monotonic() - t_cap - encode_ms / 1000
            behind = self.queue.qsize() >= MAX_BEHIND or (waited > MAX_WAIT_S and not keyframe)
            if behind or (self._want_key and not keyframe):
                # Ask once per episode, and again when a keyframe itself had to be skipped.
                if not self._want_key or keyframe:
                    self.request_keyframe()
                self._want_key = True
                self.skipped += 1
                continue
            self._want_key = False
            break
        data = raw[HEADER.size :]
        if self._t0 is None:
            self._t0 = t_cap
        packet = av.Packet(data)
        packet.pts = int((t_cap - self._t0) * CLOCK)
        packet.time_base = fractions.Fraction(1, CLOCK)
        self.frames += 1
        self.bytes += len(data)
        self.encode_ms = encode_ms
        return packet
