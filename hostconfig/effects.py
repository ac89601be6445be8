"""Which test proves that each acting configuration key changes what the host does.

Every key of the schema (pattern keys by their pattern) either has an entry here or is
refused for any value but its default (`Key.refused_all`, with the reason). The guard test
(tests/hostconfig/test_key_guard.py) fails when a key has neither, both, or names a test that
does not exist, so no key can be added that is stored and ignored. The console's config page
shows the marker beside each key.
"""

from __future__ import annotations

import re

from hostconfig.schema import AUDIO_KEYS, ENCODER_KEYS, KEYS, OPUS_KEYS, key

_E = "tests/hostconfig/test_key_effects.py::"
_AUDIO = _E + "test_audio_keys_change_the_session_chain_and_opus_settings"
_LAUNCH = _E + "test_launch_takes_the_stream_keys_from_the_config"
_PROFILES = "tests/games/test_profiles.py::"
_HEADLESS = "tests/displays/test_headless_machine.py::"
_PAIRING = "tests/pairing/test_e2e.py::"
_CAPTURE = "tests/displays/test_capture_select.py::"
_ADAPTIVE = (
    "tests/compat/test_adaptive.py::test_adaptive_keys_reach_the_launch_and_bound_the_controller"
)
_ENCRYPTION = (
    "tests/compat/test_encryption.py::test_encryption_modes_come_from_the_config_by_network_class"
)
_ENCODER_KEYS = "tests/media/test_encoder_options.py::test_config_keys_reach_the_encoder_that_opens"
_KEYS_GAIN = "tests/media/test_keybindings_and_gain.py::"
_FILES = "tests/hostconfig/test_file_keys.py::"
_CLIP = "tests/native/test_clipboard_e2e.py::"

EFFECTS: dict[str, str] = {
    # network and start-up
    "port": _E + "test_port_and_bind_address_come_from_host_conf_and_the_environment_wins",
    "bind_address": _E + "test_port_and_bind_address_come_from_host_conf_and_the_environment_wins",
    "min_log_level": _E + "test_min_log_level_holds_back_lower_levels_from_the_next_start",
    "compat_enabled": _PAIRING + "test_mdns_announces_while_the_compat_switch_is_on",
    "mdns": _PAIRING + "test_mdns_announces_while_the_compat_switch_is_on",
    "max_sessions": (
        "tests/streaming/test_admission.py::test_max_sessions_is_read_at_each_admission"
    ),
    "busy_poll_us": _LAUNCH,
    "rate_cap_pct": _LAUNCH,
    "dscp_qos": _LAUNCH,
    "fec_percentage": _LAUNCH,
    "ping_timeout": _LAUNCH,
    "encoder": _LAUNCH,
    "lan_encryption_mode": _ENCRYPTION,
    "wan_encryption_mode": _ENCRYPTION,
    "network_policy": _ENCRYPTION,
    "adaptive_bitrate_enabled": _ADAPTIVE,
    "adaptive_bitrate_min": _ADAPTIVE,
    "adaptive_bitrate_max": _ADAPTIVE,
    "enet_4mib_buffer": _E + "test_enet_4mib_buffer_grows_both_socket_buffers_or_leaves_them",
    "max_fps": _E + "test_max_fps_caps_the_frame_rate_a_client_asks_for",
    "external_ip": _E + "test_external_ip_is_in_the_server_facts",
    # access and security
    "trusted_subnet_auto_pairing": _PAIRING + "test_trusted_subnet_auto_pairing_needs_no_pin_entry",
    "trusted_subnets": _PAIRING + "test_trusted_subnet_auto_pairing_needs_no_pin_entry",
    "webhook_secret": "tests/hooks/test_e2e_hooks.py::test_stream_webhooks_signed_and_retried",
    "webhook_url_N": "tests/hooks/test_e2e_hooks.py::test_stream_webhooks_signed_and_retried",
    "origin_web_ui_allowed": _E + "test_origin_keys_decide_who_may_reach_the_console",
    "csrf_allowed_origins": _E + "test_origin_keys_decide_who_may_reach_the_console",
    "api_tokens": "tests/console/test_tokens_api.py::test_scope_denial",
    "update_manifest_url": (
        "tests/console/test_updater_platform.py::test_manifest_url_env_fallback_goes_through_the_schema"
    ),
    "update_auto": (
        "tests/console/test_update_auto.py::test_the_job_applies_only_when_idle_long_enough_and_"
        "never_twice_a_version"
    ),
    "cert": _E + "test_cert_and_pkey_are_served_instead_of_the_generated_pair",
    "pkey": _E + "test_cert_and_pkey_are_served_instead_of_the_generated_pair",
    "sunshine_name": _E + "test_sunshine_name_is_the_host_name_clients_see",
    "locale": _E + "test_locale_is_what_config_locale_answers",
    # video, capture, displays
    "nvenc_tuning_preset": _E + "test_nvenc_tuning_preset_is_the_host_default_preset",
    "qp": _ENCODER_KEYS,
    "sw_preset": _ENCODER_KEYS,
    "sw_tune": _ENCODER_KEYS,
    **dict.fromkeys(ENCODER_KEYS, _ENCODER_KEYS),
    "adapter_name": _E + "test_adapter_name_pins_the_selected_gpu",
    "compositor": _E + "test_compositor_is_the_default_of_the_compositor_list",
    "capture_method": (
        "tests/displays/test_capture_select.py::test_a_dead_display_falls_back_under_auto_and_"
        "fails_when_asked_for"
    ),
    "capture": _CAPTURE + "test_the_two_names_of_the_setting_must_agree",
    "output_name": (
        "tests/displays/test_capture_select.py::test_output_name_names_the_display_and_the_monitor"
    ),
    "headless_mode": (
        _HEADLESS + "test_the_native_plane_gets_an_output_of_the_headless_compositor_too"
    ),
    "compositor_backend": (
        _HEADLESS + "test_preflight_says_which_backend_and_why_the_headless_compositor_cannot_run"
    ),
    "headless_width": _HEADLESS + "test_headless_defaults_fill_the_mode_a_request_leaves_out",
    "headless_height": _HEADLESS + "test_headless_defaults_fill_the_mode_a_request_leaves_out",
    "headless_refresh": _HEADLESS + "test_headless_defaults_fill_the_mode_a_request_leaves_out",
    "max_bitrate": _PROFILES + "test_profile_applies_to_its_client_only",
    "hevc_mode": _PROFILES + "test_av1_off_falls_back_through_hevc",
    "av1_mode": _PROFILES + "test_av1_off_falls_back_through_hevc",
    "client_profile_<name>_max_bitrate": _PROFILES + "test_profile_applies_to_its_client_only",
    "client_profile_<name>_hevc_mode": _PROFILES + "test_profile_applies_to_its_client_only",
    "client_profile_<name>_av1_mode": _PROFILES + "test_av1_off_falls_back_through_hevc",
    # audio
    "stream_audio": "tests/media/test_capture.py::test_stream_audio_false_means_no_audio_at_all",
    "audio_sink": _E + "test_sink_keys_name_the_session_sink",
    "virtual_sink": _E + "test_sink_keys_name_the_session_sink",
    # input and apps
    "keyboard": _E + "test_input_switches_drop_the_kinds_turned_off",
    "mouse": _E + "test_input_switches_drop_the_kinds_turned_off",
    "controller": _E + "test_input_switches_drop_the_kinds_turned_off",
    "global_prep_cmd": _E + "test_global_prep_cmd_runs_before_every_app_unless_excluded",
    "keybindings": _KEYS_GAIN + "test_keybindings_press_the_mapped_key_on_a_real_display",
    "audio_gain": _KEYS_GAIN + "test_audio_gain_scales_the_sound_of_both_planes",
    "clipboard": _CLIP + "test_text_both_ways_bounded_and_nothing_when_off",
    # files the host uses
    "file_apps": _FILES + "test_file_apps_is_the_catalog_at_once_and_host_apps_file_wins",
    "log_path": _FILES + "test_log_path_is_where_every_host_process_logs_and_the_console_reads",
}
for _name in (*AUDIO_KEYS, *OPUS_KEYS):
    EFFECTS[_name] = _AUDIO

