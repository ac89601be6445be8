"""Encryption modes (`lan_/wan_encryption_mode`, `network_policy`) and each layer's bytes.

The decryptors here are written from the byte layouts (reference B.10, B.12, B.13 and the
control framing), not with the host's own helpers, so a packetizer that drifts from the
layout the client implements fails here.
"""

from __future__ import annotations

import struct
import time

import pytest
from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes
from cryptography.hazmat.primitives.ciphers.aead import AESGCM

from compat import control, rtsp
from compat.audio import AudioPacketizer
from compat.engine import encryption
from compat.engine.stream import StreamSession
from compat.video import FRAME_TYPE_IDR, VideoPacketizer
from tests.compat.loopback import black, loopback_launch, rtsp_request
from tests.compat.test_rtsp import ANNOUNCE, URL, _handshake, _req, _status
from tests.support.state_api import state  # noqa: F401 - fixture

KEY = bytes(range(16))


# ---- policy ----


@pytest.mark.parametrize(
    "ip,policy,want",
    [("127.0.0.1", "auto", "lan"), ("192.168.1.20", "auto", "lan"), ("10.1.2.3", "auto", "lan"),
     ("100.80.1.1", "auto", "lan"), ("fe80::1%eth0", "auto", "lan"),
     ("::ffff:10.0.0.1", "auto", "lan"),
     ("8.8.8.8", "auto", "wan"), ("2001:db8::1", "auto", "wan"), ("garbage", "auto", "wan"),
     ("", "auto", "wan"), ("8.8.8.8", "lan", "lan"), ("192.168.1.20", "wan", "wan")],
)  # fmt: skip
def test_network_class_by_address_and_policy(ip, policy, want):
    assert encryption.network_class(ip, policy) == want


def test_modes_decide_rtspenc_and_refuse_clients_without_corever():
    assert encryption.mode_for("192.168.1.2", "auto", 0, 2) == 0
    assert encryption.mode_for("8.8.8.8", "auto", 0, 2) == 2
    assert encryption.mode_for("192.168.1.2", "wan", 0, 1) == 1
    off = encryption.decide(0, 1)
    assert not off.rtsp_encrypted and off.offered == 0x05 and off.requested == 0x01
    assert off.required == 0
    assert not encryption.decide(1, 0).rtsp_encrypted  # opportunistic: plain for old clients
    when = encryption.decide(1, 1)
    assert when.rtsp_encrypted and when.offered == 0x07 and when.required == 0
    required = encryption.decide(2, 1)
    assert required.rtsp_encrypted and required.requested == required.required == 0x07
    for corever in (0, -1):
        with pytest.raises(encryption.Refused):
            encryption.decide(2, corever)
    assert [encryption.corever(v) for v in ("1", " 2 ", "", None, "x", "-3", "99999")] == [
        1, 2, 0, 0, 0, 0, 0]  # fmt: skip


def test_describe_requests_every_layer_and_announce_without_one_is_403():
    s = rtsp.RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1, 0x07, 0x07, 0x07)
    replies = _handshake(s)  # encryptionEnabled 5: control and audio, video left in clear
    assert b"encryptionSupported:7\n" in replies[1] and b"encryptionRequested:7\n" in replies[1]
    assert _status(replies[5]) == 403 and s.params is None
    assert s.refused == "encryption required; the client left video in clear"
    assert _status(replies[6]) == 455  # no PLAY after a refused ANNOUNCE
    ok = rtsp.RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1, 0x07, 0x07, 0x07)
    replies = _handshake(ok, ANNOUNCE.replace(b"encryptionEnabled:5", b"encryptionEnabled:7"))
    assert [_status(r) for r in replies] == [200] * 7 and ok.refused is None
    # Audio may be switched on by the legacy feature flag instead of its bit.
    legacy = rtsp.RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1, 0x07, 0x07, 0x07)
    body = ANNOUNCE.replace(b"encryptionEnabled:5", b"encryptionEnabled:3")
    assert _status(_handshake(legacy, body)[5]) == 200
    none = rtsp.RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1, 0x07, 0x07, 0x07)
    body = ANNOUNCE.replace(b"encryptionEnabled:5", b"encryptionEnabled:0").replace(
        b"featureFlags:167", b"featureFlags:135"
    )
    assert _status(_handshake(none, body)[5]) == 403
    assert none.refused.endswith("left control, video, audio in clear")


