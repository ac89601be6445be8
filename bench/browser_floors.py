"""Floors and per-stage times for bench/browser_play.py, measured in the same run as the live
figures, so a reader sees where the time and the CPU of a browser session go.

- `record_frames` grabs the session's own display the way the encoder child does
  (`DisplayCapture` at the stream's size) while the bench paints colours into it.
- `encoder_floor` encodes those frames alone (no session running): capture, convert and
  encode CPU ms per frame (process CPU time, encoder threads included) and the % of a core
  they make at the stream's rate. CPU time, not wall time: the machine is shared.
- `decode_floor` has the page decode that pre-encoded stream alone (no network, no host):
  WebCodecs decode ms per frame, paced at the stream's rate, and the browser's CPU per frame.
- `STAGES_JS` (an init script) stamps each WebCodecs chunk in the live page: decode call,
  decoder output, draw and the next animation frame; `webcodecs_stages` maps them onto the
  encoder child's capture clock (CLOCK_MONOTONIC) to split capture -> arrival (capture,
  convert, encode, pipe, peer relay, daphne, WebSocket) from decode and present.
- `webrtc_stages`: the `<video>`'s `requestVideoFrameCallback` metadata (receive -> decoded
  -> presented) and the inbound-rtp counters (jitter buffer, decode time per frame).
- `process_cpu`: CPU of the session's encoder child (capture, convert, encode), its peer
  process (pipe pump, RTP packetize and SRTP, or the WebSocket relay's Unix socket), daphne
  (the WebSocket relay) and the browser, read around the live fps window.
"""

from __future__ import annotations

import base64
import statistics
import time

import mss
import psutil

from media.encoder import VideoEncoder, to_yuv420p
from media.framesource import DisplayCapture

# Stamps per WebCodecs chunk (performance.now() ms), keyed by the chunk's timestamp (the
# capture time in microseconds): [decode called, output, drawn, next animation frame, bytes].
STAGES_JS = """(() => {
  const VD = window.VideoDecoder;
  if (!VD) return;
  const rec = window.__stages = { at: new Map(), rows: [], on: false };
  window.VideoDecoder = class extends VD {
    constructor(init) {
      const out = init.output;
      super({ ...init, output: (frame) => {
        const ts = frame.timestamp, t1 = performance.now();
        out(frame);
        const t2 = performance.now(), [t0, size] = rec.at.get(ts) || [];
        rec.at.delete(ts);
        if (rec.on && t0 !== undefined)
          requestAnimationFrame(() => rec.rows.push([ts, t0, t1, t2, performance.now(), size]));
      } });
    }
    decode(chunk) {
      if (this.__stamp !== false)
        rec.at.set(chunk.timestamp, [performance.now(), chunk.byteLength]);
      return super.decode(chunk);
    }
  };
})();"""

# The <video>'s frames as the compositor shows them (WebRTC).
RVFC_JS = """async (ms) => {
  const v = document.getElementById('video'), rows = [], t0 = performance.now();
  await new Promise((res) => {
    const tick = (now, m) => {
      rows.push([m.receiveTime ?? NaN, (m.processingDuration ?? NaN) * 1000,
                 m.presentationTime, m.expectedDisplayTime, now]);
      if (performance.now() - t0 < ms) v.requestVideoFrameCallback(tick); else res();
    };
    v.requestVideoFrameCallback(tick);
  });
  return rows;
}"""

# The page decodes a pre-recorded stream alone and draws it as play.js does (2D canvas): fed
# back to back (throughput), then one chunk per frame interval, each fed from the previous
# one's timer (timers set all at once fire in bursts on a busy renderer): per frame decode ms
# (call -> output), draw ms, and how many later chunks had gone in before a frame came out.
DECODE_ALONE_JS = """async ([codec, chunks, fps]) => {
  const bytes = chunks.map(([k, b]) => [k, Uint8Array.from(atob(b), (c) => c.charCodeAt(0))]);
  const canvas = document.createElement('canvas'), g = canvas.getContext('2d');
  const run = (paced) => new Promise((resolve, reject) => {
    const at = [], rows = [];
    let fed = 0;
    const d = new VideoDecoder({
      output: (f) => {
        const t1 = performance.now();
        if (canvas.width !== f.displayWidth) canvas.width = f.displayWidth;
        if (canvas.height !== f.displayHeight) canvas.height = f.displayHeight;
        g.drawImage(f, 0, 0);
        rows.push([t1 - at[f.timestamp], performance.now() - t1, fed - 1 - f.timestamp]);
        f.close();
        if (rows.length === bytes.length) { d.close(); resolve(rows); }
      },
      error: reject,
    });
    d.__stamp = false;
    d.configure({ codec, optimizeForLatency: true });
    const feed = (i) => {
      at[i] = performance.now(); fed = i + 1;
      d.decode(new EncodedVideoChunk({ type: bytes[i][0] ? 'key' : 'delta', timestamp: i,
                                       data: bytes[i][1] }));
      if (i + 1 < bytes.length) {
        if (paced) setTimeout(() => feed(i + 1), 1000 / fps); else feed(i + 1);
      }
    };
    feed(0);
  });
  const t0 = performance.now();
  await run(false);
  const burst = performance.now() - t0;
  const rows = await run(true);
  return { burst_fps: bytes.length / (burst / 1000), rows };
}"""

