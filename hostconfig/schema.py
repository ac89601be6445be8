"""Every host configuration key: type, default, range or allowed values, restart and file-only.

One table for the whole host; both APIs, the config file and the env file go through it. Keys
with a number or a name inside them (`webhook_url_N`, `client_profile_<name>_<field>`, the
per-vendor encoder options) are matched by pattern in `key()`.
"""

from __future__ import annotations

import re
import shutil
from functools import partial

from hostconfig.keytype import FALSE_WORDS, TRUE_WORDS, Key

__all__ = [
    "APP_EXEC_FIELDS",
    "FALSE_WORDS",
    "KEYS",
    "TRUE_WORDS",
    "Key",
    "app_exec_fields",
    "exec_keys",
    "is_known",
    "key",
]


def _keys(*keys: Key) -> dict[str, Key]:
    return {k.name: k for k in keys}


# compositor_backend values this build cannot run here (a write is refused with the reason);
# sway only where it is installed (checked when the host starts).
COMPOSITOR_BACKEND_REFUSED = {
    "labwc": "this build drives only sway (or GNOME's mutter) as its headless compositor",
    "krfb": "krfb is a VNC server, not a headless compositor this build can drive; use sway",
    "gamescope": "this build drives only sway (or GNOME's mutter) as its headless compositor",
}
if shutil.which("sway") is None:
    COMPOSITOR_BACKEND_REFUSED["sway"] = "sway is not installed (Debian package sway)"

# Why a key is stored but only its default accepted (`Key.refused_all`); the guard test
# (tests/hostconfig/test_key_guard.py) fails for a key with neither this nor an effect test
# registered in hostconfig/effects.py.
CODECS = "planned: issue 18 (codecs, encoders, encryption, adaptive bitrate)"
SDR_ONLY = "every capture source is 8-bit SDR: no 10-bit (HEVC Main10, AV1 10-bit) is encoded"
YUV420_ONLY = "every encoder here runs 4:2:0 (yuv420p); 4:4:4 is never offered"
REAL_MACHINE = "planned: issue 15 (real-machine capture and displays)"
NO_GAMESCOPE = "this build drives no gamescope (sway is its only headless compositor)"
LATENCY_MODES = (
    "every session already encodes with zero-latency tuning (no lookahead, no B-frames); "
    "the speed/quality trade-off is nvenc_tuning_preset or the app's encoder-preset"
)
IN_DATABASE = "the host keeps this in its database (state dir), not in a file of your choosing"
SERVES_FILE = "chooses a file the host reads as its TLS identity"

B = partial(Key, type="bool")
I = partial(Key, type="int")  # noqa: E741 - a table reads better with one-letter makers
F = partial(Key, type="float")
E = partial(Key, type="enum")
S = partial(Key, type="str")

_NETWORK = _keys(
    I(
        name="port",
        default=47989,
        min=1029,
        max=65374,
        group="network",
        help="base port, from the next start; HOST_PORT wins (each concurrent compat session "
        "streams on the stream ports + 20 per slot, up to base + 161)",
    ),
    I(
        name="max_sessions",
        default=2,
        min=1,
        max=8,
        group="network",
        restart=False,
        help="sessions streaming at once, both planes together; read at each launch or offer",
    ),
    B(
        name="compat_enabled",
        default=True,
        group="network",
        restart=False,
        file_only=True,
        help="compatibility-plane broadcast switch (mDNS); written only by PUT /api/v1/host/compat",
    ),
    I(name="busy_poll_us", default=50, min=0, max=10000, group="network"),
    I(name="rate_cap_pct", default=80, min=50, max=95, group="network"),
    B(
        name="enet_4mib_buffer",
        default=True,
        group="network",
        help="4 MiB send and receive buffers on the video and audio sockets",
    ),
    B(name="dscp_qos", default=True, group="network"),
    B(name="trusted_subnet_auto_pairing", default=False, group="access", restart=False),
    Key("trusted_subnets", "list", [], group="access", restart=False, item="cidr", nullable=True),
    S(name="webhook_secret", default="", group="access", restart=False, secret=True),
    I(name="nvenc_tuning_preset", default=-1, min=-1, max=2, group="video"),
    S(
        name="input_seat",
        default=None,
        nullable=True,
        group="input",
        max_len=64,
        refused_all="input goes to the session's own display (XTest or the compositor's "
        "virtual devices); there is no seat to choose",
    ),
    B(
        name="headless_virtual_display",
        default=None,
        nullable=True,
        group="headless",
        refused_all=REAL_MACHINE + "; use headless_mode",
    ),
    B(name="headless_mode", default=False, group="headless"),
    E(
        name="compositor_backend",
        default="auto",
        choices=("auto", "sway", "mutter", "labwc", "krfb", "gamescope"),
        refused=COMPOSITOR_BACKEND_REFUSED,
        group="headless",
        help="what each headless display is: mutter = a virtual monitor of the GNOME desktop "
        "the host runs in, sway = an output of the host's own sway (auto = mutter on a GNOME "
        "session, else sway when installed); see docs/host-state.md",
    ),
    B(
        name="linux_use_cage_compositor",
        default=False,
        refused_all="this build has no cage compositor; use headless_mode with sway",
        group="headless",
    ),
    I(name="headless_width", default=0, min=0, max=7680, group="headless"),
    I(name="headless_height", default=0, min=0, max=4320, group="headless"),
    I(name="headless_refresh", default=0, min=0, max=240, group="headless"),
)

