"""A real host with `hevc_mode = 2` / `av1_mode = 3`: moonlight-python asks for HEVC, then AV1,
gets exactly that bitstream, decodes the drawn pattern's colours; `stream.started` and the
history record name the codec and the encoder that opened (software here: no GPU encoder)."""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from common.statedir import DB_FILE
from tests.streaming.conftest import events, pair, wait_for
from tests.support.client import BLUE_BGR, GREEN_BGR

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]
ROOT = Path(__file__).resolve().parents[2]
# What is checked is the codec, not the mode: a small one keeps the software AV1 encoder
# (libsvtav1) well inside what a 2-core machine encodes in real time.
W, H, FPS = 640, 360, 30


def close(bgr, want, tol=24) -> bool:
    return max(abs(a - b) for a, b in zip(bgr, want, strict=True)) <= tol


def _client(host, config_dir: Path, codec: str) -> dict:
    out = subprocess.run(
        [sys.executable, str(ROOT / "tests/compat/host_codec_client.py"), str(host.base_port),
         str(config_dir), codec, str(W), str(H), str(FPS), "5", host.url, host.mgmt_token,
         str(host.cert_path)],
        capture_output=True, text=True, timeout=120, cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
    )  # fmt: skip
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_hevc_and_av1_stream_from_a_real_host_when_the_modes_offer_them(stream_host, tmp_path):
    host = stream_host
    pair(host, tmp_path / "ml")
    with (host.state_dir / "host.conf").open("a") as conf:
        conf.write("hevc_mode = 2\nav1_mode = 3\n")  # read at the next /serverinfo and arm
    for codec, encoder in (("hevc", "libx265"), ("av1", "libsvtav1")):
        r = _client(host, tmp_path / "ml", codec)
        assert r["scm"] == 0x1 | 0x100 | 0x10000 and r["max_luma_hevc"] == 1869449984, r
        assert r["bitstream"] == codec, r
        assert r["frames"] >= 5 and r["decoded"] >= r["frames"] - 2, r
        assert close(r["box_bgr"], GREEN_BGR) and close(r["corner_bgr"], BLUE_BGR), r

        def named(ev, c=codec) -> bool:
            return any(e.get("codec") == c for e in ev)

        started = events(host, "stream.started", named, timeout=20)
        mine = [e for e in started if e.get("codec") == codec]
        assert mine and mine[-1]["encoder"] == encoder, started
        rec = wait_for(lambda c=codec: _record(host, c), 20)
        assert rec == (codec, encoder)


def _record(host, codec: str):
    """The host's own history record (its database in its state dir) for `codec`."""
    db = sqlite3.connect(host.state_dir / DB_FILE)
    try:
        return db.execute("SELECT codec, encoder FROM streaming_sessionrecord WHERE codec = ?",
                          (codec,)).fetchone()  # fmt: skip
    finally:
        db.close()


HEVC_DECODES_JS = (
    "VideoDecoder.isConfigSupported({codec: 'hev1.1.6.L153.B0'}).then(r => r.supported)"
)


def test_the_browser_plane_streams_the_codec_its_webcodecs_decodes_from_the_same_plan(stream_host):
    """The same modes reach the browser plane: with `av1_mode = 3` headless Chromium's
    WebCodecs (dav1d) gets AV1 from SVT-AV1 and shows the painted colours; with AV1 off and
    `hevc_mode = 2` it gets HEVC only if it decodes HEVC (this Chromium has no HEVC decoder:
    H.264). `stream.started` names what opened each time."""
    from tests.native.browserkit import CANVAS_PIXEL_JS, paint_to_page_ms, self_paired
    from tests.native.test_player import Painter

    host = stream_host
    conf = host.state_dir / "host.conf"
    base = conf.read_text()
    name = "webcodecs codecs"
    try:
        with self_paired(host, name, fps="30") as player:
            page = player.page
            page.check("#lowlat")
            hevc_decodes = page.evaluate(HEVC_DECODES_JS)
            for modes, want, encoder in (
                ("hevc_mode = 2\nav1_mode = 3\n", "av1", "libsvtav1"),
                ("hevc_mode = 2\nav1_mode = 1\n", "hevc" if hevc_decodes else "h264",
                 "libx265" if hevc_decodes else "libx264"),
            ):  # fmt: skip
                conf.write_text(base + modes)
                try:
                    player.start(
                        "() => window.nativePlayer.state === 'playing' && "
                        f"window.nativePlayer.codec === '{want}' && "
                        "document.getElementById('canvas').width === 1280"
                    )
                except AssertionError as exc:
                    peer_log = host.state_dir / "logs" / "native-peer.log"
                    peer_tail = peer_log.read_text(errors="replace")[-6000:]
                    raise AssertionError(
                        f"{exc}\nhost log:\n{host.log_tail(60)}\nsession log:\n{peer_tail}"
                    ) from None
                x_name = next(
                    d["x_display"]
                    for d in player.api.get("/api/v1/display/state").json()["displays"]
                    if d["client"] == name
                )
                painter = Painter(x_name)
                try:
                    paint_to_page_ms(page, painter, CANVAS_PIXEL_JS, [(255, 0, 0), (0, 0, 255)])
                finally:
                    painter.close()

                def named(ev, c=want, e=encoder) -> bool:
                    return any(x.get("codec") == c and x.get("encoder") == e for x in ev)

                assert named(events(host, "stream.started", named, timeout=20))
    finally:
        conf.write_text(base)
