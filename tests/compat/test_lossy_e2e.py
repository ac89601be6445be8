"""The compat stream over a lossy, jittery, reordering link.

`tests/compat/netem_client.py` runs our StreamSession and the real client (moonlight-common-c)
with the video through tests/support/netem_relay.py: 5 % loss, 20 ms jitter, 5 % reordered
(netem's shape, seeded; this kernel has no netem and the tests may not use a netns). At 5 %
loss the client must keep decoding frames with no freeze over one second, rebuild frames from
the FEC shards, and the frames the FEC cannot rebuild must be answered with a key frame.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]


def stream_over(seconds: float, loss_pct: float) -> dict:
    # NETEM_MCC_LOG: the client library's own lines come back, to tell the known freeze below.
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/compat/netem_client.py"), str(seconds), str(loss_pct)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NETEM_MCC_LOG": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def five_pct() -> dict:
    return stream_over(10, 5)  # one 10 s run for both tests


def test_five_percent_loss_keeps_frames_coming_with_fec_and_key_frame_recovery(five_pct):
    r = five_pct
    assert r["relay_dropped"] > 20 and r["relay_reordered"] > 20, r  # the link was bad
    # Frames keep coming: a 10 s window at 30 fps read 11 fps at load 25 on 2 shared cores
    # (the encoder's share); ask for a stream that moves, not for the rate.
    assert r["decoded"] == r["frames"] and r["decoded"] >= 40, r
    assert r["frames_last_2s"] >= 5, r
    assert r["fec_recovered"] > 0, r  # frames rebuilt from the FEC shards
    # What FEC could not rebuild was reported and answered with a key frame.
    if r["frames_unrecovered"]:
        assert r["lost_frames"] >= 1 and r["idr_frames"] >= 2, r  # the first IDR + recovery
    assert r["stop_reason"] == "host"


# GAP (docs/gaps.md, `stuck without asking`): after reordered video the client sometimes
# waits for a key frame without asking for one (its log says "Waiting for IDR frame"; the host
# sees nothing), and the picture stands still up to its 120-frame limit. Seen: 0.25 to 0.41 s
# in three runs at 5 %, 1.06 and 2.19 s in two others. Only that freeze, told by the client's
# own line inside it, is an expected failure; any other freeze over one second fails.
def test_five_percent_loss_never_freezes_the_picture_over_one_second(five_pct):
    r = five_pct
    start, end = r["freeze_at_s"], r["freeze_at_s"] + r["freeze_max_s"]
    waiting = [t for t, line in r["mcc_log"] if "Waiting for IDR frame" in line]
    if r["freeze_max_s"] > 1.0 and any(start <= t <= end for t in waiting):
        pytest.xfail("GAP: client stuck without asking for a key frame (docs/gaps.md)")
    assert r["freeze_max_s"] <= 1.0, r