# One example name per pattern key, and the label it is registered under.
PATTERN_SAMPLES: dict[str, str] = {
    "webhook_url_0": "webhook_url_N",
    "client_profile_deck_max_bitrate": "client_profile_<name>_max_bitrate",
    "client_profile_deck_hevc_mode": "client_profile_<name>_hevc_mode",
    "client_profile_deck_av1_mode": "client_profile_<name>_av1_mode",
    "client_profile_deck_latency_mode": "client_profile_<name>_latency_mode",
    "vaapi_quality": "<vendor>_<option> (nvenc_, vaapi_, qsv_, amd_, vt_, vk_)",
    # The vendor keys mapped to encoder options act under their own names.
    **{name: name for name in ENCODER_KEYS},
}


def label(name: str) -> str:
    """The registry name of a key: itself, or its pattern's label."""
    if re.fullmatch(r"webhook_url_\d+", name):
        return "webhook_url_N"
    m = re.fullmatch(r"client_profile_.+_(max_bitrate|hevc_mode|av1_mode|latency_mode)", name)
    if m:
        return f"client_profile_<name>_{m.group(1)}"
    vendor = key(name) is not None and re.fullmatch(r"(nvenc|vaapi|qsv|amd|vt|vk)_.+", name)
    if vendor and name not in KEYS and name not in ENCODER_KEYS:
        return PATTERN_SAMPLES["vaapi_quality"]
    return name


def marker(name: str) -> tuple[str, str]:
    """("effect", test node id) or ("refused", reason) or ("unclassified", "")."""
    spec = key(name)
    if spec is not None and spec.refused_all:
        return "refused", spec.refused_all
    test = EFFECTS.get(label(name))
    if test:
        return "effect", test
    return "unclassified", ""


def refused_keys(names) -> dict[str, str]:
    """Key -> why, for each of `names` that accepts only its default (the APIs' `refused`)."""
    out = {}
    for name in names:
        spec = key(name)
        if spec is not None and spec.refused_all:
            out[name] = spec.refused_all
    return out


def refused_values(names) -> dict[str, dict[str, str]]:
    """Key -> {value as written: why}, for each of `names` that acts but refuses some values
    (the APIs' `refused_values`; the console disables those options)."""
    out = {}
    for name in names:
        spec = key(name)
        if spec is not None and spec.refused and not spec.refused_all:
            out[name] = {spec.render(v): why for v, why in spec.refused.items()}
    return out
