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
