"""HEVC and AV1 from the stream encoder, the encoder list per codec, and the hand-over.

Real encoders (libx264, libx265, SVT-AV1) and real decoders (FFmpeg's h264/hevc, dav1d); the
GPU encoders are decided from probe tables here (they open only on a GPU with the engine).
"""

from __future__ import annotations

import av
import numpy as np
import pytest

from media import encoders
from media.encoder import EncoderFailed, VideoEncoder
from media.h264 import HevcRewriter, hevc_nal_type, split_nals

RED = np.zeros((240, 320, 4), np.uint8)
RED[..., 2] = 200
DECODER = {"h264": "h264", "hevc": "hevc", "av1": "libdav1d"}


def _run(enc: VideoEncoder, n: int, idr_at=()) -> list:
    out = []
    for i in range(n):
        if i in idr_at:
            enc.request_idr()
        out.append(enc.encode(RED))
    return out


@pytest.mark.parametrize(
    "codec,name", [("h264", "libx264"), ("hevc", "libx265"), ("av1", "libsvtav1")]
)
def test_each_codec_encodes_and_decodes_to_the_same_colour(codec, name):
    enc = VideoEncoder(320, 240, 30, 2000, codec=codec)
    try:
        assert (enc.codec, enc.codec_name) == (codec, name)
        frames = _run(enc, 6, idr_at=(4,))
    finally:
        enc.close()
    assert [f.keyframe for f in frames] == [True, False, False, False, True, False]
    dec = av.CodecContext.create(DECODER[codec], "r")
    pics = [p for f in frames for p in dec.decode(av.Packet(f.data))] + list(dec.decode(None))
    assert len(pics) == 6
    b, g, r = pics[-1].to_ndarray(format="bgr24")[120, 160]
    assert r > 180 and g < 25 and b < 25


def test_hevc_has_vps_sps_pps_before_every_idr_and_no_sei_or_aud():
    enc = VideoEncoder(320, 240, 30, 2000, codec="hevc")
    try:
        frames = _run(enc, 8, idr_at=(3, 6))
    finally:
        enc.close()
    for f in frames:
        assert f.data.startswith(b"\x00\x00\x00\x01")
        kinds = [hevc_nal_type(n) for n in split_nals(f.data)]
        assert not {35, 39, 40} & set(kinds)
        if f.keyframe:
            assert kinds[:3] == [32, 33, 34] and kinds[3] in (19, 20)
        else:
            assert not {32, 33, 34} & set(kinds)


def test_hevc_rewriter_puts_back_parameter_sets_an_encoder_sent_once():
    sc = b"\x00\x00\x00\x01"
    vps, sps, pps = b"\x40\x01\xaa", b"\x42\x01\xbb", b"\x44\x01\xcc"
    idr, p = b"\x26\x01\xdd", b"\x02\x01\xee"
    sei = b"\x4e\x01\x05"
    rw = HevcRewriter()
    first, key = rw(sc + vps + sc + sps + sc + pps + sc + sei + sc + idr)
    assert key and first == sc + vps + sc + sps + sc + pps + sc + idr
    assert rw(sc + p) == (sc + p, False)
    again, key = rw(sc + idr)  # a later IDR without its parameter sets
    assert key and again == sc + vps + sc + sps + sc + pps + sc + idr


class _Broken:
    def encode(self, frame):
        raise av.error.ExternalError(-1, "device lost")


def test_an_encoder_failing_mid_stream_hands_over_with_one_idr():
    enc = VideoEncoder(320, 240, 30, 2000, candidates=["libx264", "libx264"])
    try:
        frames = _run(enc, 3)
        enc._ctx = _Broken()  # the open encoder dies (a GPU reset, a driver fault)
        after = _run(enc, 4)
        assert [f.keyframe for f in frames + after] == [
            True,
            False,
            False,
            True,
            False,
            False,
            False,
        ]
        assert enc.codec_name == "libx264" and enc._index == 1
        assert [name for name, _ in enc.failures] == ["libx264"]
        enc._ctx = _Broken()  # the last one fails too: a clear error, not a silent stall
        with pytest.raises(EncoderFailed):
            enc.encode(RED)
    finally:
        enc.close()


def test_an_encoder_that_does_not_open_is_skipped_and_software_is_last():
    enc = VideoEncoder(320, 240, 30, 2000, candidates=["hevc_nvenc"])  # no NVENC engine here
    try:
        assert enc.candidates == ["hevc_nvenc", "libx265"]
        assert enc.codec_name == "libx265" and enc.failures[0][0] == "hevc_nvenc"
    finally:
        enc.close()
    with pytest.raises(ValueError):
        VideoEncoder(320, 240, candidates=["libx264", "libx265"])  # one codec per list
    with pytest.raises(ValueError):
        VideoEncoder(321, 240, codec="hevc")  # odd sizes: refused before any encoder


def test_a_mode_no_encoder_opens_is_a_clear_error():
    with pytest.raises(EncoderFailed):
        VideoEncoder(16, 16, 30, 500, codec="av1")  # SVT-AV1 needs at least 64x64


TABLE = {
    "nvenc": {"h264": True, "hevc": True, "av1": False},
    "amf": {"h264": True, "hevc": False, "av1": False},
    "qsv": {"h264": True, "hevc": True, "av1": True},
    "vaapi": {"h264": False, "hevc": False, "av1": False},
    "software": {"h264": True, "hevc": True, "av1": True},
}


