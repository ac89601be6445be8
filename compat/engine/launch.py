"""What one armed launch carries into the engine, and what the session reports back.

Plain data, so the nvhttp side (which builds a :class:`Launch` from ``/launch``) and the Celery
task (which reads :class:`SessionStats` into the history record) need not import sockets.
"""

from __future__ import annotations

import secrets
import struct
from dataclasses import dataclass, field
from typing import Protocol

from common.samples import Samples
from compat.codecs import H264_ONLY, Offer
from compat.engine.recovery import RecoveryStats

CONTROL_TIMEOUT_S = 10.0  # no ENet traffic for this long: the client is gone


class InputSink(Protocol):
    """What the session hands 0x0206 payloads to (media.input.session.SessionInput)."""

    def handle(self, payload: bytes) -> object: ...

    def disconnect(self) -> None: ...


@dataclass
class Launch:
    """What /launch armed: secrets and the endpoints to bind."""

    rikey: bytes
    rikeyid: int
    host: str = "0.0.0.0"
    rtsp_port: int = 48010
    video_port: int = 47998
    control_port: int = 47999
    audio_port: int = 48000
    ping_payload: str = field(default_factory=lambda: secrets.token_hex(8).upper())
    connect_data: int = field(default_factory=lambda: secrets.randbits(32))
    # The IP of the client that called /launch or /resume: the only peer the session's RTSP,
    # ENet and media ports listen to (compat.endpoint). Empty: the first RTSP peer.
    client_ip: str = ""
    fec_percentage: int = 20
    codec: str = "libx264"
    control_timeout_s: float = CONTROL_TIMEOUT_S
    # Socket options from the host config, applied where Linux supports them.
    dscp_qos: bool = False
    busy_poll_us: int = 0
    # `enet_4mib_buffer`: 4 MiB send and receive buffers on the video and audio sockets (the
    # kernel caps them at net.core.wmem_max / rmem_max); off leaves the kernel defaults.
    big_buffers: bool = True
    # Pacing (engine.pacing): the tighter of max_send_mbps and rate_cap_pct % of the speed of
    # the link that routes to the client; neither (0, or no known link speed) sends each frame
    # as one burst. Paced frames go out in ~1 ms slots (at most 64 datagrams each).
    max_send_mbps: float = 0.0
    rate_cap_pct: int = 0
    # Off by default: costs a GCM pass per datagram; Moonlight enables whatever is offered.
    # Encryption mode 1 or 2 (compat.engine.encryption) offers it too.
    offer_video_encryption: bool = False
    # True when /launch answered with rtspenc:// (clients with corever >= 1).
    rtsp_encryption: bool = False
    # lan_/wan_encryption_mode for this client's network class: 0 off, 1 when supported,
    # 2 required (the DESCRIBE requests every layer and an ANNOUNCE without one gets 403).
    encryption_mode: int = 0
    # Ceiling on the client's requested bitrate (client profile / host max_bitrate); 0 = none.
    max_bitrate_kbps: int = 0
    # Encoder tuning (app `encoder-preset` over host `nvenc_tuning_preset`): see
    # `engine.encoder.TUNINGS`; -1 keeps the encoder's own low-latency defaults.
    encoder_tuning: int = -1
    # Adaptive bitrate (compat.engine.adaptive): the client's loss reports move the rate between
    # adaptive_min_kbps (0: a fifth of the ceiling) and min(adaptive_max_kbps, negotiated).
    adaptive_bitrate: bool = False
    adaptive_min_kbps: int = 0
    adaptive_max_kbps: int = 0
    # The codecs offered to this client (compat.codecs): DESCRIBE markers, the ANNOUNCE check.
    offer: Offer = H264_ONLY
    # codec -> the encoders to try in order (media.encoders.choose); empty: `codec` above for
    # H.264, the codec's software encoder otherwise.
    encoders: dict[str, list[str]] = field(default_factory=dict)
    # The encoder keys set in the host config (media.encoder_options), plus `gpu` for NVENC.
    encoder_config: dict = field(default_factory=dict)
    # A software encoder's threads (streaming.sessions.encoding.software_threads); 0: its own.
    encoder_threads: int = 0

    def video_kbps(self, requested_kbps: int) -> int:
        """The bitrate this stream encodes at: the client's ask under the launch's ceiling."""
        if self.max_bitrate_kbps and requested_kbps > self.max_bitrate_kbps:
            return self.max_bitrate_kbps
        return requested_kbps


VIDEO_STAGES = ("capture", "convert", "encode", "packetize_fec", "encrypt", "send")
WALL_SPANS = ("capture", "convert+encode", "frame")


@dataclass
class StageCpu:
    """The session process's CPU time spent in each stage of the video loop, summed.

    Process CPU (`time.process_time`), so the encoder's and OpenCV's worker threads count in
    the stage that waits for them; the audio and control threads add what they run meanwhile
    (a few percent of a frame). Read as CPU per frame: what a stream costs whatever the
    machine's load, where wall-clock fps moves with the neighbours."""

    frames: int = 0
    seconds: dict = field(default_factory=lambda: dict.fromkeys(VIDEO_STAGES, 0.0))
    # Wall-clock seconds beside it: the grab, the conversion and encode, a whole frame's work
    # (sleep excluded). Wall over CPU is the time a stage waited (for a core, the X server).
    wall: dict = field(default_factory=lambda: dict.fromkeys(WALL_SPANS, 0.0))

    def per_frame_ms(self) -> dict[str, float]:
        n = max(self.frames, 1)
        figures = {k: round(v * 1000 / n, 3) for k, v in self.seconds.items()}
        figures.update({f"wall {k}": round(v * 1000 / n, 3) for k, v in self.wall.items()})
        return figures


@dataclass
class SessionStats:
    frames_sent: int = 0
    idr_frames: int = 0
    bytes_sent: int = 0
    encode_ms: Samples = field(default_factory=Samples)
    audio_packets: int = 0
    rtt_ms: Samples = field(default_factory=Samples)  # ENet's smoothed RTT at each client ping
    pace_mbps: float = 0.0  # the video pacer's rate for this client; 0 = one burst per frame
    target_kbps: int = 0  # the wire rate the video aims at now (adaptive bitrate moves it)
    fec_pct: int = 0  # the FEC share now
    rate_changes: int = 0  # adaptive bitrate changes (each one encoder reopen and one IDR)
    codec: str = ""  # h264 / hevc / av1, as negotiated at ANNOUNCE
    encoder: str = ""  # the FFmpeg encoder open now (changes when one hands over)
    encoder_options: dict = field(default_factory=dict)  # what that encoder was given
    encoder_threads: int = 0  # the threads it was given (0: its own choice)
    # Reference-frame invalidation requests: verdicts and request-heard -> IDR-sent delays.
    recovery: RecoveryStats = field(default_factory=RecoveryStats)
    stage_cpu: StageCpu = field(default_factory=StageCpu)


def rikeyid_from_iv(iv: bytes) -> int:
    """Moonlight derives rikeyid from the first 4 bytes of its IV (signed, big-endian)."""
    return struct.unpack(">i", iv[:4])[0]
