"""What a compat stream costs the CPU, stage by stage, with the encoder as the yardstick.

Run by hand: `.venv/bin/python bench/stream_cost.py [--seconds 10]
[--modes 1280x720x60,1920x1080x60] [--encrypt]`.

Per mode it starts a private Xvfb at the mode with a moving noise window on it (a child
process moves it every 16 ms, so the encoder has motion to code, as in a game) and runs the
compat engine's video and audio path in one thread, in the engine's order, at the mode's rate:

  capture (`media.framesource.DisplayCapture`, XShm) -> colour conversion (`to_yuv420p`)
  -> encode (`VideoEncoder.encode_yuv`, libx264 as the engine opens it) -> bitstream rewrite
  (`h264_for_moonlight`) -> FEC (`compat.fec`, 20 %) and packetize (`VideoPacketizer`)
  -> [encrypt, `--encrypt`: AES-GCM per datagram, when a client negotiates it]
  -> send (`compat.engine.stream.send_datagrams` to a loopback UDP socket nobody reads)
  -> opus (libopus encoding a tone in 5 ms packets, `media.audio.opus.OpusEncoder`)
  -> audio (the rest of the audio path: `AudioPacketizer` with its FEC, sendto).

Each stage's CPU is `time.process_time` across it (the process's CPU, so libx264's and
OpenCV's worker threads count where they work: the pipeline is one thread, nothing else in the
process runs meanwhile). Stages inside others (FEC inside packetize, the rewrite inside encode)
are taken out of their parent. Figures: CPU ms per frame (mean), % of one core at the mode's
rate, and each stage as a share of the video encoder's CPU; the goal is the
non-encoder stages at most 30 % of the encoder at 1080p60. "non-encoder" leaves out both
encoders (libx264 and libopus: each is the codec's own work) and counts everything else.
What is not here: the session's sound capture (parec, its own process) and the game itself.
The box's load average is printed: on a shared machine the encoder's CPU per frame moves with
it, so compare runs made side by side.
"""

from __future__ import annotations

import argparse
import math
import multiprocessing as mp
import os
import shutil
import socket
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from compat import fec  # noqa: E402
from compat import video as compat_video  # noqa: E402
from compat.audio import AudioPacketizer  # noqa: E402
from compat.engine.stream import send_datagrams  # noqa: E402
from compat.video import FRAME_TYPE_IDR, FRAME_TYPE_P, VideoPacketizer  # noqa: E402
from media import encoder as media_encoder  # noqa: E402
from media.audio.opus import OpusEncoder  # noqa: E402
from media.encoder import VideoEncoder, to_yuv420p  # noqa: E402
from media.framesource import DisplayCapture  # noqa: E402

STAGES = ("capture", "convert", "encode", "rewrite", "fec", "packetize", "encrypt", "send",
          "opus", "audio")  # fmt: skip
ENCODERS = ("encode", "opus")  # the encoders' own work: the yardstick, not a cost to cut
AUDIO_PACKET_MS = 5


class Stages:
    """Process CPU per stage; a stage entered inside another is taken out of the outer one."""

    def __init__(self):
        self.cpu = dict.fromkeys(STAGES, 0.0)
        self._stack: list[str] = []

    @contextmanager
    def __call__(self, name: str):
        t0 = time.process_time()
        self._stack.append(name)
        try:
            yield
        finally:
            self._stack.pop()
            spent = time.process_time() - t0
            self.cpu[name] += spent
            if self._stack:
                self.cpu[self._stack[-1]] -= spent


def timed(stages: Stages, name: str, fn):
    def wrapper(*args, **kwargs):
        with stages(name):
            return fn(*args, **kwargs)

    return wrapper