def test_choose_orders_pin_then_preference_then_probe_with_software_last():
    assert encoders.choose("h264", "auto", None, TABLE) == [
        "h264_nvenc",
        "h264_amf",
        "h264_qsv",
        "libx264",
    ]
    # The GPU preference's vendor goes first.
    assert encoders.choose("h264", "auto", "intel", TABLE)[0] == "h264_qsv"
    assert encoders.choose("h264", "auto", "amd", TABLE)[:2] == ["h264_amf", "h264_nvenc"]
    # Only what the probe opened.
    assert encoders.choose("av1", "auto", "nvidia", TABLE) == ["av1_qsv", "libsvtav1"]
    # The `encoder` key pins one backend (still falling back to software) or software alone.
    assert encoders.choose("hevc", "nvenc", "intel", TABLE) == ["hevc_nvenc", "libx265"]
    assert encoders.choose("hevc", "amf", None, TABLE) == ["libx265"]  # AMF has no HEVC here
    assert encoders.choose("hevc", "software", "nvidia", TABLE) == ["libx265"]
    assert encoders.choose("av1", "auto", None, {}) == ["libsvtav1"]


def test_host_listing_is_truthful_and_names_vaapi_as_unavailable():
    listing = encoders.listing(TABLE)
    assert listing["encoders"]["hevc"] == ["hevc_nvenc", "hevc_qsv", "libx265"]
    assert "vaapi" in listing["encoders_unavailable"]
    assert encoders.backend_of("av1_amf") == "amf" and encoders.backend_of("libx265") == "software"


NV0 = {"id": "10de-2c05-0", "name": "NVIDIA A", "vendor": "nvidia", "vram_mb": 16000}
NV1 = {"id": "10de-2c05-1", "name": "NVIDIA B", "vendor": "nvidia", "vram_mb": 8000}
AMD = {"id": "1002-73bf-0", "name": "AMD 1002:73bf", "vendor": "amd", "vram_mb": 32000}


@pytest.mark.django_db
def test_the_gpu_preference_reaches_the_encoder_list_and_nvencs_device(state, monkeypatch):
    from media import encoder_options, gpus

    monkeypatch.delenv(gpus.ENV_PIN, raising=False)
    fleet = [AMD, NV0, NV1]
    # Auto: the most VRAM (the AMD card) leads, so AMF goes first and NVENC gets no index.
    assert gpus.preferred_vendor(fleet) == "amd" and gpus.nvenc_gpu_index(fleet) is None
    # AMF has no HEVC here: the other backends follow in their usual order.
    assert encoders.choose("hevc", "auto", gpus.preferred_vendor(fleet), TABLE)[0] == "hevc_nvenc"
    assert encoders.choose("h264", "auto", gpus.preferred_vendor(fleet), TABLE)[0] == "h264_amf"
    gpus.set_preference({"mode": "manual", "gpu_id": NV1["id"]}, fleet)
    assert gpus.preferred_vendor(fleet) == "nvidia"
    assert encoders.choose("h264", "auto", "nvidia", TABLE)[0] == "h264_nvenc"
    index = gpus.nvenc_gpu_index(fleet)
    assert index == 1  # the second NVIDIA GPU
    assert encoder_options.options_for("h264_nvenc", {"gpu_index": index})["gpu"] == "1"
    assert "gpu" not in encoder_options.options_for("h264_amf", {"gpu_index": index})
    # Where the session records it runs (GET /gpus `active`): the preferred NVIDIA GPU.
    monkeypatch.setattr(encoders, "available", lambda: TABLE)
    assert gpus.encoder_for("hevc_nvenc", fleet) == {"backend": "nvenc", "gpu_id": NV1["id"]}
    assert gpus.encoder_for("h264_amf", fleet) == {"backend": "amf", "gpu_id": AMD["id"]}
    assert gpus.encoder_for("av1_nvenc", fleet) == {
        "backend": "software",
        "gpu_id": "",
    }  # no AV1 NVENC
    assert gpus.encoder_for("libsvtav1", fleet) == {"backend": "software", "gpu_id": ""}


@pytest.mark.parametrize("codec", ["h264", "hevc", "av1"])
def test_nvenc_opens_on_the_gpu_asked_for_where_there_is_one(codec):
    """On a machine with an NVENC engine: the encoder list leads with NVENC and the session's
    encoder really opens it on GPU 0 (`gpu` option). Skipped elsewhere, with the reason."""
    table = encoders.available()
    if not table.get("nvenc", {}).get(codec):
        pytest.skip(f"{codec}_nvenc does not open here (no NVIDIA GPU with an NVENC engine)")
    names = encoders.choose(codec, "auto", "nvidia", table)
    assert names[0] == f"{codec}_nvenc"
    enc = VideoEncoder(1280, 720, 60, 8000, candidates=names, config={"gpu_index": 0})
    try:
        assert enc.codec_name == f"{codec}_nvenc" and enc.options["gpu"] == "0"
        frame = np.zeros((720, 1280, 4), np.uint8)
        assert enc.encode(frame).keyframe
    finally:
        enc.close()


def test_set_bitrate_reopens_the_encoder_at_the_new_rate_with_one_idr():
    enc = VideoEncoder(320, 240, 30, 2000, codec="hevc")
    try:
        _run(enc, 2)
        assert "vbv-maxrate=2000" in enc.options["x265-params"]
        enc.set_bitrate(800)
        assert "vbv-maxrate=800" in enc.options["x265-params"] and enc.codec_name == "libx265"
        assert [f.keyframe for f in _run(enc, 3)] == [True, False, False]
        enc.set_bitrate(800)  # no change: no reopen, no IDR
        assert not enc.encode(RED).keyframe
    finally:
        enc.close()
