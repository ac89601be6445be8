"""Annex-B H.264 helpers shared by the encoder and the GameStream packetizer."""

from __future__ import annotations

_NAL_START = b"\x00\x00\x01"


def split_nals(bitstream: bytes) -> list[bytes]:
    """Annex-B NAL units without their start codes."""
    nals = []
    i = bitstream.find(_NAL_START)
    while i >= 0:
        start = i + 3
        j = bitstream.find(_NAL_START, start)
        end = len(bitstream) if j < 0 else j
        nal = bitstream[start:end]
        if j >= 0 and nal.endswith(b"\x00"):
            nal = nal[:-1]  # the next start code was a 4-byte one
        if nal:
            nals.append(nal)
        i = j
    return nals


def h264_for_moonlight(bitstream: bytes) -> tuple[bytes, bool]:
    """Rewrite an H.264 access unit the way the client's depacketizer wants it.

    Drops AUD (9) and SEI (6) NALs: the depacketizer only looks for the IDR slice in the
    frame's first packet, and x264's first SEI (its version string, ~600 bytes) can push it
    out. Returns (Annex-B bytes with 4-byte start codes, whether the unit holds an IDR slice).
    """
    keep = []
    idr = False
    for nal in split_nals(bitstream):
        kind = nal[0] & 0x1F
        if kind in (6, 9):
            continue
        idr = idr or kind == 5
        keep.append(b"\x00\x00\x00\x01" + nal)
    return b"".join(keep), idr


# HEVC NAL unit types (H.265 table 7-1) the rewrite looks at.
HEVC_VPS, HEVC_SPS, HEVC_PPS, HEVC_AUD, HEVC_SEI_PREFIX, HEVC_SEI_SUFFIX = 32, 33, 34, 35, 39, 40
HEVC_PARAMETER_SETS = (HEVC_VPS, HEVC_SPS, HEVC_PPS)


def hevc_nal_type(nal: bytes) -> int:
    return (nal[0] >> 1) & 0x3F


class HevcRewriter:
    """HEVC access units the way the client's depacketizer wants them: Annex-B with 4-byte
    start codes, AUD and SEI dropped (as for H.264), and VPS/SPS/PPS in front of every IDR.

    x265 (``repeat-headers``) and NVENC already repeat them; an encoder that writes them only
    once would leave every later IDR undecodable, so the last ones seen are put back."""

    def __init__(self) -> None:
        self.parameter_sets: dict[int, bytes] = {}

    def __call__(self, bitstream: bytes) -> tuple[bytes, bool]:
        keep: list[bytes] = []
        idr = False
        has_sets = set()
        for nal in split_nals(bitstream):
            kind = hevc_nal_type(nal)
            if kind in (HEVC_AUD, HEVC_SEI_PREFIX, HEVC_SEI_SUFFIX):
                continue
            if kind in HEVC_PARAMETER_SETS:
                self.parameter_sets[kind] = nal
                has_sets.add(kind)
            idr = idr or 16 <= kind <= 21  # IRAP pictures: BLA, IDR, CRA
            keep.append(nal)
        if idr and has_sets != set(HEVC_PARAMETER_SETS):
            missing = [self.parameter_sets[k] for k in HEVC_PARAMETER_SETS
                       if k not in has_sets and k in self.parameter_sets]  # fmt: skip
            keep = missing + keep
        return b"".join(b"\x00\x00\x00\x01" + nal for nal in keep), idr
