"""Run as a script: a paired moonlight-python client streams Desktop from a host attached to an
operator desktop, sends a mouse move, a key and a click through the control stream, quits,
and reports the colours of the last decoded frames at the points it is given.

    attached_client.py BASE_PORT CONFIG_DIR WIDTH HEIGHT FPS SECONDS MOVE_X MOVE_Y
                       [SAMPLE_X,SAMPLE_Y ...]

MOVE_X/MOVE_Y are client pixels (the client's own WIDTHxHEIGHT reference). One JSON line on
stdout. A subprocess because moonlight-common-c keeps global state.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import threading
import time

import av

from tests.support.play_client import BUTTON_PRESS, BUTTON_RELEASE, KEY_DOWN, KEY_UP, mcc


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    base, config_dir = int(sys.argv[1]), sys.argv[2]
    width, height, fps, seconds = (int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                                   float(sys.argv[6]))  # fmt: skip
    move = int(sys.argv[7]), int(sys.argv[8])
    samples = [tuple(int(v) for v in p.split(",")) for p in sys.argv[9:]]
    http = NvHTTP("127.0.0.1", Identity(config_dir), http_port=base, https_port=base - 5)
    name = os.environ.get("STREAM_APP", "Desktop")  # the catalog entry to launch
    desktop = next(a for a in http.get_app_list() if a.name == name)
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=width, height=height, fps=fps, bitrate_kbps=10000)
    url = http.launch_app(desktop.id, width, height, fps, 10000, 1, key, iv,
                          config.surroundaudioinfo,
                          launch_query_params=session.get_launch_query_params())  # fmt: skip
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=False)  # fmt: skip
    frames: list = []

    def pull() -> None:
        while (raw := session.pull_frame()) is not None:
            frames.append((time.monotonic(), raw))

    threading.Thread(target=pull, daemon=True).start()
    t0 = time.monotonic()
    time.sleep(1.5)
    lib = mcc()
    lib.LiSendMousePositionEvent(move[0], move[1], width, height)
    time.sleep(0.3)
    lib.LiSendKeyboardEvent(0x8041, KEY_DOWN, 0)  # 'A' as Moonlight sends it (0x80 | VK)
    time.sleep(0.05)
    lib.LiSendKeyboardEvent(0x8041, KEY_UP, 0)
    lib.LiSendMouseButtonEvent(BUTTON_PRESS, 1)
    time.sleep(0.05)
    lib.LiSendMouseButtonEvent(BUTTON_RELEASE, 1)
    time.sleep(max(0.0, seconds - (time.monotonic() - t0)))
    session.stop()
    result = {"termination": session.termination_error if session.is_terminated else None}
    http.quit_app()
    result["serverinfo_after"] = http.parse_server_info(http.open_https("serverinfo")).current_game
    frames = list(frames)
    result["frames"] = len(frames)
    decoder = av.CodecContext.create("h264", "r")
    last = None
    decoded = 0
    for at, raw in frames:
        for pic in decoder.decode(av.Packet(raw.annex_b_data)):
            decoded += 1
            if at > t0 + 1.0:
                last = pic.to_ndarray(format="bgr24")
    result["decoded"] = decoded
    arrivals = [at for at, _ in frames if at > t0 + 1.0]
    if len(arrivals) > 1:  # frames received per second once streaming
        result["fps"] = round((len(arrivals) - 1) / (arrivals[-1] - arrivals[0]), 1)
    if last is not None:
        result["shape"] = list(last.shape)
        result["samples_bgr"] = [last[y, x].tolist() for x, y in samples]
        if os.environ.get("STREAM_SAVE"):  # the last decoded picture, for a person to look at
            import cv2

            cv2.imwrite(os.environ["STREAM_SAVE"], last)
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
