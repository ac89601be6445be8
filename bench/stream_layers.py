"""Benchmark of the streaming layers. Run by hand: `.venv/bin/python bench/stream_layers.py`.

Figures:
* encode (BGRA -> yuv420p -> libx264 ultrafast/zerolatency) ms p50/p99 and fps at 1280x720 and
  1920x1080, with the colour conversion alone alongside; floor = the 60 fps frame interval.
* FEC (nanors-compatible Reed-Solomon) encode and decode throughput, against a pure-Python
  per-byte loop measured in the same run (the baseline the vectorised code replaces).
* packetizer (frame -> datagrams incl. 20 % FEC) frames/s and datagrams/s for a 20 Mbit/s 60 fps
  stream's P-frame and IDR, against the rate such a stream needs.

Synthetic content: a gradient with a moving box and a band of noise, so motion search and the
entropy coder both have work (a static screen would flatter the encoder).
"""

from __future__ import annotations

import argparse
import os
import sys
import time

import av
import numpy as np

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from compat import fec
from compat.video import FRAME_TYPE_IDR, FRAME_TYPE_P, VideoPacketizer
from media.encoder import VideoEncoder, to_yuv420p

FRAME_INTERVAL_MS = 1000 / 60


def content(w: int, h: int, n: int) -> np.ndarray:
    rng = np.random.default_rng(n)
    img = np.empty((h, w, 4), np.uint8)
    img[..., 0] = (np.arange(w)[None, :] * 255 // w).astype(np.uint8)
    img[..., 1] = (np.arange(h)[:, None] * 255 // h).astype(np.uint8)
    img[..., 2] = 64
    img[..., 3] = 255
    x = (n * 8) % (w - 200)
    img[100:300, x : x + 200, :3] = (20, 200, 240)
    img[h // 2 : h // 2 + 32, :, :3] = rng.integers(0, 255, (32, w, 3), dtype=np.uint8)
    return img


def pct(values: list[float], q: float) -> float:
    return float(np.percentile(values, q))


def bench_encode(w: int, h: int, frames: int, codec: str = "libx264") -> None:
    enc = VideoEncoder(w, h, fps=60, bitrate_kbps=20_000, codec=codec)
    inputs = [content(w, h, i) for i in range(16)]
    first = enc.encode(inputs[0])  # open/warm-up
    times, sizes, out = [], [], [first]
    for i in range(frames):
        if i == frames // 2:
            enc.request_idr()
        f = enc.encode(inputs[(i + 1) % 16])
        times.append(f.encode_ms)
        sizes.append(len(f.data))
        out.append(f)
    # Correctness alongside speed: decode everything, compare the last picture to its input.
    dec = av.CodecContext.create("h264", "r")
    pics = []
    for f in out:
        pics += dec.decode(av.Packet(f.data))
    last = pics[-1].to_ndarray(format="bgr24").astype(int) if pics else None
    err = float(np.mean(np.abs(last - inputs[frames % 16][..., :3]))) if last is not None else -1
    idrs = [i for i, f in enumerate(out) if f.keyframe]
    conv, sws = [], []
    for i in range(min(frames, 60)):
        t = time.perf_counter()
        to_yuv420p(inputs[i % 16])
        conv.append((time.perf_counter() - t) * 1000)
        t = time.perf_counter()
        av.VideoFrame.from_ndarray(inputs[i % 16], format="bgra").reformat(format="yuv420p")
        sws.append((time.perf_counter() - t) * 1000)
    print(
        f"encode {enc.codec_name} {w}x{h}: p50 {pct(times, 50):6.2f} ms  "
        f"p99 {pct(times, 99):6.2f} ms  "
        f"-> {1000 / np.mean(times):6.1f} fps  (floor {FRAME_INTERVAL_MS:.1f} ms = 60 fps; "
        f"avg frame {np.mean(sizes) / 1024:.1f} KiB)\n"
        f"  decoded {len(pics)}/{len(out)}, mean abs error {err:.1f}/255, IDR at {idrs}\n"
        f"  colour conversion alone p50 {pct(conv, 50):.2f} ms (baseline swscale BGRA->yuv420p "
        f"p50 {pct(sws, 50):.2f} ms)"
    )


def naive_parity(data: list[bytes], matrix: np.ndarray) -> list[bytearray]:
    """The baseline: per-byte Python loops over the same log/exp tables."""
    out = []
    for row in matrix.tolist():
        acc = bytearray(len(data[0]))
        for coef, shard in zip(row, data, strict=True):
            for k, byte in enumerate(shard):
                if byte and coef:
                    acc[k] ^= int(fec.EXP[int(fec.LOG[coef]) + int(fec.LOG[byte])])
        out.append(acc)
    return out


def bench_fec(repeat: int) -> None:
    size = 1408
    for d, p in [(30, 6), (146, 30)]:
        data = np.random.default_rng(d).integers(0, 256, (d, size), dtype=np.uint8)
        rs = fec.ReedSolomon(d, p)
        rs.encode(data)
        t = time.perf_counter()
        for _ in range(repeat):
            parity = rs.encode(data)
        enc_s = (time.perf_counter() - t) / repeat
        shards = [data[i].tobytes() for i in range(d)] + [parity[j].tobytes() for j in range(p)]
        for i in range(p):
            shards[i * (d // p)] = None
        t = time.perf_counter()
        for _ in range(repeat):
            rs.decode(shards)
        dec_s = (time.perf_counter() - t) / repeat
        print(
            f"fec {d}+{p} x {size} B: encode {enc_s * 1000:6.2f} ms/block "
            f"({d * size / enc_s / 1e6:6.1f} MB/s data, {(d + p) / enc_s:8.0f} shards/s); "
            f"decode with {p} losses {dec_s * 1000:6.2f} ms/block"
        )
    # Baseline: the per-byte loop on a small block, scaled per data byte.
    d, p = 4, 2
    data = np.random.default_rng(1).integers(0, 256, (d, size), dtype=np.uint8)
    rows = [data[i].tobytes() for i in range(d)]
    t = time.perf_counter()
    naive = naive_parity(rows, fec.nanors_parity_matrix(d, p))
    naive_s = time.perf_counter() - t
    assert [bytes(r) for r in naive] == [r.tobytes() for r in fec.ReedSolomon(d, p).encode(data)]
    rs = fec.codec(d, p)
    rs.encode(data)
    t = time.perf_counter()
    for _ in range(repeat):
        rs.encode(data)
    vec_s = (time.perf_counter() - t) / repeat
    print(
        f"fec baseline {d}+{p}: pure-Python per-byte loop {naive_s * 1000:8.2f} ms/block "
        f"({d * size / naive_s / 1e6:.3f} MB/s) vs vectorised {vec_s * 1000:.3f} ms "
        f"-> {naive_s / vec_s:.0f}x"
    )


def bench_packetizer(repeat: int) -> None:
    rng = np.random.default_rng(3)
    need_fps = 60
    for name, size, ftype in [
        ("P-frame 20 Mbit/s@60", 20_000_000 // 8 // 60, FRAME_TYPE_P),
        ("IDR 300 KB", 300_000, FRAME_TYPE_IDR),
    ]:
        frame = b"\0\0\0\1\x41" + rng.integers(1, 256, size, dtype=np.uint8).tobytes()
        pk = VideoPacketizer(fec_percentage=20)
        rows = pk.packetize(frame, ftype)
        t = time.perf_counter()
        for _ in range(repeat):
            rows = pk.packetize(frame, ftype)
        per = (time.perf_counter() - t) / repeat
        print(
            f"packetize {name}: {per * 1000:6.2f} ms/frame, {1 / per:7.0f} frames/s, "
            f"{rows.shape[0] / per:8.0f} datagrams/s ({rows.shape[0]} per frame incl. FEC; "
            f"a 60 fps stream needs {need_fps} frames/s = {rows.shape[0] * need_fps} datagrams/s)"
        )


def _free_port(kind: int) -> int:
    import socket

    with socket.socket(socket.AF_INET, kind) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def loopback_launch(**kw):
    """A stream session's launch on loopback with free ports."""
    import socket

    from compat.engine.stream import Launch

    return Launch(
        rikey=bytes(16),
        rikeyid=1,
        host="127.0.0.1",
        rtsp_port=_free_port(socket.SOCK_STREAM),
        video_port=_free_port(socket.SOCK_DGRAM),
        control_port=_free_port(socket.SOCK_DGRAM),
        audio_port=_free_port(socket.SOCK_DGRAM),
        **kw,
    )


def bench_rtsp(repeat: int) -> None:
    """RTSP listener: OPTIONS round trips (one TCP connection each, as Moonlight does), alone and
    while silent clients hold connections open (they must not delay the real one)."""
    import socket

    from compat.engine.stream import StreamSession

    launch = loopback_launch()
    session = StreamSession(launch, lambda w, h: np.zeros((h, w, 4), np.uint8))
    session.start()
    request = b"OPTIONS rtsp://127.0.0.1 RTSP/1.0\r\nCSeq: 1\r\n\r\n"

    def options() -> float:
        t0 = time.perf_counter()
        with socket.create_connection(("127.0.0.1", launch.rtsp_port), timeout=10) as c:
            c.sendall(request)
            reply = b""
            while b"\r\n\r\n" not in reply and (chunk := c.recv(4096)):
                reply += chunk
        assert reply.startswith(b"RTSP/1.0 200"), reply
        return (time.perf_counter() - t0) * 1000

    silent: list[socket.socket] = []
    try:
        for label, n_silent in (("alone", 0), ("1 silent client open", 1)):
            while len(silent) < n_silent:
                silent.append(socket.create_connection(("127.0.0.1", launch.rtsp_port)))
            first = options()
            runs = sorted(options() for _ in range(repeat if not n_silent else 5))
            print(
                f"rtsp OPTIONS ({label}): first {first:.2f} ms, then p50 "
                f"{runs[len(runs) // 2]:.2f} ms, p99 {runs[int(len(runs) * 0.99)]:.2f} ms "
                f"over {len(runs)} connections"
            )
    finally:
        for c in silent:
            c.close()
        session.stop()


class _TimedSocket:
    """A socket stand-in that notes when each datagram left."""

    def __init__(self, sock):
        self.sock, self.stamps = sock, []

    def sendto(self, row, addr):
        self.stamps.append(time.perf_counter())
        return self.sock.sendto(row, addr)


def bench_pacing(repeat: int) -> None:
    """The video pacer: one 300 KB IDR (263 datagrams) sent to a loopback socket unpaced and
    at max_send_mbps caps; how long the frame takes against the ideal at that rate, and its
    burstiness (most datagrams leaving within any 1 ms)."""
    import socket

    from compat.engine.stream import StreamSession

    rows = np.zeros((263, 1408), np.uint8)
    rx = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    rx.bind(("127.0.0.1", 0))
    rx.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 8 << 20)
    rx.setblocking(False)
    for mbps in (0, 800, 80):
        session = StreamSession(
            loopback_launch(max_send_mbps=mbps), lambda w, h: np.zeros((h, w, 4), np.uint8)
        )
        real = session._video_sock
        spans, peaks = [], []
        for _ in range(max(repeat // 5, 3)):
            timed = _TimedSocket(real)
            stamps = timed.stamps
            session._video_sock = timed
            session._send_video(rows, rx.getsockname())
            spans.append((stamps[-1] - stamps[0]) * 1000)
            t = np.array(stamps)
            peaks.append(int((np.searchsorted(t, t + 0.001) - np.arange(len(t))).max()))
            while True:
                try:
                    rx.recv(2048)
                except BlockingIOError:
                    break
        session._video_sock = real
        session.stop()
        ideal = rows.nbytes * 8 / (mbps * 1e6) * 1000 if mbps else 0.0
        print(
            f"pacing {mbps or 'none':>4} Mbit/s: IDR 263 datagrams in p50 "
            f"{sorted(spans)[len(spans) // 2]:.2f} ms (ideal {ideal:.2f} ms), most in any 1 ms "
            f"p50 {sorted(peaks)[len(peaks) // 2]}"
        )
    rx.close()


def bench_loopback(w: int, h: int, seconds: float) -> None:
    """Our StreamSession feeding the real client (moonlight-python) over loopback."""
    import json
    import subprocess

    root = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
    script = os.path.join(root, "tests", "compat", "e2e_client.py")
    out = subprocess.run(
        [sys.executable, script, str(w), str(h), "60", str(seconds)],
        capture_output=True,
        text=True,
        timeout=seconds + 60,
        cwd=root,
        env={**os.environ, "PYTHONPATH": root},
    )
    if out.returncode != 0:
        print(f"loopback {w}x{h}@60: failed: {out.stderr[-500:]}")
        return
    r = json.loads(out.stdout.strip().splitlines()[-1])
    print(
        f"loopback {w}x{h}@60 to moonlight-common-c for {seconds:.0f} s: "
        f"{r['delivered_fps']} fps delivered ({r['frames']} frames, floor/target 60), "
        f"host encode p50 {r['encode_ms_p50']} ms p99 {r['encode_ms_p99']} ms, "
        f"decoded {r['decoded']}, termination {r['termination']}"
    )


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--frames", type=int, default=120)
    ap.add_argument("--repeat", type=int, default=50)
    ap.add_argument("--loopback-seconds", type=float, default=10, help="0 skips the client run")
    ap.add_argument("--codecs", default="libx264", help="comma-separated, e.g. h264_nvenc,libx264")
    ap.add_argument("--only-encode", action="store_true")
    ap.add_argument("--only-rtsp", action="store_true", help="RTSP listener and pacer only")
    args = ap.parse_args()
    print(f"cpu cores: {os.cpu_count()}, load avg: {os.getloadavg()[0]:.2f}")
    if args.only_rtsp:
        bench_rtsp(args.repeat * 4)
        bench_pacing(args.repeat)
        return
    for codec in args.codecs.split(","):
        for w, h in [(1280, 720), (1920, 1080)]:
            bench_encode(w, h, args.frames, codec)
    if args.only_encode:
        return
    bench_fec(args.repeat)
    bench_packetizer(args.repeat)
    bench_rtsp(args.repeat * 4)
    bench_pacing(args.repeat)
    if args.loopback_seconds:
        for w, h in [(1280, 720), (1920, 1080)]:
            bench_loopback(w, h, args.loopback_seconds)


if __name__ == "__main__":
    main()
