"""The transport session on loopback: the real client end to end, and hostile clients."""

from __future__ import annotations

import contextlib
import json
import os
import socket
import subprocess
import sys
import time
from pathlib import Path

import enet
import numpy as np
import pytest

from compat import control, rtsp
from compat.engine.stream import RTSP_MAX_CONNECTIONS, RTSP_READ_DEADLINE_S, StreamSession
from tests.compat.loopback import black, loopback_launch

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("encrypted", [False, True], ids=["plain", "rtspenc+video-gcm"])
def test_real_client_streams_decodes_and_terminates_gracefully(mcc_lib, encrypted):
    script = str(ROOT / "tests/compat/e2e_client.py")
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
    assert r["input_texts"] == ["é", "日"]  # UTF-8 text, one code point per message, parses
    assert r["input_disconnected"]  # and the sink was told the client is gone
    assert r["rtt_samples"] >= 5  # the client pings every 100 ms
    assert r["termination"] == 0  # MCC maps 0x80030023 after frames to graceful (0)
    assert r["events"][:2] == ["client.connected", "stream.started"]
    assert r["stop_reason"] == "host"
    # The launch's encoder threads reach libx264, and every stage of the loop is counted.
    assert r["encoder_threads"] == 1
    assert r["stage_frames"] >= r["frames"]
    cpu = r["stage_cpu_ms"]
    assert cpu["encode"] > 0 and cpu["convert"] > 0 and cpu["packetize_fec"] > 0
    assert (cpu["encrypt"] > 0) is encrypted


