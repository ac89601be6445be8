"""GNOME capture cost (media.framesource.MutterCapture): mutter 43 headless (shared memory, no
GPU) -> PipeWire -> gst-launch pipewiresrc -> raw BGRx on a pipe -> our reader thread.

Grabs at 60/s for a few seconds on a static screen (a fullscreen foot) and on a changing one
(foot's background set 60 times a second through OSC 11, so every frame damages the whole
monitor), and prints: frames mutter delivered per second, grabs per second, grab ms p50/p99,
CPU of gst-launch, of this process (reader thread + grab loop) and of mutter, in % of one core
and in ms per delivered frame.

Run: .venv/bin/python bench/mutter_capture.py [seconds] [WxH]   (starts its own desktop)
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path

import psutil

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from media.framesource import MutterCapture  # noqa: E402
from tests.support.gnome import missing_tools, running_gnome  # noqa: E402

CHANGER = (
    "import sys, time\n"
    "t0 = time.monotonic()\n"
    "for i in range(10**9):\n"
    "    c = '3366cc' if i % 2 else 'cc6633'\n"
    "    sys.stdout.write('\\033]11;#' + c + '\\a'); sys.stdout.flush()\n"
    "    time.sleep(max(0, t0 + (i + 1) / 60 - time.monotonic()))\n"
)


def cpu(proc: psutil.Process) -> float:
    t = proc.cpu_times()
    return t.user + t.system


def run(desk, seconds: float, width: int, height: int, label: str) -> None:
    cap = MutterCapture("Meta-0", bus_address=desk.bus_address, env=desk.env)
    try:
        cap(width, height)
        time.sleep(0.5)  # past the first frames and foot's start
        gst = psutil.Process(cap._frames.proc.pid)
        me, mutter = psutil.Process(), psutil.Process(desk.procs["mutter"].pid)
        c0 = (cpu(gst), cpu(me), cpu(mutter))
        f0, grabs, times = cap.frames_received, 0, []
        t0 = time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            t = time.perf_counter()
            cap(width, height)
            times.append((time.perf_counter() - t) * 1000)
            grabs += 1
            time.sleep(max(0.0, t0 + grabs / 60 - time.perf_counter()))
        wall = time.perf_counter() - t0
        c1 = (cpu(gst), cpu(me), cpu(mutter))
        frames = cap.frames_received - f0
        assert cap.failures == 0, cap.failures
    finally:
        cap.close()
    q = statistics.quantiles(times, n=100)
    names = ("gst-launch", "ours", "mutter")
    cpus = "  ".join(
        f"{n} {100 * (b - a) / wall:5.1f}%"
        + (f" ({1000 * (b - a) / frames:5.2f} ms/frame)" if frames else "")
        for n, a, b in zip(names, c0, c1, strict=True)
    )
    print(
        f"{label:9s} {width}x{height}: delivered {frames / wall:5.1f}/s,"
        f" grabs {grabs / wall:5.1f}/s, grab p50 {q[49]:.3f} ms p99 {q[98]:.3f} ms | {cpus}"
    )


def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    width, height = (int(v) for v in (sys.argv[2] if len(sys.argv) > 2 else "1280x720").split("x"))
    missing = missing_tools()
    if missing:
        sys.exit(f"not installed: {', '.join(missing)}")
    with running_gnome(f"{width}x{height}") as desk:
        foot = desk.foot("3366cc", ["sleep", "3600"])
        time.sleep(1.0)
        run(desk, seconds, width, height, "static")
        foot.terminate()
        foot.wait(5)
        desk.foot("3366cc", [sys.executable, "-c", CHANGER])
        time.sleep(1.0)
        run(desk, seconds, width, height, "changing")
    print(f"{psutil.cpu_count()} CPUs; gst-launch: pipewiresrc always-copy ! videoconvert ! "
          "videoscale ! BGRx ! fdsink")  # fmt: skip


if __name__ == "__main__":
    main()
