"""The codec offer: one answer feeding /serverinfo, the RTSP DESCRIBE and the ANNOUNCE check.

Moonlight (moonlight-common-c) learns what the host encodes from two places, and both must
agree or the client picks a codec the host cannot stream:

* ``/serverinfo`` ``ServerCodecModeSupport``: a bitmask (``SCM_*`` in MCC's ``Limelight.h``),
  H.264 always; and ``MaxLumaPixelsHEVC``, non-zero when HEVC is offered.
* The DESCRIBE reply: MCC looks for the literal ``sprop-parameter-sets=AAAAAU`` (the base64 of
  an HEVC VPS start) for HEVC and ``a=rtpmap:98 AV1/90000`` for AV1.

The client then names its pick in ANNOUNCE (``x-nv-vqos[0].bitStreamFormat``: 0 H.264,
1 HEVC, 2 AV1); a pick that was not offered is refused (RTSP 400 naming it).

``hevc_mode`` / ``av1_mode`` (0..3, the reference's meaning): 1 never offers the codec; 2 offers
Main (8-bit); 3 also Main10; 0 (auto) offers it when an encoder for it opened. Decision: auto
counts GPU encoders only. Moonlight picks HEVC or AV1 whenever it is offered, and software
HEVC/AV1 (libx265, SVT-AV1) holds neither 1080p60 nor H.264's latency on a desktop CPU
(bench/codecs.py); modes 2 and 3 offer them in software too. Every capture source is 8-bit
SDR, so the 10-bit bits are never set (GAP in docs/gaps.md: no HDR / Main10 path).
"""

from __future__ import annotations

from dataclasses import dataclass

SCM_H264 = 0x1
SCM_HEVC = 0x100
SCM_HEVC_MAIN10 = 0x200
SCM_AV1 = 0x10000
SCM_AV1_MAIN10 = 0x20000
SCM = {"h264": SCM_H264, "hevc": SCM_HEVC, "av1": SCM_AV1}

# What Sunshine reports when HEVC is on (the largest luma picture its encoders take).
MAX_LUMA_PIXELS_HEVC = 1869449984

HEVC_MARKER = "sprop-parameter-sets=AAAAAU"
AV1_MARKER = "a=rtpmap:98 AV1/90000"

BITSTREAM_FORMATS = {0: "h264", 1: "hevc", 2: "av1"}
CODEC_NAMES = {"h264": "H.264", "hevc": "HEVC", "av1": "AV1"}

MODE_AUTO, MODE_OFF, MODE_MAIN, MODE_MAIN10 = 0, 1, 2, 3


class CodecRefused(ValueError):
    """The client picked a codec the host did not offer."""


@dataclass(frozen=True)
class Offer:
    """The codecs offered to one client (H.264 always first)."""

    codecs: tuple[str, ...] = ("h264",)

    @property
    def codec_mode_support(self) -> int:
        mask = 0
        for codec in self.codecs:
            mask |= SCM[codec]
        return mask

    @property
    def max_luma_pixels_hevc(self) -> int:
        return MAX_LUMA_PIXELS_HEVC if "hevc" in self.codecs else 0

    def describe_lines(self) -> str:
        """The DESCRIBE markers for the offered codecs (newline-ended lines, or empty)."""
        lines = []
        if "hevc" in self.codecs:
            lines.append(HEVC_MARKER)
        if "av1" in self.codecs:
            lines.append(AV1_MARKER)
        return "".join(f"{line}\n" for line in lines)

    def accept(self, bitstream_format: int) -> str:
        """The codec an ANNOUNCE asked for; CodecRefused naming it when it was not offered."""
        codec = BITSTREAM_FORMATS.get(bitstream_format)
        if codec is None:
            raise CodecRefused(f"unknown bitStreamFormat {bitstream_format}")
        if codec not in self.codecs:
            raise CodecRefused(f"{CODEC_NAMES[codec]} was not offered by this host")
        return codec


H264_ONLY = Offer()


def _mode(value, default: int = MODE_AUTO) -> int:
    return (
        value
        if isinstance(value, int) and not isinstance(value, bool) and 0 <= value <= 3
        else default
    )


def decide(hevc_mode, av1_mode, gpu_codecs, any_codecs) -> Offer:
    """The offer for these modes, given which codecs a GPU encoder opened for (`gpu_codecs`)
    and which any encoder, software included, opened for (`any_codecs`)."""
    codecs = ["h264"]
    for codec, mode in (("hevc", _mode(hevc_mode)), ("av1", _mode(av1_mode))):
        if mode == MODE_OFF:
            continue
        pool = gpu_codecs if mode == MODE_AUTO else any_codecs
        if codec in pool:
            codecs.append(codec)
    return Offer(tuple(codecs))


def probed_codecs(table: dict[str, dict[str, bool]]) -> tuple[set[str], set[str]]:
    """(codecs a GPU encoder opened for, codecs any encoder opened for) from the probe table
    (`media.encoders.available()`: backend -> codec -> opens)."""
    gpu, anywhere = set(), set()
    for backend, codecs in table.items():
        for codec, ok in codecs.items():
            if ok:
                anywhere.add(codec)
                if backend != "software":
                    gpu.add(codec)
    return gpu, anywhere


def host_offer(client_name: str = "") -> Offer:
    """The offer for this client: the host's (or its profile's) modes over the encoder probe."""
    from games.profiles import client_profile
    from hostmgmt.config import store
    from media import encoders

    values = store.values()
    profile = client_profile(client_name, values) if client_name else {}
    gpu, anywhere = probed_codecs(encoders.available())
    pinned = values.get("encoder")
    if pinned not in (None, "", "auto"):
        table = encoders.available()
        gpu = (
            {c for c, ok in table.get(pinned, {}).items() if ok} if pinned != "software" else set()
        )
    return decide(
        profile.get("hevc_mode", values.get("hevc_mode", MODE_AUTO)),
        profile.get("av1_mode", values.get("av1_mode", MODE_AUTO)),
        gpu,
        anywhere,
    )
