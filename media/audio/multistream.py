"""libopus's multistream encoder through ctypes, for 5.1 and 7.1 with a given mapping.

PyAV's libopus encoder picks its own surround mapping (``opus_multistream_surround_encoder
_create``), and a GameStream client decodes with the streams, coupled streams and mapping the
host's DESCRIBE named (:mod:`media.audio.layouts`), so the host must encode with exactly those:
``opus_multistream_encoder_create`` takes them as they are. The library is the libopus PyAV's
wheel bundles (``av.libs/libopus-*.so*``), else the system's.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import threading

import av
import numpy as np

RATE = 48_000
MAX_PACKET = 4000 * 8  # bytes; libopus's own cap is 1275 per stream and frame

# opus_defines.h
OPUS_OK = 0
APPLICATIONS = {0: 2051, 1: 2048, 2: 2049}  # restricted low delay, VoIP, audio
SET_BITRATE = 4002
SET_MAX_BANDWIDTH = 4004
SET_VBR = 4006
SET_COMPLEXITY = 4010
SET_INBAND_FEC = 4012
SET_PACKET_LOSS_PERC = 4014
SET_VBR_CONSTRAINT = 4020
BANDWIDTH_WIDEBAND = 1103
BANDWIDTH_FULLBAND = 1105

_lib: ctypes.CDLL | None = None
_lib_lock = threading.Lock()


class OpusLibraryError(RuntimeError):
    """No libopus to load, or libopus refused a configuration."""


def library_path() -> str:
    """PyAV's bundled libopus (the one every other Opus path here uses), else the system's."""
    libs = os.path.join(os.path.dirname(os.path.dirname(av.__file__)), "av.libs")
    found = sorted(glob.glob(os.path.join(libs, "libopus-*.so*")))
    if found:
        return found[0]
    name = ctypes.util.find_library("opus")
    if name is None:
        raise OpusLibraryError("no libopus: neither PyAV's bundled one nor a system one")
    return name


def lib() -> ctypes.CDLL:
    global _lib
    with _lib_lock:
        if _lib is None:
            so = ctypes.CDLL(library_path())
            so.opus_multistream_encoder_create.restype = ctypes.c_void_p
            so.opus_multistream_encoder_create.argtypes = [
                ctypes.c_int32, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                ctypes.POINTER(ctypes.c_ubyte), ctypes.c_int, ctypes.POINTER(ctypes.c_int),
            ]  # fmt: skip
            so.opus_multistream_encode.restype = ctypes.c_int32
            so.opus_multistream_encode.argtypes = [
                ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p, ctypes.c_int32,
            ]  # fmt: skip
            so.opus_multistream_encoder_destroy.restype = None
            so.opus_multistream_encoder_destroy.argtypes = [ctypes.c_void_p]
            so.opus_multistream_encoder_ctl.restype = ctypes.c_int
            so.opus_multistream_decoder_create.restype = ctypes.c_void_p
            so.opus_multistream_decoder_create.argtypes = [
                ctypes.c_int32, ctypes.c_int, ctypes.c_int, ctypes.c_int,
                ctypes.POINTER(ctypes.c_ubyte), ctypes.POINTER(ctypes.c_int),
            ]  # fmt: skip
            so.opus_multistream_decode.restype = ctypes.c_int
            so.opus_multistream_decode.argtypes = [
                ctypes.c_void_p, ctypes.c_char_p, ctypes.c_int32, ctypes.c_void_p, ctypes.c_int,
                ctypes.c_int,
            ]  # fmt: skip
            so.opus_multistream_decoder_destroy.argtypes = [ctypes.c_void_p]
            so.opus_strerror.restype = ctypes.c_char_p
            so.opus_strerror.argtypes = [ctypes.c_int]
            _lib = so
        return _lib


def _check(code: int, what: str) -> int:
    if code < 0:
        raise OpusLibraryError(f"{what}: {lib().opus_strerror(code).decode()}")
    return code


class MultistreamEncoder:
    """One ``OpusMSEncoder``: int16 (frame_samples, channels) in, one packet out per call."""

    def __init__(
        self,
        channels: int,
        streams: int,
        coupled: int,
        mapping: tuple[int, ...] | list[int],
        *,
        bitrate: int,
        frame_samples: int,
        application: int = 0,
        vbr: int = 0,
        complexity: int = 10,
        fec: bool = True,
        expected_loss_pct: int = 0,
        fullband: bool = True,
    ):
        if len(mapping) != channels:
            raise ValueError(f"mapping has {len(mapping)} entries for {channels} channels")
        so = lib()
        self.channels = channels
        self.frame_samples = frame_samples
        err = ctypes.c_int(0)
        table = (ctypes.c_ubyte * channels)(*mapping)
        self._enc = so.opus_multistream_encoder_create(
            RATE, channels, streams, coupled, table, APPLICATIONS[application], ctypes.byref(err)
        )
        _check(err.value, "opus_multistream_encoder_create")
        if not self._enc:
            raise OpusLibraryError("opus_multistream_encoder_create returned nothing")
        try:
            for request, value in (
                (SET_BITRATE, int(bitrate)),
                (SET_VBR, 1 if vbr else 0),
                (SET_VBR_CONSTRAINT, 1 if vbr == 1 else 0),
                (SET_COMPLEXITY, int(complexity)),
                (SET_INBAND_FEC, 1 if fec else 0),
                (SET_PACKET_LOSS_PERC, int(expected_loss_pct)),
                (SET_MAX_BANDWIDTH, BANDWIDTH_FULLBAND if fullband else BANDWIDTH_WIDEBAND),
            ):
                _check(
                    so.opus_multistream_encoder_ctl(
                        ctypes.c_void_p(self._enc), ctypes.c_int(request), ctypes.c_int32(value)
                    ),
                    f"opus_multistream_encoder_ctl({request}, {value})",
                )
        except BaseException:
            self.close()
            raise
        self._out = ctypes.create_string_buffer(MAX_PACKET)

    def encode(self, frame: np.ndarray) -> bytes:
        """One frame of interleaved int16 samples, shape (frame_samples, channels)."""
        if self._enc is None:
            raise OpusLibraryError("encoder closed")
        pcm = np.ascontiguousarray(frame, dtype=np.int16)
        if pcm.shape != (self.frame_samples, self.channels):
            raise ValueError(f"expected ({self.frame_samples}, {self.channels}), got {pcm.shape}")
        n = lib().opus_multistream_encode(
            self._enc, pcm.ctypes.data, self.frame_samples, self._out, MAX_PACKET
        )
        _check(n, "opus_multistream_encode")
        return self._out.raw[:n]

    def close(self) -> None:
        if getattr(self, "_enc", None):
            lib().opus_multistream_encoder_destroy(self._enc)
            self._enc = None

    def __del__(self):
        self.close()


class MultistreamDecoder:
    """libopus's ``OpusMSDecoder``: what Moonlight's own clients decode with (moonlight-qt),
    so the channel order out is the mapping's, with no reordering on the way. For tests and
    benches: the host never decodes."""

    def __init__(self, channels: int, streams: int, coupled: int, mapping) -> None:
        so = lib()
        self.channels = channels
        err = ctypes.c_int(0)
        table = (ctypes.c_ubyte * channels)(*mapping)
        self._dec = so.opus_multistream_decoder_create(
            RATE, channels, streams, coupled, table, ctypes.byref(err)
        )
        _check(err.value, "opus_multistream_decoder_create")
        self._pcm = np.zeros((RATE * 120 // 1000, channels), dtype=np.int16)

    def decode(self, packet: bytes) -> np.ndarray:
        """int16 (frames, channels) in the mapping's channel order."""
        n = lib().opus_multistream_decode(
            self._dec, packet, len(packet), self._pcm.ctypes.data, self._pcm.shape[0], 0
        )
        _check(n, "opus_multistream_decode")
        return self._pcm[:n].copy()

    def close(self) -> None:
        if getattr(self, "_dec", None):
            lib().opus_multistream_decoder_destroy(self._dec)
            self._dec = None

    def __del__(self):
        self.close()
