"""Run as a script: a paired moonlight-python client launches an app on the live host and
streams until told to quit (a line on stdin) or until the host ends the stream.

    fault_client.py BASE_PORT CONFIG_DIR WIDTH HEIGHT FPS APP FRAMES_FILE

Each frame's arrival (CLOCK_MONOTONIC, the same clock in every process of the machine, so the
test compares it with its own kill times) is appended to FRAMES_FILE as it comes, so the test
sees gaps while the stream runs. stdout: `{"live": ...}` once the first frame is in, then one
JSON line at the end (frames, termination code: 0 is moonlight-common-c's graceful end, and
whether the quit's /cancel was answered). A subprocess because moonlight-common-c keeps global
state and a crash in C must not take pytest down.
"""

from __future__ import annotations

import json
import secrets
import select
import sys
import threading
import time


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    base, config_dir = int(sys.argv[1]), sys.argv[2]
    width, height, fps = int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5])
    wanted, frames_path = sys.argv[6], sys.argv[7]
    http = NvHTTP("127.0.0.1", Identity(config_dir), http_port=base, https_port=base - 5)
    app = next(a for a in http.get_app_list() if a.name == wanted)
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=width, height=height, fps=fps, bitrate_kbps=2000)
    url = http.launch_app(app.id, width, height, fps, 2000, 1, key, iv,
                          config.surroundaudioinfo,
                          launch_query_params=session.get_launch_query_params())  # fmt: skip
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=False)  # fmt: skip
    count = [0]
    first = threading.Event()

    def pull() -> None:
        with open(frames_path, "a", buffering=1) as out:
            while session.pull_frame() is not None:
                count[0] += 1
                out.write(f"{time.monotonic():.4f}\n")
                first.set()

    puller = threading.Thread(target=pull, daemon=True)
    puller.start()
    first.wait(30)
    print(json.dumps({"live": first.is_set()}), flush=True)
    quit_asked = False
    while not session.is_terminated:
        ready, _, _ = select.select([sys.stdin], [], [], 0.1)
        if ready:
            sys.stdin.readline()
            quit_asked = True
            break
    result = {"frames": count[0], "terminated": session.is_terminated,
              "termination": session.termination_error if session.is_terminated else None,
              "t_end": time.monotonic()}  # fmt: skip
    session.stop()
    session.wake()
    puller.join(2)
    if quit_asked:
        http.quit_app()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