_AUDIO = _keys(
    B(name="host_audio_agc", default=False),
    F(name="host_audio_agc_target_db", default=-20.0, min=-40.0, max=-6.0),
    F(name="host_audio_agc_max_gain_db", default=12.0, min=0.0, max=30.0),
    F(name="host_audio_agc_min_gain_db", default=-12.0, min=-30.0, max=0.0),
    I(name="host_audio_agc_attack_ms", default=10, min=1, max=500),
    I(name="host_audio_agc_hold_ms", default=200, min=0, max=5000),
    I(name="host_audio_agc_release_ms", default=100, min=1, max=5000),
    B(name="host_audio_vad", default=False),
    F(name="host_audio_vad_threshold_db", default=-45.0, min=-80.0, max=-10.0),
    F(name="host_audio_vad_hysteresis_db", default=6.0, min=0.0, max=30.0),
    I(name="host_audio_vad_min_speech_ms", default=100, min=10, max=2000),
    I(name="host_audio_vad_min_silence_ms", default=200, min=10, max=5000),
    B(name="host_audio_ducking", default=False),
    F(name="host_audio_ducker_attenuation_db", default=-12.0, min=-40.0, max=0.0),
    I(name="host_audio_ducker_attack_ms", default=50, min=1, max=2000),
    I(name="host_audio_ducker_release_ms", default=500, min=1, max=5000),
    B(name="host_audio_noise_gate", default=False),
    F(name="host_audio_noise_gate_db", default=-55.0, min=-90.0, max=-10.0),
    I(name="host_opus_application", default=0, min=0, max=2),
    I(name="host_opus_vbr", default=0, min=0, max=2),
    I(name="host_opus_complexity", default=10, min=0, max=10),
    B(name="host_opus_fec", default=True),
    I(name="host_opus_expected_loss_pct", default=0, min=0, max=100),
    B(name="host_opus_bandwidth_extension", default=True),
)
for _k in list(_AUDIO):
    _AUDIO[_k] = Key(**{**_AUDIO[_k].__dict__, "group": "audio"})
# What the session's audio chain (media.audio.chain) and its Opus encoder (media.audio.opus)
# read, in this order; the config effects (hostconfig.effects) prove them with one test.
AUDIO_KEYS = tuple(k for k in _AUDIO if k.startswith("host_audio_"))
OPUS_KEYS = tuple(k for k in _AUDIO if k.startswith("host_opus_"))

