"""Video packetizer: hand-derived header bytes, FEC layout, and the real client's depacketizer."""

from __future__ import annotations

import struct

import av
import numpy as np
import pytest

from compat import video
from compat.video import FRAME_TYPE_IDR, FRAME_TYPE_P, VideoPacketizer, fec_layout
from media import h264

RNG = np.random.default_rng(42)


def _body(n: int) -> bytes:
    return bytes(RNG.integers(1, 256, n, dtype=np.uint8))  # no zero bytes: no fake start codes


def _idr(size: int) -> bytes:
    return b"\0\0\0\1\x67" + _body(20) + b"\0\0\0\1\x68" + _body(4) + b"\0\0\0\1\x65" + _body(size)


def test_single_packet_frame_bytes_by_hand():
    pk = VideoPacketizer(packet_size=1392, fec_percentage=20)
    bitstream = b"\0\0\0\1\x41" + b"\xaa" * 11
    rows = pk.packetize(bitstream, FRAME_TYPE_P, rtp_timestamp=0x01020304, latency_01ms=0x55)
    # 1 data shard: ceil(1 * 20 / 100) = 1 parity < 2 minimum -> 2 parity, pct = 100*2/1 = 200.
    assert rows.shape == (3, 1408)
    first = rows[0].tobytes()
    assert first[:16] == bytes.fromhex("90 00 0000 01020304 00000000 00000000".replace(" ", ""))
    spi, frame_index, flags, extra, mff, mfb, fec_info = struct.unpack_from("<IIBBBBI", first, 16)
    assert (spi, frame_index, flags, extra, mff, mfb) == (0, 1, 0x7, 0, 0x10, 0)
    assert fec_info == (0 << 12) | (1 << 22) | (200 << 4)
    # Frame header: 0x01, latency LE, type, lastPayloadLen = (16 + 8) % 1376, zero.
    assert first[32:40] == bytes([0x01, 0x55, 0x00, 0x01, 24, 0, 0, 0])
    assert first[40:56] == bitstream
    assert first[56:] == bytes(1408 - 56)
    parity = [r.tobytes() for r in rows[1:]]
    assert [struct.unpack_from(">H", p, 2)[0] for p in parity] == [1, 2]
    assert [struct.unpack_from("<I", p, 28)[0] >> 12 & 0x3FF for p in parity] == [1, 2]


def test_sequence_and_frame_index_run_on():
    pk = VideoPacketizer(fec_percentage=0)
    a = pk.packetize(_body(3000))
    b = pk.packetize(_body(100))
    seqs = [struct.unpack_from(">H", r.tobytes(), 2)[0] for r in np.concatenate([a, b])]
    assert seqs == list(range(len(seqs)))
    assert struct.unpack_from("<I", b[0].tobytes(), 20)[0] == 2
    # streamPacketIndex = seq << 8
    assert struct.unpack_from("<I", b[0].tobytes(), 16)[0] == len(a) << 8


def test_sequence_wraps_at_16_bits():
    pk = VideoPacketizer(fec_percentage=0)
    pk.sequence = 0xFFFF
    rows = pk.packetize(_body(3000))
    assert [struct.unpack_from(">H", r.tobytes(), 2)[0] for r in rows] == [0xFFFF, 0, 1]


@pytest.mark.parametrize(
    "shards,pct,expected",
    [
        (4, 20, [(4, 2, 50)]),
        (10, 20, [(10, 2, 20)]),
        (100, 20, [(100, 20, 20)]),
        (300, 20, [(150, 30, 20), (150, 30, 20)]),  # 212 per block at 20 %
        (1000, 20, [(1000, 0, 0)]),  # would need 5 blocks: FEC off
        (3000, 20, [(1000, 0, 0)] * 3),
        (4000, 20, [(1000, 0, 0)] * 4),
        (5, 0, [(5, 0, 0)]),
    ],
)
def test_fec_layout(shards, pct, expected):
    assert fec_layout(shards, pct, 2) == expected


def test_frames_over_four_blocks_of_1023_are_refused():
    with pytest.raises(ValueError):
        fec_layout(4 * 1023 + 1, 20, 2)


