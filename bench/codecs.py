"""Benchmark of the stream codecs against the real client. Run by hand:
`.venv/bin/python bench/codecs.py [--seconds 10] [--modes 1280x720x60,1920x1080x60]
[--codecs h264,hevc,av1] [--kbps 10000]`.

Per mode and codec, one subprocess runs the engine's StreamSession (offering all three codecs,
encoders from `media.encoders.choose` on this machine's probe: a GPU encoder where one opens,
else libx264 / libx265 / SVT-AV1) and a moonlight-python client asking for that codec, on
loopback. The frame source draws a 16-bit frame counter (bench/stream.py's layout) and a moving
noise window into each frame the engine asks for; the client decodes every frame as it arrives
and reads the counter back.

Figures, next to H.264 in the same run:
* fps delivered (frames the client decoded over the run) against the mode's rate;
* encode ms p50/p99 (colour conversion + encode, the engine's own timing);
* glass-to-glass ms p50/p99: the frame source handed frame N to the encoder -> the client has
  decoded a frame showing N (no display in the loop: capture is not part of this figure), and
  its ratio to H.264's p50;
* wire kbps (video datagrams, FEC included) at the asked rate;
* PSNR-Y dB of the decoded picture against the source frame (every 10th frame).

Client and host share one process and the machine's cores, so the figures carry the cost of
both ends; run it on an idle machine for numbers to compare.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stream import BITS, CELL, X0, Y0, parse_mode, pct, read_counter  # noqa: E402

DECODERS = {"h264": "h264", "hevc": "hevc", "av1": "libdav1d"}
PSNR_EVERY = 10


class Source:
    """The engine's frame source: counter strip + moving noise; remembers when frame N left."""

    def __init__(self, width: int, height: int):
        self.n = 0
        self.handed: dict[int, float] = {}
        self.luma: dict[int, np.ndarray] = {}  # every PSNR_EVERY-th frame's Y plane
        rng = np.random.default_rng(1)
        self.noise = rng.integers(0, 255, (height // 4, width // 4, 3), np.uint8)
        self.lock = threading.Lock()

    def __call__(self, width: int, height: int) -> np.ndarray:
        import cv2

        self.n = (self.n + 1) & 0xFFFF
        n = self.n
        img = np.zeros((height, width, 4), np.uint8)
        img[..., 3] = 255
        x = (n * 4) % (width - width // 4)
        img[height // 2 : height // 2 + height // 4, x : x + width // 4, :3] = self.noise
        img[Y0 - 4 : Y0 + 2 * CELL + 4, X0 - 4 : X0 + BITS * CELL + 4, :3] = 0x20
        for bit in range(BITS):
            on = (n >> bit) & 1
            top, bottom = (255, 0) if on else (0, 255)
            img[Y0 : Y0 + CELL, X0 + bit * CELL : X0 + (bit + 1) * CELL, :3] = top
            img[Y0 + CELL : Y0 + 2 * CELL, X0 + bit * CELL : X0 + (bit + 1) * CELL, :3] = bottom
        with self.lock:
            self.handed[n] = time.monotonic()
            if n % PSNR_EVERY == 0:
                i420 = cv2.cvtColor(img, cv2.COLOR_BGRA2YUV_I420)
                self.luma[n] = i420[:height].copy()
            if len(self.handed) > 4096:  # keep the last few seconds only
                for k in sorted(self.handed)[:2048]:
                    self.handed.pop(k, None)
                    self.luma.pop(k, None)
        return img


def one(codec: str, width: int, height: int, fps: int, seconds: float, kbps: int) -> dict:
    """The subprocess: one codec at one mode; returns the figures."""
    import av
    from moonlight_python.config import CODEC_MAP, StreamConfig
    from moonlight_python.stream import StreamingSession

    from compat.codecs import Offer
    from compat.engine.stream import StreamSession
    from media import encoders
    from tests.compat.e2e_client import loopback_launch

    table = encoders.available()
    launch, key, iv = loopback_launch(
        offer=Offer(("h264", "hevc", "av1")),
        encoders={c: encoders.choose(c, "auto", None, table) for c in ("h264", "hevc", "av1")},
    )
    source = Source(width, height)
    host = StreamSession(launch, source)
    host.start()
    client = StreamingSession()
    client.start(
        address="127.0.0.1",
        app_version="7.1.431.-1",
        gfe_version="3.23.0.74",
        server_codec_mode_support=launch.offer.codec_mode_support,
        rtsp_session_url=f"rtsp://127.0.0.1:{launch.rtsp_port}",
        config=StreamConfig(
            width=width,
            height=height,
            fps=fps,
            bitrate_kbps=kbps,
            supported_video_formats=CODEC_MAP[codec],
            codec=codec,
        ),
        ri_aes_key=key,
        ri_aes_iv=iv,
        capture_audio=False,
    )
    decoder = av.CodecContext.create(DECODERS[codec], "r")
    decoder.thread_type = "AUTO"
    g2g: list[float] = []
    psnr: list[float] = []
    decoded = [0]
    torn = [0]
    first = [None]

    def pull() -> None:
        while (raw := client.pull_frame()) is not None:
            for pic in decoder.decode(av.Packet(raw.annex_b_data)):
                now = time.monotonic()
                first[0] = first[0] or now
                decoded[0] += 1
                yuv = pic.to_ndarray(format="yuv420p")
                luma = yuv[:height]
                # The counter from the Y plane (white > 128 there too).
                n = read_counter(np.repeat(luma[..., None], 3, axis=2))
                if n is None:
                    torn[0] += 1
                    continue
                with source.lock:
                    at = source.handed.get(n)
                    ref = source.luma.get(n)
                if at is not None:
                    g2g.append((now - at) * 1000)
                if ref is not None:
                    mse = float(np.mean((ref.astype(np.float32) - luma.astype(np.float32)) ** 2))
                    psnr.append(99.0 if mse == 0 else 10 * np.log10(255 * 255 / mse))

    puller = threading.Thread(target=pull, daemon=True)
    puller.start()
    time.sleep(seconds)
    end = time.monotonic()
    sent = host.stats.bytes_sent
    span = end - (first[0] or end)
    host.stop("host")
    client._connection_terminated.wait(3)
    client.stop()
    client.wake()
    puller.join(5)
    enc = host.stats.encode_ms.values()
    return {
        "codec": codec,
        "mode": f"{width}x{height}@{fps}",
        "encoder": host.stats.encoder,
        "fps_delivered": round(decoded[0] / span, 1) if span > 0 else 0.0,
        "encode_ms_p50": pct(enc, 50),
        "encode_ms_p99": pct(enc, 99),
        "g2g_ms_p50": pct(g2g, 50),
        "g2g_ms_p99": pct(g2g, 99),
        "wire_kbps": round(sent * 8 / 1000 / seconds, 0),
        "psnr_y_db": round(float(np.mean(psnr)), 1) if psnr else None,
        "frames": decoded[0],
        "torn_or_unread": torn[0],
    }


def _f(v, width: int = 7, digits: int = 1) -> str:
    return f"{v:{width}.{digits}f}" if isinstance(v, int | float) else f"{'-':>{width}}"


def print_table(results: list[dict], kbps: int) -> None:
    load = " ".join(f"{v:.1f}" for v in os.getloadavg())
    print(f"\n{os.cpu_count()} CPUs, load average at the end {load}; {kbps} kbps asked")
    print(f"{'mode':<13} {'encoder':<11} {'fps':>6} {'enc p50':>7} {'enc p99':>7} "
          f"{'g2g p50':>7} {'g2g p99':>7} {'ratio':>6} {'kbps':>6} {'PSNR-Y':>6}")  # fmt: skip
    base = {r["mode"]: r for r in results if r.get("codec") == "h264" and "error" not in r}
    for r in results:
        if "error" in r:
            print(f"{r['mode']:<13} {r['codec']:<11} {r['error']}")
            continue
        b = base.get(r["mode"])
        ratio = "-"
        if b and r["codec"] != "h264" and r["g2g_ms_p50"] and b["g2g_ms_p50"]:
            ratio = f"{r['g2g_ms_p50'] / b['g2g_ms_p50']:.2f}x"
        print(f"{r['mode']:<13} {r['encoder']:<11} {_f(r['fps_delivered'], 6)} "
              f"{_f(r['encode_ms_p50'], 7, 2)} {_f(r['encode_ms_p99'], 7, 2)} "
              f"{_f(r['g2g_ms_p50'])} {_f(r['g2g_ms_p99'])} {ratio:>6} "
              f"{_f(r['wire_kbps'], 6, 0)} {_f(r['psnr_y_db'], 6)}")  # fmt: skip
    for r in results:  # the goal: HEVC and AV1 hold 720p60 within 1.3x of H.264's g2g
        b = base.get(r["mode"])
        if (
            r["mode"] == "1280x720@60"
            and r.get("codec") in ("hevc", "av1")
            and b
            and "error" not in r
        ):
            ok = r["fps_delivered"] >= 0.98 * 60 and r["g2g_ms_p50"] <= 1.3 * b["g2g_ms_p50"]
            print(f"goal, {r['codec']} at 720p60 (60 fps, g2g p50 <= 1.3x H.264): "
                  f"{'met' if ok else 'NOT met'}")  # fmt: skip


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--modes", default="1280x720x60,1920x1080x60")
    ap.add_argument("--codecs", default="h264,hevc,av1")
    ap.add_argument("--kbps", type=int, default=10000)
    ap.add_argument("--one", nargs=2, metavar=("CODEC", "MODE"), help=argparse.SUPPRESS)
    args = ap.parse_args()
    if args.one:
        w, h, f = parse_mode(args.one[1])
        print(json.dumps(one(args.one[0], w, h, f, args.seconds, args.kbps)), flush=True)
        return
    results = []
    for mode in args.modes.split(","):
        w, h, f = parse_mode(mode)
        for codec in args.codecs.split(","):
            out = subprocess.run(
                [sys.executable, __file__, "--one", codec, mode, "--seconds", str(args.seconds),
                 "--kbps", str(args.kbps)],
                capture_output=True, text=True, timeout=args.seconds + 120, cwd=ROOT,
                env={**os.environ, "PYTHONPATH": str(ROOT)},
            )  # fmt: skip
            try:
                results.append(json.loads(out.stdout.strip().splitlines()[-1]))
            except (ValueError, IndexError):
                tail = (out.stderr.strip().splitlines() or ["no output"])[-1]
                results.append({"codec": codec, "mode": f"{w}x{h}@{f}", "error": tail[:120]})
            r = results[-1]
            print(f"{r['mode']} {codec}: {r.get('fps_delivered', r.get('error'))} fps", flush=True)
    print_table(results, args.kbps)


if __name__ == "__main__":
    main()
