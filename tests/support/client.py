"""Run as a script: a paired moonlight-python client launches an app on the live host, streams,
optionally draws a known pattern into the session's virtual display, then ends the way it is
told. One JSON line on stdout. A subprocess because moonlight-common-c keeps global state and
a crash in C must not take pytest down; `vanish` exits without any goodbye.

    client.py BASE_PORT CONFIG_DIR WIDTH HEIGHT FPS SECONDS {quit|vanish|resume|spoof}
              [MGMT_URL TOKEN CAFILE]

`resume` stops the stream (the app stays), resumes it with new keys and streams again.
`spoof` quits like `quit`, while outsiders ping the stream ports for the whole stream.
"""

from __future__ import annotations

import json
import os
import secrets
import socket
import struct
import sys
import threading
import time

import av
import httpx

# BGR colours the test draws and looks for (the client decodes to BGR).
GREEN_BGR = (60, 200, 40)
BLUE_BGR = (230, 40, 40)


def x_display_of_session(url: str, token: str, cafile: str) -> str:
    r = httpx.get(f"{url}/api/v1/display/state", headers={"Authorization": f"Bearer {token}"},
                  verify=cafile, timeout=10)  # fmt: skip
    (active,) = [d for d in r.json()["displays"] if d["state"] == "active"]
    return active["x_display"]