# Capture backends this build can run (displays/capture.py), and the ones it knows but cannot:
# a write of those is refused with the reason (both APIs and the console form).
CAPTURE_METHODS = ("auto", "x11", "wlr", "gnome", "kwin", "portal", "xvfb")
CAPTURE_UNSUPPORTED = {
    "kms": "this build has no KMS/DRM framebuffer capture; use x11, wlr, gnome, kwin, portal or "
    "xvfb",
    "nvfbc": "this build has no NVIDIA FBC capture; use x11, wlr, gnome, kwin, portal or xvfb",
}
_CAPTURE_RULE = {
    "type": "enum",
    "nullable": True,
    "choices": CAPTURE_METHODS,
    "refused": CAPTURE_UNSUPPORTED,
    "fold_case": True,
    "group": "video",
}
HEADLESS_COMPOSITORS = ("off", "auto", "labwc", "krfb", "gamescope", "xvfb")
COMPOSITORS = ("kwin", "mutter", "wlroots", "hyprland", "gamescope")
COMPOSITOR_ALIASES = {
    "kde": "kwin",
    "plasma": "kwin",
    "gnome": "mutter",
    "wlr": "wlroots",
    "sway": "wlroots",
    "river": "wlroots",
    "hypr": "hyprland",
}
ENCODERS = ("auto", "nvenc", "amf", "qsv", "vaapi", "software")
X264_PRESETS = ("ultrafast", "superfast", "veryfast", "faster", "fast", "medium", "slow",
                "slower", "veryslow", "placebo")  # fmt: skip
X264_TUNES = ("film", "animation", "grain", "stillimage", "fastdecode", "zerolatency")
# The vendor encoder keys this host maps to FFmpeg options (media.encoder_options): name ->
# allowed values, None for a boolean. Other `<vendor>_<option>` names are refused.
ENCODER_KEYS: dict[str, tuple[str, ...] | None] = {
    "nvenc_preset": tuple("1234567"),
    "nvenc_twopass": ("disabled", "quarter_res", "full_res"),
    "nvenc_spatial_aq": None,
    "nvenc_h264_cavlc": None,
    "qsv_preset": ("veryfast", "faster", "fast", "medium", "slow", "slower", "veryslow"),
    "qsv_coder": ("auto", "cabac", "cavlc"),
    "amd_usage": (
        "transcoding",
        "webcam",
        "lowlatency_high_quality",
        "lowlatency",
        "ultralowlatency",
    ),
    "amd_rc": ("cqp", "cbr", "vbr_latency", "vbr_peak"),
    "amd_quality": ("speed", "balanced", "quality"),
    "amd_preanalysis": None,
    "amd_vbaq": None,
    "amd_enforce_hrd": None,
}

