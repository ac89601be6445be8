"""Sound, input and the game end to end on a host of its own, with the real client library
(moonlight-python's moonlight-common-c): the session's sound (tone app -> private null sink ->
parec -> chain -> Opus -> encrypted RTP + FEC -> the client's audio callback -> the library's
Opus decoder), input from the control stream into the session's Xvfb, and the launched title's
lifecycle."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import events, owned_processes, pair, wait_for
from tests.support.livehost import ROOT, running_host

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.exclusive]

CLIENT = str(ROOT / "tests/support/play_client.py")
TONE_APP = ROOT / "tests/support/tone_app.py"
KEYS = "rikey=000102030405060708090a0b0c0d0e0f&rikeyid=7&localAudioPlayMode=0"
RATE = 48_000
LAUNCHER = "#!/bin/bash\n( exec -a fakegame sleep 300 ) &\nexit 0\n"  # the game outlives it
BASE_CONF = (
    "ping_timeout = 3000\nvirtual_sink = gamesink\n"
    "client_profile_Player_max_bitrate = 3000\n"  # the client asks for 10000
)


@pytest.fixture(scope="module")
def play_host():
    state = Path(tempfile.mkdtemp(prefix="play-e2e-"))
    marks = state / "marks"
    marks.mkdir()
    (marks / "launcher.sh").write_text(LAUNCHER)
    (state / "host.conf").write_text(BASE_CONF)
    apps = {
        "env": {"STREAM_TEST_MARK": str(marks)},
        "apps": [
            {"name": "Desktop"},
            {"name": "Tone", "cmd": f"exec {sys.executable} {TONE_APP} {marks}"},
            {
                "name": "Launcher",
                "cmd": f"exec bash {marks}/launcher.sh",
                "exit-timeout": 2,
                "detect": {"process_name": "fakegame"},
            },
        ],
    }
    (state / "apps.json").write_text(json.dumps(apps))
    with running_host((ADMIN_USER, ADMIN_PASSWORD), state_dir=state) as host:
        host.marks = marks
        yield host


@pytest.fixture(scope="module")
def player(play_host, tmp_path_factory):
    cfg = tmp_path_factory.mktemp("ml")
    return cfg, pair(play_host, cfg, pin="4321", name="Player")


def play(host, cfg, app: str, seconds: float, action: str, env: dict | None = None) -> dict:
    args = [sys.executable, CLIENT, str(host.base_port), str(cfg), app, str(seconds), action,
            str(host.marks), host.url, host.mgmt_token, str(host.cert_path)]  # fmt: skip
    proc = subprocess.run(args, cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env={**os.environ, "PYTHONPATH": str(ROOT), **(env or {})})  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout.strip().splitlines()[-1])


def db(x: np.ndarray) -> float:
    return 20 * np.log10(max(float(np.sqrt(np.mean(np.square(x, dtype=np.float64)))), 1e-9))


def received_tone(host, spec: dict, seconds: float = 3.0) -> tuple[dict, np.ndarray, int, float]:
    """Play `spec` through the session; (client result, left channel, onset, latency ms)."""
    (host.marks / "tone.json").unlink(missing_ok=True)
    (host.marks / "tone-spec.json").write_text(json.dumps(spec))
    r = play(host, host.cfg, "Tone", seconds, "tone")
    z = np.load(host.marks / "received.npz")
    pcm, starts = z["pcm"][:, 0], z["starts"]
    onset = int(np.argmax(np.abs(pcm) > 0.2 * spec["amp"]))  # as bench/audio.py --client
    assert onset > 0
    t_on = json.loads((host.marks / "tone.json").read_text())["t_on"]
    first_us = starts[np.searchsorted(starts[:, 0], onset, side="right") - 1, 1]
    return r, pcm, onset, (first_us / 1e6 - t_on) * 1000


@pytest.fixture(scope="module")
def tone_host(play_host, player):
    play_host.cfg = player[0]
    return play_host


def test_a_1khz_tone_reaches_the_client_at_its_frequency_and_level(tone_host):
    host = tone_host
    r, pcm, onset, latency_ms = received_tone(host, {"freq": 1000, "amp": 0.25, "seconds": 1.5})
    assert r["audio_loss"] == {"lost": 0, "dropped": 0, "callback_errors": 0}, r
    assert r["frames"] > 30
    # Silence before the tone (the stream starts with the sink's silence, not noise).
    assert db(pcm[max(onset - RATE // 2, 0) : onset - RATE // 100]) < -60
    steady = pcm[onset + RATE // 5 : onset + RATE // 5 + RATE]  # 1 s inside the 1.5 s tone
    spectrum = np.abs(np.fft.rfft(steady * np.hanning(steady.size))) ** 2
    freqs = np.fft.rfftfreq(steady.size, 1 / RATE)
    peak = freqs[int(np.argmax(spectrum))]
    band = spectrum[(freqs > 990) & (freqs < 1010)].sum() / spectrum.sum()
    level = db(steady)
    print(f"tone: peak {peak:.1f} Hz, level {level:.2f} dBFS (sent -15.05), "
          f"{band * 100:.3f} % of the energy within 10 Hz, app write -> client receive "
          f"{latency_ms:.1f} ms, {r['audio_packets']} packets")  # fmt: skip
    assert abs(peak - 1000) <= 1.0
    assert abs(level - db(0.25 * np.sin(np.linspace(0, 200 * np.pi, 48000)))) < 1.0
    # Unloaded runs put >99.9 % of the energy in the band; on a starved 2-core CI box the host
    # fills a late capture block with silence on the session clock, and those gaps spread some
    # energy out of the band (seen: 90 %). Frequency and level above are the strict checks.
    assert band > 0.8
    assert 0 < latency_ms < 250, latency_ms
    # The client profile's ceiling applied at launch: the client asked for 10000 kbps.
    assert r["status"]["stream"]["bitrate_kbps"] == 3000, r["status"]


@pytest.mark.parametrize(
    "channels,channel,kbps,opus_config",
    [
        (6, 4, 10000, [6, 4, 2, [0, 1, 4, 5, 2, 3]]),
        (8, 6, 10000, [8, 5, 3, [0, 1, 6, 7, 2, 3, 4, 5]]),
        (6, 3, 20000, [6, 6, 0, [0, 1, 2, 3, 4, 5]]),  # high quality: the DESCRIBE's 2nd line
    ],
    ids=["5.1-RL", "7.1-SL", "5.1-LFE-high"],
)
def test_a_surround_client_hears_a_tone_on_one_channel_on_that_channel(
    tone_host, channels, channel, kbps, opus_config
):
    """A 5.1 (7.1) launch: the session's sink has that layout, the app plays a tone on one
    speaker alone, and the client decodes every channel with the tone on that speaker only
    (at normal quality, and at high quality from 15 Mb/s)."""
    host = tone_host
    (host.marks / "channels").write_text(str(channels))  # the tone app's stream layout
    spec = {"freq": 1000, "amp": 0.25, "seconds": 1.5, "channel": channel}
    (host.marks / "tone-spec.json").write_text(json.dumps(spec))
    (host.marks / "received.npz").unlink(missing_ok=True)
    try:
        env = {"PLAY_AUDIO_CHANNELS": str(channels), "PLAY_BITRATE_KBPS": str(kbps)}
        r = play(host, host.cfg, "Tone", 3.0, "tone", env)
    finally:
        (host.marks / "channels").unlink()
    # What the client derived from the DESCRIBE is what the host encodes with (layouts).
    assert r["opus_config"] == opus_config, r
    assert r["audio_loss"] == {"lost": 0, "dropped": 0, "callback_errors": 0}, r
    pcm = np.load(host.marks / "received.npz")["pcm"]
    assert pcm.ndim == 2 and pcm.shape[1] == channels
    onset = int(np.argmax(np.abs(pcm[:, channel]) > 0.2 * spec["amp"]))
    assert onset > 0
    steady = pcm[onset + RATE // 5 : onset + RATE // 5 + RATE]
    levels = [round(float(db(steady[:, c])), 1) for c in range(channels)]
    print(f"{channels}-channel tone on channel {channel}: levels {levels} dBFS")
    assert abs(levels[channel] - -15.05) < 1.0, levels  # amplitude 0.25: -15.05 dBFS RMS
    assert max(levels[:channel] + levels[channel + 1 :]) < -60, levels


def test_agc_lifts_a_quiet_tone_to_its_target_within_the_attack_time(tone_host):
    host = tone_host
    conf = host.state_dir / "host.conf"
    conf.write_text(BASE_CONF + "host_audio_agc = true\nhost_audio_agc_target_db = -20\n"
                    "host_audio_agc_max_gain_db = 30\nhost_audio_agc_attack_ms = 50\n")  # fmt: skip
    try:
        r, pcm, onset, _ = received_tone(host, {"freq": 1000, "amp": 0.02, "seconds": 1.5})
    finally:
        conf.write_text(BASE_CONF)
    win = RATE // 100
    levels = [db(pcm[onset + i * win : onset + (i + 1) * win]) for i in range(100)]
    print("AGC, 10 ms windows from the onset (dBFS):", [round(float(v), 1) for v in levels[:10]],
          "... settled", round(float(np.mean(levels[50:100])), 2), "; input -36.99")  # fmt: skip
    seen = f"levels {[round(float(v), 1) for v in levels[:12]]}, audio {r.get('audio_loss')}"
    # It started quiet: no gain was built up during the silence (a pre-ramped AGC would put
    # the onset near -7 dBFS). How far the first block already rose depends on where the tone
    # fell in the chain's 10 ms block: the first millisecond is -36 to -26 dBFS over the block
    # phases (offline, same chain), the first 10 ms window up to -25 (it failed -26 once).
    assert db(pcm[onset : onset + RATE // 1000]) < -23, seen
    assert max(levels[5:8]) >= -23, seen  # within 3 dB of the target after the 50 ms attack
    assert abs(np.mean(levels[50:100]) - (-20)) <= 1.0, seen  # settled on the target


def test_stream_audio_false_sends_silence_and_captures_nothing(tone_host):
    host = tone_host
    conf = host.state_dir / "host.conf"
    conf.write_text(BASE_CONF + "stream_audio = false\n")
    (host.marks / "received.npz").unlink(missing_ok=True)
    (host.marks / "tone-spec.json").write_text('{"freq": 1000, "amp": 0.25, "seconds": 1}')
    try:
        r = play(host, host.cfg, "Desktop", 1, "tone")
    finally:
        conf.write_text(BASE_CONF)
        (host.marks / "play").unlink(missing_ok=True)
    assert r["audio_packets"] > 100  # the client still gets its audio stream: silence
    assert db(np.load(host.marks / "received.npz")["pcm"]) < -80
    assert "stream_audio is off" in host.log_path.read_text(errors="replace")


def test_client_input_reaches_the_session_display(tone_host):
    host = tone_host
    r = play(host, host.cfg, "Desktop", 0, "input")
    inp = r["input"]
    print("input:", json.dumps(inp))
    assert inp["abs_center"] == [320, 180]
    assert inp["a_held"] and inp["a_released"]
    kc = inp["kc_a"]
    assert [2, kc] in inp["key_events"] and [3, kc] in inp["key_events"]  # KeyPress, Release
    assert inp["abs_scaled"] == [200, 100]  # 100,50 of a 320x180 reference
    assert inp["rel"] == [230, 80]
    assert 4 in inp["buttons"] and 1 in inp["buttons"]  # scroll up, left click
    assert inp["abs_clamped"] == [639, 0]
    assert not inp["a_after_flood"]  # releases are never dropped
    assert inp["b_held"] and inp["b_released_on_disconnect"]
    assert r["frames"] > 10  # the flood did not end the stream


def _game_pids(host) -> list[int]:
    found = []
    for p in os.listdir("/proc"):
        try:
            if Path(f"/proc/{p}/cmdline").read_bytes().startswith(b"fakegame\0"):
                env = Path(f"/proc/{p}/environ").read_bytes()
                if f"STREAM_TEST_MARK={host.marks}".encode() in env:
                    found.append(int(p))
        except (OSError, ValueError):
            continue
    return found


def _game_pid(host) -> int | None:
    pids = _game_pids(host)
    return pids[0] if pids else None


def _waiting(host) -> list[dict]:
    return [g for g in _status(host)["games"] if g["state"] == "grace"]


def _status(host) -> dict:
    with host.mgmt() as c:
        return c.get("/api/v1/status").json()


def _launch(ml, host, name: str = "Launcher") -> None:
    app = next(a.id for a in ml.apps() if a.name == name)
    assert 'status_code="200"' in ml.https("launch", f"appid={app}&mode=640x360x30&{KEYS}")


def _kinds(host, n_exited: int, timeout: float = 20) -> list[dict]:
    def enough(ev):  # the last title's exit, then its session's end
        exits = sum(e["kind"] == "game.exited" and e["game"]["title"] == "Launcher" for e in ev)
        return exits >= n_exited and ev[-1]["kind"] == "session.ended"

    return events(host, "game.*,session.*", enough, timeout=timeout)


def test_launched_title_lifecycle_running_exited_terminated_and_waiting(tone_host, player):
    host, ml = tone_host, player[1]
    # The player quits the game (the launcher exited long before): exited, session ends.
    _launch(ml, host)
    pid = wait_for(lambda: _game_pid(host), 10)
    assert pid
    assert wait_for(lambda: any((g.get("game") or {}).get("name") == "fakegame" for g in
                                json.loads((host.state_dir / "games.json").read_text()).values()),
                    5)  # fmt: skip
    os.kill(pid, signal.SIGTERM)
    assert wait_for(lambda: _status(host)["session"] is None, 10)
    # The host closes it: POST /api/apps/close, then DELETE /api/v1/session.
    for close in ("apps_close", "delete"):
        _launch(ml, host)
        assert wait_for(lambda: _game_pid(host), 10)
        if close == "apps_close":
            with host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
                assert c.post("/api/apps/close").json() == {"status": True}
        else:
            with host.mgmt() as c:
                assert c.delete("/api/v1/session").status_code == 204
        assert wait_for(lambda: _game_pid(host) is None, 5)
    # A vanished client's game waits out its grace window; POST /game/end ends it.
    with host.mgmt() as c:
        body = {"game_on_session_end": "always", "disconnect_grace_seconds": 60}
        assert c.put("/api/v1/session/settings", json=body).status_code == 200
        assert c.post("/api/v1/game/end", json={}).status_code == 409  # none waits yet
    r = play(host, host.cfg, "Launcher", 2, "vanish")
    with host.mgmt() as c:
        status = wait_for(lambda: _waiting(host), 15)
        assert status and status[0]["title"] == "Launcher", status
        assert _game_pid(host)  # still running, waiting for its player
        assert c.post("/api/v1/game/end", json={"app_id": "nope"}).status_code == 409
        assert c.post("/api/v1/game/end", json={"app_id": str(r["app_id"])}).json() == {"ended": 1}
    assert wait_for(lambda: _game_pid(host) is None, 5)
    # A player back inside the window gets the waiting game, not a second copy.
    play(host, host.cfg, "Launcher", 2, "vanish")
    assert wait_for(lambda: _waiting(host), 15)
    waiting = _game_pids(host)
    _launch(ml, host)
    assert wait_for(lambda: not _waiting(host), 5)
    time.sleep(0.5)
    assert len(waiting) == 1 and _game_pids(host) == waiting
    with host.mgmt() as c:
        assert c.delete("/api/v1/session").status_code == 204
        c.put("/api/v1/session/settings", json={})
    assert wait_for(lambda: _game_pid(host) is None, 5)
    seen = _kinds(host, 5)
    first = next(i for i, e in enumerate(seen)
                 if e["kind"] == "game.running" and e["game"]["title"] == "Launcher")  # fmt: skip
    seen = seen[first:]
    games = [e for e in seen if e["kind"].startswith("game.") and e["game"]["title"] == "Launcher"]
    ends = [e.get("reason") for e in seen if e["kind"] == "session.ended"]
    print("events:", [(e["kind"], e.get("reason")) for e in games], "sessions:", ends)
    assert [e["kind"] for e in games] == ["game.running", "game.exited"] * 5
    assert [e["reason"] for e in games if e["kind"] == "game.exited"] == [
        "exited"] + ["terminated"] * 4  # fmt: skip
    assert all(e["game"]["client"] == "Player" for e in games)
    assert ends == ["app_exited", "app_closed", "api", "timeout", "timeout", "api"]
    assert wait_for(lambda: not owned_processes(host.state_dir), 10), owned_processes(
        host.state_dir
    )
