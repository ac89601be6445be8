"""The native plane in a real browser: decoded fps, glass-to-glass latency, input echo.

Run by hand:  .venv/bin/python bench/browser_play.py [--mode 1280x720] [--fps 60] [--samples 40]

Starts a throwaway host, opens /play in Debian's headless Chromium, approves the browser through
the API and plays Desktop, first over WebRTC, then in the low-latency mode (WebSocket +
WebCodecs; the page is a secure context: HTTPS on 127.0.0.1). For each:
1. Decoded fps over 5 s (`requestVideoFrameCallback` on the <video>; the decoder's output
   count on the WebCodecs canvas); the frame interval is the floor.
2. Glass-to-glass: the bench paints a new colour into the virtual display (python-xlib) and
   polls the <video> / <canvas> until the centre pixel shows it; p50/p99 over N paints.
   The poll itself (a CDP round trip and the read) is included, so these are upper bounds;
   the probe floor line says what one poll costs.
3. Input echo: a data-channel ping answered by the host's peer process, p50.
4. The encoder process's CPU share (psutil, % of one core) while playing.
5. Where the time and the CPU go (bench/browser_floors.py), in the same run: CPU ms per
   encoded frame of the encoder child, the peer, daphne, the browser and the host's other
   processes; per-stage p50s of the live path; the floors: the encoder alone on frames
   recorded from the session's display (capture, convert, encode), the page decoding that
   stream alone, and the glass-to-glass probe's own cost. Each figure carries the load
   average: the machine may be shared, and CPU time per frame is the figure load spares.
Browser and host share this machine's cores.

`--starve S` (WebRTC only): the session's peer process is pinned to one core (its encoder to the
others) and, S seconds into a run of back-to-back glass-to-glass paints, busy processes pinned
to that core take most of it for S seconds (bench/starve.py). Prints the latency p50/p99 before,
during and after the hog, how long after the hog stopped the latency stayed under 2x its
before-p50 for good, and per phase the floors measured in the same run: the frame interval, the
encoder alone on the same frames (its capture and encode ms per frame, from the session's live
points), and the browser's receive side (frames received and decoded per second, dropped, jitter
buffer ms per frame). The peer's pacing threads run at realtime priority where the host may
give it (common/realtime.py; the bench prints how many); `--normal-priority` puts them back to
normal first, the baseline to compare with.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

import psutil  # noqa: E402
from playwright.sync_api import sync_playwright  # noqa: E402

from bench import browser_floors as floors  # noqa: E402
from bench.starve import Hog, pin  # noqa: E402
from tests.native.browserkit import (  # noqa: E402
    ARGS,
    CANVAS_PIXEL_JS,
    CHROMIUM,
    DECODED_FPS_JS,
    page_wait,
    paint_to_page_ms,
    wait_for,
)
from tests.native.test_player import FRAMES_JS, Painter  # noqa: E402
from tests.support.livehost import start_host  # noqa: E402

# The browser's own counters for the received video (WebRTC only): decoded vs shown frames and
# the jitter buffer's delay say where frames go missing (host pacing or the page's renderer).
RTP_JS = """async () => {
  const rep = await window.nativePlayer.pc.getStats();
  let out = null;
  rep.forEach((s) => { if (s.type === 'inbound-rtp' && s.kind === 'video') out = {
    received: s.framesReceived || 0, decoded: s.framesDecoded || 0, dropped: s.framesDropped || 0,
    jb: s.jitterBufferDelay || 0, jbn: s.jitterBufferEmittedCount || 0,
    lost: s.packetsLost || 0, t: performance.now() }; });
  return out;
}"""

COLOURS = [(255, 0, 0), (0, 255, 0), (0, 0, 255), (255, 255, 0), (0, 255, 255), (255, 0, 255)]


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))]


def x_display(api) -> str:
    displays = api.get("/api/v1/display/state").json()["displays"]
    return next(d["x_display"] for d in displays if d.get("state", "active") == "active")


def encoder_process():
    """The newest native session's encoder process (its parent is the session's peer)."""
    managers = [  # the session manager forks one process per session
        p
        for p in psutil.process_iter(["cmdline"])
        if "streaming.sessions.manager" in " ".join(p.info["cmdline"] or [])
    ]
    # The newest session's encoder (a spawned child of its peer process): a replaced
    # session's process may still be on its way out, and a peer has other children too.
    return wait_for(
        lambda: max(
            (c for m in managers for c in m.children(recursive=True)
             if "spawn_main" in " ".join(c.cmdline())),
            key=lambda c: c.create_time(),
            default=None,
        ),
        what="the encoder process",
    )  # fmt: skip


def live_session(api) -> dict:
    """The native session's GET /api/v1/streams entry (its encoder, options, live points)."""
    found = [s for s in api.get("/api/v1/streams").json().get("sessions", [])
             if s.get("plane") == "native" and s.get("encoder")]  # fmt: skip
    return found[-1] if found else {}


