"""Adaptive bitrate against the real client over a link that loses 3 % of the video.

`tests/compat/lossy_client.py` runs our StreamSession, moonlight-python and a seeded UDP relay
that drops video datagrams (no netem on this kernel). The client's own FEC reports must make
the host step the rate down and the FEC up, at most once a second, while frames keep coming.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.slow]


def _kbps(timeline, first: int, last: int) -> float:
    (t0, *_, b0), (t1, *_, b1) = timeline[first], timeline[last]
    return (b1 - b0) * 8 / 1000 / (t1 - t0)


def test_three_percent_loss_steps_the_rate_down_and_fec_up_and_frames_keep_coming(mcc_lib):
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/compat/lossy_client.py"), "8", "3", "18"],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    r = json.loads(out.stdout.strip().splitlines()[-1])
    timeline = r["timeline"]  # [t, target kbps, fec %, bytes sent] every 0.25 s
    assert r["relay_dropped"] > 20 and r["reported_lost"] > 10  # the client told the host
    first, last = timeline[0], timeline[-1]
    assert last[1] <= first[1] * 0.7 and last[2] > first[2], (first, last)
    assert _kbps(timeline, -9, -1) < 0.7 * _kbps(timeline, 1, 5)  # the wire rate fell too
    changes = [a[0] for a, b in zip(timeline, timeline[1:], strict=False) if a[1:3] != b[1:3]]
    assert all(b - a >= 0.9 for a, b in zip(changes, changes[1:], strict=False)), changes
    assert r["idr_frames"] <= r["rate_changes"] + 4  # one IDR per change, no storm
    assert r["frames"] >= 0.9 * r["host_frames_sent"] and r["frames_last_2s"] >= 20, r
    assert r["stop_reason"] == "host"
