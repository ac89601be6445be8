"""A catalog app for the native sound test: records where it was started, then plays a steady
sine into its default PulseAudio sink (the session's, through PULSE_SINK) until it is ended.

    tone_app.py MARKS_DIR FREQ_HZ
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np

RATE = 48_000


def main() -> None:
    marks, freq = Path(sys.argv[1]), float(sys.argv[2])
    keys = ("DISPLAY", "PULSE_SINK", "HOST_APP_NAME", "HOST_CLIENT_NAME", "HOST_CLIENT_WIDTH")
    info = {"pid": os.getpid(), **{k: os.environ.get(k) for k in keys}}
    (marks / "started.json").write_text(json.dumps(info))
    t = np.arange(RATE) / RATE  # one second: a whole number of periods for integer Hz
    x = 0.5 * np.sin(2 * np.pi * freq * t)
    second = (np.stack([x, x], 1) * 32767).round().astype(np.int16).tobytes()
    cmd = ["pacat", "--playback", "--raw", f"--rate={RATE}", "--channels=2", "--format=s16le",
           "--latency-msec=20"]  # fmt: skip
    pacat = subprocess.Popen(cmd, stdin=subprocess.PIPE)
    while pacat.poll() is None:  # pacat paces us: its pipe fills at the sink's real-time rate
        pacat.stdin.write(second)
        pacat.stdin.flush()


if __name__ == "__main__":
    main()
