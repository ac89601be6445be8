"""Video encoder for the stream: BGRA frames (as ``mss`` captures them) in, one access unit out.

Codecs: H.264 (libx264, ``h264_nvenc``/``_qsv``/``_amf``), HEVC Main (libx265, ``hevc_*``) and
AV1 (SVT-AV1, ``av1_*``), all 8-bit yuv420p (every capture source is 8-bit SDR). The session
hands an ordered list of encoders for its codec (``media.encoders.choose``): the first that opens
encodes; one that fails mid-stream hands over to the next, which starts with an IDR. H.264 and
HEVC come out Annex-B with SEI/AUD dropped (HEVC with VPS/SPS/PPS before each IDR); AV1 passes
through as the encoder writes it (OBUs, sequence header on each keyframe).

Every encoder gets low-latency settings (no B-frames, no lookahead, IDRs only on request, a
VBV of a few frames); the config's encoder keys go on top (``media.encoder_options``).

Choices, and why:

* One colour conversion per frame, BGRA straight to planar yuv420p (BT.601, limited range, what
  the client assumes for ``encoderCscMode`` 0) in OpenCV's SIMD, multi-threaded ``cvtColor``:
  measured 3-7x faster than swscale's generic path here (2.3 ms vs 16 ms at 1080p). swscale is
  the fallback when OpenCV is missing. No per-pixel Python either way, and no copy after it:
  the frame handed to PyAV is cvtColor's own buffer.
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

from media import encoder_options
from media.h264 import HevcRewriter, h264_for_moonlight

log = logging.getLogger("media")


@dataclass
class EncodedFrame:
    data: bytes  # Annex-B (SEI/AUD stripped, see media.h264), or AV1 OBUs
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
        # The frame wraps cvtColor's fresh buffer (and keeps it alive): no second copy of the
        # picture (from_ndarray copied it plane by plane, 2.3 ms of CPU at 1080p).
        # Every encoder copies its input before `encode` returns; the buffer is never reused.
        return av.VideoFrame.from_numpy_buffer(i420, format="yuv420p")
    return av.VideoFrame.from_ndarray(bgra, format="bgra").reformat(format="yuv420p")


# Tunings (config `nvenc_tuning_preset`, app `encoder-preset`): -1 manual (the defaults below),
# 0 latency, 1 balanced, 2 quality (spatial adaptive quantization). Every tuning keeps zero
# B-frames and no lookahead: a streamed frame must leave the encoder as soon as it went in, so
# "quality" spends encoder time per frame, never frames of delay. The libx264 presets are
# ones a desktop CPU holds at 1080p60; slower ones would drop frames instead of improving them.
_NV = ("h264_nvenc", "hevc_nvenc", "av1_nvenc")
TUNINGS: dict[int, dict[str, dict[str, str]]] = {
    0: {
        **{n: {"preset": "p1", "tune": "ull"} for n in _NV},
        "libx264": {"preset": "ultrafast"},
        "libx265": {"preset": "ultrafast"},
        "libsvtav1": {"preset": "12"},
    },
    1: {
        **{n: {"preset": "p4", "tune": "ll"} for n in _NV},
        "libx264": {"preset": "superfast"},
        "libx265": {"preset": "superfast"},
        "libsvtav1": {"preset": "11"},
    },
    2: {
        **{n: {"preset": "p6", "tune": "ll", "spatial-aq": "1"} for n in _NV},
        "libx264": {"preset": "veryfast", "aq-mode": "1"},
        "libx265": {"preset": "veryfast"},
        "libsvtav1": {"preset": "10"},
    },
}

# encoder -> codec, and the software encoder each codec falls back to.
CODEC_OF = {
    **{f"{c}_{b}": c for c in ("h264", "hevc", "av1") for b in ("nvenc", "qsv", "amf", "vaapi")},
    "libx264": "h264",
    "libx265": "hevc",
    "libsvtav1": "av1",
}
SOFTWARE_ENCODER = {"h264": "libx264", "hevc": "libx265", "av1": "libsvtav1"}


def base_options(encoder: str, kbps: int, fps: int, refs: int, qp: int | None) -> dict[str, str]:
    """Each encoder's low-latency settings (FFmpeg option names of that encoder)."""
    # A VBV of a few frames keeps each frame near the rate without starving IDRs.
    bufsize = max(kbps * 4 // fps, 50)
    vbv = "" if qp is not None else f":vbv-maxrate={kbps}:vbv-bufsize={bufsize}"
    codec = CODEC_OF.get(encoder, "h264")
    if encoder == "libx264":
        return {
            "preset": "ultrafast",
            "tune": "zerolatency",
            "profile": "baseline",
            "forced-idr": "1",
            "x264-params": f"ref={max(refs, 1)}{vbv}:scenecut=0:repeat-headers=1",
        }
    if encoder == "libx265":
        # open-gop=0: a forced keyframe is an IDR (with forced-idr alone x265 wrote CRA, measured).
        return {
            "preset": "ultrafast",
            "tune": "zerolatency",
            "profile": "main",
            "forced-idr": "1",
            "x265-params": f"ref={max(refs, 1)}{vbv}:scenecut=0:repeat-headers=1:bframes=0"
            ":rc-lookahead=0:open-gop=0:aud=0:info=0:log-level=error",
        }
    if encoder == "libsvtav1":
        # pred-struct 1 = low delay (no reordering), which takes CBR (rc 2) or a fixed QP (rc 0).
        rc = "0" if qp is not None else "2"
        return {"preset": "12", "svtav1-params": f"pred-struct=1:lookahead=0:scd=0:rc={rc}"}
    if encoder.endswith("_nvenc"):
        options = {"preset": "p1", "tune": "ull", "zerolatency": "1", "rc": "cbr",
                   "forced-idr": "1", "delay": "0", "rc-lookahead": "0"}  # fmt: skip
        if codec == "h264":
            options["profile"] = "baseline"
        elif codec == "hevc":
            options["profile"] = "main"
        return options
    if encoder.endswith("_qsv"):
        options = {"preset": "veryfast", "async_depth": "1", "forced_idr": "1",
                   "low_delay_brc": "1"}  # fmt: skip
        if codec == "h264":
            options["look_ahead"] = "0"
        return options
    if encoder.endswith("_amf"):
        return {"usage": "ultralowlatency", "quality": "speed", "rc": "cbr", "forced_idr": "1"}
    return {}


class EncoderFailed(RuntimeError):
    """No encoder of the session's list opened (or every one failed mid-stream)."""


class VideoEncoder:
    """One session's encoder. Not thread-safe: the engine's capture loop owns it.

    `codec` is an encoder name (``libx264``, ``hevc_nvenc``, ...), ``auto`` (H.264 on NVENC
    where it opens, else libx264) or a codec (``h264``/``hevc``/``av1``: that codec's software
    encoder); `candidates` (an ordered encoder list, `media.encoders.choose`) wins over it.
    `config` holds the encoder keys set in the host config (`media.encoder_options`).
    """

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
        candidates: list[str] | None = None,
        config: dict | None = None,
    ):
        if width % 2 or height % 2 or width < 16 or height < 16:
            raise ValueError("yuv420p needs even dimensions of at least 16")
        self.width, self.height, self.fps = width, height, fps
        self.tuning = tuning if tuning in TUNINGS else -1
        self.kbps, self.refs, self.threads = bitrate_kbps, max_ref_frames, threads
        self.config = dict(config or {})
        if candidates:
            names = list(candidates)
        elif codec == "auto":
            names = ["h264_nvenc", "libx264"]
        elif codec in SOFTWARE_ENCODER:
            names = [SOFTWARE_ENCODER[codec]]
        else:
            names = [codec]
        codecs = {CODEC_OF.get(n) for n in names}
        if len(codecs) != 1 or None in codecs:
            raise ValueError(f"encoders {names} are not all of one known codec")
        self.codec = codecs.pop()
        # The software encoder of the codec is always the last resort.
        if SOFTWARE_ENCODER[self.codec] not in names:
            names.append(SOFTWARE_ENCODER[self.codec])
        self.candidates = names
        self.failures: list[tuple[str, str]] = []  # (encoder, why) for each one that gave up
        self._ctx = None
        self.codec_name = ""
        self._open_from(0)
        self._pts = 0
        self._idr_pending = True  # the first frame is always an IDR

    def _open_from(self, index: int) -> None:
        """Open the first candidate from `index` on that opens; EncoderFailed when none does."""
        for i in range(index, len(self.candidates)):
            name = self.candidates[i]
            try:
                self._ctx = self._open(name, self.kbps, self.refs, self.threads)
            except (av.error.FFmpegError, ValueError, OSError) as exc:
                # A GPU encoder compiled in but without its GPU or driver (or a GPU without
                # that engine, such as an H100's missing NVENC): try the next one.
                log.warning("%s did not open (%s); trying the next encoder", name, exc)
                self.failures.append((name, str(exc)))
                continue
            self.codec_name = name
            self._index = i
            self._rewrite = HevcRewriter() if self.codec == "hevc" else None
            return
        raise EncoderFailed(f"no {self.codec} encoder opened: {self.failures}")

    def _open(self, codec: str, kbps: int, refs: int, threads: int) -> av.CodecContext:
        qp = encoder_options.qp_of(self.config)
        ctx = av.CodecContext.create(codec, "w")
        ctx.width, ctx.height = self.width, self.height
        ctx.pix_fmt = "yuv420p"
        ctx.time_base = Fraction(1, self.fps)
        ctx.framerate = Fraction(self.fps, 1)
        if qp is None or codec not in encoder_options.SOFTWARE:
            ctx.bit_rate = kbps * 1000
        ctx.gop_size = 10_000  # effectively infinite: IDRs only on request
        ctx.max_b_frames = 0
        if threads and codec in encoder_options.SOFTWARE:  # a GPU encoder's work is not here
            ctx.thread_count = threads
        options = base_options(codec, kbps, self.fps, refs, qp)
        options.update(TUNINGS.get(self.tuning, {}).get(codec, {}))
        options.update(encoder_options.options_for(codec, self.config))
        ctx.options = options
        self.options = dict(ctx.options)  # what was asked of the encoder, for tests and logs
        ctx.open()
        return ctx

    @property
    def thread_count(self) -> int:
        """The threads the open encoder was given (0: its own choice, a thread per core)."""
        return self._ctx.thread_count if self._ctx is not None else 0

    @property
    def bitrate_kbps(self) -> int:
        return self.kbps

    def set_bitrate(self, kbps: int) -> float:
        """Move the encoder to ``kbps`` (adaptive bitrate); returns the milliseconds it took.

        PyAV 18's libx264 context ignores a new ``bit_rate`` once open (measured: 4000 kbps
        asked down to 500 kept coming out at ~4000), so the context is reopened at the new
        rate and VBV: the next frame is one IDR, bounded by the new VBV. The engine calls this
        at most once a second (``compat.engine.adaptive``), so there is no IDR storm.
        """
        if kbps == self.kbps:
            return 0.0
        start = time.perf_counter()
        self.kbps = kbps
        old, self._ctx = self._ctx, None
        _close(old)
        self._open_from(self._index)
        self._idr_pending = True
        return (time.perf_counter() - start) * 1000

    def request_idr(self) -> None:
        """The client asked for a keyframe (control 0x0302 or an RFI we answer with IDR)."""
        self._idr_pending = True

    def _hand_over(self, exc: Exception) -> None:
        """The open encoder failed mid-stream: the next one takes over with an IDR."""
        failed = self.codec_name
        log.warning("%s failed mid-stream (%s); handing over to the next encoder", failed, exc)
        self.failures.append((failed, str(exc)))
        old, self._ctx = self._ctx, None
        _close(old)
        self._open_from(self._index + 1)
        self._idr_pending = True

    def encode(self, bgra: np.ndarray) -> EncodedFrame | None:
        """Encode one captured frame (H x W x 4 uint8, BGRA). None if the encoder held it back.

        No encoder here has lookahead or B-frames, so every input frame comes straight out.
        """
        start = time.perf_counter()
        return self.encode_yuv(self.convert(bgra), start)

    def convert(self, bgra: np.ndarray) -> av.VideoFrame:
        """`encode`'s first half, the colour conversion (the engine times it apart)."""
        if bgra.shape[:2] != (self.height, self.width):
            raise ValueError(
                f"frame is {bgra.shape[1]}x{bgra.shape[0]}, encoder {self.width}x{self.height}"
            )
        return to_yuv420p(bgra)

    def encode_yuv(self, frame: av.VideoFrame, start: float | None = None) -> EncodedFrame | None:
        """Encode a frame already converted to yuv420p (`to_yuv420p`): `encode`'s second half,
        apart so `bench/stream_cost.py` can time the conversion and the encoder separately.
        `start` (perf_counter) is where `encode_ms` counts from; None: now."""
        if start is None:
            start = time.perf_counter()
        frame.pts = self._pts
        self._pts += 1
        try:
            packets = self._encode(frame)
        except EncoderFailed:
            raise
        except Exception as exc:  # any encoder error: the next one takes over
            self._hand_over(exc)
            packets = self._encode(frame)
        if not packets:
            return None
        raw = b"".join(bytes(p) for p in packets)
        if self.codec == "h264":
            data, idr = h264_for_moonlight(raw)
        elif self.codec == "hevc":
            data, idr = self._rewrite(raw)
        else:
            data, idr = raw, any(p.is_keyframe for p in packets)
        return EncodedFrame(data, idr, packets[0].pts or 0, (time.perf_counter() - start) * 1000)

    def _encode(self, frame: av.VideoFrame) -> list:
        if self._idr_pending:
            frame.pict_type = av.video.frame.PictureType.I
            self._idr_pending = False
        else:
            frame.pict_type = av.video.frame.PictureType.NONE
        return self._ctx.encode(frame)

    def close(self) -> None:
        _close(self._ctx)
        self._ctx = None


def _close(ctx) -> None:
    if ctx is None:
        return
    try:
        ctx.encode(None)
    except Exception:  # a dead encoder has nothing left to flush
        pass
