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
  1280x720 client: the grab plus the session's resize;
- gnome: a private headless GNOME (tests/support/gnome.py: dbus-daemon, PipeWire, WirePlumber,
  `mutter --headless` with a virtual monitor of the row's size, a fullscreen foot) grabbed
  through media.framesource.MutterCapture on connector Meta-0, the frame source a session
  opens for a `gnome` display (session_display.open_capture; here with the desktop's bus and
  environment passed in): mutter -> PipeWire -> gst-launch pipewiresrc -> a pipe -> our reader
  thread. "static": foot shows a still screen, mutter sends no frames and every grab returns
  the held one; "changing": foot's background is set 60 times a second (OSC 11), so every
  frame damages the whole monitor. "new/s" is the frames mutter sent per second; "idle" is
  what mutter (and nothing else) costs per 1/60 s rendering that changing screen with no
  capture open: the part of its CPU that is the desktop's, not the capture's.
- kwin window: a private KWin 5.27 (tests/support/kde.py, `kwin_wayland --virtual` at the
  row's size) through media.framesource.KWinCapture of a fullscreen tests/support/wl_app.py
  window (its own process), still or swapping its colours 60 times a second (foot crashes on
  that backend):
  there an output stream sends no frame (docs/kde-capture.md), so the window stream stands in
  for it (the same KWin stream code, memfd buffers and our reader).

CPU per frame is CPU time over the row divided by its grabs: ours is this process's CPU less
the grabbing thread's time outside grab() (pacing and the encoder stand-in), so it counts the
grab and any reader thread; "gst" is gst-launch's (gnome, kwin); "srv" is the compositor's or
X server's (sway, Xvfb, mutter, KWin), from /proc/<pid>/stat. "total" = ours + gst + srv, the
figure the gnome/xvfb and kwin/xvfb ratios compare (goal: within 1.5x of Xvfb, and 60 grabs a
second delivered at 720p60 on every 60/s row).

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

from displays import capture
from displays.sway import SwayCompositor, repaint_rate
from media.framesource import DisplayCapture, KWinCapture, MutterCapture
from media.wayland.screencopy import ScreenCopy
from streaming.session_display import open_capture
from tests.support.desktop import OperatorDesktop
from tests.support.gnome import missing_tools, running_gnome
from tests.support.kde import missing_tools as missing_kde_tools
from tests.support.kde import running_kde
from tests.support.wl_app import WaylandApp

ROOT = Path(__file__).resolve().parent.parent
SIZES = [(1280, 720), (1920, 1080)]
FRAMES = int(sys.argv[1]) if len(sys.argv) > 1 else 120
GRIM_FRAMES = max(10, FRAMES // 4)
RATE = 60.0
ENCODE_MS = 8.0


def pct(values: list[float], p: float) -> float:
    s = sorted(values)
    return s[min(len(s) - 1, int(round(p / 100 * (len(s) - 1))))]


TICK = os.sysconf("SC_CLK_TCK")
# The processes that render/serve the frames: "srv" (sway, Xvfb, mutter) and, for gnome,
# "gst" (gst-launch); `count` is a counter of frames the compositor sent (gnome).
SERVER: dict = {"pid": 0, "gst": 0, "count": None}
STATS: dict[int, dict] = {}  # id(row list) -> ours/gst/srv CPU ms per frame, fps, new/s


def cpu_s(pid: int) -> float:
    if not pid:
        return 0.0
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / TICK  # utime + stime


def timed(fn, n: int, rate: float | None = None, work_ms: float = 0.0) -> list[float]:
    """ms per call; with `rate`, calls are paced at that many a second (as the video thread
    asks for frames) and only the time fn blocks is counted; `work_ms` of busy work after
    each call stands in for the encoder. CPU per frame goes to STATS: ours is the process's
    CPU (so a reader thread counts) less this thread's outside fn (pacing, the busy work),
    which a busy box would stretch; the server's and gst-launch's from /proc."""
    fn()  # warm-up: buffers allocated, connections open
    fn()
    out = []
    inside = 0.0
    count = SERVER["count"]
    f0 = count() if count else 0
    s0, g0 = cpu_s(SERVER["pid"]), cpu_s(SERVER["gst"])
    p0, th0 = time.process_time(), time.thread_time()
    start = tick = time.perf_counter()
    first = 0.0
    for _ in range(n):
        if rate:
            tick += 1 / rate
            time.sleep(max(0.0, tick - time.perf_counter()))
        c0 = time.thread_time()
        t0 = time.perf_counter()
        fn()
        t1 = time.perf_counter()
        inside += time.thread_time() - c0
        out.append((t1 - t0) * 1000)
        first = first or t1
        while work_ms and time.perf_counter() - t1 < work_ms / 1000:
            pass
    wall = time.perf_counter() - start
    others = (time.process_time() - p0) - (time.thread_time() - th0)  # other threads
    STATS[id(out)] = {
        "ours": (inside + others) * 1000 / n,
        "gst": (cpu_s(SERVER["gst"]) - g0) * 1000 / n,
        "srv": (cpu_s(SERVER["pid"]) - s0) * 1000 / n,
        "fps": (n - 1) / (t1 - first),  # first to last grab returned
        "new": (count() - f0) / wall if count else None,
    }
    SERVER.update(gst=0, count=None)
    return out


def total(ms: list[float]) -> float:
    st = STATS[id(ms)]
    return st["ours"] + st["gst"] + st["srv"]


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


CHANGER = (  # foot's background set 60 times a second: every frame damages the whole monitor
    "import sys, time\n"
    "t0 = time.monotonic()\n"
    "for i in range(10**9):\n"
    "    c = '3366cc' if i % 2 else 'cc6633'\n"
    "    sys.stdout.write('\\033]11;#' + c + '\\a'); sys.stdout.flush()\n"
    "    time.sleep(max(0, t0 + (i + 1) / 60 - time.monotonic()))\n"
)
IDLE: dict[
    tuple, float
] = {}  # (backend, w, h) -> compositor CPU ms per 1/60 s, changing, no capture


def pipewire_rows(desk, prefix: str, server: int, screens, open_cap, w: int, h: int) -> dict:
    """The static and changing rows of a PipeWire source on `desk` (a tests/support/gnome.py
    desktop or its KDE subclass): `screens` gives (label, start, stop) for a still screen and
    one changing 60 times a second, each grabbed through the frame source `open_cap()` makes.
    `server`: the compositor's pid."""
    rows: dict[str, list[float]] = {}
    for label, start, stop in screens:
        shown = start()
        time.sleep(1.0)  # up and fullscreen
        if label == "changing":  # the compositor rendering the changing screen, nothing capturing
            c0, t0 = cpu_s(server), time.perf_counter()
            time.sleep(FRAMES / RATE)
            IDLE[(prefix, w, h)] = (cpu_s(server) - c0) * 1000 / ((time.perf_counter() - t0) * RATE)
        cap = open_cap()
        try:
            frame = cap(w, h)
            assert frame.shape == (h, w, 4) and cap.failures == 0, (frame.shape, cap.failures)
            time.sleep(0.5)  # past the first frames
            SERVER.update(pid=server, gst=cap._frames.proc.pid)
            SERVER["count"] = lambda cap=cap: cap.frames_received
            rows[f"{prefix} {label}, 60/s + 8 ms"] = timed(
                lambda cap=cap: cap(w, h), FRAMES, RATE, ENCODE_MS
            )
            assert cap.failures == 0, cap.failures
        finally:
            cap.close()
            stop(shown)
    return rows


def _stop_foot(proc) -> None:
    """Ends a screen's client process (foot, or the test client)."""
    proc.terminate()
    proc.wait(5)


def gnome_rows(w: int, h: int) -> dict[str, list[float]]:
    """The session's frame source for a gnome display (open_capture: MutterCapture of the
    display's output), with this desktop's bus and environment; foot shows the screens."""
    with running_gnome(f"{w}x{h}") as desk:
        screens = (
            ("static", lambda: desk.foot("3366cc", ["sleep", "3600"]), _stop_foot),
            ("changing", lambda: desk.foot("3366cc", [sys.executable, "-c", CHANGER]), _stop_foot),
        )
        return pipewire_rows(
            desk, "gnome", desk.procs["mutter"].pid, screens,
            lambda: MutterCapture("Meta-0", bus_address=desk.bus_address, env=desk.env), w, h,
        )  # fmt: skip


def kwin_rows(w: int, h: int) -> dict[str, list[float]]:
    """KWinCapture of a fullscreen native client's window on a private KWin 5.27
    (`--virtual`): its output streams send no frame on that backend (docs/kde-capture.md),
    so the window, which fills the output, stands in for it through the same KWin stream
    code and the same reader. foot crashes there (SIGFPE), so the client is
    tests/support/wl_app.py in a process of its own, still or swapping its colours 60 times a
    second."""
    with running_kde(w, h) as desk:
        app = [sys.executable, str(ROOT / "tests/support/wl_app.py"), os.devnull]

        def client(flip: float):
            env = {**desk.env, "PYTHONPATH": str(ROOT), "WL_APP_FLIP_HZ": str(flip)}
            return desk.start("wl_app", app, env=env)

        screens = (("static", lambda: client(0), _stop_foot),
                   ("changing", lambda: client(RATE), _stop_foot))  # fmt: skip

        def open_cap():
            uuid = desk.window_uuids()[-1]  # the client, on top
            return KWinCapture(desk.socket, window=uuid, env=desk.env)

        return pipewire_rows(desk, "kwin window", desk.procs["kwin"].pid, screens, open_cap, w, h)


def main() -> None:
    # The bench's own state dir: capture.select() must not read the operator's host.conf.
    os.environ["HOST_STATE_DIR"] = tempfile.mkdtemp(prefix="bench-capture-")
    missing = missing_tools()
    if missing:
        print(f"no gnome rows: not installed: {', '.join(missing)}")
    missing_kde = missing_kde_tools()
    if missing_kde:
        print(f"no kwin rows: not installed: {', '.join(missing_kde)}")
    comp = SwayCompositor(run_as=(65534, 65534) if os.geteuid() == 0 else None)
    comp.start()
    try:
        load = " ".join(f"{v:.1f}" for v in os.getloadavg())
        print(f"{os.cpu_count()} CPUs, load average at the start {load}")
        print(
            f"frames per row: {FRAMES} (grim: {GRIM_FRAMES}); grab ms: wall time the grab"
            " blocks; fps: grabs returned a second; new/s: frames mutter sent a second; CPU ms"
            " per frame of this process (us), gst-launch (gst), the compositor or X server (srv)"
        )
        print(
            f"{'size':>10}  {'backend':<30} {'p50':>7} {'p99':>7} {'mean':>7} {'fps':>6}"
            f" {'new/s':>6} {'cpu us':>7} {'gst':>6} {'srv':>6} {'total':>6}"
        )
        goals = []
        for w, h in SIZES:
            rows = wlr_rows(comp, w, h)
            rows.update(xvfb_rows(w, h))
            rows.update(x11_rows(w, h))
            if not missing:
                rows.update(gnome_rows(w, h))
            if not missing_kde:
                rows.update(kwin_rows(w, h))
            for name, ms in rows.items():
                st = STATS[id(ms)]
                new = f"{st['new']:6.1f}" if st["new"] is not None else ""
                print(
                    f"{w}x{h:<5}  {name:<30} {pct(ms, 50):7.2f} {pct(ms, 99):7.2f}"
                    f" {statistics.fmean(ms):7.2f} {st['fps']:6.1f} {new:>6} {st['ours']:7.2f}"
                    f" {st['gst']:6.2f} {st['srv']:6.2f} {total(ms):6.2f}"
                )
            for (prefix, iw, ih), idle in IDLE.items():
                if (iw, ih) == (w, h):
                    print(
                        f"{'':>10}  {prefix} changing, no capture: compositor {idle:.2f} ms"
                        " CPU per 1/60 s (the desktop's own rendering)"
                    )
            for what in ("60/s + 8 ms", "back-to-back"):
                x = [v for k, v in rows.items() if k.startswith("xvfb") and what in k][0]
                pairs = (("wlr", "wlr,"), ("wlr prefetch", "wlr prefetch,"),
                         ("x11", "x11 attached,"), ("gnome static", "gnome static,"),
                         ("gnome changing", "gnome changing,"),
                         ("kwin window static", "kwin window static,"),
                         ("kwin window changing", "kwin window changing,"))  # fmt: skip
                for which, prefix in pairs:
                    found = [v for k, v in rows.items() if k.startswith(prefix) and what in k]
                    if not found:
                        continue
                    ms = found[0]
                    ratio = total(ms) / total(x)
                    print(
                        f"{'':>10}  {which}/xvfb, {what}: wall p50"
                        f" {pct(ms, 50) / pct(x, 50):.2f}x, CPU (ours + gst + server)"
                        f" {ratio:.2f}x"
                    )
                    if which.startswith(("gnome", "kwin")):
                        goals.append(f"{w}x{h} {which}: CPU {ratio:.2f}x Xvfb's (goal 1.5x):"
                                     f" {'met' if ratio <= 1.5 else 'NOT met'}")  # fmt: skip
            if (w, h) == (1280, 720):
                for name, ms in rows.items():
                    if "60/s" in name:
                        fps = STATS[id(ms)]["fps"]
                        goals.append(f"{w}x{h} {name}: {fps:.1f} grabs/s (goal 60):"
                                     f" {'met' if fps >= 59 else 'NOT met'}")  # fmt: skip
                        new = STATS[id(ms)]["new"]
                        if "changing" in name:
                            ok = "met" if new >= 59 else "NOT met"
                            goals.append(f"{w}x{h} {name}: the compositor sent {new:.1f} new"
                                         f" frames/s of 60 changes/s: {ok}")  # fmt: skip
        print("goals:")
        for line in goals:
            print(f"  {line}")
    finally:
        comp.stop()


if __name__ == "__main__":
    main()