def daphnes(host) -> list:
    root = psutil.Process(host.proc.pid)
    return [p for p in root.children(recursive=True) if "daphne" in " ".join(p.cmdline())]


def measure(page, api, host, size: tuple, samples: int, webcodecs: bool, record: int) -> dict:
    """The live figures of the session now playing: fps, glass-to-glass, echo, the CPU of
    each process per frame and the per-stage times (bench/browser_floors.py)."""
    width, height = size
    surface = "canvas').width" if webcodecs else "video').videoWidth"
    page_wait(
        page,
        f"() => window.nativePlayer.state === 'playing' && "
        f"document.getElementById('{surface} === {width}",
        30,
    )
    x_name = x_display(api)
    encoder = encoder_process()
    painter = Painter(x_name)
    time.sleep(2)
    groups = {
        "encoder": [encoder],
        "peer": [encoder.parent()],
        "daphne": daphnes(host),
        "browser": floors.browser_procs(),
    }
    known = {p.pid for group in groups.values() for p in group}
    others = [
        p for p in psutil.Process(host.proc.pid).children(recursive=True) if p.pid not in known
    ]
    groups["host other"] = [psutil.Process(host.proc.pid), *others]
    before = None if webcodecs else page.evaluate(RTP_JS)
    t0_wall, t0, c0 = time.time(), time.monotonic(), floors.process_cpu(groups)
    c0_each = {p.pid: floors.cpu_s(p) for p in groups["host other"]}
    fps = page.evaluate(DECODED_FPS_JS if webcodecs else FRAMES_JS, 5000)
    c1, span, t1_wall = floors.process_cpu(groups), time.monotonic() - t0, time.time()
    live = live_session(api)
    points = [
        p for p in live.get("live") or [] if t0_wall * 1000 <= p.get("ts_ms", 0) < t1_wall * 1000
    ]
    encoded = floors.med([p["fps"] for p in points if isinstance(p.get("fps"), int | float)])
    per_frame = encoded * span if encoded == encoded and encoded > 0 else fps * span
    cpu_ms = {k: (c1[k] - c0[k]) * 1000 / per_frame for k in groups}
    busiest = sorted(
        ((floors.cpu_s(p) - c0_each.get(p.pid, 0.0), p) for p in groups["host other"]),
        key=lambda x: -x[0],
    )[:3]
    busiest = ", ".join(f"{name_of(p)} {cpu / span * 100:.0f} %" for cpu, p in busiest)
    if before is not None:
        after = page.evaluate(RTP_JS)
        dt = (after["t"] - before["t"]) / 1000
        emitted = max(1, after["jbn"] - before["jbn"])
        delta = {k: after[k] - before[k] for k in ("received", "decoded", "dropped", "lost")}
        print(
            f"webrtc inbound over {dt:.1f} s: received {delta['received'] / dt:.1f} fps, "
            f"decoded {delta['decoded'] / dt:.1f} fps, dropped {delta['dropped']}, packets lost "
            f"{delta['lost']}, jitter buffer {(after['jb'] - before['jb']) / emitted * 1000:.1f} "
            "ms per frame"
        )
    stages = floors.webcodecs_stages(page) if webcodecs else floors.webrtc_stages(page)
    pixel = CANVAS_PIXEL_JS if webcodecs else floors.VIDEO_PIXEL_JS
    colours = [COLOURS[i % len(COLOURS)] for i in range(samples)]
    offset = floors.stages_on(page) if webcodecs else None
    g2g = paint_to_page_ms(page, painter, pixel, colours, interval=0.001, pause=0.05)
    painted = floors.stages_off(page, offset, changed=True) if webcodecs else None
    probe = floors.probe_floor(page, painter, pixel, x_name, COLOURS)
    echo = [page.evaluate("() => window.nativePlayer.ping()") for _ in range(samples)]
    stats = page.evaluate("() => window.nativePlayer.stats")
    frames = capture_ms = None
    if record:  # the encoder floor's frames: this display, at the stream's size
        frames, capture_ms = floors.record_frames(x_name, width, height, painter, COLOURS, record)
    painter.close()
    return {
        "fps": fps, "g2g": g2g, "echo": echo, "kbps": stats.get("kbps", 0),
        "encoded": encoded, "cpu_ms": cpu_ms, "stages": stages, "live": live,
        "host": encoder_figures(points), "load": floors.load(),
        "frames": frames, "capture_ms": capture_ms, "probe": probe, "busiest": busiest,
        "painted": painted,
    }  # fmt: skip


