"""The compat plane's bytes on the wire match digests of the plain, unbatched code path.

The digests below were computed with the per-column `np.take` FEC and a per-row send loop
(commit 5c22152): the same fixed inputs through today's batched code must give the very same
datagrams. Covers video packetizing with FEC (one shard, a shard
boundary, multi-block frames, a frame too big for FEC, no FEC, a high minimum parity, 255 %),
AES-GCM video encryption, raw Reed-Solomon parity over several (data, parity) shapes, and the
audio packetizer with its FEC and CBC encryption. That per-column FEC is also kept here as a
reference and compared on random shapes.
"""

from __future__ import annotations

import hashlib
import socket

import numpy as np
import pytest

from compat import fec
from compat.audio import AudioPacketizer
from compat.engine import stream as engine
from compat.video import FRAME_TYPE_IDR, FRAME_TYPE_P, VideoPacketizer

# (bitstream bytes, FEC %, min parity, packet size, encrypted) -> sha256 of 3 frames' datagrams
VIDEO = [
    ((10, 20, 2, 1392, False),
     "ed6ad77cfcaeb540630df830f6bcc4cb0e4720ccfdc9a2d41b45840aff931647"),
    ((1368, 20, 2, 1392, False),
     "98394f97ab1997cd1ae0734f2733b0933bfe4519ea18ecdb1bb3a212a20a023c"),
    ((40_000, 20, 2, 1392, False),
     "558d196a2a646a0adeb257c226dc51a74cb7405bdea77c8c4f3edd82f59ca446"),
    ((300_000, 20, 2, 1392, False),
     "96dea3ddbe75a6b138f4a41c20214fa0735c7caebdf5e096f03f2c50e5e3eae2"),
    ((900_000, 20, 2, 1392, False),
     "573c7feb7be929546151b19418df0a375567c5a6625b70ed710c46517bc8260c"),
    ((5000, 0, 0, 1024, False),
     "9441c69c6a08d7add5987654c94b7f7ac146420847d16cda53003e4bb7abf3c9"),
    ((60_000, 50, 4, 1392, False),
     "f9ee7c31f4616c32d8f332cbba78e76853e6a81dd57651b92668aa5440b083bb"),
    ((25_000, 20, 2, 1392, True),
     "11bab37c9abf0aa8476be816da62dca404042ea23757e6a356875aba88cff0bb"),
    ((70_000, 255, 2, 512, False),
     "8ea98fc9cbadea31d8ae6188422dc01618284eeb8392cdb95136b20e8c85b339"),
]  # fmt: skip
RS = "dcd7d5b3bd3dc59ee02f70a2a8ee2e52284a43b487bdba0b639df3cdce476e8a"
AUDIO = "86bb4c64864c69d7c7b80e522847303586c2dfb99da0fec4616c87e7173fa123"


def _inputs():
    rng = np.random.default_rng(23)  # one stream of bytes, drawn in this order
    return [(case, rng.integers(0, 256, case[0], np.uint8).tobytes(), want) for case, want in VIDEO]


@pytest.mark.parametrize("index", range(len(VIDEO)))
def test_video_datagrams_unchanged(index):
    (_n, pct, minp, size, enc), data, want = _inputs()[index]
    p = VideoPacketizer(packet_size=size, fec_percentage=pct, min_required_fec_packets=minp,
                        encryption_key=bytes(range(16)) if enc else None)  # fmt: skip
    h = hashlib.sha256()
    for i in range(3):
        rows = p.packetize(data, FRAME_TYPE_IDR if i == 0 else FRAME_TYPE_P, 1500 * i, 37)
        h.update(rows.tobytes())
    assert h.hexdigest() == want


def test_reed_solomon_parity_unchanged():
    rng = np.random.default_rng(5)
    h = hashlib.sha256()
    for d, p in [(1, 1), (4, 2), (30, 6), (100, 20), (200, 55), (12, 9), (7, 16)]:
        data = rng.integers(0, 256, (d, 1408), np.uint8)
        h.update(fec.ReedSolomon(d, p).encode(data).tobytes())
    assert h.hexdigest() == RS


def test_audio_datagrams_unchanged():
    a = AudioPacketizer(key=bytes(range(16)), rikeyid=7, packet_ms=5)
    h = hashlib.sha256()
    for i in range(16):
        for datagram in a.packetize(bytes([i]) * 80):
            h.update(datagram)
    assert h.hexdigest() == AUDIO


def _old_apply_tables(tables: np.ndarray, shards: np.ndarray) -> np.ndarray:
    """The per-column FEC inner loop of commit 5c22152, verbatim: one row-gather per data shard."""
    out_t = np.zeros((shards.shape[1], tables.shape[2]), dtype=np.uint8)
    for col in range(tables.shape[0]):
        out_t ^= np.take(tables[col], shards[col], axis=0)
    return np.ascontiguousarray(out_t.T)


@pytest.mark.parametrize(
    "d,p,size", [(1, 1, 16), (3, 2, 100), (30, 6, 1408), (9, 8, 33), (40, 9, 1408), (20, 17, 64)]
)
def test_fec_matches_the_old_loop(d, p, size):
    rng = np.random.default_rng(d * 1000 + p)
    data = rng.integers(0, 256, (d, size), np.uint8)
    matrix = fec.nanors_parity_matrix(d, p)
    old_tables = np.ascontiguousarray(np.transpose(fec.MUL[matrix], (1, 2, 0)))
    want = _old_apply_tables(old_tables, data)
    assert np.array_equal(fec.ReedSolomon(d, p).encode(data), want)
    assert np.array_equal(fec.gf_matmul(matrix, data), want)


@pytest.mark.parametrize("count,size", [(1, 1408), (7, 1408), (46, 1408), (100, 1408), (9, 4112)])
@pytest.mark.parametrize("gso", [True, False])
def test_batched_send_delivers_the_same_datagrams_in_order(count, size, gso):
    """engine.send_datagrams (UDP GSO batches, or one sendto per row where GSO is refused):
    the receiver reads exactly the rows, one datagram each, in order."""
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    tx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    try:
        rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4 << 20)
        rx.bind(("127.0.0.1", 0))
        rx.settimeout(2)
        if not gso:
            engine._NO_GSO.add(tx)
        rows = np.random.default_rng(count).integers(0, 256, (count, size), np.uint8)
        engine.send_datagrams(tx, rows, rx.getsockname())
        got = [rx.recv(65536) for _ in range(count)]
        assert got == [bytes(r) for r in rows]
        assert (tx in engine._NO_GSO) is not gso  # loopback takes GSO: it was the batch path
        rx.setblocking(False)
        with pytest.raises(BlockingIOError):
            rx.recv(65536)  # nothing more
    finally:
        rx.close()
        tx.close()
