"""The H.264 encoder: BGRA in, decodable Annex-B out, IDR on request."""

from __future__ import annotations

import av
import numpy as np
import pytest

from media.encoder import VideoEncoder
from media.h264 import split_nals


def _pattern(w: int, h: int, shift: int = 0) -> np.ndarray:
    img = np.zeros((h, w, 4), np.uint8)
    img[..., 3] = 255
    img[:, :, 0] = (np.arange(w)[None, :] * 255 // w).astype(np.uint8)  # blue ramp
    img[20 + shift : 80 + shift, 40:140, :3] = (30, 60, 220)  # red-ish box (BGR)
    return img


def _decode(frames) -> list[np.ndarray]:
    dec = av.CodecContext.create("h264", "r")
    out = []
    for f in frames:
        out += [p.to_ndarray(format="bgr24") for p in dec.decode(av.Packet(f.data))]
    return out


def test_round_trip_pixels_within_tolerance():
    enc = VideoEncoder(320, 240, fps=60, bitrate_kbps=8000)
    frames = [enc.encode(_pattern(320, 240, shift=i)) for i in range(4)]
    pictures = _decode(frames)
    assert len(pictures) == 4
    for i, pic in enumerate(pictures):
        want = _pattern(320, 240, shift=i)[..., :3].astype(int)
        err = np.abs(pic.astype(int) - want)
        assert np.median(err) <= 3
        assert np.abs(pic[50 + i, 90].astype(int) - (30, 60, 220)).max() < 16


def test_first_frame_and_requested_frames_are_idr_with_parameter_sets():
    enc = VideoEncoder(160, 128, fps=30)
    img = _pattern(160, 128)
    kinds = []
    for n in range(6):
        if n == 4:
            enc.request_idr()
        f = enc.encode(img)
        kinds.append(f.keyframe)
        nal_types = [nal[0] & 0x1F for nal in split_nals(f.data)]
        if f.keyframe:
            assert nal_types[:3] == [7, 8, 5]  # SPS, PPS, IDR slice: what the client needs
        assert 6 not in nal_types and 9 not in nal_types  # no SEI/AUD reaches the client
    assert kinds == [True, False, False, False, True, False]


def test_bad_geometry_is_refused():
    with pytest.raises(ValueError):
        VideoEncoder(321, 240)
    enc = VideoEncoder(160, 128)
    with pytest.raises(ValueError):
        enc.encode(np.zeros((100, 160, 4), np.uint8))


def test_an_encoder_that_will_not_open_falls_back_to_libx264():
    from media.encoder import nvenc_available

    if nvenc_available():
        pytest.skip("this machine really has NVENC")
    enc = VideoEncoder(160, 128, codec="h264_nvenc")
    assert enc.codec_name == "libx264"
    assert enc.encode(_pattern(160, 128)).keyframe


def test_auto_falls_back_to_libx264_without_a_gpu():
    enc = VideoEncoder(160, 128, codec="auto")
    assert enc.codec_name in ("libx264", "h264_nvenc")
    assert enc.encode(_pattern(160, 128)).keyframe


def _x264_settings(enc: VideoEncoder) -> dict[str, str]:
    """The settings libx264 really used, from the SEI it writes into its first frame (the
    engine strips SEI before the client; this reads the encoder's own output)."""
    frame = av.VideoFrame.from_ndarray(_pattern(320, 240), format="bgra").reformat(format="yuv420p")
    raw = b"".join(bytes(p) for p in enc._ctx.encode(frame))
    text = raw[raw.index(b"x264 - core") :].split(b"\x00", 1)[0].decode("latin-1")
    options = text.split("options: ", 1)[1].split()
    return dict(o.split("=", 1) for o in options if "=" in o)


@pytest.mark.parametrize(
    ("tuning", "subme", "aq"),
    [(-1, "0", "0"), (0, "0", "0"), (1, "1", "1:1.00"), (2, "2", "1:1.00"), (9, "0", "0")],
)
def test_tuning_reaches_libx264_and_keeps_zero_latency(tuning, subme, aq):
    enc = VideoEncoder(320, 240, fps=60, bitrate_kbps=4000, tuning=tuning)
    used = _x264_settings(enc)
    assert used["subme"] == subme  # ultrafast 0, superfast 1, veryfast 2
    assert used["aq"] == aq  # spatial adaptive quantization off / on
    # Every tuning stays a streaming encoder: no B-frames, no lookahead, no frame threads.
    assert used["bframes"] == "0" and used["rc_lookahead"] == "0"
    assert used["sliced_threads"] == "1" or used["threads"] == "1"
    assert enc.tuning == (tuning if tuning in (0, 1, 2) else -1)


def test_the_converted_frame_is_cvtcolors_buffer_and_encodes_as_a_copy_did():
    """to_yuv420p hands cvtColor's buffer to PyAV without a copy: the same planes, and
    libx264 writes the same bytes as from a copying `from_ndarray`."""
    import cv2

    from media.encoder import to_yuv420p

    rng = np.random.default_rng(23)
    frames = [rng.integers(0, 256, (144, 256, 4), np.uint8) for _ in range(4)]
    want = cv2.cvtColor(frames[0], cv2.COLOR_BGRA2YUV_I420)
    assert np.array_equal(to_yuv420p(frames[0]).to_ndarray(), want)
    new, old = VideoEncoder(256, 144, threads=1), VideoEncoder(256, 144, threads=1)
    try:
        for f in frames:
            copied = av.VideoFrame.from_ndarray(cv2.cvtColor(f, cv2.COLOR_BGRA2YUV_I420),
                                                format="yuv420p")  # fmt: skip
            assert new.encode(f).data == old.encode_yuv(copied).data
    finally:
        new.close()
        old.close()