def name_of(proc) -> str:
    try:
        return " ".join(proc.cmdline())[:60] or proc.name()
    except psutil.Error:
        return "?"


def encoder_figures(points: list) -> dict:
    """The encoder child's own per-frame figures (live points: capture ms, encode ms, which
    counts the conversion and the encode)."""
    return {k: floors.med([p[k] for p in points if isinstance(p.get(k), int | float)])
            for k in ("capture_ms", "encode_ms")}  # fmt: skip


def rtp_rates(before: dict, after: dict) -> str:
    dt = max((after["t"] - before["t"]) / 1000, 1e-3)
    emitted = max(1, after["jbn"] - before["jbn"])
    return (
        f"recv {(after['received'] - before['received']) / dt:5.1f} fps, "
        f"decoded {(after['decoded'] - before['decoded']) / dt:5.1f} fps, "
        f"dropped {after['dropped'] - before['dropped']}, lost {after['lost'] - before['lost']}, "
        f"jitter buffer {(after['jb'] - before['jb']) / emitted * 1000:5.1f} ms"
    )


def encoder_floor(api, t0_wall: float, t1_wall: float) -> str:
    """The encoder alone on the same frames: its per-second live points (fps it encoded,
    capture and encode ms per frame) in [t0_wall, t1_wall)."""
    points = [
        p
        for sess in api.get("/api/v1/streams").json().get("sessions", [])
        for p in sess.get("live") or []
        if t0_wall * 1000 <= p.get("ts_ms", 0) < t1_wall * 1000
    ]
    if not points:
        return "no live points"

    def med(key):
        vals = [p[key] for p in points if isinstance(p.get(key), int | float)]
        return statistics.median(vals) if vals else float("nan")

    return (
        f"encoded {med('fps'):5.1f} fps, capture {med('capture_ms'):5.2f} ms, "
        f"encode {med('encode_ms'):5.2f} ms (median of {len(points)} s)"
    )


def cpu_s(proc) -> float:
    times = proc.cpu_times()
    return times.user + times.system


RECOVERY_RUN = 5