# The operator knobs of the v1 file form (GET/PUT /api/v1/host/config); `v1form` maps them.
_HOST = _keys(
    S(
        name="sunshine_name",
        default="",
        max_len=128,
        restart=False,
        help="host name shown to clients",
    ),
    B(name="perf", default=False, refused_all="this host has no performance mode to switch"),
    S(
        name="gamepad",
        default=None,
        nullable=True,
        group="input",
        refused_all="one pad type is emulated (an Xbox 360-style uinput pad)",
    ),
    B(
        name="input_pen",
        default=True,
        group="input",
        refused_all="pen and touch events are not injected on this host",
    ),
    B(name="hide_host_cursor", default=True, group="input", refused_all=REAL_MACHINE),
    B(name="gamescope_grab_cursor", default=False, group="input", refused_all=NO_GAMESCOPE),
    E(
        name="video_source",
        default=None,
        nullable=True,
        choices=("virtual", "portal"),
        fold_case=True,
        group="video",
        refused_all=REAL_MACHINE + "; the source follows capture_method",
    ),
    Key(
        "capture_method",
        **_CAPTURE_RULE,
        env="HOST_CAPTURE_METHOD",
        help="capture backend (auto, x11, wlr, gnome, kwin, portal, xvfb); the same setting as "
        "`capture`",
    ),
    Key(
        "capture",
        **_CAPTURE_RULE,
        help="capture backend (auto, x11, wlr, gnome, kwin, portal, xvfb); the same setting as "
        "`capture_method`",
    ),
    E(
        name="compositor",
        default=None,
        nullable=True,
        choices=COMPOSITORS,
        aliases=COMPOSITOR_ALIASES,
        fold_case=True,
        group="video",
    ),
    E(
        name="headless_compositor",
        default=None,
        nullable=True,
        choices=HEADLESS_COMPOSITORS,
        group="headless",
        refused_all=REAL_MACHINE + "; the headless compositor is compositor_backend",
    ),
    I(
        name="max_fps",
        default=None,
        nullable=True,
        min=15,
        max=240,
        group="video",
        help="cap on the frame rate a client may ask for at launch",
    ),
    B(name="ten_bit", default=True, group="video", refused_all=SDR_ONLY),
    B(name="four_four_four", default=True, group="video", refused_all=YUV420_ONLY),
    B(name="gamescope_hdr", default=True, group="video", refused_all=NO_GAMESCOPE),
    B(name="gamescope_splash", default=True, group="video", refused_all=NO_GAMESCOPE),
    I(
        name="pipewire_latency_ms",
        default=None,
        nullable=True,
        min=1,
        max=40,
        group="audio",
        refused_all="audio is captured from PulseAudio (pipewire-pulse), not a PipeWire node",
    ),
    I(
        name="capture_max_age_ms",
        default=None,
        nullable=True,
        min=1,
        max=500,
        group="video",
        refused_all=REAL_MACHINE,
    ),
    B(
        name="audio_fec",
        default=True,
        group="audio",
        refused_all="the Opus FEC switch is host_opus_fec",
    ),
    F(
        name="audio_gain",
        default=None,
        nullable=True,
        min=0.0,
        max=4.0,
        group="audio",
        restart=False,
        help="fixed gain on the session's sound, after the audio processing (both planes); "
        "from the next session",
    ),
    E(
        name="audio_capture",
        default=None,
        nullable=True,
        choices=("stream-sink", "monitor"),
        group="audio",
        refused_all="each session captures its own stream sink (virtual_sink)",
    ),
    I(name="vdisplay_hz_mult", default=1, min=1, max=4, group="video", refused_all=REAL_MACHINE),
    I(
        name="gamescope_sdr_nits",
        default=None,
        nullable=True,
        min=1,
        max=10000,
        group="video",
        refused_all=NO_GAMESCOPE,
    ),
    B(name="chacha20", default=True, group="network", refused_all=CODECS),
    B(name="mdns", default=True, group="network"),
    I(name="fec_percentage", default=None, nullable=True, min=0, max=90, group="network"),
    E(name="encoder", default="auto", choices=ENCODERS, fold_case=True, group="video"),
    S(name="adapter_name", default=None, nullable=True, group="video", help="render adapter pin"),
    B(name="zerocopy", default=None, nullable=True, group="video", refused_all=CODECS),
    E(
        name="clipboard",
        default="off",
        choices=("off", "text-only", "on"),
        group="input",
        restart=False,
        refused={"on": "only text is shared (text-only); images and files are not"},
        help="text-only: text both ways between the native player and an X11 session display "
        "(64 KiB); the compat plane has none (Moonlight sends no clipboard)",
    ),
    E(
        name="performance_profile",
        default="balanced",
        choices=("balanced", "low_latency"),
        refused_all="this host has no performance profiles to switch",
    ),
    E(
        name="latency_profile",
        default="balanced",
        choices=("balanced", "low_latency"),
        refused_all=LATENCY_MODES,
    ),
    E(
        name="network_policy",
        default="auto",
        choices=("auto", "lan", "wan"),
        group="network",
    ),
)

_SECURITY = _keys(
    E(
        name="origin_web_ui_allowed",
        default="lan",
        choices=("pc", "lan", "wan"),
        group="security",
        restart=False,
        help="where the web UI and admin API may be reached from",
    ),
    Key(
        "csrf_allowed_origins",
        "list",
        [],
        group="security",
        restart=False,
        item="origin",
        help="extra https origins allowed to make browser writes",
    ),
    Key(
        "api_tokens",
        "json",
        [],
        group="access",
        restart=False,
        file_only=True,
        secret=True,
        help="scoped API tokens, entries `name hash salt scopes`",
    ),
    S(
        name="pkey",
        default=None,
        nullable=True,
        group="security",
        item="abspath",
        exec_power=SERVES_FILE,
        help="PEM RSA key served instead of the generated one (set with cert)",
    ),
    S(
        name="cert",
        default=None,
        nullable=True,
        group="security",
        item="abspath",
        exec_power=SERVES_FILE,
        help="PEM certificate served instead of the generated one (set with pkey)",
    ),
    # Host extension (not in the admin spec's key list): where the updater fetches the signed
    # release manifest. File-only, so no API token can point the host's fetches elsewhere.
    Key(
        "update_manifest_url",
        "url",
        None,
        nullable=True,
        group="general",
        restart=False,
        file_only=True,
        https_only=True,
        env="HOST_UPDATE_MANIFEST_URL",
        max_len=2048,
        help="signed release manifest the updater checks (https; http only to loopback)",
    ),
    # Host extension: apply an announced release by itself once the host has been idle this
    # many minutes (console/update_auto.py; docs/updates.md, "Automatic apply").
    I(
        name="update_auto",
        default=0,
        min=5,
        max=1440,
        off=0,
        group="general",
        restart=False,
        help="minutes without any session after which an announced release is applied by "
        "itself (0: off, apply by hand); never while a session is live",
    ),
)

