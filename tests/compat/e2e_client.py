"""Run as a script: our StreamSession serves moonlight-common-c (moonlight-python) on loopback.

A subprocess because the client library keeps global state and a crash in C must not take
pytest down. Prints one JSON line with what the client saw.
"""

from __future__ import annotations

import json
import secrets
import socket
import sys
import threading
import time

import av
import numpy as np


def free_port(kind: int) -> int:
    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_launch(**fields):
    """A Launch on free loopback ports with a fresh key and IV (what /launch arms for a local
    client), and that key and IV for the client; `fields` set the rest."""
    from compat.engine.stream import Launch, rikeyid_from_iv

    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    launch = Launch(
        rikey=key,
        rikeyid=rikeyid_from_iv(iv),
        host="127.0.0.1",
        rtsp_port=free_port(socket.SOCK_STREAM),
        video_port=free_port(socket.SOCK_DGRAM),
        control_port=free_port(socket.SOCK_DGRAM),
        audio_port=free_port(socket.SOCK_DGRAM),
        client_ip="127.0.0.1",  # what /launch records: the nvhttp peer
        **fields,
    )
    return launch, key, iv


_tick = [0]


def pattern(w: int, h: int) -> np.ndarray:
    """Static marks to check, plus a moving textured bar so the encoder has real work."""
    img = np.zeros((h, w, 4), np.uint8)
    _tick[0] += 1
    x = (_tick[0] * 7) % (w // 2)
    bar = np.random.default_rng(_tick[0] % 8).integers(0, 255, (h // 8, w // 4, 3), np.uint8)
    img[5 * h // 8 : 3 * h // 4, x : x + w // 4, :3] = bar
    img[..., 3] = 255
    img[h // 4 : h // 2, w // 4 : w // 2, :3] = (40, 200, 60)  # BGR: green box
    img[3 * h // 4 :, 3 * w // 4 :, :3] = (230, 40, 40)  # BGR: blue corner
    return img


class Attacker:
    """Spoofed media pings from sockets that are not the client, for the whole stream.

    From 127.0.0.2 (another host on the loopback net) it sends the session's real ping payload,
    as if it had sniffed it; from 127.0.0.1 (the client's own IP) it sends the legacy ``PING``
    and a payload ping with a wrong payload. Each socket counts what the host sends it. It also
    tries the RTSP port and an ENet connect with the session's connect data from 127.0.0.2.
    """

    def __init__(self, launch) -> None:
        from compat import endpoint

        self.launch = launch
        self.received = 0
        self.sent = 0
        self.socks = []
        wrong = "0123456789ABCDEF" if launch.ping_payload != "0123456789ABCDEF" else "F" * 16
        for source, datagram in (
            ("127.0.0.2", endpoint.ping(launch.ping_payload, 1)),
            ("127.0.0.1", b"PING"),
            ("127.0.0.1", endpoint.ping(wrong, 1)),
        ):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((source, 0))
            s.settimeout(0.01)
            self.socks.append((s, datagram))
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self.stop.is_set():
            for s, datagram in self.socks:
                for port in (self.launch.video_port, self.launch.audio_port):
                    s.sendto(datagram, ("127.0.0.1", port))
                    self.sent += 1
                try:
                    while True:
                        s.recvfrom(4096)
                        self.received += 1
                except OSError:
                    pass
            time.sleep(0.02)

    def rtsp_reply(self) -> str:
        """What an RTSP OPTIONS from 127.0.0.2 gets back (nothing: the host closes it)."""
        with socket.create_connection(
            ("127.0.0.1", self.launch.rtsp_port), timeout=3, source_address=("127.0.0.2", 0)
        ) as c:
            reply = b""
            try:  # a reset (closed before it read the request) is no reply too
                c.sendall(b"OPTIONS rtsp://127.0.0.1 RTSP/1.0\r\nCSeq: 1\r\n\r\n")
                while chunk := c.recv(4096):
                    reply += chunk
            except OSError:
                pass
        return reply.decode("latin-1")

    def enet_connect(self) -> str:
        """An ENet connect with the right connect data from 127.0.0.2: what the host answers."""
        import enet

        host = enet.Host(enet.Address(b"127.0.0.2", 0), 1, 0, 0, 0)
        peer = host.connect(
            enet.Address(b"127.0.0.1", self.launch.control_port), 0x30, self.launch.connect_data
        )
        deadline = time.monotonic() + 2
        kinds = []
        while time.monotonic() < deadline and enet.EVENT_TYPE_DISCONNECT not in kinds:
            kinds.append(host.service(20).type)
        peer.reset()
        if enet.EVENT_TYPE_DISCONNECT in kinds:
            return "disconnected"
        return "connected" if enet.EVENT_TYPE_CONNECT in kinds else "silent"


def _span(frames) -> int:
    return frames[-1].receive_time_us - frames[0].receive_time_us if len(frames) > 1 else 0


def _opus_config(client) -> list:
    cfg = client.wait_for_opus_config(0.1)
    return [cfg.channel_count, cfg.streams, cfg.coupled_streams, list(cfg.mapping)]


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.stream import StreamingSession

    from compat.engine.stream import StreamSession
    from media.input import packets

    width, height, fps, seconds = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        float(sys.argv[4]),
    )
    options = sys.argv[5:]
    launch, key, iv = loopback_launch(
        offer_video_encryption="encrypt-video" in options,
        rtsp_encryption="rtspenc" in options,
        encoder_threads=1,  # as a 2-core host sharing its cores between two sessions plans
    )
    events: list[str] = []
    inputs: list[bytes] = []
    # "surround71": the client asks for 7.1 (MAKE_AUDIO_CONFIGURATION(8, 0x63F)); else stereo
    audio_configuration = (
        (0x63F << 16) | (8 << 8) | 0xCA
        if "surround71" in options
        else ((0x3 << 16) | (2 << 8) | 0xCA)
    )

    class Sink:
        def handle(self, payload: bytes) -> None:
            inputs.append(payload)

        def disconnect(self) -> None:
            inputs.append(b"<disconnect>")

    host = StreamSession(
        launch, pattern, on_event=lambda kind, **d: events.append(kind), input_sink=Sink()
    )
    host.start()
    attacker = Attacker(launch) if "attack" in options else None
    if attacker is not None:
        attacker.thread.start()  # spoofing from before the first ping to the end

    client = StreamingSession()
    t0 = time.monotonic()
    client.start(
        address="127.0.0.1",
        app_version="7.1.431.-1",
        gfe_version="3.23.0.74",
        server_codec_mode_support=1,
        rtsp_session_url=f"{'rtspenc' if launch.rtsp_encryption else 'rtsp'}://127.0.0.1:{launch.rtsp_port}",
        config=StreamConfig(
            width=width,
            height=height,
            fps=fps,
            bitrate_kbps=8000,
            audio_configuration=audio_configuration,
        ),  # fmt: skip
        ri_aes_key=key,
        ri_aes_iv=iv,
        capture_audio=True,
    )
    connected_s = time.monotonic() - t0
    frames = []

    def pull() -> None:
        while True:
            raw = client.pull_frame()
            if raw is None:
                return
            frames.append(raw)

    puller = threading.Thread(target=pull, daemon=True)
    puller.start()
    audio = []
    deadline = time.monotonic() + seconds
    client._lib.LiSendMouseMoveEvent(10, -5)
    import ctypes

    from moonlight_python.stream import _find_shared_lib

    keyboard = ctypes.CDLL(_find_shared_lib()).LiSendKeyboardEvent
    keyboard.argtypes = [ctypes.c_short, ctypes.c_char, ctypes.c_char]
    keyboard(0x41, b"\x03", b"\x00")  # 'A' down (KEY_ACTION_DOWN)
    text = ctypes.CDLL(_find_shared_lib()).LiSendUtf8TextEvent
    text.argtypes = [ctypes.c_char_p, ctypes.c_uint]
    utf8 = "é日".encode()
    text(utf8, len(utf8))  # MCC sends one message per code point
    attack = {}
    if attacker is not None:
        attack["rtsp_reply"] = attacker.rtsp_reply()
        attack["enet"] = attacker.enet_connect()
    while time.monotonic() < deadline:
        pkt = client.pull_audio_packet(timeout=0.05)
        if pkt is not None:
            audio.append(pkt.opus_data)
    if attacker is not None:
        attacker.stop.set()
        attacker.thread.join(2)
        time.sleep(0.1)  # let the client's receive queue catch up with the last frame
        attack.update(
            sent=attacker.sent,
            received=attacker.received,
            ignored={kind: ep.ignored for kind, ep in host.endpoints.items()},
            destinations={kind: list(ep.addr or ()) for kind, ep in host.endpoints.items()},
            peers_refused=host.client.refused,
            attacker_ports=[s.getsockname()[1] for s, _ in attacker.socks],
        )
    host.stop("host")  # sends the graceful termination
    client._connection_terminated.wait(3)
    termination = client._termination_error_code if client._connection_terminated.is_set() else None
    client.stop()
    client.wake()
    puller.join(2)

    decoder = av.CodecContext.create("h264", "r")
    pictures = []
    for f in frames:
        pictures += [
            p.to_ndarray(format="bgr24") for p in decoder.decode(av.Packet(f.annex_b_data))
        ]
    last = pictures[-1] if pictures else None
    result = {
        "connected_s": round(connected_s, 3),
        "frames": len(frames),
        "idr_first": bool(frames) and frames[0].frame_type == 1,
        "frame_numbers_contiguous": [f.frame_number for f in frames]
        == list(range(frames[0].frame_number, frames[0].frame_number + len(frames)))
        if frames
        else False,
        "decoded": len(pictures),
        "box_bgr": last[height * 3 // 8, width * 3 // 8].tolist() if last is not None else None,
        "corner_bgr": last[height - 5, width - 5].tolist() if last is not None else None,
        "background_bgr": last[5, 5].tolist() if last is not None else None,
        "audio_packets": len(audio),
        "audio_sizes": sorted({len(a) for a in audio}),
        "opus_config": _opus_config(client),
        "host_frames_sent": host.stats.frames_sent,
        "host_audio_packets": host.stats.audio_packets,
        "rtt_samples": len(host.stats.rtt_ms),
        "rtsp_sealed_replies": host.rtsp._reply_seq,
        "input_messages": len([i for i in inputs if i != b"<disconnect>"]),
        # Input packets: u32 BE size, u32 LE magic (3 = key down, 7 = relative mouse move).
        "input_magics": sorted(
            {int.from_bytes(i[4:8], "little") for i in inputs if i != b"<disconnect>"}
        ),
        "input_disconnected": inputs[-1:] == [b"<disconnect>"],
        "input_texts": [
            packets.parse(i).text
            for i in inputs
            if i != b"<disconnect>" and int.from_bytes(i[4:8], "little") == packets.TEXT
        ],
        "video_encrypted": bool(host.rtsp.params and host.rtsp.params.video_encrypted),
        "packet_size": host.rtsp.params.packet_size if host.rtsp.params else None,
        "termination": termination,
        "events": events,
        "attack": attack,
        "last_frame_number": frames[-1].frame_number if frames else None,
        "stop_reason": host.stop_reason,
        "encode_ms_p50": round(float(np.percentile(host.stats.encode_ms.values(), 50)), 2)
        if host.stats.encode_ms
        else None,
        "encode_ms_p99": round(float(np.percentile(host.stats.encode_ms.values(), 99)), 2)
        if host.stats.encode_ms
        else None,
        "encoder_threads": host.stats.encoder_threads,
        "stage_cpu_ms": host.stats.stage_cpu.per_frame_ms(),
        "stage_frames": host.stats.stage_cpu.frames,
        "delivered_fps": round((len(frames) - 1) * 1e6 / span, 1) if (span := _span(frames)) else 0,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
