"""The transport session on loopback: the real client end to end, and hostile clients."""

from __future__ import annotations

import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from streaming.compat import control
from streaming.engine.session import Launch, StreamSession

ROOT = Path(__file__).resolve().parents[2]


def _free(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _launch(**kw) -> Launch:
    return Launch(
        rikey=bytes(range(16)),
        rikeyid=1,
        host="127.0.0.1",
        rtsp_port=_free(socket.SOCK_STREAM),
        video_port=_free(socket.SOCK_DGRAM),
        control_port=_free(socket.SOCK_DGRAM),
        audio_port=_free(socket.SOCK_DGRAM),
        **kw,
    )


def _black(w: int, h: int) -> np.ndarray:
    return np.zeros((h, w, 4), np.uint8)


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "rtspenc+video-gcm"])
def test_real_client_streams_decodes_and_terminates_gracefully(mcc_lib, encrypted):
    script = str(ROOT / "tests/compat_protocol/e2e_client.py")
    mode = ["encrypt-video", "rtspenc"] if encrypted else []
    out = subprocess.run(
        [sys.executable, script, "640", "360", "30", "2", *mode],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["connected_s"] < 5
    assert r["frames"] >= 10 and r["idr_first"] and r["frame_numbers_contiguous"]
    assert r["decoded"] == r["frames"]
    assert max(abs(a - b) for a, b in zip(r["box_bgr"], (40, 200, 60), strict=True)) < 12
    assert max(abs(a - b) for a, b in zip(r["corner_bgr"], (230, 40, 40), strict=True)) < 12
    assert max(r["background_bgr"]) < 12
    assert r["audio_packets"] > 50 and r["audio_sizes"] == [60]  # decrypted CBR Opus silence
    assert r["video_encrypted"] is encrypted
    assert r["packet_size"] == (1360 if encrypted else 1392)  # the client makes room
    assert r["rtsp_sealed_replies"] == (7 if encrypted else 0)  # OPTIONS .. PLAY, all sealed
    assert {3, 7} <= set(r["input_magics"])  # our key press and mouse move reached the sink
    assert r["input_disconnected"]  # and the sink was told the client is gone
    assert r["rtt_samples"] >= 5  # the client pings every 100 ms
    assert r["termination"] == 0  # MCC maps 0x80030023 after frames to graceful (0)
    assert r["events"][:2] == ["client.connected", "stream.started"]
    assert r["stop_reason"] == "host"


def _rtsp(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as c:
        c.sendall(data)
        c.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := c.recv(4096):
            reply += chunk
    return reply


def test_garbage_rtsp_gets_an_error_and_the_listener_lives_on():
    session = StreamSession(_launch(), _black)
    session.start()
    try:
        assert _rtsp(session.launch.rtsp_port, b"\x16\x03\x01garbage\r\n\r\n").startswith(
            b"RTSP/1.0 400"
        )
        ok = _rtsp(session.launch.rtsp_port, b"OPTIONS rtsp://x RTSP/1.0\r\nCSeq: 1\r\n\r\n")
        assert ok.startswith(b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n")
        assert session.running
    finally:
        session.stop()


def test_wrong_connect_data_is_refused_and_silence_times_out():
    enet = pytest.importorskip("enet")
    events = []
    launch = _launch(control_timeout_s=0.5)
    session = StreamSession(launch, _black, on_event=lambda kind, **d: events.append((kind, d)))
    session.start()
    try:
        stranger = enet.Host(None, 1, 0, 0, 0)
        peer = stranger.connect(enet.Address(b"127.0.0.1", launch.control_port), 0x30, 12345)
        kinds = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and enet.EVENT_TYPE_DISCONNECT not in kinds:
            kinds.append(stranger.service(20).type)
        assert enet.EVENT_TYPE_DISCONNECT in kinds  # the host dropped the unknown peer
        assert session.running and events == []

        client = enet.Host(None, 1, 0, 0, 0)
        peer = client.connect(
            enet.Address(b"127.0.0.1", launch.control_port), 0x30, launch.connect_data
        )
        msg = control.seal(launch.rikey, 0, control.IDR_REQUEST, b"\0\0", b"C")
        deadline = time.monotonic() + 5
        sent = False
        while time.monotonic() < deadline and session.running:
            ev = client.service(20)
            if ev.type == enet.EVENT_TYPE_CONNECT and not sent:
                peer.send(1, enet.Packet(msg, enet.PACKET_FLAG_RELIABLE))
                sent = True
        # Connected, spoke once, then went quiet: the session ends on its own.
        assert not session.running
        assert session.stop_reason == "timeout"
        assert events == [("client.connected", {}), ("client.disconnected", {"reason": "timeout"})]
    finally:
        session.stop()


def test_pacing_spreads_a_frame_at_the_configured_rate():
    session = StreamSession(_launch(max_send_mbps=20), _black)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1 << 20)
    try:
        rows = np.zeros((256, 1408), np.uint8)  # 360 KB: 144 ms at 20 Mbit/s
        start = time.monotonic()
        session._send_video(rows, rx.getsockname())
        took = time.monotonic() - start
        assert 0.12 < took < 0.6
    finally:
        rx.close()
        session.stop()


def test_a_port_in_use_leaks_no_listener():
    launch = _launch()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as squatter:
        squatter.bind(("127.0.0.1", launch.audio_port))
        with pytest.raises(OSError):
            StreamSession(launch, _black)
    # The RTSP and video ports bound before the failure were released.
    StreamSession(launch, _black).stop()


def test_a_forged_control_message_ends_the_session():
    enet = pytest.importorskip("enet")
    launch = _launch()
    session = StreamSession(launch, _black)
    session.start()
    try:
        client = enet.Host(None, 1, 0, 0, 0)
        peer = client.connect(
            enet.Address(b"127.0.0.1", launch.control_port), 0x30, launch.connect_data
        )
        forged = control.seal(bytes(16), 0, control.IDR_REQUEST, b"\0\0", b"C")  # wrong key
        deadline = time.monotonic() + 5
        while time.monotonic() < deadline and session.running:
            if client.service(20).type == enet.EVENT_TYPE_CONNECT:
                peer.send(0, enet.Packet(forged, enet.PACKET_FLAG_RELIABLE))
        assert session.stop_reason == "protocol_error"
    finally:
        session.stop()
