"""Benchmark of a whole session against the real client. Run by hand:
`.venv/bin/python bench/stream.py [--seconds 20] [--modes 1280x720x60,1920x1080x60]`.

It starts its own host (`manage.py runhost`), pairs a moonlight-python client with a PIN, and
for each mode launches Desktop and streams for `--seconds`. A drawer thread in the client
process draws a 16-bit frame counter (and its complement, to reject frames captured mid-draw)
into the session's Xvfb display every 2 ms, plus a moving noise window so the encoder has real
work; the client decodes every frame as it arrives and reads the counter back.

Figures per mode:
* fps delivered to the client (decoded frames over the run), against the mode's rate;
* host capture ms and encode ms p50/p99 (the engine's live window, last 600 frames, read from
  the state dir just before the end);
* glass-to-glass ms p50/p99: counter drawn (after XSync) -> the client has decoded a frame
  showing it. Floor: one frame interval (a frame waits up to one interval to be captured).
"""

from __future__ import annotations

import argparse
import json
import os
import secrets
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

BITS, CELL, X0, Y0 = 16, 24, 16, 16


def pct(values, q):
    return round(float(np.percentile(values, q)), 2) if len(values) else None


# -- client side (a subprocess: moonlight-common-c keeps global state) ------------------------
class Drawer(threading.Thread):
    def __init__(self, x_display: str, width: int, height: int):
        super().__init__(daemon=True)
        from Xlib import X
        from Xlib import display as xdisplay

        self.d = xdisplay.Display(x_display)
        s = self.d.screen()
        self.root, self.width, self.height = s.root, width, height
        self.strip = s.root.create_window(X0 - 4, Y0 - 4, BITS * CELL + 8, 2 * CELL + 8, 0,
                                          s.root_depth, background_pixel=0x202020,
                                          override_redirect=True)  # fmt: skip
        self.white = self.strip.create_gc(foreground=0xFFFFFF)
        self.black = self.strip.create_gc(foreground=0x000000)
        nw, nh = width // 4, height // 4
        noise = np.random.default_rng(1).integers(0, 255, (nh, nw, 4), np.uint8)
        pix = s.root.create_pixmap(nw, nh, s.root_depth)
        gc = pix.create_gc()
        for y in range(0, nh, 16):  # keep each request under the X request size limit
            rows = noise[y : y + 16]
            pix.put_image(gc, 0, y, nw, rows.shape[0], X.ZPixmap, s.root_depth, 0, rows.tobytes())
        self.mover = s.root.create_window(0, height // 2, nw, nh, 0, s.root_depth,
                                          background_pixmap=pix,
                                          override_redirect=True)  # fmt: skip
        self.strip.map()
        self.mover.map()
        self.d.sync()
        self.drawn: dict[int, float] = {}
        self.stop = threading.Event()

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            n = (n + 1) & 0xFFFF
            ones, zeros = [], []
            for bit in range(BITS):
                on = (n >> bit) & 1
                (ones if on else zeros).append((X0 + bit * CELL, Y0, CELL, CELL))
                (zeros if on else ones).append((X0 + bit * CELL, Y0 + CELL, CELL, CELL))
            self.strip.poly_fill_rectangle(self.white, ones)
            self.strip.poly_fill_rectangle(self.black, zeros)
            self.mover.configure(x=(n * 4) % (self.width - self.width // 4))
            self.d.sync()
            self.drawn[n] = time.monotonic()
            time.sleep(0.002)


def read_counter(img: np.ndarray) -> int | None:
    """The counter from a decoded BGR frame, or None when the two rows disagree (torn)."""
    ys = (Y0 + CELL // 2, Y0 + CELL + CELL // 2)
    xs = [X0 + b * CELL + CELL // 2 for b in range(BITS)]
    top = img[ys[0], xs, 1] > 128
    bottom = img[ys[1], xs, 1] > 128
    if not np.all(top != bottom):
        return None
    return int(sum(1 << b for b in range(BITS) if top[b]))


def client(args) -> None:
    import av
    import httpx
    from moonlight_python.config import StreamConfig
    from moonlight_python.http_client import NvHTTP
    from moonlight_python.identity import Identity
    from moonlight_python.stream import StreamingSession

    w, h, fps = args.mode
    http = NvHTTP("127.0.0.1", Identity(args.config_dir), http_port=args.base,
                  https_port=args.base - 5)  # fmt: skip
    desktop = next(a for a in http.get_app_list() if a.name == "Desktop")
    key, iv = secrets.token_bytes(16), secrets.token_bytes(16)
    session = StreamingSession()
    config = StreamConfig(width=w, height=h, fps=fps, bitrate_kbps=20000)
    url = http.launch_app(desktop.id, w, h, fps, 20000, 1, key, iv, config.surroundaudioinfo,
                          launch_query_params=session.get_launch_query_params())  # fmt: skip
    session.start(address="127.0.0.1", app_version="7.1.431.-1", gfe_version="3.23.0.74",
                  server_codec_mode_support=1, rtsp_session_url=url, config=config,
                  ri_aes_key=key, ri_aes_iv=iv, capture_audio=False)  # fmt: skip
    r = httpx.get(f"{args.url}/api/v1/display/state", verify=args.cafile,
                  headers={"Authorization": f"Bearer {args.token}"})  # fmt: skip
    (disp,) = [d for d in r.json()["displays"] if d["state"] == "active"]
    drawer = Drawer(disp["x_display"], w, h)
    drawer.start()
    decoder = av.CodecContext.create("h264", "r")
    g2g, times, torn = [], [], 0
    warm = time.monotonic() + 2  # skip the first IDR and the encoder's warm-up
    end = warm + args.seconds
    latency_file = Path(args.state_dir) / "stream-latency.json"
    host_stats = None
    while time.monotonic() < end:
        raw = session.pull_frame()
        if raw is None:
            break
        for pic in decoder.decode(av.Packet(raw.annex_b_data)):
            now = time.monotonic()
            if now < warm:
                continue
            times.append(now)
            n = read_counter(pic.to_ndarray(format="bgr24"))
            if n is None:
                torn += 1
            elif n in drawer.drawn:
                g2g.append((now - drawer.drawn[n]) * 1000)
        if host_stats is None and time.monotonic() > end - 1:
            host_stats = json.loads(latency_file.read_text())
    drawer.stop.set()
    session.stop()
    drawer.join(1)
    drawer.d.close()
    http.quit_app()
    span = times[-1] - times[0] if len(times) > 1 else 0
    host_stats = host_stats or {}
    print(json.dumps({
        "mode": f"{w}x{h}@{fps}",
        "fps_delivered": round((len(times) - 1) / span, 1) if span else 0,
        "frames": len(times),
        "torn_or_unread": torn,
        "capture_ms_p50": pct(host_stats.get("capture_ms", []), 50),
        "capture_ms_p99": pct(host_stats.get("capture_ms", []), 99),
        "encode_ms_p50": pct(host_stats.get("encode_ms", []), 50),
        "encode_ms_p99": pct(host_stats.get("encode_ms", []), 99),
        "g2g_ms_p50": pct(g2g, 50),
        "g2g_ms_p99": pct(g2g, 99),
        "g2g_samples": len(g2g),
        "floor_ms": round(1000 / fps, 1),
    }))  # fmt: skip


# -- driver ------------------------------------------------------------------------------------
def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=20)
    ap.add_argument("--modes", default="1280x720x60,1920x1080x60")
    ap.add_argument("--client", action="store_true", help=argparse.SUPPRESS)
    for name in ("base", "config-dir", "url", "token", "cafile", "state-dir", "mode"):
        ap.add_argument(f"--{name}", help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.client:
        args.base = int(args.base)
        args.mode = tuple(int(v) for v in args.mode.split("x"))
        client(args)
        return
    from tests.livehost import start_host
    from tests.pairing.live import Moonlight, post_pin

    state = Path(tempfile.mkdtemp(prefix="bench-stream-"))
    host = start_host(state_dir=state)
    auth = ("admin", secrets.token_hex(8))
    try:
        with host.client() as c:
            c.post("/api/password", json={"newUsername": auth[0], "newPassword": auth[1],
                                          "confirmNewPassword": auth[1]})  # fmt: skip
        ml = Moonlight(host, state / "client")
        ml.start_pairing("1234")
        post_pin(host, auth, "1234", "bench")
        ml.wait_paired()
        print(f"host: {os.cpu_count()} CPUs, load {os.getloadavg()[0]:.1f}", file=sys.stderr)
        for mode in args.modes.split(","):
            out = subprocess.run(
                [sys.executable, __file__, "--client", "--base", str(host.base_port),
                 "--config-dir", str(state / "client"), "--url", host.url,
                 "--token", host.mgmt_token, "--cafile", str(host.cert_path),
                 "--state-dir", str(state), "--mode", mode, "--seconds", str(args.seconds)],
                capture_output=True, text=True, timeout=args.seconds + 90,
                cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
            if out.returncode != 0:
                print(out.stderr[-3000:], file=sys.stderr)
                continue
            print(out.stdout.strip().splitlines()[-1])
            time.sleep(1)
    finally:
        host.stop()


if __name__ == "__main__":
    main()