# The <video>'s centre pixel through one reused 1x1 canvas: tests/native/test_player.py's
# PIXEL_JS draws the whole frame into a new canvas per poll, ~19 ms a poll at load 11 here,
# which the glass-to-glass figure then carries.
VIDEO_PIXEL_JS = """() => {
  const v = document.getElementById('video');
  if (!v.videoWidth) return null;
  const c = window.__pixel || (window.__pixel = document.createElement('canvas'));
  c.width = 1; c.height = 1;
  const g = c.getContext('2d', { willReadFrequently: true });
  g.drawImage(v, v.videoWidth / 2, v.videoHeight / 2, 1, 1, 0, 0, 1, 1);
  return Array.from(g.getImageData(0, 0, 1, 1).data.slice(0, 3));
}"""

CODEC_STRING = "avc1.42E034"  # what the page configures for H.264 (play.js CODEC_STRINGS)


def pct(values: list[float], q: float) -> float:
    values = sorted(values)
    return values[min(len(values) - 1, int(q * len(values)))] if values else float("nan")


def med(values) -> float:
    values = [v for v in values if v == v]
    return statistics.median(values) if values else float("nan")


def cpu_s(proc) -> float:
    try:
        times = proc.cpu_times()
    except psutil.Error:
        return 0.0
    return times.user + times.system


def load() -> str:
    with open("/proc/loadavg") as f:
        return "load " + " ".join(f.read().split()[:3])


