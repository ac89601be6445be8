"""Control stream: AES-GCM framing vectors, message parsing, and ENet on loopback."""

from __future__ import annotations

import socket
import struct
import time

import enet
import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

from compat import control
from compat.control import ControlCipher, ControlError

KEY = bytes(range(16))


def _gcm(key: bytes, iv: bytes, plaintext: bytes) -> tuple[bytes, bytes]:
    """AES-GCM through the low-level API, independent of the module's AESGCM use."""
    enc = Cipher(algorithms.AES(key), modes.GCM(iv)).encryptor()
    ct = enc.update(plaintext) + enc.finalize()
    return ct, enc.tag


def test_client_idr_request_layout_by_hand():
    # seq 0, client -> host, control-v2: IV = 00000000 000000000000 'C' 'C'
    ct, tag = _gcm(KEY, bytes(10) + b"CC", struct.pack("<HH", 0x0302, 2) + b"\0\0")
    expected = struct.pack("<HHI", 0x0001, 4 + 16 + 6, 0) + tag + ct
    assert control.seal(KEY, 0, 0x0302, b"\0\0", b"C") == expected
    # Pinned vector (regression guard for the bytes above).
    assert expected.hex() == "01001a000000000022302723537811166cb9bfead7dad4575cd629f5cafe"
    host = ControlCipher(KEY)
    assert host.open(expected) == (control.IDR_REQUEST, b"\0\0")


def test_host_termination_layout_by_hand():
    host = ControlCipher(KEY)
    host.send_seq = 7
    packet = host.termination()
    iv = struct.pack("<I", 7) + bytes(6) + b"HC"
    ct, tag = _gcm(KEY, iv, struct.pack("<HH", 0x0109, 4) + bytes.fromhex("80030023"))
    assert packet == struct.pack("<HHI", 1, 4 + 16 + 8, 7) + tag + ct
    assert packet.hex() == "01001c0007000000a825d6bd20ccfe5ba7fbb60530900ef17f27937ed176265a"
    assert host.send_seq == 8


def test_legacy_iv_is_16_bytes_with_the_low_seq_byte():
    ct, tag = _gcm(KEY, bytes([0x34]) + bytes(15), struct.pack("<HH", 0x0200, 0))
    packet = control.seal(KEY, 0x1234, 0x0200, b"", b"C", v2=False)
    assert packet[8:] == tag + ct
    assert ControlCipher(KEY, v2=False).open(packet) == (0x0200, b"")


def test_tampered_unencrypted_and_reflected_messages_are_rejected():
    host = ControlCipher(KEY)
    good = control.seal(KEY, 3, control.PERIODIC_PING, bytes(8), b"C")
    bad = bytearray(good)
    bad[-1] ^= 1
    with pytest.raises(ControlError):
        host.open(bytes(bad))
    with pytest.raises(ControlError):
        host.open(struct.pack("<HH", 0x0302, 2) + b"\0\0" + bytes(24))  # plaintext type
    with pytest.raises(ControlError):
        host.open(host.seal(control.IDR_REQUEST, b"\0\0"))  # our own message sent back
    with pytest.raises(ControlError):
        host.open(good[:-1])  # length field disagrees
    with pytest.raises(ControlError):
        host.open(b"\x01\x00")


def test_interpret_maps_messages_to_engine_actions():
    assert control.interpret(control.IDR_REQUEST, b"\0\0").idr_requested
    rfi = struct.pack("<IIII", 10, 0, 12, 0) + bytes(8)
    assert control.parse_rfi(rfi) == control.RefInvalidation(10, 12)
    asked = control.interpret(control.INVALIDATE_REF_FRAMES, rfi)
    # Not an IDR request as such: the engine first checks the range (compat.engine.recovery).
    assert asked.invalidation == control.RefInvalidation(10, 12) and not asked.idr_requested
    with pytest.raises(ControlError):
        control.interpret(control.INVALIDATE_REF_FRAMES, rfi[:11])
    assert control.interpret(control.PERIODIC_PING, bytes(8)).ping
    assert control.interpret(control.START_B, b"\0").ignored
    fec = struct.pack(">IHHHHHHHBBB", 42, 100, 90, 3, 20, 4, 18, 2, 20, 0, 1)
    status = control.interpret(control.FRAME_FEC_STATUS, fec).fec_status
    assert (status.frame_index, status.total_data, status.received_parity, status.block_count) == (
        42,
        20,
        2,
        1,
    )
    with pytest.raises(ControlError):
        control.parse_fec_status(fec[:-1])


def _free_udp_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_enet_loopback_connect_data_and_encrypted_exchange():
    from compat.enet_transport import EnetHost

    port = _free_udp_port()
    host = EnetHost(port, "127.0.0.1")
    client = enet.Host(None, 1, 0, 0, 0)
    peer = client.connect(enet.Address(b"127.0.0.1", port), 0x30, 0xCAFEF00D)
    cipher = ControlCipher(KEY)
    got: list = []
    reply = None
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and reply is None:
        ev = host.service(5)
        if ev is not None:
            got.append(ev)
            if ev.kind == "receive":
                host.send(ev.peer, cipher.termination())
                host.flush()
        cev = client.service(5)
        if cev.type == enet.EVENT_TYPE_CONNECT:
            msg = control.seal(KEY, 0, control.IDR_REQUEST, b"\0\0", b"C")
            peer.send(1, enet.Packet(msg, enet.PACKET_FLAG_RELIABLE))
        elif cev.type == enet.EVENT_TYPE_RECEIVE:
            reply = cev.packet.data
    assert [e.kind for e in got] == ["connect", "receive"]
    assert got[0].connect_data == 0xCAFEF00D
    assert got[1].channel == 1
    assert cipher.open(got[1].data) == (control.IDR_REQUEST, b"\0\0")
    assert reply is not None
    _, msg_type, payload = control.open_sealed(KEY, reply, b"H")
    assert (msg_type, payload) == (control.TERMINATION, bytes.fromhex("80030023"))