def test_a_refused_announce_ends_the_session_with_the_reason():
    session = StreamSession(loopback_launch(encryption_mode=2), black)
    session.start()
    port = session.launch.rtsp_port
    try:

        def one(data: bytes) -> bytes:
            return rtsp_request(port, data, timeout=3)

        one(_req("OPTIONS", URL, 1))
        describe = one(_req("DESCRIBE", URL, 2))
        assert b"encryptionRequested:7" in describe
        for cseq, stream in ((3, "audio/0/0"), (4, "video/0/0"), (5, "control/13/0")):
            assert _status(one(_req("SETUP", f"streamid={stream}", cseq))) == 200
        reply = one(_req("ANNOUNCE", "streamid=control/13/0", 6, body=ANNOUNCE))
        assert reply.startswith(b"RTSP/1.0 403 Forbidden\r\nCSeq: 6\r\n")
        deadline = time.monotonic() + 3
        while session.running and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not session.running and session.stop_reason == "encryption_required"
    finally:
        session.stop()


# ---- each layer, decrypted from its byte layout ----


def _gcm_open(iv: bytes, tag: bytes, body: bytes) -> bytes:
    return AESGCM(KEY).decrypt(iv, body + tag, None)


def test_video_datagrams_decrypt_by_the_layout_and_hide_the_bitstream():
    bitstream = b"\x00\x00\x00\x01\x67" + bytes(range(256)) * 40  # SPS start code, ~10 KB
    plain = VideoPacketizer(packet_size=1360, fec_percentage=20)
    sealed = VideoPacketizer(packet_size=1360, fec_percentage=20, encryption_key=KEY)
    clear_rows = plain.packetize(bitstream, FRAME_TYPE_IDR, 9000)
    rows = sealed.packetize(bitstream, FRAME_TYPE_IDR, 9000)
    assert rows.shape == (clear_rows.shape[0], clear_rows.shape[1] + 32)
    for i, row in enumerate(rows):
        data = row.tobytes()
        assert b"\x00\x00\x00\x01" not in data[32:]
        iv, frame_index, tag, body = data[:12], data[12:16], data[16:32], data[32:]
        assert iv == struct.pack("<Q", i) + b"\x00\x00\x00V"  # per-session counter, 'V'
        assert struct.unpack("<I", frame_index)[0] == 1
        assert _gcm_open(iv, tag, body) == clear_rows[i].tobytes()
    second = sealed.packetize(bitstream[:500], FRAME_TYPE_IDR, 9001)[0].tobytes()
    assert second[:8] == struct.pack("<Q", rows.shape[0])  # the counter runs on across frames
    assert struct.unpack("<I", second[12:16])[0] == 2


def test_audio_payloads_decrypt_with_cbc_and_the_rikeyid_iv():
    rikeyid = -7
    pk = AudioPacketizer(key=KEY, rikeyid=rikeyid, packet_ms=5)
    opus = [bytes([i]) * 60 for i in range(4)]
    packets = [p for o in opus for p in pk.packetize(o)]
    data = [p for p in packets if p[1] == 97]
    assert len(data) == 4 and len(packets) == 6  # 4 data + 2 FEC after the block
    for seq, (packet, want) in enumerate(zip(data, opus, strict=True)):
        assert struct.unpack(">H", packet[2:4])[0] == seq
        iv = struct.pack(">I", (rikeyid + seq) & 0xFFFFFFFF) + bytes(12)
        dec = Cipher(algorithms.AES(KEY), modes.CBC(iv)).decryptor()
        padded = dec.update(packet[12:]) + dec.finalize()
        assert padded[: -padded[-1]] == want and set(padded[-padded[-1] :]) == {padded[-1]}
        assert len(packet[12:]) == 64  # PKCS#7 to the next block


def test_control_v2_messages_decrypt_with_the_host_direction_iv():
    cipher = control.ControlCipher(KEY)
    for seq in range(3):
        packet = cipher.termination()
        kind, length, wire_seq = struct.unpack_from("<HHI", packet)
        assert (kind, length, wire_seq) == (0x0001, len(packet) - 4, seq)
        iv = struct.pack("<I", seq) + bytes(6) + b"HC"
        plain = _gcm_open(iv, packet[8:24], packet[24:])
        assert plain == struct.pack("<HH", 0x0109, 4) + struct.pack(">I", 0x80030023)


