"""Capture cost per backend: ms per frame, p50/p99, at 1280x720 and 1920x1080, in one run.

- wlr: media.wayland.screencopy.ScreenCopy on a headless sway output (pixman renderer)
  showing a native Wayland app fullscreen. "60/s + 8 ms" asks for a frame every 1/60 s as the
  video thread does, busy for 8 ms after each (the encoder's stand-in), and counts the time
  grab() blocks: waiting for the compositor's next repaint, idle, not work; "view" skips
  the copy out of the shared buffer; "prefetch" requests the next frame as soon as one is
  returned; "back-to-back" shows the rate limit (the output's refresh: the compositor copies
  at repaint);
- grim: `grim -t ppm -o OUTPUT -` on the same output (a process per frame, as people use it);
- xvfb: Xvfb at the same size grabbed with mss (XShm), through framesource.DisplayCapture,
  the path sessions use today;
- x11 attached: the host's `capture = x11` path on an "operator desktop" the bench starts (an
  Xvfb with windows drawn on it, tests/support/desktop.py): capture.select() resolves it from
  DISPLAY exactly as a session start does (probe, monitor, region) and
  session_display.open_capture() gives the session's frame source for it (a DisplayCapture
  of that monitor's region). "1080p desk->720p" is a 1920x1080 desktop streamed to a
  1280x720 client: the grab plus the session's resize.

Run: .venv/bin/python bench/capture.py [frames]   (as root it starts sway as `nobody`)
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from displays import capture  # noqa: E402
from displays.sway import SwayCompositor, repaint_rate  # noqa: E402
from media.framesource import DisplayCapture  # noqa: E402
from media.wayland.screencopy import ScreenCopy  # noqa: E402
from streaming.session_display import open_capture  # noqa: E402
from tests.support.desktop import OperatorDesktop  # noqa: E402
from tests.support.wl_app import WaylandApp  # noqa: E402

SIZES = [(1280, 720), (1920, 1080)]
FRAMES = int(sys.argv[1]) if len(sys.argv) > 1 else 120
GRIM_FRAMES = max(10, FRAMES // 4)
RATE = 60.0
ENCODE_MS = 8.0


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


TICK = os.sysconf("SC_CLK_TCK")
SERVER = {"pid": 0}  # the process that renders/serves the frames (sway or Xvfb)
CPU: dict[int, tuple[float, float]] = {}  # id(row list) -> (our CPU ms, server CPU ms) / frame


def server_cpu_s() -> float:
    with open(f"/proc/{SERVER['pid']}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def timed(fn, n: int, rate: float | None = None, work_ms: float = 0.0) -> list[float]:
    """ms per call; with `rate`, calls are paced at that many a second (as the video thread
    asks for frames) and only the time fn blocks is counted; `work_ms` of busy work after
    each call stands in for the encoder. CPU per frame (ours: this thread's inside fn, so a
    busy box that stretches the busy work does not skew it; the server's) goes to CPU."""
    fn()  # warm-up: buffers allocated, connections open
    fn()
    out = []
    ours = 0.0
    tick = time.perf_counter()
    s0 = server_cpu_s()
    for _ in range(n):
        if rate:
            tick += 1 / rate
            time.sleep(max(0.0, tick - time.perf_counter()))
        c0 = time.thread_time()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        ours += time.thread_time() - c0
        out.append((t1 - t0) * 1000)
        while work_ms and time.perf_counter() - t1 < work_ms / 1000:
            pass
    CPU[id(out)] = (ours * 1000 / n, (server_cpu_s() - s0) * 1000 / n)
    return out


def wlr_rows(comp: SwayCompositor, w: int, h: int) -> dict[str, list[float]]:
    out = comp.create_output(w, h, repaint_rate(60))  # as sessions' outputs (headless.py)
    comp.focus_output(out)
    app = WaylandApp(comp.wayland_socket, title=f"bench-{w}")
    try:
        app.wait(lambda: app.size == (w, h), 30)
        rows = {}
        SERVER["pid"] = comp.pid
        with ScreenCopy(comp.wayland_socket, out) as cap:
            frame = cap.grab()
            assert frame.shape == (h, w, 4), frame.shape
            rows["wlr, back-to-back"] = timed(cap.grab, FRAMES)
            rows["wlr, 60/s + 8 ms encode"] = timed(cap.grab, FRAMES, RATE, ENCODE_MS)
            rows["wlr, view, 60/s + 8 ms"] = timed(
                lambda: cap.grab(copy=False), FRAMES, RATE, ENCODE_MS
            )
        with ScreenCopy(comp.wayland_socket, out, prefetch=True) as cap:
            rows["wlr prefetch, 60/s + 8 ms"] = timed(cap.grab, FRAMES, RATE, ENCODE_MS)
        env = {
            "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            "XDG_RUNTIME_DIR": comp.runtime_dir,
            "WAYLAND_DISPLAY": comp.wayland_display,
        }

        def grim() -> None:
            r = subprocess.run(["grim", "-t", "ppm", "-o", out, "-"], env=env, capture_output=True)
            if r.returncode != 0 or len(r.stdout) < w * h * 3:
                raise RuntimeError(f"grim failed: {r.stderr.decode(errors='replace')}")

        rows["grim (process per frame)"] = timed(grim, GRIM_FRAMES)
        return rows
    finally:
        app.close()
        comp.retire_output(out)


def xvfb_rows(w: int, h: int) -> dict[str, list[float]]:
    r, wfd = os.pipe()
    proc = subprocess.Popen(
        ["Xvfb", "-screen", "0", f"{w}x{h}x24", "-nolisten", "tcp", "-displayfd", str(wfd)],
        pass_fds=(wfd,),
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    os.close(wfd)
    buf = b""
    while not buf.endswith(b"\n"):
        buf += os.read(r, 16)
    os.close(r)
    cap = DisplayCapture(":" + buf.decode().strip())
    SERVER["pid"] = proc.pid
    try:
        return {
            "xvfb + mss, back-to-back": timed(lambda cap=cap: cap(w, h), FRAMES),
            "xvfb + mss, 60/s + 8 ms": timed(lambda cap=cap: cap(w, h), FRAMES, RATE, ENCODE_MS),
        }
    finally:
        cap.close()
        proc.terminate()
        proc.wait(5)


def x11_rows(w: int, h: int) -> dict[str, list[float]]:
    rows = {}
    desks = [(w, h)] + ([(1920, 1080)] if (w, h) != (1920, 1080) else [])
    for dw, dh in desks:
        desk = OperatorDesktop(dw, dh)
        try:
            desk.draw()
            # What a session start does with capture = x11 and the host's DISPLAY.
            sel = capture.select({"DISPLAY": desk.name, capture.ENV_METHOD: "x11"})
            assert sel.backend == "x11" and not sel.error, sel
            cap = open_capture({"x_display": sel.x_display, "region": sel.region})
            frame = cap(w, h)
            assert frame.shape == (h, w, 4) and cap.failures == 0, (frame.shape, cap.failures)
            SERVER["pid"] = desk.proc.pid
            try:
                if (dw, dh) == (w, h):
                    rows["x11 attached, back-to-back"] = timed(lambda cap=cap: cap(w, h), FRAMES)
                    rows["x11 attached, 60/s + 8 ms"] = timed(
                        lambda cap=cap: cap(w, h), FRAMES, RATE, ENCODE_MS
                    )
                else:
                    rows[f"x11 {dh}p desk->{h}p, 60/s+8"] = timed(
                        lambda cap=cap: cap(w, h), FRAMES, RATE, ENCODE_MS
                    )
            finally:
                cap.close()
        finally:
            desk.stop()
    return rows


def main() -> None:
    # The bench's own state dir: capture.select() must not read the operator's host.conf.
    os.environ["HOST_STATE_DIR"] = tempfile.mkdtemp(prefix="bench-capture-")
    comp = SwayCompositor(run_as=(65534, 65534) if os.geteuid() == 0 else None)
    comp.start()
    try:
        load = " ".join(f"{v:.1f}" for v in os.getloadavg())
        print(f"{os.cpu_count()} CPUs, load average at the start {load}")
        print(
            f"frames per row: {FRAMES} (grim: {GRIM_FRAMES}); ms per frame: wall time the"
            " grab blocks, and CPU per frame of this process (cpu us) and of the compositor"
            " or X server (cpu srv)"
        )
        print(
            f"{'size':>10}  {'backend':<30} {'p50':>7} {'p99':>7} {'mean':>7} {'fps':>6}"
            f" {'cpu us':>7} {'cpu srv':>7}"
        )
        for w, h in SIZES:
            rows = wlr_rows(comp, w, h)
            rows.update(xvfb_rows(w, h))
            rows.update(x11_rows(w, h))
            for name, ms in rows.items():
                mean = statistics.fmean(ms)
                fps = f"{1000 / mean:6.1f}" if "back-to-back" in name or "grim" in name else ""
                ours, srv = CPU[id(ms)]
                print(
                    f"{w}x{h:<5}  {name:<30} {pct(ms, 50):7.2f} {pct(ms, 99):7.2f}"
                    f" {mean:7.2f} {fps:>6} {ours:7.2f} {srv:7.2f}"
                )
            for what in ("60/s + 8 ms", "back-to-back"):
                x = [v for k, v in rows.items() if k.startswith("xvfb") and what in k][0]
                pairs = (("wlr", "wlr,"), ("wlr prefetch", "wlr prefetch,"),
                         ("x11", "x11 attached,"))  # fmt: skip
                for which, prefix in pairs:
                    found = [v for k, v in rows.items() if k.startswith(prefix) and what in k]
                    if not found:
                        continue
                    ms = found[0]
                    print(
                        f"{'':>10}  {which}/xvfb, {what}: wall p50"
                        f" {pct(ms, 50) / pct(x, 50):.2f}x, CPU (ours + server)"
                        f" {sum(CPU[id(ms)]) / sum(CPU[id(x)]):.2f}x"
                    )
    finally:
        comp.stop()


if __name__ == "__main__":
    main()