def test_a_71_client_without_a_sound_source_gets_cbr_silence_in_71(mcc_lib):
    """No sound (no server, `stream_audio = false`): silence, in the layout the ANNOUNCE
    agreed, with the multistream config the client read from the DESCRIBE."""
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/compat/e2e_client.py"), "640", "360", "30", "1.5",
         "surround71"],
        capture_output=True, text=True, timeout=90, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    assert r["opus_config"] == [8, 5, 3, [0, 1, 6, 7, 2, 3, 4, 5]]
    assert r["audio_packets"] > 50 and r["audio_sizes"] == [450_000 * 5 // 1000 // 8]


def _rtsp(port: int, data: bytes) -> bytes:
    with socket.create_connection(("127.0.0.1", port), timeout=3) as c:
        c.sendall(data)
        c.shutdown(socket.SHUT_WR)
        reply = b""
        while chunk := c.recv(4096):
            reply += chunk
    return reply


def test_garbage_rtsp_gets_an_error_and_the_listener_lives_on():
    session = StreamSession(loopback_launch(), black)
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


def _exchange(port: int, cseq: int, head: str) -> bytes:
    """One request on its own connection, as Moonlight does; the reply read up to its end."""
    with socket.create_connection(("127.0.0.1", port), timeout=3) as c:
        c.sendall(f"{head} RTSP/1.0\r\nCSeq: {cseq}\r\n\r\n".encode())
        reply = b""
        while chunk := c.recv(4096):
            reply += chunk
    return reply


def _rtsp_threads() -> list:
    import threading

    return [t for t in threading.enumerate() if t.name == "gs-rtsp-conn"]


def test_a_silent_rtsp_client_does_not_hold_up_the_real_one():
    session = StreamSession(loopback_launch(), black)
    session.start()
    port = session.launch.rtsp_port
    silent = socket.create_connection(("127.0.0.1", port))  # connects first, says nothing
    half = socket.create_connection(("127.0.0.1", port))
    half.sendall(b"OPTIONS rtsp://x RTSP/1.0\r\nCSe")  # and one that stops mid-request
    try:
        time.sleep(0.1)  # both are accepted and waiting before the real client comes
        t0 = time.monotonic()
        opts = _exchange(port, 1, "OPTIONS rtsp://127.0.0.1:48010")
        desc = _exchange(port, 2, "DESCRIBE rtsp://127.0.0.1:48010")
        took = time.monotonic() - t0
        assert opts.startswith(b"RTSP/1.0 200 OK\r\nCSeq: 1\r\n")
        assert desc.startswith(b"RTSP/1.0 200 OK\r\nCSeq: 2\r\n") and b"encryptionSupported" in desc
        assert took < 1.0  # one at a time, the silent client held it for the read timeout
        # The silent ones are dropped at the deadline, without a reply.
        silent.settimeout(RTSP_READ_DEADLINE_S + 2)
        half.settimeout(RTSP_READ_DEADLINE_S + 2)
        assert silent.recv(100) == b"" and half.recv(100) == b""
        assert session.rtsp_dropped == 2
    finally:
        silent.close()
        half.close()
        session.stop()


def test_rtsp_connections_are_bounded_oversized_requests_dropped_and_stop_joins_them():
    session = StreamSession(loopback_launch(), black)
    session.start()
    port = session.launch.rtsp_port
    crowd = [socket.create_connection(("127.0.0.1", port)) for _ in range(3 * RTSP_MAX_CONNECTIONS)]
    try:
        time.sleep(0.3)
        assert len(_rtsp_threads()) <= 2 * RTSP_MAX_CONNECTIONS
        t0 = time.monotonic()
        assert _exchange(port, 7, "OPTIONS rtsp://x").startswith(b"RTSP/1.0 200 OK")
        assert time.monotonic() - t0 < 1.0  # a newcomer pushes the oldest silent one out
        # An endless request is cut at MAX_REQUEST_BYTES: 413, then the connection closes.
        with socket.create_connection(("127.0.0.1", port), timeout=5) as big:
            big.sendall(b"OPTIONS rtsp://x RTSP/1.0\r\nX: ")
            with contextlib.suppress(OSError):  # the host may close while we still write
                big.sendall(b"a" * (rtsp.MAX_REQUEST_BYTES + 4096))
            reply = b""
            with contextlib.suppress(OSError):
                while chunk := big.recv(4096):
                    reply += chunk
            assert reply.startswith(b"RTSP/1.0 413") or reply == b""
        assert session.running
    finally:
        t0 = time.monotonic()
        session.stop()  # joins every handler (they watch the stop flag) before closing
        stopped_in = time.monotonic() - t0
        for c in crowd:
            c.close()
    assert _rtsp_threads() == []
    assert stopped_in < 2.0


def test_wrong_connect_data_is_refused_and_silence_times_out():
    events = []
    launch = loopback_launch(control_timeout_s=0.5)
    session = StreamSession(launch, black, on_event=lambda kind, **d: events.append((kind, d)))
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
    session = StreamSession(loopback_launch(max_send_mbps=20), black)
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
    launch = loopback_launch()
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as squatter:
        squatter.bind(("127.0.0.1", launch.audio_port))
        with pytest.raises(OSError):
            StreamSession(launch, black)
    # The RTSP and video ports bound before the failure were released.
    StreamSession(launch, black).stop()


def test_a_forged_control_message_ends_the_session():
    launch = loopback_launch()
    session = StreamSession(launch, black)
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


def _run_real_client(*args: str) -> dict:
    script = str(ROOT / "tests/compat/e2e_client.py")
    out = subprocess.run(
        [sys.executable, script, *args],
        capture_output=True,
        text=True,
        timeout=90,
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_spoofed_pings_during_a_live_stream_get_nothing_and_the_client_every_frame(mcc_lib):
    """A spoofed PING never redirects the video to its sender.

    Spoofers ping both media ports every 20 ms from before the client's first ping to the end:
    from 127.0.0.2 with the session's real ping payload (a sniffed one), and from the client's
    own IP with the legacy ``PING`` and with a wrong payload. None of them may receive a single
    datagram, and the real client (moonlight-common-c) must get every frame the host sent.
    """
    r = _run_real_client("640", "360", "30", "3", "attack")
    attack = r["attack"]
    assert attack["received"] == 0
    assert attack["sent"] > 200  # the spoofing ran for the whole stream
    assert r["frames"] >= 30 and r["idr_first"] and r["frame_numbers_contiguous"]
    assert r["frames"] == r["host_frames_sent"] == r["last_frame_number"]  # every frame
    assert r["decoded"] == r["frames"]
    assert r["audio_packets"] > 50 and r["audio_sizes"] == [60]
    for kind in ("video", "audio"):
        ip, port = attack["destinations"][kind]
        assert ip == "127.0.0.1" and port not in attack["attacker_ports"]
        assert attack["ignored"][kind] > 50
    # The stranger's RTSP connection is closed without a reply, its ENet connect dropped.
    assert attack["rtsp_reply"] == ""
    assert attack["enet"] == "disconnected"
    assert attack["peers_refused"] >= 2
    assert r["termination"] == 0 and r["stop_reason"] == "host"


def _second_loopback_ip_works() -> bool:
    try:
        with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s:
            s.bind(("127.0.0.2", 0))
    except OSError:
        return False
    return True


needs_127_0_0_2 = pytest.mark.skipif(
    not _second_loopback_ip_works(), reason="127.0.0.2 cannot be bound here"
)


@needs_127_0_0_2
def test_rtsp_from_another_address_is_closed_without_a_reply():
    """RTSP hands out the ping payload and the connect data: only the client's IP may ask."""
    launch = loopback_launch()
    session = StreamSession(launch, black)
    session.start()
    try:
        with socket.create_connection(
            ("127.0.0.1", launch.rtsp_port), timeout=3, source_address=("127.0.0.2", 0)
        ) as c:
            c.sendall(b"DESCRIBE rtsp://127.0.0.1 RTSP/1.0\r\nCSeq: 1\r\n\r\n")
            try:
                reply = c.recv(4096)
            except ConnectionResetError:  # closed before it read our request: a reset
                reply = b""
            assert reply == b""  # closed, no reply
        assert _exchange(launch.rtsp_port, 2, "OPTIONS rtsp://x").startswith(b"RTSP/1.0 200")
        assert session.rtsp_dropped == 1 and not session.rtsp.described
    finally:
        session.stop()


@needs_127_0_0_2
def test_a_control_connect_from_another_address_is_refused_even_with_the_connect_data():
    launch = loopback_launch()
    session = StreamSession(launch, black)
    session.start()
    try:
        stranger = enet.Host(enet.Address(b"127.0.0.2", 0), 1, 0, 0, 0)
        stranger.connect(enet.Address(b"127.0.0.1", launch.control_port), 0x30, launch.connect_data)
        kinds = []
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and enet.EVENT_TYPE_DISCONNECT not in kinds:
            kinds.append(stranger.service(20).type)
        assert enet.EVENT_TYPE_DISCONNECT in kinds
        assert session._peer is None  # the slot is still free for the real client

        client = enet.Host(None, 1, 0, 0, 0)
        client.connect(enet.Address(b"127.0.0.1", launch.control_port), 0x30, launch.connect_data)
        deadline = time.monotonic() + 3
        while time.monotonic() < deadline and session._peer is None:
            client.service(20)
        assert session._peer is not None
        assert session.client.refused == 1
    finally:
        session.stop()
