"""The stream parameters a session takes from the host config (read at each arm, so a config
edit counts from the next launch or resume, never mid-stream)."""

from __future__ import annotations

from django.conf import settings

from compat.engine import encryption
from compat.engine.launch import Launch
from hostconfig import store


def _config(name: str, default):
    try:
        value = store.get(name)
    except Exception:  # a broken config must not stop a stream
        return default
    return default if value is None else value


def _clamped_int(value, default: int, lo: int, hi: int) -> int:
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError):
        return default
    return lo if number < lo else hi if number > hi else number


def encryption_policy(remote: str, corever: object) -> encryption.Policy:
    """The launch's encryption (`lan_/wan_encryption_mode` by `network_policy`); raises
    `encryption.Refused` when it is required and the client sent no `corever >= 1`."""
    mode = encryption.mode_for(
        str(remote or ""),
        str(_config("network_policy", "auto")),
        _clamped_int(_config("lan_encryption_mode", 0), 0, 0, 2),
        _clamped_int(_config("wan_encryption_mode", 1), 1, 0, 2),
    )
    return encryption.decide(mode, encryption.corever(corever))


def make_launch(arm: dict, slot: int = 0) -> Launch:
    """The Launch of one /launch or /resume, on its session's port slot's stream ports."""
    ports = settings.PORTS.stream_ports(slot)
    try:
        policy = encryption_policy(arm.get("remote"), arm.get("corever"))
    except encryption.Refused:  # /launch and /resume refuse this first; stay strict here too
        policy = encryption.Policy(encryption.REQUIRED)
    return Launch(
        rikey=bytes.fromhex(arm["rikey"]),
        rikeyid=int(arm["rikeyid"]),
        client_ip=str(arm.get("remote") or ""),  # the nvhttp peer of /launch or /resume
        host=settings.HOST_BIND,
        rtsp_port=ports.rtsp,
        video_port=ports.video,
        control_port=ports.control,
        audio_port=ports.audio,
        fec_percentage=int(_config("fec_percentage", 20)),
        codec="h264_nvenc" if _config("encoder", "auto") == "nvenc" else "libx264",
        control_timeout_s=int(_config("ping_timeout", 10000)) / 1000,
        dscp_qos=bool(_config("dscp_qos", True)),
        big_buffers=bool(_config("enet_4mib_buffer", True)),
        busy_poll_us=int(_config("busy_poll_us", 0)),
        # Share of the client's link speed the video pacer may use (engine.pacing); the
        # schema's 50..95, so a hand-edited file cannot turn pacing off or exceed the link.
        rate_cap_pct=_clamped_int(_config("rate_cap_pct", 80), 80, 50, 95),
        adaptive_bitrate=bool(_config("adaptive_bitrate_enabled", False)),
        adaptive_min_kbps=_clamped_int(_config("adaptive_bitrate_min", 0), 0, 0, 1_000_000),
        adaptive_max_kbps=_clamped_int(_config("adaptive_bitrate_max", 0), 0, 0, 1_000_000),
        encryption_mode=policy.mode,
        rtsp_encryption=policy.rtsp_encrypted,
    )