def test_encrypted_rtsp_replies_decrypt_with_the_host_direction_iv():
    s = rtsp.RtspSession(47998, 48000, 47999, "0123456789ABCDEF", 1, key=KEY)
    request = _req("OPTIONS", URL, 1)
    iv = struct.pack("<I", 1) + bytes(6) + b"CR"
    sealed = AESGCM(KEY).encrypt(iv, request, None)
    wire = struct.pack(">II", 0x80000000 | len(request), 1) + sealed[-16:] + sealed[:-16]
    reply = s.handle(wire)
    type_len, seq = struct.unpack(">II", reply[:8])
    assert type_len & 0x80000000 and seq == 1
    body = _gcm_open(struct.pack("<I", 1) + bytes(6) + b"HR", reply[8:24], reply[24:])
    assert len(body) == type_len & 0x7FFFFFFF and body.startswith(b"RTSP/1.0 200 OK\r\nCSeq: 1")


# ---- /launch and /resume ----


def _config(monkeypatch, **values):
    from compat import launchconfig

    real = launchconfig._config
    monkeypatch.setattr(
        launchconfig, "_config", lambda name, default: values.get(name, real(name, default))
    )


def _resume(monkeypatch, remote: str, query: dict) -> tuple[bytes, list]:
    from compat import session_routes
    from compat.nvhttp.dispatch import ClientInfo, NvRequest
    from streaming import services

    pushed: list = []
    mine = {"id": "0000aaaa", "state": "streaming", "port_slot": 0}
    monkeypatch.setattr(services, "current", lambda fp: mine if fp == "aa" * 32 else None)
    monkeypatch.setattr(services, "request_resume", lambda sid, arm: pushed.append(arm))
    monkeypatch.setattr(services, "wait_report", lambda arm, timeout: {"status": 200})
    req = NvRequest(path="/resume", query={"rikey": "00" * 16, "rikeyid": "3", **query},
                    https=True, remote=remote, local="192.168.1.2")  # fmt: skip
    req.client = ClientInfo("aa" * 32, "tv", "U")
    return session_routes.resume(req).body, pushed


def test_resume_under_required_encryption_refuses_old_clients_and_seals_rtsp(monkeypatch):
    _config(monkeypatch, lan_encryption_mode=2, wan_encryption_mode=0)
    body, pushed = _resume(monkeypatch, "192.168.1.20", {})
    assert b'status_code="403"' in body and b"requires encryption" in body and not pushed
    body, pushed = _resume(monkeypatch, "192.168.1.20", {"corever": "1"})
    assert b"<sessionUrl0>rtspenc://192.168.1.2:" in body and pushed[0]["corever"] == "1"
    body, _ = _resume(monkeypatch, "8.8.8.8", {})  # WAN is mode 0 here: plain
    assert b"<sessionUrl0>rtsp://192.168.1.2:" in body
    _config(monkeypatch, network_policy="wan", wan_encryption_mode=1)
    body, _ = _resume(monkeypatch, "192.168.1.20", {"corever": "1"})
    assert b"<sessionUrl0>rtspenc://" in body


@pytest.mark.usefixtures("state")
def test_encryption_modes_come_from_the_config_by_network_class():
    """`lan_encryption_mode`, `wan_encryption_mode` and `network_policy` decide the launch's
    encryption (the file the operator edits, read at each arm)."""
    from compat.launchconfig import make_launch
    from hostconfig import store

    arm = {"rikey": "00" * 16, "rikeyid": 1, "remote": "192.168.1.20", "corever": "1"}
    before = make_launch(arm)  # defaults: LAN 0, WAN 1
    assert before.encryption_mode == 0 and not before.rtsp_encryption
    wan = make_launch({**arm, "remote": "203.0.113.9"})
    assert wan.encryption_mode == 1 and wan.rtsp_encryption
    store.write({"lan_encryption_mode": "2"})
    lan = make_launch(arm)
    assert lan.encryption_mode == 2 and lan.rtsp_encryption
    assert make_launch({**arm, "corever": ""}).encryption_mode == 2  # never weaker
    store.write({"network_policy": "wan", "wan_encryption_mode": "0"})
    assert make_launch(arm).encryption_mode == 0  # the LAN client counted as WAN