# Inherited option names with a known rule; the rest of the inherited names are free strings.
_INHERITED = _keys(
    I(name="max_bitrate", default=0, min=0, max=1_000_000, group="video"),
    I(
        name="qp",
        default=28,
        min=0,
        max=51,
        group="video",
        help="constant QP for every encoder that has one, only when set (media.encoder_options)",
    ),
    I(name="hevc_mode", default=0, min=0, max=3, group="video"),
    I(name="av1_mode", default=0, min=0, max=3, group="video"),
    B(name="adaptive_bitrate_enabled", default=False, group="video"),
    I(
        name="adaptive_bitrate_min",
        default=0,
        min=0,
        max=1_000_000,
        group="video",
    ),
    I(
        name="adaptive_bitrate_max",
        default=0,
        min=0,
        max=1_000_000,
        group="video",
    ),
    B(name="stream_audio", default=True, group="audio"),
    B(
        name="upnp",
        default=False,
        group="network",
        refused_all="no UPnP port mapping in this build; forward the ports on the gateway",
    ),
    E(
        name="address_family",
        default="ipv4",
        choices=("ipv4", "both"),
        group="network",
        refused_all="IPv4 only (the listeners and the ENet control stream bind IPv4)",
    ),
    I(
        name="lan_encryption_mode",
        default=0,
        min=0,
        max=2,
        group="network",
    ),
    I(
        name="wan_encryption_mode",
        default=1,
        min=0,
        max=2,
        group="network",
    ),
    I(name="ping_timeout", default=10000, min=100, max=600_000, group="network"),
    I(
        name="packetsize",
        default=1024,
        min=256,
        max=9000,
        group="network",
        refused_all="the client sets the video packet size (RTSP packetSize)",
    ),
    E(
        name="min_log_level",
        default="info",
        choices=("verbose", "debug", "info", "warning", "error", "fatal", "none"),
        fold_case=True,
        help="lowest level logged, from the next start; HOST_LOG_LEVEL wins",
    ),
    S(name="locale", default="en", max_len=16, restart=False),
)
_FREE_STRINGS = ("output_name", "audio_sink", "virtual_sink", "external_ip")
_INHERITED.update({n: Key(n, "str", None, nullable=True) for n in _FREE_STRINGS})
_INHERITED.update(
    _keys(
        E(name="sw_preset", default=None, nullable=True, choices=X264_PRESETS, group="video",
          help="software encoder preset (libx264, libx265; SVT-AV1 by speed)"),
        E(name="sw_tune", default=None, nullable=True, choices=X264_TUNES, group="video",
          help="libx264 tune (zerolatency is always kept)"),
    )
)  # fmt: skip
_REFUSED_STRINGS = {
    "file_state": IN_DATABASE + " (paired clients)",
    "credentials_file": IN_DATABASE + " (console credentials)",
}
_INHERITED.update(
    {n: Key(n, "str", None, nullable=True, refused_all=why) for n, why in _REFUSED_STRINGS.items()}
)
_INHERITED.update(
    _keys(
        S(
            name="bind_address",
            default=None,
            nullable=True,
            group="network",
            item="ip",
            help="address the listeners bind, from the next start; HOST_BIND wins",
        ),
        S(
            name="file_apps",
            default=None,
            nullable=True,
            group="general",
            restart=False,
            item="abspath",
            exec_power="chooses the app catalog, whose entries run commands",
            help="the app catalog (apps.json), applied at once; HOST_APPS_FILE wins",
        ),
        S(
            name="log_path",
            default=None,
            nullable=True,
            group="general",
            item="abspath",
            exec_power="chooses a file the host appends to",
            help="the host log file (default logs/host.log in the state dir), from the next start",
        ),
        Key(
            "keybindings",
            "list",
            [],
            group="input",
            item="keycode",
            nullable=True,
            restart=False,
            help="from,to pairs of key codes (0x01 to 0xFE): the client's `from` key presses "
            "`to`; from the next session",
        ),
        B(name="keyboard", default=True, group="input", help="keyboard (and text) input"),
        B(name="mouse", default=True, group="input", help="mouse input"),
        B(name="controller", default=True, group="input", help="gamepad input"),
        Key(
            "global_prep_cmd",
            "json",
            [],
            group="general",
            item="prep",
            exec_power="runs commands around every launch",
            help='[{"do": ..., "undo": ...}] run around every launch (unless the app sets '
            "exclude-global-prep-cmd)",
        ),
    )
)