def recovered_after(samples: list[tuple[float, float]], off: float, bound_ms: float) -> float:
    """Seconds from `off` (the hog stopped) to the end of the first paint that finished after
    it and began a run of RECOVERY_RUN paints whose median is under `bound_ms` (one slow poll
    on a loaded machine is not a relapse); the whole "after" phase when none did."""
    late = [(t + ms / 1000, ms) for t, ms in samples if t + ms / 1000 > off]
    for i in range(len(late) - RECOVERY_RUN + 1):
        if statistics.median(ms for _, ms in late[i : i + RECOVERY_RUN]) < bound_ms:
            return max(0.0, late[i][0] - off)
    return late[-1][0] - off if late else float("nan")


def starve(page, api, seconds: float, hogs: int, fps: int, normal: bool = False) -> None:
    """Back-to-back paints for `seconds` before, during and after a CPU hog on the peer's core;
    prints the phases and the recovery (see the module docstring)."""
    encoder = encoder_process()
    peer = encoder.parent()
    cpu = max(os.sched_getaffinity(0))
    others = (os.sched_getaffinity(0) - {cpu}) or {cpu}
    # Everything the measurement goes through but the peer (the encoder, the display server,
    # the browser, this bench) on the other cores: only the peer is starved.
    for proc in [psutil.Process(), *psutil.Process().children(recursive=True)]:
        if proc.pid != peer.pid:
            try:
                pin(proc.pid, others)
            except (FileNotFoundError, psutil.NoSuchProcess):
                pass
    threads = pin(peer.pid, {cpu})
    if normal:
        for tid in os.listdir(f"/proc/{peer.pid}/task"):
            os.sched_setscheduler(int(tid), os.SCHED_OTHER, os.sched_param(0))
    realtime = sum(
        os.sched_getscheduler(int(tid)) & ~os.SCHED_RESET_ON_FORK == os.SCHED_RR
        for tid in os.listdir(f"/proc/{peer.pid}/task")
    )
    painter = Painter(x_display(api))
    hog = Hog(cpu, hogs)
    after_s = max(seconds, 4.0)
    samples: list[tuple[float, float]] = []  # (paint time, latency ms), time.monotonic
    marks = {}  # phase -> (monotonic, wall, RTP counters) at its first sample
    time.sleep(1)
    t0 = time.monotonic()
    hog.begin(time.monotonic, seconds, seconds)
    try:
        i = 0
        while time.monotonic() - t0 < 2 * seconds + after_s:
            phase = (
                "before" if hog.started_at is None else "hog" if hog.stopped_at is None else "after"
            )
            if phase not in marks:
                marks[phase] = (time.monotonic(), time.time(), page.evaluate(RTP_JS), cpu_s(peer))
            start = time.monotonic()
            samples += [(start, ms) for ms in paint_to_page_ms(
                page, painter, floors.VIDEO_PIXEL_JS, [COLOURS[i % len(COLOURS)]], interval=0.001
            )]  # fmt: skip
            i += 1
        marks["end"] = (time.monotonic(), time.time(), page.evaluate(RTP_JS), cpu_s(peer))
    finally:
        hog.stop()
        painter.close()
    on, off = hog.started_at, hog.stopped_at
    phases = {
        "before": [ms for t, ms in samples if t < on],
        "hog": [ms for t, ms in samples if on <= t < off],
        "after": [ms for t, ms in samples if t >= off],
    }
    base = statistics.median(phases["before"])
    recovery = recovered_after(samples, off, 2 * base)
    load = os.getloadavg()
    print(
        f"starved peer: pid {peer.pid} ({threads} threads, {realtime} at realtime priority) "
        f"pinned to CPU {cpu}, {hogs} busy "
        f"processes there for {off - on:.1f} s, load average {load[0]:.1f} {load[1]:.1f} "
        f"{load[2]:.1f}; floor = frame interval {1000 / fps:.1f} ms"
    )
    print("phase    paints  g2g_p50_ms  g2g_p99_ms  g2g_max_ms")
    for name, values in phases.items():
        print(
            f"{name:7}  {len(values):6}  {statistics.median(values):10.1f}  "
            f"{pct(values, 0.99):10.1f}  {max(values):10.1f}"
        )
    order = [k for k in ("before", "hog", "after", "end") if k in marks]
    for a, b in zip(order, order[1:], strict=False):
        span = marks[b][0] - marks[a][0]
        peer_pct = (marks[b][3] - marks[a][3]) / span * 100
        print(f"{a:7}  peer process: {peer_pct:4.1f} % of a core")
        print(f"{'':7}  browser: {rtp_rates(marks[a][2], marks[b][2])}")
        print(f"{'':7}  encoder: {encoder_floor(api, marks[a][1], marks[b][1])}")
    hog_p99 = pct(phases["hog"], 0.99)
    print(
        f"recovery: under 2x before-p50 ({2 * base:.1f} ms) for good {recovery:.2f} s after the "
        f"hog stopped; goal p99 <= 100 ms during the hog: "
        f"{'met' if hog_p99 <= 100 else 'not met'} ({hog_p99:.1f} ms), recovery <= 1 s: "
        f"{'met' if recovery <= 1.0 else 'not met'}"
    )


