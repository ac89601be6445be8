"""A catalog app for the playable tests: plays into its default PulseAudio sink.

Started by the session like any title (its env carries PULSE_SINK / PULSE_SERVER). It writes
silence through `pacat` in real time, 10 ms at a time, until the test drops `play` (JSON
`{"freq", "amp", "seconds"}`, optionally `"channel"`) into the marks folder; then it plays
that sine (on every channel, or on `channel` alone) and writes
`tone.json` with `t_on`, the monotonic time its first tone block was written (the same clock
as the client's `receive_time_us`, so the test can measure capture-to-client latency).

Its channels: 2, or what the marks folder's `channels` file says when the app starts (6 or 8,
in the client's order FL FR C LFE RL RR SL SR, with that PulseAudio channel map).

    tone_app.py MARKS_DIR
"""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

RATE, BLOCK = 48_000, 480
MAPS = {
    2: "front-left,front-right",
    6: "front-left,front-right,front-center,lfe,rear-left,rear-right",
    8: "front-left,front-right,front-center,lfe,rear-left,rear-right,side-left,side-right",
}


def main() -> None:
    marks = Path(sys.argv[1])
    wanted = marks / "channels"
    channels = int(wanted.read_text()) if wanted.exists() else 2
    pacat = subprocess.Popen(
        [
            "pacat",
            "--playback",
            "--raw",
            f"--rate={RATE}",
            f"--channels={channels}",
            f"--channel-map={MAPS[channels]}",
            "--format=s16le",
            "--latency-msec=10",
        ],
        stdin=subprocess.PIPE,
    )
    frame_bytes = 2 * channels
    silence = np.zeros((BLOCK, channels), np.int16).tobytes()
    tone: bytes | None = None
    pos = 0
    next_at = time.monotonic()
    while pacat.poll() is None:
        if tone is None and (marks / "play").exists():
            spec = json.loads((marks / "play").read_text())
            (marks / "play").unlink()
            t = np.arange(int(spec["seconds"] * RATE)) / RATE
            x = spec["amp"] * np.sin(2 * np.pi * spec["freq"] * t)
            pcm = np.zeros((x.shape[0], channels))
            for channel in [spec["channel"]] if "channel" in spec else range(channels):
                pcm[:, channel] = x
            tone = (pcm * 32767).round().astype(np.int16).tobytes()
            pos = 0
            (marks / "tone.json").write_text(json.dumps({"t_on": time.monotonic(), **spec}))
        if tone is not None and pos < len(tone):
            chunk, pos = tone[pos : pos + BLOCK * frame_bytes], pos + BLOCK * frame_bytes
            chunk += silence[: BLOCK * frame_bytes - len(chunk)]
        else:
            chunk = silence
        pacat.stdin.write(chunk)
        pacat.stdin.flush()
        next_at += BLOCK / RATE
        delay = next_at - time.monotonic()
        if delay > 0:
            time.sleep(delay)


if __name__ == "__main__":
    main()