KEYS: dict[str, Key] = {**_NETWORK, **_AUDIO, **_HOST, **_SECURITY, **_INHERITED}

# Keys with a number or a name inside.
_WEBHOOK_URL = re.compile(r"^webhook_url_(0|[1-9][0-9]{0,2})$")
_CLIENT_PROFILE = re.compile(r"^client_profile_([A-Za-z0-9][A-Za-z0-9_.-]{0,63})_(%s)$")
_PROFILE_FIELDS = {
    "max_bitrate": Key("", "int", None, 0, 1_000_000, nullable=True),
    "hevc_mode": Key("", "int", None, 0, 3, nullable=True),
    "av1_mode": Key("", "int", None, 0, 3, nullable=True),
    "latency_mode": Key(
        "",
        "enum",
        None,
        choices=("safe", "aggressive"),
        nullable=True,
        refused_all=LATENCY_MODES,
    ),
}
_CLIENT_PROFILE = re.compile(_CLIENT_PROFILE.pattern % "|".join(_PROFILE_FIELDS))
_VENDOR = re.compile(r"^(nvenc|vaapi|qsv|amd|vt|vk)_[a-z0-9_]{1,48}$")
UNMAPPED_VENDOR = (
    "no encoder option of this build is mapped to this key (mapped: "
    + ", ".join(ENCODER_KEYS)
    + "; VAAPI, VideoToolbox and Vulkan encoders are not in PyAV's wheels)"
)


def key(name: str) -> Key | None:
    """The rule of `name`, including the pattern keys; None for a key the host does not know."""
    if not isinstance(name, str):
        return None
    found = KEYS.get(name)
    if found is not None:
        return found
    if _WEBHOOK_URL.match(name):
        return Key(name, "url", None, nullable=True, group="access", restart=False)
    m = _CLIENT_PROFILE.match(name)
    if m:
        base = _PROFILE_FIELDS[m.group(2)]
        return Key(**{**base.__dict__, "name": name, "group": "client_profile", "file_only": True})
    if name in ENCODER_KEYS:
        choices = ENCODER_KEYS[name]
        if choices is None:
            return Key(name, "bool", None, nullable=True, group="video")
        return Key(name, "enum", None, nullable=True, choices=choices, group="video")
    if _VENDOR.match(name):
        return Key(name, "str", None, nullable=True, group="video", refused_all=UNMAPPED_VENDOR)
    return None


def is_known(name: str) -> bool:
    return key(name) is not None


# Fields of an app catalog entry (POST /api/apps) that run commands or choose a file or the
# environment commands run with: writing one needs `config:exec`, like a key's `exec_power`.
APP_EXEC_FIELDS: dict[str, str] = {
    "cmd": "runs a command",
    "detached": "runs commands",
    "prep-cmd": "runs commands around the launch",
    "working-dir": "chooses the directory commands run in",
    "output": "chooses a file the host appends to",
    "env": "sets the environment commands run with",
}


def exec_keys(names) -> dict[str, str]:
    """The keys among `names` whose write gives code execution or a file choice, with why."""
    found = {}
    for name in names:
        spec = key(name)
        if spec is not None and spec.exec_power:
            found[name] = spec.exec_power
    return found


def app_exec_fields(entry: dict) -> dict[str, str]:
    """The fields of an app entry that would run commands or choose files, with why; a field
    that is absent, null or empty adds nothing that runs and is not listed."""
    return {
        name: why
        for name, why in APP_EXEC_FIELDS.items()
        if entry.get(name) not in (None, "", [], {})
    }