def report(rows: list, floor: dict | None, decode: dict | None, args) -> None:
    print(f"mode {args.mode}@{args.fps}, floor = frame interval {1000 / args.fps:.1f} ms")
    print("plane      fps_shown  g2g_p50_ms  g2g_p99_ms  echo_p50_ms  encoder_%core  kbps  load")
    for name, r in rows:
        enc_pct = r["cpu_ms"]["encoder"] * r["encoded"] / 10 if r["encoded"] == r["encoded"] else 0
        print(
            f"{name:9}  {r['fps']:9.1f}  {statistics.median(r['g2g']):10.1f}  "
            f"{pct(r['g2g'], 0.99):10.1f}  {statistics.median(r['echo']):11.2f}  "
            f"{enc_pct:13.0f}  {r['kbps']:4.0f}  {r['load']}"
        )
    print("live CPU ms per encoded frame (process CPU time over the fps window):")
    for name, r in rows:
        cpu = r["cpu_ms"]
        print(
            f"  {name:9}  encoded {r['encoded']:4.1f} fps: encoder child {cpu['encoder']:5.2f}, "
            f"peer {cpu['peer']:5.2f}, daphne {cpu['daphne']:5.2f}, browser {cpu['browser']:5.2f}, "
            f"the host's other processes {cpu['host other']:5.2f}"
        )
        print(f"  {'':9}  busiest other: {r['busiest']}")
    print("live stages, p50 ms per frame:")
    for name, r in rows:
        st, host = r["stages"], r["host"]
        enc = f"host capture {host['capture_ms']:5.2f}, convert+encode {host['encode_ms']:5.2f}"
        if name == "webcodecs":
            print(
                f"  webcodecs  {enc}; capture start -> page has the chunk {st['to_arrival']:5.1f} "
                f"(capture, encode, pipe, relay, WebSocket), decode {st['decode']:5.1f}, draw "
                f"{st['draw']:4.1f}, draw -> next frame {st['to_frame']:4.1f}; capture start -> "
                f"next frame {st['total']:5.1f} ({st['frames']} frames, {st['kb']:.1f} kB)"
            )
            pt = r["painted"]
            print(
                f"  {'':9}  the painted frames during the g2g paints: capture start -> chunk "
                f"{pt['to_arrival']:5.1f}, decode {pt['decode']:5.1f}, draw {pt['draw']:4.1f}, -> "
                f"next frame {pt['to_frame']:4.1f}; capture start -> next frame {pt['total']:5.1f} "
                f"({pt['frames']} frames, {pt['kb']:.1f} kB)"
            )
        else:
            print(
                f"  webrtc     {enc}; browser: decode {st['decode']:5.1f}, receive -> presented "
                f"{st['receive_to_present']:5.1f}, presented -> callback "
                f"{st['present_to_callback']:4.1f} ({st['frames']} frames)"
            )
    print("floor, the glass-to-glass probe itself (in every g2g figure):")
    for name, r in rows:
        pr = r["probe"]
        print(
            f"  {name:9}  one poll of the page's pixel p50 {pr['poll_p50']:5.1f} / p99 "
            f"{pr['poll_p99']:5.1f} ms; paint -> colour in the display p50 "
            f"{pr['paint_p50']:5.1f} ms"
        )
    if floor:
        same = "the live session's options" if floor["same_options"] else "OTHER options"
        print(
            f"floor, encoder alone on {args.floor_frames} recorded frames ({floor['encoder']}, "
            f"{same}; {floor['load']}): capture {floor['capture_ms']:5.2f}, convert "
            f"{floor['convert_ms']:5.2f}, encode {floor['encode_ms']:5.2f} CPU ms per frame "
            f"(encode wall p50 {floor['encode_wall_p50']:5.2f} ms) = {floor['cpu_pct']:4.1f} % "
            f"of a core at {args.fps} fps"
        )
    if decode:
        print(
            f"floor, browser decode alone (the same frames pre-encoded, no network or host; "
            f"{decode['load']}): {decode['burst_fps']:5.0f} fps back to back; paced: decode p50 "
            f"{decode['decode_p50']:5.2f} / p99 {decode['decode_p99']:5.2f} ms, draw "
            f"{decode['draw_p50']:4.2f} ms, frames held in the decoder at most "
            f"{decode['held_max']}, "
            f"browser CPU {decode['cpu_ms']:5.2f} ms per frame"
        )
    for name, r in rows:
        print(f"{name} encoder: {r['live'].get('encoder')} {r['live'].get('encoder_options')}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--mode", default="1280x720")
    ap.add_argument("--fps", type=int, default=60)
    ap.add_argument("--samples", type=int, default=40)
    ap.add_argument(
        "--starve", type=float, default=0.0, help="seconds of CPU hog on the peer (WebRTC only)"
    )
    ap.add_argument("--hogs", type=int, default=8, help="busy processes on the peer's core")
    ap.add_argument(
        "--normal-priority",
        action="store_true",
        help="put the peer's realtime threads back to normal priority first (the baseline)",
    )
    ap.add_argument("--floor-frames", type=int, default=120, help="frames the floors encode")
    args = ap.parse_args()
    host = start_host()
    pw = sync_playwright().start()
    browser = pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
    rows, floor, decode = [], None, None
    try:
        api = host.mgmt()
        context = browser.new_context(ignore_https_errors=True, base_url=host.url)
        context.add_init_script(floors.STAGES_JS)
        page = context.new_page()
        page.goto("/play")
        page.fill("#name", "bench")
        page.select_option("#mode", args.mode)
        page.select_option("#fps", str(args.fps))
        page.click("#start")
        entry = wait_for(lambda: api.get("/api/v1/native/pending").json(), what="pending")[0]
        api.post(f"/api/v1/native/pending/{entry['id']}/approve", json={})
        size = tuple(int(v) for v in args.mode.split("x"))
        rtc = measure(
            page, api, host, size, args.samples, False, 0 if args.starve else args.floor_frames
        )
        rows.append(("webrtc", rtc))
        if args.starve:
            starve(page, api, args.starve, args.hogs, args.fps, args.normal_priority)
        else:
            page.click("#stop")
            time.sleep(2)  # the floors run with no session streaming
            kbps = 12_000  # the page asks for no rate: the host's default for a browser
            floor = floors.encoder_floor(rtc["frames"], rtc["capture_ms"], args.fps, kbps,
                                         rtc["live"])  # fmt: skip
            decode = floors.decode_floor(page, floor["chunks"], args.fps)
            rtc["frames"] = None
            page.check("#lowlat")
            page.click("#start")
            time.sleep(1)  # the new session replaces the old one (its display is released)
            rows.append(("webcodecs", measure(page, api, host, size, args.samples, True, 0)))
        report(rows, floor, decode, args)
    finally:
        browser.close()
        pw.stop()
        host.stop()
    return 0


if __name__ == "__main__":
    sys.exit(main())