def draw_pattern(x_display: str, width: int, height: int):
    """Two solid windows (no window manager: they land where asked)."""
    from Xlib import display as xdisplay

    d = xdisplay.Display(x_display)
    screen = d.screen()

    def box(x, y, w, h, bgr):
        b, g, r = bgr
        win = screen.root.create_window(x, y, w, h, 0, screen.root_depth,
                                        background_pixel=(r << 16) | (g << 8) | b,
                                        override_redirect=True)  # fmt: skip
        win.map()

    box(width // 4, height // 4, width // 4, height // 4, GREEN_BGR)
    box(3 * width // 4, 3 * height // 4, width // 4, height // 4, BLUE_BGR)
    d.sync()
    return d


class Spoofer:
    """An outsider who knows the port layout (base + 9 video, + 11 audio) but not the session's
    secrets: it pings both media ports every 20 ms with the legacy `PING` and a made-up
    payload ping, from 127.0.0.2 (another machine on the loopback net) and from the client's
    own IP, and counts every datagram the host sends back to it."""

    def __init__(self, base: int) -> None:
        self.ports = (base + 9, base + 11)
        self.sent = self.received = 0
        self.socks = []
        for source in ("127.0.0.2", "127.0.0.1"):
            s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
            s.bind((source, 0))
            s.setblocking(False)
            self.socks.append(s)
        self.stop = threading.Event()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        guess = b"0123456789ABCDEF" + struct.pack(">I", 1)
        while not self.stop.is_set():
            for s in self.socks:
                for port in self.ports:
                    for datagram in (b"PING", guess):
                        s.sendto(datagram, ("127.0.0.1", port))
                        self.sent += 1
                try:
                    while True:
                        s.recvfrom(4096)
                        self.received += 1
                except BlockingIOError:
                    pass
            time.sleep(0.02)


def main() -> None:
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    base, config_dir = int(sys.argv[1]), sys.argv[2]
    width, height, fps, seconds = (int(sys.argv[3]), int(sys.argv[4]), int(sys.argv[5]),
                                   float(sys.argv[6]))  # fmt: skip
    action = sys.argv[7]
    mgmt = sys.argv[8:11]
    http = NvHTTP("127.0.0.1", Identity(config_dir), http_port=base, https_port=base - 5)
    # CLIENT_APP: the catalog entry to launch (Desktop unless told).
    wanted = os.environ.get("CLIENT_APP", "Desktop")
    desktop = next(a for a in http.get_app_list() if a.name == wanted)
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    spoofer = Spoofer(base) if action == "spoof" else None  # from before the client's pings
    session = StreamingSession()
    config = StreamConfig(width=width, height=height, fps=fps, bitrate_kbps=10000)
    t0 = time.monotonic()
    extra = session.get_launch_query_params()
    url = http.launch_app(desktop.id, width, height, fps, 10000, 1, key, iv,
                          config.surroundaudioinfo, launch_query_params=extra)  # fmt: skip
    launch_s = time.monotonic() - t0
    serverinfo = http.open_https("serverinfo")
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=True)  # fmt: skip
    connected_s = time.monotonic() - t0
    frames: list = []

    def pull() -> None:
        while (raw := session.pull_frame()) is not None:
            frames.append((time.monotonic(), raw))

    threading.Thread(target=pull, daemon=True).start()
    drawn_at = None
    x = None
    if mgmt:
        x = draw_pattern(x_display_of_session(*mgmt), width, height)
        drawn_at = time.monotonic()
    # The stream's length, or less when the host ends it first (the console's stop button):
    # no frame comes after that, and a test waiting on this process need not wait it out.
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline and not session.is_terminated:
        time.sleep(0.1)
    result = {
        "session_url": url,
        "launch_s": round(launch_s, 3),
        "connected_s": round(connected_s, 3),
        "serverinfo_busy": "<state>SUNSHINE_SERVER_BUSY</state>" in serverinfo,
        "currentgame": http.parse_server_info(serverinfo).current_game,
        "desktop_id": desktop.id,
        "frames": len(frames),
    }
    if spoofer is not None:
        spoofer.stop.set()
        spoofer.thread.join(2)
        numbers = [raw.frame_number for _, raw in frames]
        result.update(
            spoof_sent=spoofer.sent,
            spoof_received=spoofer.received,
            frame_numbers_contiguous=numbers == list(range(1, len(numbers) + 1)),
        )
    if action == "vanish":
        print(json.dumps(result), flush=True)
        os._exit(0)  # no ENet disconnect, no /cancel: the host must notice on its own
    session.stop()
    if action == "resume":
        result["idle_currentgame"] = http.parse_server_info(
            http.open_https("serverinfo")
        ).current_game
        key2, iv2 = secrets.token_bytes(16), secrets.token_bytes(16)
        again = StreamingSession()
        url2 = http.resume_app(key2, iv2, config.surroundaudioinfo, again.get_launch_query_params())
        again.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                    server_codec_mode_support=1, rtsp_session_url=url2, config=config,
                    ri_aes_key=key2, ri_aes_iv=iv2, capture_audio=False)  # fmt: skip
        resumed = []
        threading.Thread(target=lambda: [resumed.append(f) for f in iter(again.pull_frame, None)],
                         daemon=True).start()  # fmt: skip
        time.sleep(seconds)
        again.stop()
        result["resumed_frames"] = len(resumed)
        result["resumed_idr_first"] = bool(resumed) and resumed[0].frame_type == 1
    if x is not None:
        x.close()  # before /cancel tears the display down
    result["termination"] = session.termination_error if session.is_terminated else None
    t1 = time.monotonic()
    http.quit_app()
    result["cancel_s"] = round(time.monotonic() - t1, 3)
    result["serverinfo_after"] = http.parse_server_info(http.open_https("serverinfo")).current_game
    frames = list(frames)  # the puller has stopped: count what arrived
    result["frames"] = len(frames)
    decoder = av.CodecContext.create("h264", "r")
    last = None
    decoded = 0
    for at, raw in frames:
        for pic in decoder.decode(av.Packet(raw.annex_b_data)):
            decoded += 1
            if drawn_at is not None and at > drawn_at + 0.5:
                last = pic.to_ndarray(format="bgr24")
    result["decoded"] = decoded
    if frames:
        span = frames[-1][0] - frames[0][0]
        result["fps"] = round((len(frames) - 1) / span, 1) if span else 0
    if last is not None:
        result["shape"] = list(last.shape)
        result["box_bgr"] = last[height * 3 // 8, width * 3 // 8].tolist()
        result["corner_bgr"] = last[height * 7 // 8, width * 7 // 8].tolist()
        result["background_bgr"] = last[height // 8, width // 8].tolist()
    print(json.dumps(result), flush=True)


if __name__ == "__main__":
    main()
