"""streaming/sessions/encoding.py: the one encoder choice both planes stream with.

The GPUs and the probe are given (a table of what opened, two GPUs); the config file, the GPU
preference file and the encoder child are real.
"""

from __future__ import annotations

import os

import pytest

from media import encoders, gpus
from media.encoder import EncoderFailed
from streaming.sessions import encoding
from tests.support.state_api import state  # noqa: F401 - fixture

GPUS = [
    {"id": "10de-2684-0", "name": "NVIDIA GeForce RTX 4090", "vendor": "nvidia", "vram_mb": 24564},
    {"id": "8086-56a0-0", "name": "Intel Arc A770", "vendor": "intel", "vram_mb": 16384},
]
TABLE = {
    "nvenc": {"h264": True, "hevc": True, "av1": True},
    "qsv": {"h264": True, "hevc": True, "av1": False},
    "software": {"h264": True, "hevc": True, "av1": True},
}


@pytest.fixture
def machine(state, monkeypatch):  # noqa: F811
    monkeypatch.setattr(gpus, "enumerate_gpus", lambda *a, **k: list(GPUS))
    monkeypatch.setattr(encoders, "available", lambda: TABLE)
    return state


def _write(**keys) -> None:
    from hostconfig import store

    store.write({k: str(v) for k, v in keys.items()})


def test_the_browser_gets_the_best_codec_it_decodes_among_those_offered():
    assert encoding.pick(("h264", "hevc", "av1"), ["h264", "hevc", "av1"]) == "av1"
    assert encoding.pick(("h264", "hevc", "av1"), ["h264", "hevc"]) == "hevc"
    assert encoding.pick(("h264", "hevc"), ["h264", "av1"]) == "h264"  # AV1 not offered
    assert encoding.pick(("h264",), ["hevc", "av1"]) == "h264"
    assert encoding.pick(("h264", "hevc", "av1"), ()) == "h264"


@pytest.mark.django_db
def test_the_gpu_preference_orders_the_encoders_and_points_nvenc(machine):
    plan = encoding.plan(["h264", "av1"])
    assert plan.encoders["h264"] == ["h264_nvenc", "h264_qsv", "libx264"]  # auto: most VRAM
    assert plan.config["gpu_index"] == 0
    gpus.set_preference({"mode": "manual", "gpu_id": "8086-56a0-0"}, GPUS)
    plan = encoding.plan(["h264", "av1"])
    assert plan.encoders["h264"] == ["h264_qsv", "h264_nvenc", "libx264"]
    assert plan.encoders["av1"] == ["av1_nvenc", "libsvtav1"]  # QSV has no AV1 here
    assert "gpu_index" not in plan.config  # NVENC is not the preferred GPU's encoder
    assert plan.first("h264") == "h264_qsv"


@pytest.mark.django_db
def test_the_encoder_key_pins_and_the_encoder_keys_ride_along(machine):
    _write(encoder="software", qp=30, sw_preset="veryfast")
    plan = encoding.plan(["h264", "hevc"])
    assert plan.encoders == {"h264": ["libx264"], "hevc": ["libx265"]}
    assert {k: plan.config[k] for k in ("qp", "sw_preset")} == {"qp": 30, "sw_preset": "veryfast"}
    # A pinned backend is tried first even for a codec the probe did not see it open for.
    _write(encoder="qsv")
    assert encoding.plan(["av1"]).encoders["av1"] == ["av1_qsv", "libsvtav1"]
    # And a pinned backend narrows the offer to the codecs it opened for.
    _write(encoder="qsv", hevc_mode=0, av1_mode=0)
    assert encoding.offered() == ("h264", "hevc")


@pytest.mark.django_db
@pytest.mark.parametrize(
    "pin,why",
    [
        ("amf", "amf: no GPU render node (/dev/dri/renderD*) on this host"),
        ("vaapi", "vaapi: this PyAV/FFmpeg build has no h264_vaapi/hevc_vaapi/av1_vaapi encoder"),
    ],
)
def test_a_pinned_encoder_that_cannot_open_here_refuses_rather_than_encode_in_software(
    machine, monkeypatch, pin, why
):
    """A value hand-edited into the file (the config APIs refuse it): no plan, the reason."""
    monkeypatch.setattr(encoders.glob, "glob", lambda pattern: [])  # no GPU device nodes
    _write(encoder=pin)
    with pytest.raises(encoding.Refused) as exc:
        encoding.plan(["h264"])
    assert exc.value.status == 503
    assert str(exc.value).startswith("The configured encoder cannot be used: " + why)
    for ok in ("auto", "software", "nvenc"):  # nvenc opened in the probe
        _write(encoder=ok)
        assert encoding.plan(["h264"]).encoders["h264"][-1] == "libx264"


@pytest.mark.django_db
def test_a_plan_that_cannot_be_made_is_software_on_the_defaults(machine, monkeypatch):
    def broken():
        raise OSError("probe died")

    monkeypatch.setattr(encoders, "available", broken)
    plan = encoding.plan(["hevc"])
    assert plan.encoders == {} and plan.config == {}
    assert plan.first("hevc") == "libx265"
    assert encoding.offered_or_h264() == ("h264",)


@pytest.mark.slow
def test_the_browser_planes_encoder_child_opens_the_plans_encoder_or_says_why_not():
    """The native encoder process streams with the plan it is given: HEVC on libx265 here, and
    a size no encoder takes is an EncoderFailed with the reason, not a silent H.264."""
    from native.media import EncoderProcess

    gone = {"backend": "xvfb", "x_display": f":{900 + os.getpid() % 90}", "region": None,
            "wayland_display": None, "output": None}  # fmt: skip
    enc = EncoderProcess(gone, 320, 240, 10, 500, candidates=["libx265"], config={"qp": 30})
    try:
        assert enc.wait_opened(30) == "libx265"
    finally:
        enc.close()
    enc = EncoderProcess(gone, 321, 240, 10, 500, candidates=["libx265"])
    try:
        with pytest.raises(EncoderFailed, match="even dimensions"):
            enc.wait_opened(30)
    finally:
        enc.close()


@pytest.mark.parametrize(
    ("sessions", "cores", "threads"),
    [(1, 2, 0), (2, 2, 1), (3, 2, 1), (2, 8, 4), (3, 8, 2), (8, 4, 1)],
)
def test_software_encoder_threads_share_the_cores_between_concurrent_sessions(
    sessions, cores, threads
):
    """libx264 on its own runs a slice thread per core in every session: two sessions on two
    cores ran four threads on two cores. 0 keeps the encoder's own choice."""
    assert encoding.software_threads(sessions, cores) == threads


def test_the_plan_gives_each_session_its_share_of_the_cores(machine, monkeypatch):
    monkeypatch.setattr(encoding.os, "cpu_count", lambda: 2)
    _write(max_sessions=2)
    assert encoding.plan(("h264",)).threads == 1
    _write(max_sessions=1)
    assert encoding.plan(("h264",)).threads == 0
