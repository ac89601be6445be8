"""Run as a script: a paired moonlight-python launches Desktop on a real host and streams it
through a lossy relay on 127.0.0.2.

The host listens on 127.0.0.1 only. The client's HTTPS calls go straight to it (so the
session belongs to 127.0.0.1), but its stream connects to 127.0.0.2, where this script relays
RTSP (TCP) and the control, video and audio ports (UDP) to 127.0.0.1, dropping a seeded share
of the host's video datagrams. This kernel has no ``netem``; tests/support/netem_relay.py is
the user-space stand-in. Prints one JSON line: frames received and the relay's counts (the test
reads the host's side from `/api/stream/network-stats` meanwhile).

A 320x180 patch of fresh noise is drawn into the session's display 30 times a second, so the
encoder has to spend its whole rate (a still desktop would fit in a datagram a frame).

Usage: lossy_host_client.py BASE_PORT CONFIG_DIR SECONDS DROP_PCT SEED URL TOKEN CAFILE
"""

from __future__ import annotations

import json
import secrets
import sys
import threading
import time

from tests.support.netem_relay import Impairment, TcpRelay, UdpRelay

RELAY_IP = "127.0.0.2"


def relay_udp(port: int, drop_pct: float = 0.0, seed: int = 0) -> UdpRelay:
    """RELAY_IP:port <-> 127.0.0.1:port, dropping a share of the host's datagrams."""
    imp = Impairment(loss_pct=drop_pct, seed=seed)
    return UdpRelay(("127.0.0.1", port), imp, front=(RELAY_IP, port))


def noise(x_display: str, stop: threading.Event) -> None:
    """Fresh noise in a 320x180 window, ~30 times a second, until ``stop``."""
    import os

    from Xlib import X
    from Xlib import display as xdisplay

    d = xdisplay.Display(x_display)
    screen = d.screen()
    win = screen.root.create_window(0, 0, 320, 180, 0, screen.root_depth,
                                    override_redirect=True)  # fmt: skip
    win.map()
    gc = win.create_gc()
    while not stop.is_set():
        pixels = os.urandom(320 * 180 * 4)
        win.put_image(gc, 0, 0, 320, 180, X.ZPixmap, screen.root_depth, 0, pixels)
        d.sync()
        time.sleep(1 / 30)
    d.close()


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    base, config_dir = int(sys.argv[1]), sys.argv[2]
    seconds, drop_pct, seed = float(sys.argv[3]), float(sys.argv[4]), int(sys.argv[5])
    from tests.support.client import x_display_of_session

    relays = [TcpRelay((RELAY_IP, base + 21), ("127.0.0.1", base + 21)), relay_udp(base + 10),
              relay_udp(base + 11), relay_udp(base + 9, drop_pct, seed)]  # fmt: skip
    video = relays[-1]
    http = NvHTTP("127.0.0.1", Identity(config_dir), http_port=base, https_port=base - 5)
    desktop = next(a for a in http.get_app_list() if a.name == "Desktop")
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=640, height=360, fps=30, bitrate_kbps=8000)
    rtsp_url = http.launch_app(desktop.id, 640, 360, 30, 8000, 1, key, iv, config.surroundaudioinfo,
                               launch_query_params=session.get_launch_query_params())  # fmt: skip
    session.start(address=RELAY_IP, app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=rtsp_url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=False)  # fmt: skip
    frames: list = []
    threading.Thread(
        target=lambda: [frames.append(time.monotonic()) for _ in iter(session.pull_frame, None)],
        daemon=True,
    ).start()
    stop = threading.Event()
    drawer = threading.Thread(target=noise, args=(x_display_of_session(*sys.argv[6:9]), stop))
    drawer.start()
    time.sleep(seconds)
    stop.set()
    drawer.join(5)
    end = time.monotonic()
    session.stop()
    http.quit_app()
    for relay in relays:
        relay.close()
    print(json.dumps({
        "session_url": rtsp_url,
        "frames": len(frames),
        "frames_last_2s": len([t for t in frames if t > end - 2]),
        "video_forwarded": video.forwarded,
        "video_dropped": video.dropped,
    }), flush=True)  # fmt: skip


if __name__ == "__main__":
    main()
