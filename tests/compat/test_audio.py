"""Audio RTP packets: header bytes, CBC encryption vectors, and the 4+2 FEC blocks."""

from __future__ import annotations

import struct

import numpy as np
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from compat import audio
from compat.audio import AudioPacketizer
from media.audio import layouts
from media.audio.multistream import MultistreamDecoder

KEY = bytes(range(16))


def test_data_packet_headers_by_hand():
    pk = AudioPacketizer(packet_ms=5)
    first = pk.packetize(b"\x11" * 60)
    second = pk.packetize(b"\x22" * 60)
    assert first == [bytes.fromhex("806100000000000000000000") + b"\x11" * 60]
    assert second[0][:12] == bytes.fromhex("806100010000000500000000")


def test_iv_is_rikeyid_plus_seq_big_endian():
    assert audio.audio_iv(0x12345678, 3) == bytes.fromhex("1234567b") + bytes(12)
    assert audio.audio_iv(-1, 1) == bytes(16)  # rikeyid is a signed 32-bit value


def test_encrypted_payload_is_cbc_pkcs7():
    pk = AudioPacketizer(key=KEY, rikeyid=100)
    pk.packetize(b"\x00" * 60)
    (packet,) = pk.packetize(b"\x01" * 60)
    payload = packet[12:]
    assert len(payload) == 64  # 60 bytes + 4 of PKCS#7 padding
    dec = Cipher(algorithms.AES(KEY), modes.CBC(struct.pack(">I", 101) + bytes(12))).decryptor()
    plain = dec.update(payload) + dec.finalize()
    assert plain == b"\x01" * 60 + b"\x04" * 4
    assert audio.decrypt_payload(KEY, 100, 1, payload) == b"\x01" * 60


def test_parity_follows_every_fourth_packet_and_recovers_a_loss():
    pk = AudioPacketizer(key=KEY, rikeyid=7)
    payloads = [bytes([i]) * 60 for i in range(4)]
    sent = [pk.packetize(p) for p in payloads]
    assert [len(s) for s in sent] == [1, 1, 1, 3]
    data = [s[0] for s in sent]
    parity = sent[3][1:]
    assert [struct.unpack_from(">BBH", p)[1:] for p in parity] == [(127, 4), (127, 5)]
    assert struct.unpack_from(">BBHII", parity[1], 12) == (1, 97, 0, 0, 0)
    # Next data packet still uses seq 4 (parity does not consume data sequence numbers).
    assert struct.unpack_from(">H", pk.packetize(b"\x09" * 60)[0], 2)[0] == 4
    # Lose packet 2 and parity 0: rebuild it from the rest with the client's fixed matrix.
    shards = [d[12:] for d in data] + [p[24:] for p in parity]
    shards[2] = None
    shards[4] = None
    rs = audio.fec.ReedSolomon(4, 2, audio.AUDIO_FEC_MATRIX)
    recovered = rs.decode(shards)[2].tobytes()
    assert audio.decrypt_payload(KEY, 7, 2, recovered) == payloads[2]


def test_mixed_sizes_send_no_parity():
    pk = AudioPacketizer()
    sent = [pk.packetize(b"\x01" * n) for n in (60, 60, 61, 60)]
    assert [len(s) for s in sent] == [1, 1, 1, 1]


def test_silence_is_cbr_opus():
    gen = audio.OpusSilence(packet_ms=5)
    sizes = {len(gen.next_packet()) for _ in range(12)}
    assert len(sizes) == 1  # constant size: audio FEC stays usable
    assert sizes.pop() == 60  # 96 kbps * 5 ms / 8


@pytest.mark.parametrize("channels", [6, 8])
def test_surround_silence_is_cbr_and_decodes_in_the_streams_layout(channels):
    config = layouts.layout(channels).normal
    gen = audio.OpusSilence(packet_ms=5, bitrate=config.bitrate, layout=config)
    packets = [gen.next_packet() for _ in range(12)]
    assert {len(p) for p in packets} == {config.bitrate * 5 // 1000 // 8}
    dec = MultistreamDecoder(channels, config.streams, config.coupled, config.mapping)
    pcm = np.concatenate([dec.decode(p) for p in packets])
    assert pcm.shape == (12 * 240, channels) and not pcm.any()


def test_matrix_is_the_clients_override():
    assert audio.AUDIO_FEC_MATRIX.flatten().tolist() == [
        0x77,
        0x40,
        0x38,
        0x0E,
        0xC7,
        0xA7,
        0x0D,
        0x6C,
    ]
    assert np.array_equal(audio._rs.matrix, audio.AUDIO_FEC_MATRIX)


def test_clients_audio_queue_recovers_a_lost_packet_from_our_parity(mcc_lib):
    pk = AudioPacketizer(key=KEY, rikeyid=5)
    payloads = [bytes([i]) * 60 for i in range(16)]
    rx = mcc_lib.AudioReceiver()
    for packet in [d for p in payloads for d in pk.packetize(p)]:
        if packet[1] == 97 and struct.unpack_from(">H", packet, 2)[0] == 9:
            continue  # lose data packet 9 (block 2, position 1)
        rx.feed(packet)
    # The queue synchronises on the first block and releases from seq 4 on, 9 rebuilt from FEC.
    got = [audio.decrypt_payload(KEY, 5, seq, p) for seq, p in enumerate(rx.payloads, start=4)]
    assert got == payloads[4:]


def test_without_parity_the_client_conceals_the_loss(mcc_lib):
    pk = AudioPacketizer(key=KEY, rikeyid=5, fec_enabled=False)
    rx = mcc_lib.AudioReceiver()
    for seq in range(24):
        (packet,) = pk.packetize(bytes([seq]) * 60)
        if seq != 9:
            rx.feed(packet)
    got = [p and audio.decrypt_payload(KEY, 5, s, p) for s, p in enumerate(rx.payloads, start=4)]
    assert got[5] is None  # seq 9: a loss placeholder, concealed by the decoder
    assert got[:5] + got[6:] == [bytes([s]) * 60 for s in range(4, 24) if s != 9]
