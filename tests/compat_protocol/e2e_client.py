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


def _span(frames) -> int:
    return frames[-1].receive_time_us - frames[0].receive_time_us if len(frames) > 1 else 0


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.stream import StreamingSession

    from streaming.engine.session import Launch, StreamSession, rikeyid_from_iv
    from streaming.input import packets

    width, height, fps, seconds = (
        int(sys.argv[1]),
        int(sys.argv[2]),
        int(sys.argv[3]),
        float(sys.argv[4]),
    )
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    options = sys.argv[5:]
    launch = Launch(
        offer_video_encryption="encrypt-video" in options,
        rtsp_encryption="rtspenc" in options,
        rikey=key,
        rikeyid=rikeyid_from_iv(iv),
        host="127.0.0.1",
        rtsp_port=free_port(socket.SOCK_STREAM),
        video_port=free_port(socket.SOCK_DGRAM),
        control_port=free_port(socket.SOCK_DGRAM),
        audio_port=free_port(socket.SOCK_DGRAM),
    )
    events: list[str] = []
    inputs: list[bytes] = []

    class Sink:
        def handle(self, payload: bytes) -> None:
            inputs.append(payload)

        def disconnect(self) -> None:
            inputs.append(b"<disconnect>")

    host = StreamSession(
        launch, pattern, on_event=lambda kind, **d: events.append(kind), input_sink=Sink()
    )
    host.start()

    client = StreamingSession()
    t0 = time.monotonic()
    client.start(
        address="127.0.0.1",
        app_version="7.1.431.-1",
        gfe_version="3.23.0.74",
        server_codec_mode_support=1,
        rtsp_session_url=f"{'rtspenc' if launch.rtsp_encryption else 'rtsp'}://127.0.0.1:{launch.rtsp_port}",
        config=StreamConfig(width=width, height=height, fps=fps, bitrate_kbps=8000),
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
    while time.monotonic() < deadline:
        pkt = client.pull_audio_packet(timeout=0.05)
        if pkt is not None:
            audio.append(pkt.opus_data)
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
        "stop_reason": host.stop_reason,
        "encode_ms_p50": round(float(np.percentile(host.stats.encode_ms, 50)), 2)
        if host.stats.encode_ms
        else None,
        "encode_ms_p99": round(float(np.percentile(host.stats.encode_ms, 99)), 2)
        if host.stats.encode_ms
        else None,
        "delivered_fps": round((len(frames) - 1) * 1e6 / span, 1) if (span := _span(frames)) else 0,
    }
    print(json.dumps(result))


if __name__ == "__main__":
    main()
