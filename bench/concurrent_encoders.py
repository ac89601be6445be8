"""Two compat video loops at once without a host or clients: what the encoder's threads and
the frame schedule cost. Run by hand: `.venv/bin/python bench/concurrent_encoders.py
[--seconds 8] [--reps 3] [--mode 1280x720x60]`.

Each loop is a process of its own, as a session is: a moving picture (a noise window sliding
over a flat background and a growing bar, precomputed), the engine's `VideoEncoder`,
`VideoPacketizer` (20 % FEC) and `send_datagrams` to a loopback socket nobody reads, paced by
`compat.engine.frameclock.FrameClock`. Per configuration, both loops' fps, process CPU per frame
and schedule restarts; configurations alternate so the machine's load moves over all of them.

  before: libx264 on its own thread count (a slice thread per core), the schedule restarted at
          every late frame (max_behind 0)
  clock:  libx264 on its own thread count, FrameClock (max_behind 1)
  after:  one thread each (`encoding.software_threads(2)` on 2 cores), FrameClock

No capture and no client: bench/concurrent_sessions.py measures the whole path against real
clients. CPU per frame is the figure to compare on a shared machine; fps moves with the load.
"""

from __future__ import annotations

import argparse
import json
import multiprocessing as mp
import os
import socket
import sys
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from bench.stream import parse_mode  # noqa: E402
from compat.engine.frameclock import FrameClock  # noqa: E402
from compat.engine.stream import send_datagrams  # noqa: E402
from compat.video import FRAME_TYPE_IDR, FRAME_TYPE_P, VideoPacketizer  # noqa: E402
from media.encoder import VideoEncoder  # noqa: E402

# name -> (encoder threads, max_behind)
CONFIGS = {"before": (0, 0.0), "clock": (0, 1.0), "after": (1, 1.0)}


def pictures(w: int, h: int) -> list[np.ndarray]:
    noise = np.random.default_rng(1).integers(0, 255, (h // 4, w // 4, 4), np.uint8)
    out = []
    for i in range(120):
        f = np.full((h, w, 4), 40, np.uint8)
        x = (i * 7) % (w - w // 4)
        f[h // 2 : h // 2 + h // 4, x : x + w // 4] = noise
        f[20:60, 20 : 20 + 40 * (i % 16)] = 255
        out.append(f)
    return out


def loop(mode, threads: int, max_behind: float, seconds: float, q) -> None:
    w, h, fps = mode
    frames = pictures(w, h)
    encoder = VideoEncoder(w, h, fps, bitrate_kbps=10_000, threads=threads)
    packetizer = VideoPacketizer()
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    out = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    out.setblocking(False)
    for i in range(30):  # past the IDR and the encoder's warm-up
        encoder.encode(frames[i])
    t0, c0, n = time.monotonic(), time.process_time(), 0
    clock = FrameClock(1 / fps, t0, max_behind)
    while time.monotonic() - t0 < seconds:
        frame = encoder.encode(frames[n % len(frames)])
        kind = FRAME_TYPE_IDR if frame.keyframe else FRAME_TYPE_P
        send_datagrams(out, packetizer.packetize(frame.data, kind), sink.getsockname())
        n += 1
        delay = clock.wait_s(time.monotonic())
        if delay:
            time.sleep(delay)
    cpu_ms = (time.process_time() - c0) * 1000 / n
    q.put({"fps": round(n / (time.monotonic() - t0), 1), "cpu_ms_per_frame": round(cpu_ms, 2),
           "restarts": clock.restarts})  # fmt: skip
    encoder.close()
    sink.close()
    out.close()


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--mode", default="1280x720x60")
    ap.add_argument("--seconds", type=float, default=8.0)
    ap.add_argument("--reps", type=int, default=3)
    args = ap.parse_args()
    mode = parse_mode(args.mode)
    results: dict[str, list] = {name: [] for name in CONFIGS}
    for _ in range(args.reps):
        for name, (threads, max_behind) in CONFIGS.items():
            q = mp.Queue()
            procs = [mp.Process(target=loop, args=(mode, threads, max_behind, args.seconds, q))
                     for _ in range(2)]  # fmt: skip
            load = os.getloadavg()[0]
            for p in procs:
                p.start()
            pair = [q.get() for _ in procs]
            for p in procs:
                p.join()
            results[name].append(pair)
            print(f"{name}: load {load:.1f} {json.dumps(pair)}", flush=True)
    print(f"\n{args.mode}, two loops, {os.cpu_count()} CPUs; CPU ms per frame (mean of the loops)")
    for name, runs in results.items():
        cpu = [r["cpu_ms_per_frame"] for pair in runs for r in pair]
        fps = [r["fps"] for pair in runs for r in pair]
        print(f"- {name}: CPU {np.mean(cpu):.2f} ms per frame ({min(cpu)}-{max(cpu)}), "
              f"fps {min(fps)}-{max(fps)}")  # fmt: skip


if __name__ == "__main__":
    main()