def test_every_datagram_is_packet_size_plus_16():
    rows = VideoPacketizer(packet_size=1024).packetize(_body(50_000))
    assert rows.shape[1] == 1040


def test_encryption_wraps_each_datagram():
    key = bytes(range(16))
    plain = VideoPacketizer(fec_percentage=0).packetize(_idr(3000), FRAME_TYPE_IDR)
    enc = VideoPacketizer(fec_percentage=0, encryption_key=key).packetize(
        _idr(3000), FRAME_TYPE_IDR
    )
    assert enc.shape == (plain.shape[0], plain.shape[1] + 32)
    frame_index, packet = video.decrypt_packet(key, enc[1].tobytes())
    assert frame_index == 1
    assert packet[:16] == plain[1].tobytes()[:16]
    assert enc[0].tobytes()[11:12] == b"V" and enc[1].tobytes()[:8] == struct.pack("<Q", 1)


def test_h264_for_moonlight_drops_sei_and_aud():
    au = b"\0\0\0\1\x09\xf0" + b"\0\0\1\x06\x05\x10" + b"\0\0\0\1\x67\x42" + b"\0\0\1\x65\x88"
    out, idr = h264.h264_for_moonlight(au)
    assert out == b"\0\0\0\1\x67\x42\0\0\0\1\x65\x88"
    assert idr


# ---- the real client's receive path (moonlight-common-c) ----


def _deliver(rx, rows, drop=()):
    for i, row in enumerate(rows):
        if i not in drop:
            rx.feed(row.tobytes())
    return rx.frames()


def test_client_reassembles_and_recovers_a_multi_block_idr(mcc_lib):
    rx = mcc_lib.VideoReceiver()
    pk = VideoPacketizer()
    frame = _idr(400_000)  # 291 shards -> blocks of 146+30 parity and 145+29 parity
    assert fec_layout(291, 20, 2) == [(146, 30, 20), (145, 29, 20)]
    rows = pk.packetize(frame, FRAME_TYPE_IDR, 90)
    blocks = {struct.unpack_from("B", r.tobytes(), 27)[0] for r in rows}
    assert blocks == {0x40, 0x50}  # block 0 and 1, last block index 1
    # Lose data shards in both blocks, up to their parity counts.
    drop = set(range(3, 33)) | set(range(200, 229))
    ((number, is_idr, data),) = _deliver(rx, rows, drop)
    assert (number, is_idr) == (1, True)
    assert data.rstrip(b"\0") == frame
    p = b"\0\0\0\1\x41" + _body(5000)
    ((number, is_idr, data),) = _deliver(rx, pk.packetize(p, FRAME_TYPE_P, 180), drop={1})
    assert (number, is_idr, data.rstrip(b"\0")) == (2, False, p)


def test_client_drops_a_frame_with_more_losses_than_parity(mcc_lib):
    rx = mcc_lib.VideoReceiver()
    pk = VideoPacketizer()
    rows = pk.packetize(_idr(30_000), FRAME_TYPE_IDR)  # 23 data + 5 parity
    assert _deliver(rx, rows, drop=set(range(6))) == []


def test_client_decodes_our_encoder_output_to_the_right_picture(mcc_lib):
    from media.encoder import VideoEncoder

    rx = mcc_lib.VideoReceiver()
    pk = VideoPacketizer()
    enc = VideoEncoder(320, 240, fps=60, bitrate_kbps=4000)
    img = np.zeros((240, 320, 4), np.uint8)
    img[..., 3] = 255
    img[40:120, 60:180] = (0, 200, 0, 255)  # green box, BGRA
    decoder = av.CodecContext.create("h264", "r")
    pictures = []
    for n in range(3):
        ef = enc.encode(img)
        ftype = FRAME_TYPE_IDR if ef.keyframe else FRAME_TYPE_P
        for number, is_idr, data in _deliver(
            rx, pk.packetize(ef.data, ftype), drop={0} if n else ()
        ):
            assert is_idr == (number == 1)
            pictures += [f.to_ndarray(format="rgb24") for f in decoder.decode(av.Packet(data))]
    assert len(pictures) == 3
    rgb = pictures[-1].astype(int)
    assert abs(rgb[80, 120] - (0, 200, 0)).max() < 12
    assert rgb[200, 280].max() < 12
