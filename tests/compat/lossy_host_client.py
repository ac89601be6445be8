"""Run as a script: a paired moonlight-python launches Desktop on a real host and streams it
through a lossy relay on 127.0.0.2.

The host listens on 127.0.0.1 only. The client's HTTPS calls go straight to it (so the
session belongs to 127.0.0.1), but its stream connects to 127.0.0.2, where this script relays
RTSP (TCP) and the control, video and audio ports (UDP) to 127.0.0.1, dropping a seeded share
of the host's video datagrams. This kernel has no ``netem``; this is the user-space stand-in.
Prints one JSON line: frames received and the relay's counts (the test reads the host's side
from `/api/stream/network-stats` meanwhile).

A 320x180 patch of fresh noise is drawn into the session's display 30 times a second, so the
encoder has to spend its whole rate (a still desktop would fit in a datagram a frame).

Usage: lossy_host_client.py BASE_PORT CONFIG_DIR SECONDS DROP_PCT SEED URL TOKEN CAFILE
"""

from __future__ import annotations

import json
import random
import secrets
import select
import socket
import sys
import threading
import time

RELAY_IP = "127.0.0.2"


class UdpRelay:
    """One UDP port: client <-> RELAY_IP:port <-> 127.0.0.1:port, dropping host->client."""

    def __init__(self, port: int, drop_pct: float = 0.0, seed: int = 0):
        self.front = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.front.bind((RELAY_IP, port))
        self.back = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
        self.back.bind(("127.0.0.1", 0))
        self.host = ("127.0.0.1", port)
        self.drop, self.rng = drop_pct / 100, random.Random(seed)
        self.client = None
        self.forwarded = self.dropped = 0
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            ready, _, _ = select.select([self.front, self.back], [], [], 0.05)
            for sock in ready:
                try:
                    data, addr = sock.recvfrom(65535)
                except OSError:
                    continue
                if sock is self.front:
                    self.client = addr
                    self.back.sendto(data, self.host)
                elif self.client is not None:
                    if self.drop and self.rng.random() < self.drop:
                        self.dropped += 1
                        continue
                    self.forwarded += 1
                    self.front.sendto(data, self.client)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.front.close()
        self.back.close()


class TcpRelay:
    """RTSP: each connection to RELAY_IP:port is piped to 127.0.0.1:port (half-closes too)."""

    def __init__(self, port: int):
        self.listener = socket.create_server((RELAY_IP, port))
        self.listener.settimeout(0.1)
        self.port = port
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while not self.stop.is_set():
            try:
                conn, _ = self.listener.accept()
            except (TimeoutError, OSError):
                continue
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        with conn, socket.create_connection(("127.0.0.1", self.port), timeout=10,
                                            source_address=("127.0.0.1", 0)) as up:  # fmt: skip
            ends = {conn: up, up: conn}
            open_ = {conn, up}
            while open_:
                ready, _, _ = select.select(list(open_), [], [], 5)
                if not ready:
                    return
                for sock in ready:
                    data = sock.recv(65536)
                    if data:
                        ends[sock].sendall(data)
                    else:
                        open_.discard(sock)
                        ends[sock].shutdown(socket.SHUT_WR)

    def close(self) -> None:
        self.stop.set()
        self.thread.join(2)
        self.listener.close()


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

    relays = [TcpRelay(base + 21), UdpRelay(base + 10), UdpRelay(base + 11),
              UdpRelay(base + 9, drop_pct, seed)]  # fmt: skip
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
