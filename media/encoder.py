"""H.264 video encoder for the stream: BGRA frames (as ``mss`` captures them) in, Annex-B out.

PyAV drives libx264 (``ultrafast`` + ``zerolatency``, constrained baseline, yuv420p) in
software, or ``h264_nvenc`` when an NVIDIA GPU is asked for and the encoder really opens (it is
in PyAV's wheel everywhere, but fails to open without a GPU and driver).

Choices, and why:

* One colour conversion per frame, BGRA straight to planar yuv420p (BT.601, limited range, what
  the client assumes for ``encoderCscMode`` 0) in OpenCV's SIMD, multi-threaded ``cvtColor``:
  measured 3-7x faster than swscale's generic path here (2.3 ms vs 16 ms at 1080p). swscale is
  the fallback when OpenCV is missing. No per-pixel Python either way.
* No periodic keyframes: IDRs come when the client asks (start of stream, loss recovery),
  because an IDR costs several P-frames of bandwidth. ``forced-idr`` makes a requested
  keyframe a real IDR (with SPS/PPS in-band; no global header), which the client needs
  to start decoding.
* ``refs=1`` by default: Moonlight asks for one reference frame unless its decoder does
  reference-frame invalidation, which this host does not offer.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass
from fractions import Fraction

import av
import numpy as np

try:
    import cv2
except ImportError:  # pragma: no cover - opencv-python-headless is in requirements.txt
    cv2 = None

from media.h264 import h264_for_moonlight

log = logging.getLogger("media")


@dataclass
class EncodedFrame:
    data: bytes  # Annex-B, SEI/AUD stripped (see media.h264.h264_for_moonlight)
    keyframe: bool  # holds an IDR slice
    pts: int
    encode_ms: float  # colour conversion + encode, wall clock


def nvenc_available() -> bool:
    """Whether h264_nvenc opens here (needs an NVIDIA GPU with an NVENC engine and its driver;
    PyAV's wheel always has the wrapper. Checked on an H200: the driver is there, the engine is
    not, and this returns False)."""
    try:
        ctx = av.CodecContext.create("h264_nvenc", "w")
        ctx.width, ctx.height, ctx.pix_fmt = 256, 256, "yuv420p"
        ctx.time_base = Fraction(1, 60)
        ctx.open()
        return True
    except Exception:
        return False


def to_yuv420p(bgra: np.ndarray) -> av.VideoFrame:
    """The one colour conversion: BGRA (H x W x 4) -> a yuv420p frame."""
    if cv2 is not None:
        i420 = cv2.cvtColor(np.ascontiguousarray(bgra), cv2.COLOR_BGRA2YUV_I420)
        return av.VideoFrame.from_ndarray(i420, format="yuv420p")
    return av.VideoFrame.from_ndarray(bgra, format="bgra").reformat(format="yuv420p")


# Tunings (config `nvenc_tuning_preset`, app `encoder-preset`): -1 manual (the defaults below),
# 0 latency, 1 balanced, 2 quality (spatial adaptive quantization). Every tuning keeps zero
# B-frames and no lookahead: a streamed frame must leave the encoder as soon as it went in, so
# "quality" spends encoder time per frame, never frames of delay. The libx264 presets are
# ones a desktop CPU holds at 1080p60; slower ones would drop frames instead of improving them.
TUNINGS: dict[int, dict[str, dict[str, str]]] = {
    0: {"h264_nvenc": {"preset": "p1", "tune": "ull"}, "libx264": {"preset": "ultrafast"}},
    1: {"h264_nvenc": {"preset": "p4", "tune": "ll"}, "libx264": {"preset": "superfast"}},
    2: {
        "h264_nvenc": {"preset": "p6", "tune": "ll", "spatial-aq": "1"},
        "libx264": {"preset": "veryfast", "aq-mode": "1"},
    },
}


class VideoEncoder:
    """One session's encoder. Not thread-safe: the engine's capture loop owns it."""

    def __init__(
        self,
        width: int,
        height: int,
        fps: int = 60,
        bitrate_kbps: int = 10_000,
        codec: str = "libx264",
        max_ref_frames: int = 1,
        threads: int = 0,
        tuning: int = -1,
    ):
        if width % 2 or height % 2 or width < 16 or height < 16:
            raise ValueError("yuv420p needs even dimensions of at least 16")
        self.width, self.height, self.fps = width, height, fps
        self.tuning = tuning if tuning in TUNINGS else -1
        if codec == "auto":
            codec = "h264_nvenc" if nvenc_available() else "libx264"
        try:
            self._ctx = self._open(codec, bitrate_kbps, max_ref_frames, threads)
        except av.error.FFmpegError:
            if codec == "libx264":
                raise
            # A GPU encoder that is compiled in but will not open (no GPU, no driver, or a GPU
            # without an NVENC engine such as H100/H200): fall back to software.
            log.warning("%s did not open; falling back to libx264", codec)
            codec = "libx264"
            self._ctx = self._open(codec, bitrate_kbps, max_ref_frames, threads)
        self.codec_name = codec
        self.bitrate_kbps = bitrate_kbps
        self._reopen_args = (max_ref_frames, threads)
        self._pts = 0
        self._idr_pending = True  # the first frame is always an IDR

    def _open(self, codec: str, kbps: int, refs: int, threads: int) -> av.CodecContext:
        ctx = av.CodecContext.create(codec, "w")
        ctx.width, ctx.height = self.width, self.height
        ctx.pix_fmt = "yuv420p"
        ctx.time_base = Fraction(1, self.fps)
        ctx.framerate = Fraction(self.fps, 1)
        ctx.bit_rate = kbps * 1000
        ctx.gop_size = 10_000  # effectively infinite: IDRs only on request
        ctx.max_b_frames = 0
        if threads:
            ctx.thread_count = threads
        # A VBV of a few frames keeps each frame near the rate without starving IDRs.
        bufsize = max(kbps * 4 // self.fps, 50)
        if codec == "h264_nvenc":
            options = {
                "preset": "p1",
                "tune": "ull",
                "zerolatency": "1",
                "rc": "cbr",
                "forced-idr": "1",
                "profile": "baseline",
                "delay": "0",
            }
        else:
            options = {
                "preset": "ultrafast",
                "tune": "zerolatency",
                "profile": "baseline",
                "forced-idr": "1",
                "x264-params": f"ref={max(refs, 1)}:vbv-maxrate={kbps}:vbv-bufsize={bufsize}"
                ":scenecut=0:repeat-headers=1",
            }
        ctx.options = {**options, **TUNINGS.get(self.tuning, {}).get(codec, {})}
        self.options = dict(ctx.options)  # what was asked of the encoder, for tests and logs
        ctx.open()
        return ctx

    def set_bitrate(self, kbps: int) -> float:
        """Move the encoder to ``kbps`` (adaptive bitrate); returns the milliseconds it took.

        PyAV 18's libx264 context ignores a new ``bit_rate`` once open (measured: 4000 kbps
        asked down to 500 kept coming out at ~4000), so the context is reopened at the new
        rate and VBV: the next frame is one IDR, bounded by the new VBV. The engine calls this
        at most once a second (``compat.engine.adaptive``), so there is no IDR storm.
        """
        if kbps == self.bitrate_kbps:
            return 0.0
        start = time.perf_counter()
        old = self._ctx
        self._ctx = self._open(self.codec_name, kbps, *self._reopen_args)
        self.bitrate_kbps = kbps
        self._idr_pending = True  # a fresh context starts with a keyframe: say so to the client
        try:
            old.encode(None)
        except Exception:  # noqa: BLE001 - the old context is dropped either way
            pass
        return (time.perf_counter() - start) * 1000

    def request_idr(self) -> None:
        """The client asked for a keyframe (control 0x0302 or an RFI we answer with IDR)."""
        self._idr_pending = True

    def encode(self, bgra: np.ndarray) -> EncodedFrame | None:
        """Encode one captured frame (H x W x 4 uint8, BGRA). None if the encoder held it back.

        libx264 with zerolatency has no lookahead, so every input frame comes straight out.
        """
        if bgra.shape[:2] != (self.height, self.width):
            raise ValueError(
                f"frame is {bgra.shape[1]}x{bgra.shape[0]}, encoder {self.width}x{self.height}"
            )
        start = time.perf_counter()
        frame = to_yuv420p(bgra)
        frame.pts = self._pts
        self._pts += 1
        if self._idr_pending:
            frame.pict_type = av.video.frame.PictureType.I
            self._idr_pending = False
        packets = self._ctx.encode(frame)
        if not packets:
            return None
        raw = b"".join(bytes(p) for p in packets)
        data, idr = h264_for_moonlight(raw)
        return EncodedFrame(data, idr, packets[0].pts or 0, (time.perf_counter() - start) * 1000)

    def close(self) -> None:
        try:
            self._ctx.encode(None)
        except Exception:
            pass
        self._ctx = None
