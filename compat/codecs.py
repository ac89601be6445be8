"""The codec offer: one answer feeding /serverinfo, the RTSP DESCRIBE and the ANNOUNCE check.

Moonlight (moonlight-common-c) learns what the host encodes from two places, and both must
agree or the client picks a codec the host cannot stream:

* ``/serverinfo`` ``ServerCodecModeSupport``: a bitmask (``SCM_*`` in MCC's ``Limelight.h``),
  H.264 always; and ``MaxLumaPixelsHEVC``, non-zero when HEVC is offered.
* The DESCRIBE reply: MCC looks for the literal ``sprop-parameter-sets=AAAAAU`` (the base64 of
  an HEVC VPS start) for HEVC and ``a=rtpmap:98 AV1/90000`` for AV1.

The client then names its pick in ANNOUNCE (``x-nv-vqos[0].bitStreamFormat``: 0 H.264,
1 HEVC, 2 AV1); a pick that was not offered is refused (RTSP 400 naming it).

Which codecs are offered (the ``hevc_mode`` / ``av1_mode`` keys over the encoder probe) is the
session's choice for every plane, `streaming.sessions.encoding`; this module is how GameStream
says it. Moonlight picks HEVC or AV1 whenever it is offered. Every capture source is 8-bit SDR,
so the 10-bit bits are never set, and a client asking for HDR is refused (`/launch`, ANNOUNCE).
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
