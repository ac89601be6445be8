"""The encoder keys reach each encoder's FFmpeg options (media.encoder_options).

Every option the host would set (low-latency defaults, tunings, each config key) is checked
against FFmpeg's own option table of that encoder (`supported_options`: names, named values,
ranges), for all nine GPU encoders PyAV carries and the three software ones; the software
encoders are also opened for real with them. A real libx264 encode shows `qp` acting.
"""

from __future__ import annotations

import av
import numpy as np
import pytest

from media import encoder_options as eo
from media.encoder import TUNINGS, VideoEncoder, base_options

ENCODERS = eo.SOFTWARE + eo.NVENC + eo.QSV + eo.AMF
NUMERIC = {"INT", "INT64", "UINT64", "DOUBLE", "FLOAT", "BOOL", "UINT"}

# Every mapped key set at once (a value each encoder must accept).
FULL = {
    "qp": 30, "sw_preset": "veryfast", "sw_tune": "film", "nvenc_preset": "4",
    "nvenc_twopass": "quarter_res", "nvenc_spatial_aq": "true", "nvenc_h264_cavlc": "true",
    "qsv_preset": "fast", "qsv_coder": "cavlc", "amd_usage": "ultralowlatency",
    "amd_rc": "cbr", "amd_quality": "speed", "amd_preanalysis": "false", "amd_vbaq": "true",
    "amd_enforce_hrd": "true", "gpu_index": 1,
}  # fmt: skip


def _problem(encoder: str, name: str, value: str) -> str | None:
    """What FFmpeg's option table says about `name=value` for `encoder` (None: accepted)."""
    ctx = av.CodecContext.create(encoder, "w")
    # The encoder's own (private) option wins over a generic one of the same name (`profile`).
    table = {o.name: o for o in (*ctx.supported_options.generic, *ctx.supported_options.private)}
    option = table.get(name)
    if option is None:
        return f"{encoder} has no option {name!r}"
    choices = {c.name for c in option.choices}
    if value in choices:
        return None
    if option.type.name in NUMERIC:
        try:
            number = float(value)
        except ValueError:
            return f"{encoder} {name}={value!r}: not a number nor one of {sorted(choices)}"
        if not option.min <= number <= option.max:
            return f"{encoder} {name}={value}: outside {option.min}..{option.max}"
        return None
    if choices:
        return f"{encoder} {name}={value!r}: not one of {sorted(choices)}"
    return None  # a string option (x264-params, svtav1-params): the real open checks those


def _all_options(encoder: str, config: dict) -> list[dict[str, str]]:
    qp = eo.qp_of(config)
    sets = [base_options(encoder, 8000, 60, 1, qp), eo.options_for(encoder, config)]
    sets += [t.get(encoder, {}) for t in TUNINGS.values()]
    return sets


@pytest.mark.parametrize("encoder", ENCODERS)
def test_every_emitted_option_is_one_ffmpeg_knows_for_that_encoder(encoder):
    for config in ({}, FULL, {"qp": 0}, {"sw_tune": "zerolatency", "nvenc_twopass": "full_res"}):
        for options in _all_options(encoder, config):
            for name, value in options.items():
                assert _problem(encoder, name, value) is None


def test_the_checker_itself_refuses_wrong_names_and_values():
    assert _problem("h264_nvenc", "preset", "p9")
    assert _problem("h264_nvenc", "no-such-option", "1")
    assert _problem("hevc_amf", "usage", "fastest")
    assert _problem("libx264", "qp", "x")


@pytest.mark.parametrize("encoder", eo.SOFTWARE)
def test_software_encoders_open_with_every_key_set(encoder):
    for config in (FULL, {k: v for k, v in FULL.items() if k != "qp"}):
        enc = VideoEncoder(320, 240, 30, 2000, candidates=[encoder], config=config)
        try:
            assert enc.codec_name == encoder and not enc.failures
            frame = enc.encode(np.zeros((240, 320, 4), np.uint8))
            assert frame is not None and frame.keyframe
        finally:
            enc.close()


