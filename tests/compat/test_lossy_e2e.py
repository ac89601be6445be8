"""The compat stream over a lossy, jittery, reordering link.

`tests/compat/netem_client.py` runs our StreamSession and the real client (moonlight-common-c)
with the video through tests/support/netem_relay.py: 5 % loss, 20 ms jitter, 5 % reordered
(netem's shape, seeded; this kernel has no netem and the tests may not use a netns). At 5 %
loss the client must keep decoding frames with no freeze over one second, rebuild frames from
the FEC shards, and the frames the FEC cannot rebuild must be answered with a key frame; a
client that announces reference-frame invalidation must recover that way in every run.
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

RFI_SEEDS = range(101, 111)  # ten runs, each its own loss and reordering pattern


def stream_over(seconds: float, loss_pct: float, seed: int = 21, rfi: bool = False) -> dict:
    # NETEM_MCC_LOG: the client library's own lines come back, to tell a freeze's cause.
    args = [str(seconds), str(loss_pct), "20", "5", str(seed)]
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/compat/netem_client.py"), *(["--rfi"] if rfi else []),
         *args],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT), "NETEM_MCC_LOG": "1"},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def brief(r: dict) -> dict:
    return {k: v for k, v in r.items() if k not in ("mcc_log", "fec_reports")}


@pytest.fixture(scope="module")
def five_pct() -> dict:
    return stream_over(10, 5)  # one 10 s run for both tests


def test_five_percent_loss_keeps_frames_coming_with_fec_and_key_frame_recovery(five_pct):
    r = five_pct
    assert r["relay_dropped"] > 20 and r["relay_reordered"] > 20, brief(r)  # the link was bad
    # Frames keep coming: a 10 s window at 30 fps read 11 fps at load 25 on 2 shared cores
    # (the encoder's share); ask for a stream that moves, not for the rate.
    assert r["decoded"] == r["frames"] and r["decoded"] >= 40, brief(r)
    assert r["frames_last_2s"] >= 5, brief(r)
    assert r["fec_recovered"] > 0, brief(r)  # frames rebuilt from the FEC shards
    # What FEC could not rebuild was reported and answered with a key frame.
    if r["frames_unrecovered"]:
        assert r["lost_frames"] >= 1 and r["idr_frames"] >= 2, brief(r)  # first IDR + recovery
    assert r["stop_reason"] == "host"


def test_five_percent_loss_never_freezes_the_picture_over_one_second(five_pct):
    """A client without RFI: the host's swapped datagrams keep it out of the speculative loss
    prediction that froze it (compat.engine.recovery); so no freeze reads the client's own
    "Waiting for IDR frame" until its 120-frame limit."""
    r = five_pct
    assert r["reorder"], brief(r)  # its ANNOUNCE says no RFI: the host swaps
    start, end = r["freeze_at_s"], r["freeze_at_s"] + r["freeze_max_s"]
    stuck = [t for t, line in r["mcc_log"] if "Reached consecutive drop limit" in line]
    assert not [t for t in stuck if start <= t <= end + 0.1], brief(r)
    assert r["freeze_max_s"] <= 1.0, brief(r)


@pytest.fixture(scope="module")
def rfi_runs() -> list[dict]:
    return [stream_over(8, 5, seed, rfi=True) for seed in RFI_SEEDS]


def test_a_client_with_rfi_never_sees_the_picture_stand_still_over_one_second(rfi_runs):
    """Ten runs at 5 % loss, 20 ms jitter, 5 % reordered: every one under one second."""
    freezes = [r["freeze_max_s"] for r in rfi_runs]
    print("RFI client, longest freeze per run (s):", freezes)
    for r in rfi_runs:
        assert r["relay_dropped"] > 10 and r["relay_reordered"] > 10, brief(r)
        assert r["rfi"] and r["decoded"] == r["frames"] and r["decoded"] >= 40, brief(r)
        assert not r["reorder"], brief(r)  # its ANNOUNCE says RFI: its datagrams go in order
        assert r["stop_reason"] == "host", brief(r)
    assert max(freezes) <= 1.0, [brief(r) for r in rfi_runs if r["freeze_max_s"] > 1.0]


def test_a_client_with_rfi_asks_by_invalidation_and_each_request_gets_a_key_frame(rfi_runs):
    asked = [r for r in rfi_runs if r["frames_unrecovered"]]
    assert asked, "no run lost a frame FEC could not rebuild: the link was not bad enough"
    for r in asked:
        verdicts = r["rfi_verdicts"]
        assert verdicts["idr"] >= 1 and r["idr_frames"] >= 2, brief(r)  # first IDR + recovery
        assert verdicts["future"] == verdicts["inverted"] == 0, brief(r)  # the client is sane
        assert len(r["rfi_answer_ms"]) >= 1 and max(r["rfi_answer_ms"]) < 500, brief(r)
