"""Per-client profiles and per-app encoder presets: one session's parameters, nothing global."""

from __future__ import annotations

import pytest

from games.profiles import effective_stream_params, encoder_preset
from hostconfig import store
from library.catalog import App

REQ = {"bitrate_kbps": 50_000, "codec": "hevc", "width": 1920}


@pytest.fixture
def conf(state):
    def write(**values):
        store.write({k: str(v) for k, v in values.items()})

    return write


def app(preset):
    return App(id="1", index=0, name="G", encoder_preset=preset)


def test_no_profile_keeps_the_request_and_host_defaults(conf):
    conf(nvenc_tuning_preset=1)
    out = effective_stream_params("Phone", None, REQ)
    assert out["bitrate_kbps"] == 50_000 and out["codec"] == "hevc" and out["width"] == 1920
    assert out["encoder_preset"] == 1 and out["profile"] is None and out["applied"] == []
    assert out["latency_mode"] == "safe"


def test_profile_applies_to_its_client_only(conf):
    conf(client_profile_Steam_Deck_max_bitrate=20000, client_profile_Steam_Deck_hevc_mode=1,
         client_profile_Steam_Deck_latency_mode="aggressive", hevc_mode=3)  # fmt: skip
    deck = effective_stream_params("Steam Deck", None, REQ)
    assert deck["bitrate_kbps"] == 20_000
    assert deck["hevc_mode"] == 1 and deck["codec"] == "h264"  # HEVC is off for this device
    # latency_mode is refused (not applied yet): a hand-edited value reads as the default.
    assert deck["latency_mode"] == "safe" and deck["profile"] == "Steam_Deck"
    assert set(deck["applied"]) == {"max_bitrate", "hevc_mode", "codec"}
    # The next session (another client) starts from the host defaults again.
    tv = effective_stream_params("TV", None, REQ)
    assert tv["bitrate_kbps"] == 50_000 and tv["codec"] == "hevc" and tv["hevc_mode"] == 3
    assert REQ == {"bitrate_kbps": 50_000, "codec": "hevc", "width": 1920}  # input untouched
    assert store.get("hevc_mode") == 3  # nothing global changed


def test_profile_ceiling_does_not_raise_a_lower_request(conf):
    conf(client_profile_tv_max_bitrate=80000)
    assert effective_stream_params("tv", None, REQ)["bitrate_kbps"] == 50_000


def test_av1_off_falls_back_through_hevc(conf):
    conf(client_profile_tv_av1_mode=1, client_profile_tv_hevc_mode=1)
    assert effective_stream_params("tv", None, {"codec": "av1"})["codec"] == "h264"
    conf(client_profile_tv_hevc_mode=2)
    assert effective_stream_params("tv", None, {"codec": "av1"})["codec"] == "hevc"


def test_bad_profile_value_is_ignored(conf):
    conf(client_profile_tv_max_bitrate="lots", client_profile_tv_latency_mode="turbo")
    out = effective_stream_params("tv", None, REQ)
    assert out["bitrate_kbps"] == 50_000 and out["latency_mode"] == "safe"


@pytest.mark.parametrize(
    "preset, expected",
    [(0, 0), (2, 2), (-1, 1), (None, 1), (3, 1), (-2, 1), (True, 1), ("2", 1)],
)
def test_app_encoder_preset(conf, preset, expected):
    conf(nvenc_tuning_preset=1)
    assert effective_stream_params("tv", app(preset), REQ)["encoder_preset"] == expected
    assert effective_stream_params("tv", {"encoder-preset": preset}, REQ)["encoder_preset"] == (
        expected
    )


def test_preset_after_a_session_is_the_host_default_again(conf):
    conf(nvenc_tuning_preset=0)
    assert effective_stream_params("tv", app(2), REQ)["encoder_preset"] == 2
    assert effective_stream_params("tv", app(None), REQ)["encoder_preset"] == 0
    assert encoder_preset(None, 0) == (0, "host")
