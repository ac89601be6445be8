"""Both planes stream with the same encoder settings: `sw_preset` and `qp` set in the config
file reach the encoder that opens, for a Moonlight client (moonlight-python) and for a browser
(headless Chromium), read back from `GET /api/v1/streams` (`encoder_options`: what the open
encoder was given). The encoder order and the GPU preference are the same code for both planes
(`streaming.sessions.encoding.plan`, tests/streaming/test_encoding.py): no GPU here to see them
reach a hardware encoder."""

from __future__ import annotations

import contextlib
import os
import subprocess
import sys
from pathlib import Path

import pytest

from tests.streaming.conftest import pair, wait_for

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]
ROOT = Path(__file__).resolve().parents[2]
SETTINGS = "sw_preset = veryfast\nqp = 30\n"


@contextlib.contextmanager
def _streaming(host, plane: str, tmp_path: Path):
    """A live stream of `plane` for the length of the block."""
    if plane == "compat":
        config = tmp_path / "ml"
        pair(host, config)
        proc = subprocess.Popen(
            [sys.executable, str(ROOT / "tests/compat/host_codec_client.py"), str(host.base_port),
             str(config), "h264", "640", "360", "30", "12", host.url, host.mgmt_token,
             str(host.cert_path)],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd=ROOT,
            env={**os.environ, "PYTHONPATH": str(ROOT)},
        )  # fmt: skip
        try:
            yield
        finally:
            out, err = proc.communicate(timeout=120)
            assert proc.returncode == 0, err[-3000:]
    else:
        from tests.native.browserkit import self_paired

        with self_paired(host, f"settings {plane}", fps="30") as player:
            player.start()
            yield


def _live(host, plane: str) -> dict | None:
    with host.mgmt() as c:
        found = c.get("/api/v1/streams").json()["sessions"]
    return next((s for s in found if s["plane"] == plane and s["encoder_options"]), None)


@pytest.mark.parametrize("plane", ["compat", "native"])
def test_the_encoder_keys_reach_the_encoder_on_either_plane(stream_host, tmp_path, plane):
    host = stream_host
    conf = host.state_dir / "host.conf"
    base = conf.read_text()
    conf.write_text(base + SETTINGS)
    try:
        with _streaming(host, plane, tmp_path):
            live = wait_for(lambda: _live(host, plane), 30)
        assert live is not None, f"no {plane} stream with its encoder's options"
        options = live["encoder_options"]
        assert live["encoder"] == "libx264", live
        assert (options.get("preset"), options.get("qp")) == ("veryfast", "30"), options
    finally:
        conf.write_text(base)


# What a browser session's libx264 must be given when the config sets no encoder key, and when
# it sets the software keys: every frame leaves the encoder as soon as it went in (no B-frames,
# no lookahead, no frame threads: zerolatency's sliced threads), and the CPU stays at the
# ultrafast preset's. tests/media/test_encoder.py reads the same from libx264's own SEI.
LATENCY_SETTINGS = "sw_preset = veryfast\nsw_tune = film\n"


def _for_latency(options: dict) -> list[str]:
    """What in `options` (an opened libx264's) would add frames of delay; empty when none."""
    params = dict(p.split("=", 1) for p in options.get("x264-params", "").split(":") if "=" in p)
    problems = []
    if "zerolatency" not in options.get("tune", "").split(","):
        problems.append(f"tune {options.get('tune')!r} lacks zerolatency")
    if options.get("profile") != "baseline":  # Constrained Baseline: no B-frames at all
        problems.append(f"profile {options.get('profile')!r}")
    for key in ("bframes", "b-frames", "rc-lookahead", "lookahead", "sync-lookahead"):
        if params.get(key, "0") != "0":
            problems.append(f"{key}={params[key]}")
    if params.get("sliced-threads", "1") != "1" or options.get("thread_type", "slice") != "slice":
        problems.append("frame threads")
    return problems


@pytest.mark.parametrize(
    ("settings", "preset", "tune"),
    [("", "ultrafast", "zerolatency"), (LATENCY_SETTINGS, "veryfast", "film,zerolatency")],
    ids=["unset", "sw_preset-sw_tune"],
)
def test_a_browser_session_encodes_for_latency(stream_host, tmp_path, settings, preset, tune):
    """Unset, the browser plane's encoder is ultrafast/zerolatency; set, `sw_preset` and
    `sw_tune` act and the encoder still adds no frame of delay."""
    host = stream_host
    conf = host.state_dir / "host.conf"
    base = conf.read_text()
    conf.write_text(base + settings)
    try:
        with _streaming(host, "native", tmp_path):
            live = wait_for(lambda: _live(host, "native"), 30)
        assert live is not None, "no native stream with its encoder's options"
        options = live["encoder_options"]
        assert live["encoder"] == "libx264", live
        assert (options.get("preset"), options.get("tune")) == (preset, tune), options
        assert _for_latency(options) == [], options
        assert "qp" not in options, options  # the client's rate, with its VBV, bounds it
        assert "vbv-maxrate=" in options.get("x264-params", ""), options
    finally:
        conf.write_text(base)
