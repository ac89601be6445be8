"""Encryption required (mode 2) on a real host, with the real client, and the wire sniffed.

A raw AF_PACKET socket on the loopback interface (root here; skipped otherwise) sees every UDP
datagram the host's video port sends: each must be in the encrypted layout (IV with the
per-session counter and ``'V'``, the frame index, the tag, then ciphertext) and no H.264 start
code may appear in clear, while the client still decodes every frame.
"""

from __future__ import annotations

import socket
import struct
import threading

import pytest

from compat import rtsp
from tests.compat.test_launch_control import KEYS, app_id, status_of
from tests.compat.test_rtsp import ANNOUNCE, _req
from tests.streaming.conftest import client_result, events, pair, run_client, wait_for
from tests.support.moonlight import host_config

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

ETH_P_ALL = 0x0003
PACKET_OUTGOING = 4


class VideoSniffer:
    """UDP payloads sent from ``port`` on ``lo`` (each datagram once: outgoing copies skipped).

    The host sends a frame's datagrams in UDP segmentation offload batches (one `sendmsg` per
    batch, `compat.engine.stream.send_datagrams`); on ``lo`` the tap sees a batch before the
    kernel cuts it, so a payload longer than ``segment`` is cut here the way the kernel cuts it
    for the receiver (every ``segment`` bytes, the last piece shorter)."""

    def __init__(self, port: int, segment: int):
        try:
            self.sock = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(ETH_P_ALL))
        except (PermissionError, AttributeError):
            pytest.skip("a raw packet socket needs root (CAP_NET_RAW) on Linux")
        self.sock.bind(("lo", 0))
        self.sock.settimeout(0.2)
        self.port = port
        self.segment = segment
        self.batches = 0
        self.payloads: list[bytes] = []
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                frame, addr = self.sock.recvfrom(65535)
            except TimeoutError:
                continue
            if addr[2] == PACKET_OUTGOING or frame[12:14] != b"\x08\x00":
                continue
            ip = frame[14:]
            ihl = (ip[0] & 0x0F) * 4
            if ip[9] != socket.IPPROTO_UDP:
                continue
            src_port = struct.unpack_from(">H", ip, ihl)[0]
            if src_port == self.port:
                # The IP header's total length covers a whole GSO batch too.
                total = struct.unpack_from(">H", ip, 2)[0] or len(ip)
                payload = bytes(ip[ihl + 8 : total])
                if len(payload) > self.segment:
                    self.batches += 1
                seg = self.segment
                self.payloads += [payload[i : i + seg] for i in range(0, len(payload), seg)]

    def close(self) -> list[bytes]:
        self.stop.set()
        self.thread.join(2)
        self.sock.close()
        return self.payloads


def test_required_encryption_refuses_old_clients_and_encrypts_every_video_datagram(
    stream_host, tmp_path
):
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="9753", name="Encrypted")
    with host_config(host, {"lan_encryption_mode": "2"}):  # loopback is LAN under auto
        desktop = app_id(ml, "Desktop")
        # A client without corever cannot encrypt: refused before anything starts.
        xml = ml.https("launch", f"appid={desktop}&mode=640x360x30&{KEYS}")
        assert status_of(xml) == 403 and "requires encryption" in xml, xml
        sniffer = VideoSniffer(host.base_port + 9, segment=1360 + 16 + 32)
        try:
            proc = run_client(host, tmp_path / "ml", 640, 360, 30, 4, "quit", draw=False)
            r = client_result(proc)
        finally:
            payloads = sniffer.close()
    assert r["session_url"] == f"rtspenc://127.0.0.1:{host.base_port + 21}"
    assert r["frames"] > 40 and r["decoded"] == r["frames"], r
    video = [p for p in payloads if len(p) > 64]  # the pings the host answers nothing to
    assert len(video) > 40
    counters = []
    for p in video:
        assert p[8:12] == b"\x00\x00\x00V", p[:16].hex()  # the video IV layout
        # No Annex-B start code in clear past the 32-byte header (IV, frame index, tag): the
        # header's little-endian counters may spell 00 00 00 01 by themselves.
        assert b"\x00\x00\x00\x01" not in p[32:]
        assert len(p) == 1360 + 16 + 32  # the client's packetSize (1392 - 32) + RTP + overhead
        counters.append(struct.unpack_from("<Q", p)[0])
    assert counters == list(range(counters[0], counters[0] + len(counters)))  # one per datagram


def test_an_announce_leaving_video_in_clear_gets_403_and_ends_the_session(stream_host, tmp_path):
    """A client that speaks rtspenc:// but leaves video encryption off under mode 2: RTSP 403,
    and the session ends with the reason in `session.ended` (no app left running)."""
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="8642", name="Half encrypted")
    key = bytes.fromhex("000102030405060708090a0b0c0d0e0f")  # KEYS' rikey
    port = host.base_port + 21
    with host_config(host, {"lan_encryption_mode": "2"}):
        xml = ml.https("launch", f"appid={app_id(ml, 'Desktop')}&mode=640x360x30&{KEYS}&corever=1")
        assert status_of(xml) == 200 and f"rtspenc://127.0.0.1:{port}<" in xml, xml
        replies = []
        for seq, plain in enumerate(
            [_req("OPTIONS", "rtspenc://127.0.0.1", 1), _req("DESCRIBE", "rtspenc://127.0.0.1", 2),
             _req("SETUP", "streamid=audio/0/0", 3), _req("SETUP", "streamid=video/0/0", 4),
             _req("SETUP", "streamid=control/13/0", 5),
             _req("ANNOUNCE", "streamid=control/13/0", 6, body=ANNOUNCE)],  # encryptionEnabled 5
            start=1,
        ):  # fmt: skip
            with socket.create_connection(("127.0.0.1", port), timeout=5) as c:
                c.sendall(rtsp.seal(key, seq, plain, b"C"))
                reply = b""
                while chunk := c.recv(4096):
                    reply += chunk
            replies.append(rtsp.unseal(key, reply, b"H")[1])
        assert b"encryptionRequested:7" in replies[1]
        assert replies[5].startswith(b"RTSP/1.0 403 Forbidden\r\nCSeq: 6\r\n"), replies[5]
        seen = events(host, "session.ended", lambda ev: any(
            e.get("reason") == "encryption_required" for e in ev), timeout=30)  # fmt: skip
    ended = [e for e in seen if e.get("reason") == "encryption_required"]
    assert ended and "left video in clear" in ended[-1]["error"], seen
    assert wait_for(lambda: "<currentgame>0<" in ml.https("serverinfo"), 15)
