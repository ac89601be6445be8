"""Run as a script: a real StreamSession offering `hevc_mode`/`av1_mode` 2 serves
moonlight-common-c (moonlight-python) asking for one codec; prints one JSON line.

argv: codec (h264/hevc/av1) width height fps seconds hevc_mode av1_mode [fail-once]. With
`fail-once` the session's encoder list holds the codec's software encoder twice and the first
one's context raises on its 20th frame (a device lost mid-stream): the hand-over.
The host side is the engine as a session runs it: the offer from compat.codecs (software
counts under modes 2/3), the encoder list from media.encoders.choose on the real probe. The
client decodes what arrived with PyAV and reports the colours of fixed marks
(tests/compat/e2e_client.pattern).
"""

from __future__ import annotations

import json
import sys
import threading
import time

import av


def main() -> None:
    from moonlight_python.config import CODEC_MAP, StreamConfig
    from moonlight_python.stream import StreamingSession

    from compat import codecs
    from compat.engine.stream import StreamSession
    from media import encoders
    from streaming.sessions import encoding
    from tests.compat.e2e_client import loopback_launch, pattern

    codec, width, height, fps = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
    seconds, hevc_mode, av1_mode = float(sys.argv[5]), int(sys.argv[6]), int(sys.argv[7])
    fail_once = sys.argv[8:] == ["fail-once"]
    table = encoders.available()
    gpu, anywhere = encoding.probed_codecs(table)
    offer = codecs.Offer(encoding.decide(hevc_mode, av1_mode, gpu, anywhere))
    launch, key, iv = loopback_launch(
        offer=offer,
        encoders={c: encoders.choose(c, "auto", None, table) for c in offer.codecs},
    )
    if fail_once:
        from media import encoder as encoder_module

        software = encoder_module.SOFTWARE_ENCODER[codec]
        launch.encoders[codec] = [software, software]
        real = encoder_module.VideoEncoder._encode
        calls = [0]

        def flaky(self, frame):
            calls[0] += 1
            if self._index == 0 and calls[0] == 20:
                raise av.error.ExternalError(-1, "device lost")
            return real(self, frame)

        encoder_module.VideoEncoder._encode = flaky
    events: list[tuple[str, dict]] = []
    host = StreamSession(launch, pattern, on_event=lambda kind, **d: events.append((kind, d)))
    host.start()
    client = StreamingSession()
    client.start(
        address="127.0.0.1",
        app_version="7.1.431.-1",
        gfe_version="3.23.0.74",
        server_codec_mode_support=offer.codec_mode_support,
        rtsp_session_url=f"rtsp://127.0.0.1:{launch.rtsp_port}",
        config=StreamConfig(
            width=width,
            height=height,
            fps=fps,
            bitrate_kbps=8000,
            supported_video_formats=CODEC_MAP[codec],
            codec=codec,
        ),
        ri_aes_key=key,
        ri_aes_iv=iv,
        capture_audio=False,
    )
    frames = []

    def pull() -> None:
        while (raw := client.pull_frame()) is not None:
            frames.append(raw)

    puller = threading.Thread(target=pull, daemon=True)
    puller.start()
    time.sleep(seconds)
    host.stop("host")
    client._connection_terminated.wait(3)
    client.stop()
    client.wake()
    puller.join(2)
    params = host.rtsp.params
    got = params.codec if params else codec  # what the client negotiated is what it decodes
    decoder = av.CodecContext.create({"h264": "h264", "hevc": "hevc", "av1": "libdav1d"}[got], "r")
    pictures = []
    for f in frames:
        pictures += [
            p.to_ndarray(format="bgr24") for p in decoder.decode(av.Packet(f.annex_b_data))
        ]
    pictures += [p.to_ndarray(format="bgr24") for p in decoder.decode(None)]
    last = pictures[-1] if pictures else None
    started = [d for kind, d in events if kind == "stream.started"]
    print(json.dumps({
        "offer": list(offer.codecs),
        "scm": offer.codec_mode_support,
        "negotiated": params.codec if params else None,
        "encoder": host.stats.encoder,
        "started": started[0] if started else None,
        "frames": len(frames),
        "host_frames_sent": host.stats.frames_sent,
        "decoded": len(pictures),
        "idr_first": bool(frames) and frames[0].frame_type == 1,
        "idr_frames": sum(1 for f in frames if f.frame_type == 1),
        "idr_at": [i for i, f in enumerate(frames) if f.frame_type == 1],
        "host_idr_frames": host.stats.idr_frames,
        "stop_reason": host.stop_reason,
        "box_bgr": last[height * 3 // 8, width * 3 // 8].tolist() if last is not None else None,
        "corner_bgr": last[height - 5, width - 5].tolist() if last is not None else None,
        "background_bgr": last[5, 5].tolist() if last is not None else None,
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