def record_frames(x_display: str, width: int, height: int, painter, colours, n: int = 120):
    """`n` frames of the session's display at the stream's size, a new colour every 10, and
    the grab's CPU ms per frame (the encoder child's grab: `DisplayCapture`)."""
    capture = DisplayCapture(x_display)
    frames, cpu = [], 0.0
    try:
        capture(width, height)  # the first grab proves XShm
        for i in range(n):
            if i % 10 == 0:
                painter.paint(colours[(i // 10) % len(colours)])
            c0 = time.process_time()
            frame = capture(width, height)
            cpu += time.process_time() - c0
            frames.append(frame.copy())
            time.sleep(1 / 60)
    finally:
        capture.close()
    return frames, cpu * 1000 / n


def encoder_floor(frames, capture_ms: float, fps: int, kbps: int, live: dict) -> dict:
    """The encoder alone on `frames`, with the live session's encoder and options (`live`:
    its GET /api/v1/streams entry). CPU ms per frame of each stage and the % of a core."""
    c0 = time.process_time()
    yuv = [to_yuv420p(f) for f in frames]
    convert_ms = (time.process_time() - c0) * 1000 / len(frames)
    enc = VideoEncoder(frames[0].shape[1], frames[0].shape[0], fps=fps, bitrate_kbps=kbps,
                       candidates=[live.get("encoder") or "libx264"])  # fmt: skip
    same = enc.options == (live.get("encoder_options") or enc.options)
    chunks, walls = [], []
    c0 = time.process_time()
    for i, frame in enumerate(yuv):
        if i == 0:
            enc.request_idr()
        w0 = time.perf_counter()
        out = enc.encode_yuv(frame)
        walls.append((time.perf_counter() - w0) * 1000)
        if out is not None:
            chunks.append((out.keyframe, base64.b64encode(out.data).decode()))
    encode_ms = (time.process_time() - c0) * 1000 / len(frames)
    enc.close()
    total = capture_ms + convert_ms + encode_ms
    return {
        "encoder": enc.codec_name,
        "same_options": same,
        "capture_ms": capture_ms,
        "convert_ms": convert_ms,
        "encode_ms": encode_ms,
        "encode_wall_p50": med(walls),
        "cpu_pct": total * fps / 10,
        "chunks": chunks,
        "load": load(),
    }


def browser_procs() -> list:
    """This bench's Chromium processes (browser, renderer, GPU and utility processes)."""
    return [p for p in psutil.Process().children(recursive=True) if "chrom" in p.name().lower()]


def decode_floor(page, chunks, fps: int) -> dict:
    """The page decodes the pre-encoded stream alone (no network, no host)."""
    procs = browser_procs()
    c0 = sum(cpu_s(p) for p in procs)
    out = page.evaluate(DECODE_ALONE_JS, [CODEC_STRING, chunks, fps])
    cpu = sum(cpu_s(p) for p in procs) - c0
    rows = out["rows"]
    return {
        "burst_fps": out["burst_fps"],
        "decode_p50": med([r[0] for r in rows]),
        "decode_p99": pct([r[0] for r in rows], 0.99),
        "draw_p50": med([r[1] for r in rows]),
        "held_max": max((r[2] for r in rows), default=0),
        # both runs (burst and paced) decoded every chunk: CPU per decoded frame
        "cpu_ms": cpu * 1000 / (2 * len(rows)),
        "load": load(),
    }


def probe_floor(page, painter, pixel_js: str, x_display: str, colours) -> dict:
    """What the glass-to-glass probe itself costs: one poll of the page's pixel (a CDP round
    trip and the read), and paint -> the colour is in the display (the bench's X paint and
    sync, then a grab of the centre pixel until it shows)."""
    polls = []
    for _ in range(20):
        t0 = time.monotonic()
        page.evaluate(pixel_js)
        polls.append((time.monotonic() - t0) * 1000)
    shown = []
    with mss.MSS(display=x_display) as sct:
        mon = sct.monitors[1]
        centre = {"left": mon["left"] + mon["width"] // 2, "top": mon["top"] + mon["height"] // 2,
                  "width": 1, "height": 1}  # fmt: skip
        for rgb in colours:
            t0 = time.monotonic()
            painter.paint(rgb)
            while time.monotonic() - t0 < 2:
                got = sct.grab(centre).pixel(0, 0)
                if sum(abs(a - b) for a, b in zip(got, rgb, strict=True)) < 40:
                    break
            shown.append((time.monotonic() - t0) * 1000)
    return {"poll_p50": med(polls), "poll_p99": pct(polls, 0.99), "paint_p50": med(shown)}


def clock_offset_ms(page) -> float:
    """page performance.now() - host CLOCK_MONOTONIC ms, from the tightest of 7 round trips."""
    best = None
    for _ in range(7):
        a = time.monotonic()
        now = page.evaluate("() => performance.now()")
        b = time.monotonic()
        if best is None or b - a < best[0]:
            best = (b - a, now - (a + b) / 2 * 1000)
    return best[1]


def stages_on(page) -> float:
    """Start stamping the live WebCodecs chunks; the page-minus-host clock offset (ms)."""
    offset = clock_offset_ms(page)
    page.evaluate("() => { window.__stages.rows = []; window.__stages.on = true; }")
    return offset


def stages_off(page, offset: float, changed: bool = False) -> dict:
    """Per-frame stage times (ms, p50) since `stages_on`; `changed`: only the frames whose
    chunk is over 4x the median size (the picture changed: a painted colour)."""
    rows = page.evaluate("() => { window.__stages.on = false; return window.__stages.rows; }")
    if changed and rows:
        typical = med([r[5] for r in rows])
        rows = [r for r in rows if r[5] > 4 * typical]
    return {
        "frames": len(rows),
        "to_arrival": med([t0 - (ts / 1000 + offset) for ts, t0, *_ in rows]),
        "decode": med([t1 - t0 for _, t0, t1, *_ in rows]),
        "draw": med([t2 - t1 for _, _, t1, t2, *_ in rows]),
        "to_frame": med([t3 - t2 for *_, t2, t3, _ in rows]),
        "total": med([t3 - (ts / 1000 + offset) for ts, *_, t3, _ in rows]),
        "kb": med([r[5] / 1000 for r in rows]),
    }


def webcodecs_stages(page, seconds: float = 3.0) -> dict:
    """Per-frame stage times of the live WebCodecs path (ms, p50) over `seconds`."""
    offset = stages_on(page)
    time.sleep(seconds)
    return stages_off(page, offset)


def webrtc_stages(page, seconds: float = 3.0) -> dict:
    """The <video>'s frames: receive -> decoded -> presented (ms, p50)."""
    rows = page.evaluate(RVFC_JS, int(seconds * 1000))
    return {
        "frames": len(rows),
        "decode": med([r[1] for r in rows]),
        "receive_to_present": med([r[2] - r[0] for r in rows]),
        "present_to_callback": med([r[4] - r[2] for r in rows]),
    }


def process_cpu(procs: dict[str, list]) -> dict[str, float]:
    """CPU seconds so far of each named group of processes."""
    return {k: sum(cpu_s(p) for p in group) for k, group in procs.items()}
