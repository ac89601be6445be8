"""How long a client waits for its virtual display: acquire -> first captured frame -> teardown.

Baseline (same run): a bare Xvfb started by hand, one mss grab, kill. The difference is what the
state machine (database rows, policy, process checks) adds.
Run: .venv/bin/python bench/display_acquire.py
"""

from __future__ import annotations

import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROUNDS = 5
MODE = (1280, 720)

os.environ["HOST_STATE_DIR"] = tempfile.mkdtemp(prefix="bench-display-")
os.environ["DJANGO_SETTINGS_MODULE"] = "hostmgmt.settings"
os.environ.setdefault("HOST_LOG_LEVEL", "WARNING")
sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import django  # noqa: E402

django.setup()
import mss  # noqa: E402
from django.core.management import call_command  # noqa: E402

from displays import (  # noqa: E402
    capture,
    machine,
    xvfb,
)


def baseline() -> tuple[float, float]:
    t0 = time.perf_counter()
    r, w = os.pipe()
    screen = f"{MODE[0]}x{MODE[1]}x24"
    proc = subprocess.Popen(
        ["Xvfb", "-screen", "0", screen, "-nolisten", "tcp", "-displayfd", str(w)],
        pass_fds=(w,), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )  # fmt: skip
    os.close(w)
    buf = b""
    while not buf.endswith(b"\n"):
        buf += os.read(r, 16)
    os.close(r)
    with mss.MSS(display=":" + buf.decode().strip()) as sct:
        sct.grab(sct.monitors[1])
    first_frame = time.perf_counter() - t0
    proc.terminate()
    proc.wait()
    return first_frame, time.perf_counter() - t0


def managed() -> tuple[float, float]:
    t0 = time.perf_counter()
    d = machine.acquire("bench", f"{MODE[0]}x{MODE[1]}@60")
    capture.grab(d["x_display"])
    first_frame = time.perf_counter() - t0
    machine.disconnect(d["slot"], deliberate=True)
    return first_frame, time.perf_counter() - t0


def main() -> None:
    call_command("migrate", verbosity=0)
    baseline(), managed()  # warm-up: first Xvfb start pays for cold caches
    base, runs = [], []
    for _ in range(ROUNDS):  # interleaved, so load on the shared machine hits both alike
        base.append(baseline())
        runs.append(managed())

    def med(rows, i):
        return statistics.median(r[i] for r in rows) * 1000

    print(f"Xvfb {MODE[0]}x{MODE[1]}, {ROUNDS} rounds, medians (ms):")
    print("                                   start->first frame   ->torn down")
    print(f"  baseline (bare Xvfb, mss, kill)  {med(base, 0):12.1f} {med(base, 1):12.1f}")
    print(f"  managed (acquire, grab, release) {med(runs, 0):12.1f} {med(runs, 1):12.1f}")
    assert xvfb.owned_pids() == []


if __name__ == "__main__":
    main()
