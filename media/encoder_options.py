"""The encoder keys of the host config, mapped to each encoder's own FFmpeg options.

Names and values follow the reference (Sunshine's `sw_preset`, `nvenc_preset`, `amd_usage`,
...). A key reaches only the encoders that have the option (`REACH`); the console shows that
list, and a key set for an encoder not in use is kept and has no effect until that encoder
opens. Every option emitted here is checked against FFmpeg's own option table of its encoder
(tests/media/test_encoder_options.py), and opened for real where the encoder exists here.

`qp`: when the key is set in the config file, the stream is constant-QP at that value (the
bitrate the client asked for no longer bounds it); unset, the encoders run at the client's rate.
Vendor keys not in the schema's `ENCODER_KEYS` (every `vaapi_`/`vt_`/`vk_` key among them) stay
refused: VAAPI, VideoToolbox and Vulkan encoders are not in PyAV's wheels.
"""

from __future__ import annotations

from hostconfig.schema import ENCODER_KEYS, X264_PRESETS, X264_TUNES

SOFTWARE = ("libx264", "libx265", "libsvtav1")
NVENC = ("h264_nvenc", "hevc_nvenc", "av1_nvenc")
QSV = ("h264_qsv", "hevc_qsv", "av1_qsv")
AMF = ("h264_amf", "hevc_amf", "av1_amf")

# SVT-AV1 presets run 0 (slowest) .. 13; the x264 names map onto the real-time end.
SVT_PRESET = dict(zip(X264_PRESETS, ("12", "11", "10", "9", "8", "7", "6", "5", "4", "3"),
                      strict=True))  # fmt: skip

# key -> {encoder: its FFmpeg option}; the allowed values are the schema's (ENCODER_KEYS).
VENDOR_OPTIONS: dict[str, dict[str, str]] = {
    "nvenc_preset": dict.fromkeys(NVENC, "preset"),
    "nvenc_twopass": dict.fromkeys(NVENC, "multipass"),
    "nvenc_spatial_aq": dict.fromkeys(NVENC, "spatial-aq"),
    "nvenc_h264_cavlc": {"h264_nvenc": "coder"},
    "qsv_preset": dict.fromkeys(QSV, "preset"),
    "qsv_coder": {"h264_qsv": "cavlc"},
    "amd_usage": dict.fromkeys(AMF, "usage"),
    "amd_rc": dict.fromkeys(AMF, "rc"),
    "amd_quality": dict.fromkeys(AMF, "quality"),
    "amd_preanalysis": dict.fromkeys(AMF, "preanalysis"),
    "amd_vbaq": {"h264_amf": "vbaq", "hevc_amf": "vbaq"},
    "amd_enforce_hrd": dict.fromkeys(AMF, "enforce_hrd"),
}
assert set(VENDOR_OPTIONS) == set(ENCODER_KEYS)

# key -> the encoders it reaches (for the console and /config's markers).
REACH: dict[str, tuple[str, ...]] = {
    "qp": SOFTWARE + NVENC + AMF,
    "sw_preset": SOFTWARE,
    "sw_tune": ("libx264",),
    **{name: tuple(enc) for name, enc in VENDOR_OPTIONS.items()},
}


def _bool(value) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("1", "true", "yes", "on", "enabled")
    return bool(value)


def _valid(name: str, value) -> bool:
    allowed = ENCODER_KEYS[name]
    if allowed is None:
        return isinstance(value, bool) or str(value).strip().lower() in (
            "0", "1", "true", "false", "yes", "no", "on", "off"
        )  # fmt: skip
    return str(value) in allowed


def qp_of(config: dict) -> int | None:
    """The constant QP when `qp` is set (0..51), else None."""
    qp = config.get("qp")
    if isinstance(qp, int) and not isinstance(qp, bool) and 0 <= qp <= 51:
        return qp
    return None


def options_for(encoder: str, config: dict) -> dict[str, str]:
    """The FFmpeg options the config keys add for `encoder` (over its low-latency defaults).

    `config` holds the keys set in the config file (absent = not set). Values that break a
    key's rule are skipped (the config API refuses them; a hand edit must not stop a stream).
    """
    out: dict[str, str] = {}
    preset = config.get("sw_preset")
    if encoder in SOFTWARE and preset in X264_PRESETS:
        out["preset"] = SVT_PRESET[preset] if encoder == "libsvtav1" else preset
    tune = config.get("sw_tune")
    if encoder == "libx264" and tune in X264_TUNES:
        # zerolatency always stays: a psy tune rides along with it (x264 takes a list).
        out["tune"] = "zerolatency" if tune == "zerolatency" else f"{tune},zerolatency"
    for name, reached in VENDOR_OPTIONS.items():
        option = reached.get(encoder)
        value = config.get(name)
        if option is None or value is None or not _valid(name, value):
            continue
        if name == "nvenc_preset":
            out[option] = f"p{value}"
        elif name == "nvenc_twopass":
            out[option] = {"disabled": "disabled", "quarter_res": "qres", "full_res": "fullres"}[
                value
            ]
        elif name == "nvenc_h264_cavlc":
            out[option] = "cavlc" if _bool(value) else "cabac"
        elif name == "qsv_coder":
            if value != "auto":
                out[option] = "1" if value == "cavlc" else "0"
        elif ENCODER_KEYS[name] is None:
            out[option] = "1" if _bool(value) else "0"
        else:
            out[option] = str(value)
    gpu = config.get("gpu_index")
    if encoder in NVENC and isinstance(gpu, int) and not isinstance(gpu, bool) and gpu >= 0:
        out["gpu"] = str(gpu)  # the GPU preference's pick (media.gpus.nvenc_gpu_index)
    qp = qp_of(config)
    if qp is not None:
        if encoder in NVENC:
            out.update(rc="constqp", qp=str(qp))
        elif encoder in AMF:
            out.update(rc="cqp", qp_i=str(qp), qp_p=str(qp))
        elif encoder in SOFTWARE:
            out["qp"] = str(qp)
    return out


def reached_by(name: str) -> tuple[str, ...]:
    """The encoders a key acts on (empty: none here)."""
    return REACH.get(name, ())
