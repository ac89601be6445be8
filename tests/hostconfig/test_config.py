"""The host configuration through both APIs and a hand-edited file, in-process."""

from __future__ import annotations

import pytest

from hostconfig import store
from hostconfig.schema import KEYS, key

pytestmark = pytest.mark.django_db


def test_every_spec_table_key_has_a_rule():
    for name in (
        "busy_poll_us",
        "rate_cap_pct",
        "host_audio_agc_target_db",
        "host_opus_fec",
        "headless_refresh",
        "compositor_backend",
        "nvenc_tuning_preset",
        "input_seat",
        "port",
        "sunshine_name",
        "compat_enabled",
        "origin_web_ui_allowed",
        "csrf_allowed_origins",
        "api_tokens",
        "trusted_subnets",
        "webhook_secret",
    ):
        assert name in KEYS, name
    assert key("webhook_url_3").type == "url"
    assert key("client_profile_deck_hevc_mode").file_only
    assert key("nvenc_preset") is not None
    assert key("no_such_thing") is None


def test_admin_post_round_trips_and_keeps_hand_edits(admin, state):
    (state / "host.conf").write_text("# my notes\nbusy_poll_us = 10\nmy_own_key = kept\n")
    r = admin.post(
        "/api/config",
        {"rate_cap_pct": 70, "dscp_qos": "false", "host_audio_agc_target_db": -12.5},
        format="json",
    )
    assert r.status_code == 200, r.content
    assert r.json()["status"] is True
    text = (state / "host.conf").read_text()
    assert text.startswith("# my notes\nbusy_poll_us = 10\nmy_own_key = kept\n")
    assert "rate_cap_pct = 70" in text and "dscp_qos = false" in text
    body = admin.get("/api/config").json()
    assert body["status"] is True and body["platform"] == "linux" and body["version"]
    assert body["rate_cap_pct"] == 70 and body["dscp_qos"] is False
    assert body["busy_poll_us"] == 10
    assert body["host_audio_agc_target_db"] == -12.5
    assert body["defaults"]["rate_cap_pct"] == 80
    env = (state / "host.env").read_text()
    assert "HOST_RATE_CAP_PCT=70" in env and "HOST_DSCP_QOS=false" in env