def mover(x_display: str, width: int, height: int, stop) -> None:
    """Child process: a window of noise that moves every 16 ms over a gradient background."""
    from Xlib import X
    from Xlib import display as xdisplay

    d = xdisplay.Display(x_display)
    s = d.screen()
    nw, nh = width // 3, height // 3
    noise = np.random.default_rng(1).integers(0, 255, (nh, nw, 4), np.uint8)
    pix = s.root.create_pixmap(nw, nh, s.root_depth)
    gc = pix.create_gc()
    for y in range(0, nh, 16):  # each request under the X request size limit
        rows = noise[y : y + 16]
        pix.put_image(gc, 0, y, nw, rows.shape[0], X.ZPixmap, s.root_depth, 0, rows.tobytes())
    win = s.root.create_window(0, height // 3, nw, nh, 0, s.root_depth,
                               background_pixmap=pix, override_redirect=True)  # fmt: skip
    win.map()
    n = 0
    while not stop.is_set():
        n += 1
        win.configure(x=(n * 7) % (width - nw), y=height // 3 + int(40 * math.sin(n / 9)))
        d.sync()
        time.sleep(0.016)


def start_xvfb(width: int, height: int) -> tuple[subprocess.Popen, str]:
    exe = shutil.which("Xvfb")
    if exe is None:
        raise SystemExit("needs Xvfb (scripts/system-deps.sh)")
    r, w = os.pipe()
    proc = subprocess.Popen([exe, "-displayfd", str(w), "-screen", "0", f"{width}x{height}x24",
                             "-nolisten", "tcp"], pass_fds=(w,),
                            stderr=subprocess.DEVNULL)  # fmt: skip
    os.close(w)
    with os.fdopen(r) as f:
        number = f.readline().strip()
    if not number:
        proc.kill()
        raise SystemExit("Xvfb did not start")
    return proc, f":{number}"


def run_mode(width: int, height: int, fps: int, kbps: int, seconds: float, encrypt: bool) -> dict:
    xvfb, x_display = start_xvfb(width, height)
    stop = mp.Event()
    child = mp.Process(target=mover, args=(x_display, width, height, stop), daemon=True)
    child.start()
    sink = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sink.bind(("127.0.0.1", 0))
    sock = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    sock.setblocking(False)
    addr = sink.getsockname()
    stages = Stages()
    saved = (media_encoder.h264_for_moonlight, fec.ReedSolomon.encode,
             VideoPacketizer._encrypt)  # fmt: skip
    media_encoder.h264_for_moonlight = timed(stages, "rewrite", saved[0])
    fec.ReedSolomon.encode = timed(stages, "fec", saved[1])
    VideoPacketizer._encrypt = timed(stages, "encrypt", saved[2])
    capture = DisplayCapture(x_display)
    enc = VideoEncoder(width, height, fps, bitrate_kbps=kbps)
    packetizer = VideoPacketizer(encryption_key=os.urandom(16) if encrypt else None)
    opus = OpusEncoder(frame_ms=AUDIO_PACKET_MS, bitrate=96_000)
    audio = AudioPacketizer(key=None, packet_ms=AUDIO_PACKET_MS)
    tone = (np.sin(np.arange(48_000) * 2 * np.pi * 440 / 48_000) * 8000).astype(np.int16)
    tone = np.repeat(tone[:, None], 2, axis=1)
    try:
        for _ in range(30):  # warm-up: X connection, encoder, FEC tables
            enc.encode(capture(width, height))
        stages.cpu = dict.fromkeys(STAGES, 0.0)
        frames = datagrams = nbytes = audio_sent = 0
        interval = 1.0 / fps
        t_start = next_at = time.monotonic()
        audio_due = 0.0
        wall0, cpu0 = time.monotonic(), time.process_time()
        while time.monotonic() - t_start < seconds:
            if frames % (fps * 2) == 0:
                enc.request_idr()  # an IDR every 2 s, as the native plane sends
            with stages("capture"):
                bgra = capture(width, height)
            with stages("convert"):
                yuv = to_yuv420p(bgra)
            with stages("encode"):
                out = enc.encode_yuv(yuv)
            if out is not None:
                with stages("packetize"):
                    rows = packetizer.packetize(
                        out.data, FRAME_TYPE_IDR if out.keyframe else FRAME_TYPE_P, frames * 1500
                    )
                with stages("send"):
                    send_datagrams(sock, rows, addr)
                datagrams += rows.shape[0]
                nbytes += rows.nbytes
            with stages("audio"):
                audio_due += interval * 1000
                while audio_due >= AUDIO_PACKET_MS:
                    audio_due -= AUDIO_PACKET_MS
                    at = (audio_sent * 240) % (48_000 - 240)
                    with stages("opus"):
                        packets = opus.encode(tone[at : at + 240])
                    for packet in packets:
                        for datagram in audio.packetize(packet):
                            try:
                                sock.sendto(datagram, addr)
                            except BlockingIOError:
                                pass
                    audio_sent += 1
            frames += 1
            next_at += interval
            delay = next_at - time.monotonic()
            if delay > 0:
                time.sleep(delay)
            else:
                next_at = time.monotonic()
        wall = time.monotonic() - wall0
        total_cpu = time.process_time() - cpu0
    finally:
        (media_encoder.h264_for_moonlight, fec.ReedSolomon.encode,
         VideoPacketizer._encrypt) = saved  # fmt: skip
        enc.close()
        capture.close()
        stop.set()
        child.join(3)
        if child.is_alive():
            child.kill()
        xvfb.terminate()
        xvfb.wait(5)
        sink.close()
        sock.close()
    return {
        "mode": f"{width}x{height}@{fps}",
        "frames": frames,
        "fps": frames / wall,
        "mbps": nbytes * 8 / wall / 1e6,
        "datagrams_per_s": datagrams / wall,
        "cpu_ms": {k: v * 1000 / frames for k, v in stages.cpu.items()},
        "total_ms": total_cpu * 1000 / frames,
    }


def report(row: dict) -> None:
    cpu = row["cpu_ms"]
    base = cpu["encode"]
    fps = row["fps"]
    print(f"\n{row['mode']}: {row['frames']} frames at {fps:.1f} fps, {row['mbps']:.1f} Mbit/s, "
          f"{row['datagrams_per_s']:.0f} datagrams/s")  # fmt: skip
    print("stage       cpu_ms/frame  %_of_a_core  share_of_encoder")
    for name in STAGES:
        print(f"{name:10}  {cpu[name]:12.3f}  {cpu[name] * fps / 10:11.1f}  "
              f"{cpu[name] / base * 100:15.1f} %")  # fmt: skip
    others = sum(v for k, v in cpu.items() if k not in ENCODERS)
    print(f"non-encoder {others:12.3f}  {others * fps / 10:11.1f}  {others / base * 100:15.1f} %"
          "   (goal at 1080p60: <= 30 %)")  # fmt: skip
    print(f"whole loop  {row['total_ms']:12.3f}  {row['total_ms'] * fps / 10:11.1f}")


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--seconds", type=float, default=10)
    ap.add_argument("--modes", default="1280x720x60,1920x1080x60")
    ap.add_argument("--encrypt", action="store_true", help="AES-GCM video, as when negotiated")
    args = ap.parse_args()
    print(f"load average at start: {os.getloadavg()} on {os.cpu_count()} cores")
    for spec in args.modes.split(","):
        w, h, fps = (int(x) for x in spec.split("x"))
        kbps = 20_000 if h >= 1080 else 10_000  # Moonlight's defaults for these modes
        report(run_mode(w, h, fps, kbps, args.seconds, args.encrypt))
    print(f"\nload average at end: {os.getloadavg()}")
    print(f"(packet size {compat_video.VideoPacketizer().packet_size}, FEC 20 %, "
          f"audio {AUDIO_PACKET_MS} ms Opus packets at 96 kbit/s)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
