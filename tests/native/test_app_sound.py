"""A catalog app launched by a native session, and its sound in the browser.

The test adds an app (a prep step and a command that plays a 1 kHz sine into its default
PulseAudio sink) to the live host's catalog, self-pairs a browser with a PIN armed through the
API, picks the app on /play and checks: the app started inside the session's display with the
session's own sink, the prep `do` ran, the tone arrives decoded in the page (its level in the
receiver's stats and its pitch through Web Audio), and at the session's end the app's process
group is gone and the `undo` ran; the history record names the app and carries an RTT.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from common import procs
from tests.native.browserkit import page_wait, self_paired, wait_for
from tests.native.helpers import catalog_app

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

NAME = "tone player"
APP = "Native Tone"
FREQ = 1000
TONE_APP = Path(__file__).with_name("tone_app.py")

LEVEL_JS = """async () => {
  const rep = await window.nativePlayer.pc.getStats();
  let out = null;
  rep.forEach((s) => { if (s.type === 'inbound-rtp' && s.kind === 'audio')
    out = {level: s.audioLevel || 0, packets: s.packetsReceived}; });
  return out;
}"""

PITCH_JS = """async () => {
  const v = document.getElementById('video');
  const ctx = new AudioContext();
  await ctx.resume();
  const an = ctx.createAnalyser(); an.fftSize = 8192;
  ctx.createMediaStreamSource(v.srcObject).connect(an);
  await new Promise((r) => setTimeout(r, 700));
  const bins = new Float32Array(an.frequencyBinCount); an.getFloatFrequencyData(bins);
  let best = 1; for (let i = 2; i < bins.length; i++) if (bins[i] > bins[best]) best = i;
  const out = {hz: best * ctx.sampleRate / an.fftSize, db: bins[best]};
  ctx.close();
  return out;
}"""


@pytest.fixture
def tone_app(live_host, admin_auth, tmp_path):
    marks = tmp_path / "marks"
    marks.mkdir()
    cmd = f"exec {sys.executable} {TONE_APP} {marks} {FREQ}"
    with catalog_app(live_host, admin_auth, APP, cmd, marks):
        yield marks


def test_app_launch_and_tone(live_host, tone_app, admin_auth):
    marks = tone_app
    with self_paired(live_host, NAME, app=APP) as player:
        page, api = player.page, player.api
        player.start()
        fp = player.fingerprint

        # The app runs inside this session's display, on this session's own sink, after prep.
        started = json.loads(wait_for(lambda: _read(marks / "started.json"), what="app start"))
        displays = api.get("/api/v1/display/state").json()["displays"]
        x_name = next(d["x_display"] for d in displays if d["client"] == NAME)
        assert started["DISPLAY"] == x_name
        assert started["HOST_APP_NAME"] == APP and started["HOST_CLIENT_NAME"] == NAME
        assert started["HOST_CLIENT_WIDTH"] == "1280"
        assert started["PULSE_SINK"] and "native" in started["PULSE_SINK"]
        assert (marks / "do").exists() and not (marks / "undo").exists()
        assert procs.alive(started["pid"])

        # The tone arrives decoded: a loud level in the receiver's stats, at its pitch.
        level = wait_for(
            lambda: (s := page.evaluate(LEVEL_JS)) and s["level"] > 0.2 and s,
            timeout=15,
            what="the tone's level in the browser",
        )
        pitch = page.evaluate(PITCH_JS)
        print(f"\ntone in the browser: level {level['level']:.2f}, pitch {pitch}")
        assert abs(pitch["hz"] - FREQ) < 15, pitch
        # The host's per-second figures reach the overlay, RTT from the peer's RTCP stats.
        page_wait(page, "() => (window.nativePlayer.host.rtt_ms || 0) > 0", 10)
        assert page.evaluate("window.nativePlayer.host.audio_packets") > 0

        # The end of the session ends the app's group and runs the undo.
        assert api.delete(f"/api/v1/native/clients/{fp}").status_code == 204
        player.fingerprint = None
        page_wait(page, "() => window.nativePlayer.state === 'ended'", 10)
        wait_for(lambda: not procs.alive(started["pid"]), timeout=10, what="the app ended")
        wait_for(lambda: (marks / "undo").exists(), timeout=10, what="the undo step")
    with live_host.client(auth=admin_auth) as admin:
        rows = wait_for(
            lambda: admin.get("/api/sessions", params={"client": NAME}).json()["sessions"],
            timeout=10,
            what="the history record",
        )
    assert rows[0]["app_name"] == APP
    assert rows[0]["avg_rtt_ms"] is not None and rows[0]["avg_rtt_ms"] > 0, rows[0]


def _read(path: Path) -> str | None:
    try:
        return path.read_text() or None
    except FileNotFoundError:
        return None
