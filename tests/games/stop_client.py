"""Run as a script: a paired moonlight-python client launches an app by name on the live host,
streams until a line arrives on stdin, then ends its stream gracefully (ENet disconnect, the
user's "stop streaming") and exits without /cancel: what happens to the app is the host's
call. JSON lines on stdout: `{"streaming": true, ...}` once frames arrive, then the result.

    stop_client.py BASE_PORT CONFIG_DIR APP_NAME
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    base, config_dir, name = int(sys.argv[1]), sys.argv[2], sys.argv[3]
    http = NvHTTP("127.0.0.1", Identity(config_dir), http_port=base, https_port=base - 5)
    app = next(a for a in http.get_app_list() if a.name == name)
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=640, height=360, fps=30, bitrate_kbps=3000)
    url = http.launch_app(app.id, 640, 360, 30, 3000, 1, key, iv, config.surroundaudioinfo,
                          launch_query_params=session.get_launch_query_params())  # fmt: skip
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=False)  # fmt: skip
    frames: list = []
    threading.Thread(target=lambda: [frames.append(f) for f in iter(session.pull_frame, None)],
                     daemon=True).start()  # fmt: skip
    deadline = time.monotonic() + 20
    while len(frames) < 15 and time.monotonic() < deadline:
        time.sleep(0.05)
    print(json.dumps({"streaming": len(frames) >= 15, "app_id": app.id}), flush=True)
    sys.stdin.readline()
    session.stop()  # graceful: the host sees client.disconnected `quit`
    print(json.dumps({"frames": len(frames), "app_id": app.id}), flush=True)


if __name__ == "__main__":
    main()
