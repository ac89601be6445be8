"""Run as a script: a paired moonlight-python client launches Desktop on a real host asking for
one codec, with the codec bits the host's /serverinfo advertises; prints one JSON line.

argv: base_port config_dir codec width height fps seconds mgmt_url mgmt_token cafile. Draws
tests/support/client.py's pattern into the session's display and decodes what arrived with the
negotiated codec's decoder.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time

import av


def main() -> None:
    from moonlight_python.config import CODEC_MAP, StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    from tests.support.client import draw_pattern, x_display_of_session

    base, config_dir, codec = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    width, height, fps, seconds = (int(sys.argv[4]), int(sys.argv[5]), int(sys.argv[6]),
                                   float(sys.argv[7]))  # fmt: skip
    mgmt = sys.argv[8:11]
    http = NvHTTP("127.0.0.1", Identity(config_dir), http_port=base, https_port=base - 5)
    info = http.open_https("serverinfo")
    scm = int(info.split("<ServerCodecModeSupport>")[1].split("<")[0])
    luma = int(info.split("<MaxLumaPixelsHEVC>")[1].split("<")[0])
    desktop = next(a for a in http.get_app_list() if a.name == "Desktop")
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=width, height=height, fps=fps, bitrate_kbps=10000,
                          supported_video_formats=CODEC_MAP[codec], codec=codec)  # fmt: skip
    url = http.launch_app(desktop.id, width, height, fps, 10000, 1, key, iv,
                          config.surroundaudioinfo,
                          launch_query_params=session.get_launch_query_params())  # fmt: skip
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=scm, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=False)  # fmt: skip
    frames: list = []

    def pull() -> None:
        while (raw := session.pull_frame()) is not None:
            frames.append((time.monotonic(), raw))

    threading.Thread(target=pull, daemon=True).start()
    x = draw_pattern(x_display_of_session(*mgmt), width, height)
    drawn_at = time.monotonic()
    time.sleep(seconds)
    session.stop()
    x.close()
    http.quit_app()
    frames = list(frames)
    head = frames[0][1].annex_b_data[:6] if frames else b""
    # What arrived names the codec: an H.264 SPS (0x67), an HEVC VPS (0x40 0x01), an AV1
    # temporal delimiter OBU (0x12 0x00).
    seen = ("h264" if head[4:5] == b"\x67" else "hevc" if head[4:6] == b"\x40\x01"
            else "av1" if head[:2] == b"\x12\x00" else "unknown")  # fmt: skip
    decoder = av.CodecContext.create({"h264": "h264", "hevc": "hevc", "av1": "libdav1d"}
                                     .get(seen, "h264"), "r")  # fmt: skip
    last, decoded = None, 0
    for at, raw in frames:
        for pic in decoder.decode(av.Packet(raw.annex_b_data)):
            decoded += 1
            if at > drawn_at + 0.5:
                last = pic.to_ndarray(format="bgr24")
    result = {"scm": scm, "max_luma_hevc": luma, "bitstream": seen, "frames": len(frames),
              "decoded": decoded}  # fmt: skip
    if last is not None:
        result["box_bgr"] = last[height * 3 // 8, width * 3 // 8].tolist()
        result["corner_bgr"] = last[height * 7 // 8, width * 7 // 8].tolist()
    print(json.dumps(result), flush=True)
    # No interpreter teardown: the client library's stream threads and dav1d's workers can
    # hold the process there for minutes after the result is out.
    os._exit(0)


if __name__ == "__main__":
    main()