@pytest.mark.parametrize(
    "body",
    [
        [1, 2],
        5,
        "text",
        {},
        {"rate_cap_pct": 96},
        {"rate_cap_pct": {"a": 1}},
        {"busy_poll_us": -1},
        {"compositor_backend": "weston"},
        {"no_such_key": 1},
        {"api_tokens": "[]"},
        {"compat_enabled": False},
        {"rate_cap_pct": "ten"},
        {"host_audio_agc_target_db": "nan"},
        {"trusted_subnets": ["10.0.0.0/8", "nope"]},
    ],
)
def test_admin_post_rejects_bad_input_and_writes_nothing(admin, state, body):
    (state / "host.conf").write_text("rate_cap_pct = 60\n")
    r = admin.post("/api/config", body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["status"] is False and r.json()["status_code"] == 400
    assert (state / "host.conf").read_text() == "rate_cap_pct = 60\n"


def test_admin_post_names_the_out_of_range_key(admin):
    r = admin.post("/api/config", {"dscp_qos": True, "headless_width": 9000}, format="json")
    assert r.status_code == 400 and "headless_width" in r.json()["error"]
    assert store.get("dscp_qos") is True  # default; nothing of the update was written
    assert "dscp_qos" not in store.read_raw()


def test_admin_get_never_reveals_token_hashes(admin, state):
    entry = "ci " + "ab" * 32 + " salt1 config:get"
    store.write({"api_tokens": KEYS["api_tokens"].render([entry]), "webhook_secret": "s3cret"})
    body = admin.get("/api/config")
    assert body.status_code == 200
    assert "ab" * 32 not in body.content.decode() and "s3cret" not in body.content.decode()
    assert body.json()["file_only"]["api_tokens"] == [{"name": "ci", "scopes": ["config:get"]}]
    assert "s3cret" not in (state / "host.env").read_text()


def test_v1_put_round_trip_and_defaults(v1, state):
    body = {
        "version": 1,
        "general": {"host_name": "  den-pc  "},
        "audio_video": {
            "max_fps": 120,
            "capture_method": "x11",
            "compositor": "KDE",
            "audio_gain": None,
        },
        "encoders": {"encoder": " SOFTWARE "},
        "network": {"fec_pct": 20, "compat": False},
        "clipboard": "off",
    }
    r = v1.put("/api/v1/host/config", body, format="json")
    assert r.status_code == 200, r.content
    state_ = r.json()
    assert state_["requires_restart"] is True and state_["configured"] is True
    assert state_["env_path"] == str(state / "host.env")
    s = state_["settings"]
    assert s["general"]["host_name"] == "den-pc"
    assert s["audio_video"]["max_fps"] == 120 and s["audio_video"]["compositor"] == "kwin"
    assert s["encoders"]["encoder"] == "software" and s["network"]["fec_pct"] == 20
    assert s["network"]["compat"] is True  # the broadcast switch is not written here
    assert s["clipboard"] == "off" and s["input"]["pen"] is True
    assert store.get("sunshine_name") == "den-pc"
    # The admin API sees the same store.
    assert store.get("max_fps") == 120
    # A second PUT omitting fields resets them.
    r = v1.put("/api/v1/host/config", {"version": 1}, format="json")
    assert r.json()["settings"]["audio_video"]["max_fps"] is None
    assert "max_fps" not in store.read_raw()


@pytest.mark.parametrize(
    "body,field",
    [
        ({"version": 2}, "version"),
        ({"audio_video": {"max_fps": 241}}, "audio_video.max_fps"),
        ({"audio_video": {"max_fps": "60"}}, "audio_video.max_fps"),
        ({"audio_video": {"ten_bit": "yes"}}, "audio_video.ten_bit"),
        ({"audio_video": {"audio_gain": 4.5}}, "audio_video.audio_gain"),
        ({"audio_video": {"capture_method": "vnc"}}, "audio_video.capture_method"),
        ({"audio_video": {"vdisplay_hz_mult": None}}, "audio_video.vdisplay_hz_mult"),
        ({"general": {"host_name": "x" * 129}}, "general.host_name"),
        ({"general": {"host_name": "a\nb"}}, "general.host_name"),
        ({"general": {"nested": {"x": 1}}}, "general.nested"),
        ({"general": []}, "general"),
        ({"clipboard": "always"}, "clipboard"),
        ({"extra": 1}, "extra"),
        ({"network": {"fec_pct": True}}, "network.fec_pct"),
    ],
)
def test_v1_put_rejects_with_field_errors_and_writes_nothing(v1, state, body, field):
    (state / "host.conf").write_text("max_fps = 60\n")
    r = v1.put("/api/v1/host/config", body, format="json")
    assert r.status_code == 400, r.content
    assert r.json()["error"] == "invalid host configuration"
    assert field in [f["field"] for f in r.json()["fields"]]
    assert (state / "host.conf").read_text() == "max_fps = 60\n"


def test_compat_switch_is_the_only_writer(v1, state):
    r = v1.put("/api/v1/host/compat", {"enabled": False}, format="json")
    assert r.status_code == 200 and r.json()["settings"]["network"]["compat"] is False
    v1.put("/api/v1/host/config", {"network": {"mdns": False, "compat": True}}, format="json")
    assert store.get("compat_enabled") is False
    r = v1.put("/api/v1/host/compat", {"enabled": True}, format="json")
    assert r.json()["settings"]["network"]["compat"] is True
    assert r.json()["settings"]["network"]["mdns"] is True  # on forces mDNS on
    for bad in ({}, {"enabled": "yes"}, {"enabled": True, "x": 1}, [True]):
        assert v1.put("/api/v1/host/compat", bad, format="json").status_code == 400


def test_hand_edited_file_is_read_by_both_apis(v1, admin, state):
    (state / "host.conf").write_text(
        "# operator\nmax_fps=90\nencoder = software\nrate_cap_pct = 999\ncsrf_allowed_origins = "
        "[\n  https://a.example,\n  https://b.example\n]\n"
    )
    assert v1.get("/api/v1/host/config").json()["settings"]["audio_video"]["max_fps"] == 90
    body = admin.get("/api/config").json()
    assert body["encoder"] == "software"
    assert body["rate_cap_pct"] == 80  # out of range in the file: the default applies
    assert body["csrf_allowed_origins"] == ["https://a.example", "https://b.example"]


def test_read_only_state_dir_gives_503_and_keeps_the_file(v1, admin, state, read_only_dir):
    (state / "host.conf").write_text("max_fps = 60\n")
    read_only_dir(state)
    r = v1.put("/api/v1/host/config", {"audio_video": {"max_fps": 30}}, format="json")
    assert r.status_code == 503 and "not writable" in r.json()["error"], r.json()
    assert "cannot write .host.conf.lock" in r.json()["error"] and r["Retry-After"] == "30"
    r = admin.post("/api/config", {"rate_cap_pct": 70}, format="json")
    assert r.status_code == 503
    assert r.json()["status"] is False and r.json()["error"]
    assert v1.put("/api/v1/host/compat", {"enabled": False}, format="json").status_code == 503
    assert (state / "host.conf").read_text() == "max_fps = 60\n"


def test_malformed_json_is_400(v1, admin):
    r = v1.put("/api/v1/host/config", "{not json", content_type="application/json")
    assert r.status_code == 400 and r.json()["error"]
    r = admin.post("/api/config", "{not json", content_type="application/json")
    assert r.status_code == 400 and r.json()["status"] is False


def test_a_bad_list_item_in_the_file_drops_only_that_item(state):
    (state / "host.conf").write_text("csrf_allowed_origins = https://a.example, http://plain, x\n")
    assert store.get("csrf_allowed_origins") == ["https://a.example"]


def test_an_absent_body_is_400_not_a_reset(v1, admin, state):
    (state / "host.conf").write_text("max_fps = 60\n")
    for method, url in (
        ("put", "/api/v1/host/config"),
        ("put", "/api/v1/host/compat"),
        ("put", "/api/v1/display/settings"),
        ("put", "/api/v1/gpus/preference"),
        ("post", "/api/v1/display/presets"),
    ):
        r = getattr(v1, method)(url)
        assert r.status_code == 400, (url, r.status_code)
    assert admin.post("/api/config").status_code == 400
    assert (state / "host.conf").read_text() == "max_fps = 60\n"