def test_keys_map_to_the_encoders_they_reach():
    assert eo.options_for("libx264", FULL)["preset"] == "veryfast"
    assert eo.options_for("libx264", FULL)["tune"] == "film,zerolatency"  # never without it
    assert eo.options_for("libsvtav1", FULL)["preset"] == "10"
    assert "tune" not in eo.options_for("libx265", FULL)  # sw_tune reaches libx264 only
    nv = eo.options_for("hevc_nvenc", FULL)
    assert nv["preset"] == "p4" and nv["multipass"] == "qres" and nv["spatial-aq"] == "1"
    assert nv["rc"] == "constqp" and nv["qp"] == "30" and nv["gpu"] == "1"
    assert "coder" not in nv and eo.options_for("h264_nvenc", FULL)["coder"] == "cavlc"
    amf = eo.options_for("av1_amf", FULL)
    assert amf["usage"] == "ultralowlatency" and amf["rc"] == "cqp" and amf["qp_i"] == "30"
    assert "vbaq" not in amf  # av1_amf has no vbaq
    assert eo.options_for("h264_qsv", FULL) == {"preset": "fast", "cavlc": "1"}
    assert eo.options_for("libx264", {"sw_preset": "turbo", "nvenc_preset": "9"}) == {}
    assert set(eo.reached_by("sw_tune")) == {"libx264"} and eo.reached_by("vaapi_x") == ()


def _encoded_bytes(qp: int) -> int:
    rng = np.random.default_rng(7)
    enc = VideoEncoder(640, 360, 30, 2000, candidates=["libx264"], config={"qp": qp})
    try:
        total = 0
        for i in range(12):
            img = rng.integers(0, 255, (360, 640, 4), np.uint8)
            img[:, : 40 + i * 10] = 0
            total += len(enc.encode(img).data)
        return total
    finally:
        enc.close()


def test_qp_is_a_real_constant_qp_on_libx264():
    fine, coarse = _encoded_bytes(10), _encoded_bytes(40)
    assert fine > 3 * coarse, (fine, coarse)


@pytest.mark.django_db
def test_config_keys_reach_the_encoder_that_opens(state):
    """From the config file to the open encoder: the session's plan (`encoding.plan`, both planes)
    reads the keys set, and the encoder it opens carries their FFmpeg options; a key for an
    encoder not in use is kept and changes nothing here."""
    from hostconfig import store
    from streaming.sessions import encoding

    config = encoding.plan(["h264"]).config
    assert "qp" not in config  # unset: the client's bitrate rules
    written = {k: str(v).lower() if isinstance(v, bool) else str(v)
               for k, v in FULL.items() if k != "gpu_index"}  # fmt: skip
    store.write(written)
    plan = encoding.plan(["h264", "hevc", "av1"])
    config = plan.config
    assert [plan.encoders[c][-1] for c in ("h264", "hevc", "av1")] == [
        "libx264",
        "libx265",
        "libsvtav1",
    ]
    assert {k: config[k] for k in ("qp", "sw_preset", "sw_tune", "amd_usage")} == {
        "qp": 30, "sw_preset": "veryfast", "sw_tune": "film", "amd_usage": "ultralowlatency"
    }  # fmt: skip
    for name, want in (("libx264", {"preset": "veryfast", "tune": "film,zerolatency", "qp": "30"}),
                       ("libx265", {"preset": "veryfast", "qp": "30"}),
                       ("libsvtav1", {"preset": "10", "qp": "30"})):  # fmt: skip
        enc = VideoEncoder(320, 240, 30, 2000, candidates=[name], config=config)
        try:
            assert enc.codec_name == name
            assert {k: enc.options[k] for k in want} == want
            assert "usage" not in enc.options  # amd_usage: kept for AMF, no effect on software
        finally:
            enc.close()
    store.write({"qp": None, "sw_preset": None, "sw_tune": None})
    enc = VideoEncoder(
        320, 240, 30, 2000, candidates=["libx264"], config=encoding.plan(["h264"]).config
    )
    try:
        assert enc.options["preset"] == "ultrafast" and "qp" not in enc.options
    finally:
        enc.close()
