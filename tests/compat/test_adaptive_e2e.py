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
import time
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]


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


def test_a_real_host_steps_down_over_a_lossy_link_and_reports_the_loss(stream_host, tmp_path):
    """The same over a real host: the adaptive keys set in its config file, a paired client
    streaming Desktop through a relay on 127.0.0.2 that drops 3 % of the video; the host's
    `/api/stream/network-stats` shows the target falling and `loss_pct` above zero."""
    from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
    from tests.streaming.conftest import client_result, pair
    from tests.support.moonlight import host_config

    host = stream_host
    pair(host, tmp_path / "ml", pin="7531", name="Lossy")
    keys = {"adaptive_bitrate_enabled": "true", "adaptive_bitrate_min": "2000"}
    samples: dict[int, dict] = {}
    with host_config(host, keys):
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/compat/lossy_host_client.py"),
             str(host.base_port), str(tmp_path / "ml"), "9", "3", "18",
             host.url, host.mgmt_token, str(host.cert_path)],
            cwd=ROOT, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        with host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
            while proc.poll() is None:
                net = c.get("/api/stream/network-stats").json()["network"]
                samples.update({s["ts_ms"]: s for s in net["samples"]})
                time.sleep(0.5)
        r = client_result(proc)
    seq = [samples[t] for t in sorted(samples) if "target_kbps" in samples[t]]
    targets = [s["target_kbps"] for s in seq]
    # Frames: 114 in 9 s (13 fps) read here at load 20 while drawing noise at 30 fps; the
    # thresholds only ask that the stream keeps going.
    assert r["video_dropped"] > 10 and r["frames"] > 60, (r, targets)
    assert r["frames_last_2s"] >= 10, r  # still streaming at the end
    # The target starts at the client's 8000 kbps (lossy_host_client.py); on a loaded box the
    # first step down can land before the first sample, so the fall is measured from there.
    assert len(targets) >= 5 and max(targets) <= 8000, targets
    assert targets[-1] <= 0.7 * 8000, targets  # stepped down
    assert max(s.get("loss_pct", 0) for s in seq) > 0, seq  # the client's reports, measured
