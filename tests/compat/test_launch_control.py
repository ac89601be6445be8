"""/launch, /resume, /cancel and the ways a session ends, on a real host (no video client
needed for most: a launch arms the session, the app runs in the display)."""

from __future__ import annotations

import json
import re

import pytest

from tests.conftest import ADMIN_PASSWORD, ADMIN_USER
from tests.streaming.conftest import (
    client_result,
    events,
    owned_processes,
    pair,
    run_client,
    wait_for,
)

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

KEYS = "rikey=000102030405060708090a0b0c0d0e0f&rikeyid=7&localAudioPlayMode=0"


def status_of(xml: str) -> int:
    return int(re.search(r'status_code="(\d+)"', xml).group(1))


def app_id(ml, name: str) -> int:
    return next(a.id for a in ml.apps() if a.name == name)


def current_game(ml) -> int:
    return int(re.search(r"<currentgame>(\d+)</currentgame>", ml.https("serverinfo")).group(1))


def test_probe_app_runs_in_the_display_with_prep_and_every_stop_path(stream_host, tmp_path):
    host, marks = stream_host, stream_host.marks
    ml = pair(host, tmp_path / "ml", pin="1357", name="Probe client")
    probe = app_id(ml, "Probe")

    # Bad input first: nothing may start.
    assert status_of(ml.https("launch", f"appid=999&mode=1280x720x60&{KEYS}")) == 404
    for mode in ("0x720x60", "100000x720x60", "1280x720x0", "1280x720x100000", "big"):
        assert status_of(ml.https("launch", f"appid={probe}&mode={mode}&{KEYS}")) == 400, mode
    assert status_of(ml.https("launch", f"appid={probe}&mode=1280x720x60")) == 400  # no rikey
    bad_key = KEYS.replace("0f&", "zz&")
    assert status_of(ml.https("launch", f"appid={probe}&{bad_key}")) == 400
    assert status_of(ml.https("launch", f"appid={probe}&{KEYS}&hdrMode=7")) == 400
    assert status_of(ml.https("resume", KEYS)) == 503  # nothing to resume
    assert current_game(ml) == 0 and not (marks / "prep-do").exists()

    xml = ml.https("launch", f"appid={probe}&mode=1280x720x60&{KEYS}&&corever=1")
    assert status_of(xml) == 200, xml
    assert f"<sessionUrl0>rtsp://127.0.0.1:{host.base_port + 21}</sessionUrl0>" in xml
    assert current_game(ml) == probe
    env_file = marks / "app-env.json"
    assert wait_for(env_file.exists, 10)
    env = json.loads(wait_for(lambda: env_file.read_text() or None, 5))
    assert re.fullmatch(r":\d+", env["DISPLAY"])
    assert env["HOST_APP_NAME"] == "Probe" and env["HOST_APP_ID"] == str(probe)
    assert (env["HOST_CLIENT_WIDTH"], env["HOST_CLIENT_HEIGHT"], env["HOST_CLIENT_FPS"]) == (
        "1280", "720", "60")  # fmt: skip
    assert env["HOST_CLIENT_FINGERPRINT"] == ml.fingerprint
    assert (marks / "prep-do").exists() and not (marks / "prep-undo").exists()
    assert wait_for(lambda: any("sleep 300" in p for p in owned_processes(host.state_dir)), 10)
    # The client's own session runs: a second launch by it is refused clearly; a resume re-arms.
    again = ml.https("launch", f"appid={probe}&mode=1280x720x60&{KEYS}")
    assert status_of(again) == 400 and "already running" in again
    assert "<resume>1</resume>" in ml.https("resume", KEYS)

    with host.mgmt() as c:
        assert c.delete("/api/v1/session").status_code == 204
        assert c.delete("/api/v1/session").status_code == 204  # idempotent
        assert c.get("/api/v1/display/state").json()["displays"] == []  # deliberate: no linger
    assert (marks / "prep-undo").exists()
    assert current_game(ml) == 0
    assert owned_processes(host.state_dir) == []

    # POST /api/apps/close ends it the same way.
    assert status_of(ml.https("launch", f"appid={probe}&mode=1280x720x30&{KEYS}")) == 200
    with host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
        assert c.post("/api/apps/close").json() == {"status": True}
    assert current_game(ml) == 0 and owned_processes(host.state_dir) == []

    # Disabling the client cuts its running session and refuses its next launch.
    assert status_of(ml.https("launch", f"appid={probe}&mode=1280x720x30&{KEYS}")) == 200
    with host.client(auth=(ADMIN_USER, ADMIN_PASSWORD)) as c:
        certs = c.get("/api/clients/list").json()["named_certs"]
        uuid = next(n["uuid"] for n in certs if n["cert"] == ml.fingerprint)
        r = c.post("/api/clients/update", json={"uuid": uuid, "enabled": False})
        assert r.json()["status"] is True
    assert wait_for(lambda: not owned_processes(host.state_dir), 10)
    assert status_of(ml.https("launch", f"appid={probe}&mode=1280x720x30&{KEYS}")) == 401
    with host.mgmt() as c:
        assert c.get("/api/v1/status").json()["session"] is None

    # A client that never paired is refused before anything starts.
    from tests.support.moonlight import Moonlight

    stranger = Moonlight(host, tmp_path / "stranger")
    assert status_of(stranger.https("launch", f"appid={probe}&{KEYS}")) == 401
    ended = events(host, "session.*", lambda ev: sum(e["kind"] == "session.ended" for e in ev) >= 3)
    reasons = [e.get("reason") for e in ended if e["kind"] == "session.ended"]
    assert {"api", "app_closed", "unpaired"} <= set(reasons), reasons


def test_a_client_that_vanishes_times_out_and_is_cleaned_up(stream_host, tmp_path):
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="9753", name="Vanisher")
    r = client_result(run_client(host, tmp_path / "ml", 640, 360, 30, 2, "vanish", draw=False))
    assert r["frames"] > 20

    def mine(e):
        return e["kind"] == "client.disconnected" and e["client"]["fingerprint"] == ml.fingerprint

    def timed_out(ev):
        ended = [e for e in ev if e["kind"] == "session.ended" and e.get("reason") == "timeout"]
        return any(mine(e) for e in ev) and ended

    seen = events(host, "client.*,session.*", timed_out, timeout=20)
    (gone,) = [e for e in seen if mine(e)]
    assert gone["reason"] == "timeout"
    with host.mgmt() as c:
        assert c.get("/api/v1/status").json()["session"] is None
        (display,) = c.get("/api/v1/display/state").json()["displays"]
        assert display["state"] == "lingering"  # a lost client may come back (default policy)
        assert c.post("/api/v1/display/release", json={}).json()["released"] == 1
    assert wait_for(lambda: not owned_processes(host.state_dir), 5)


def test_stop_streaming_keeps_the_app_and_resume_streams_again(stream_host, tmp_path):
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="5555", name="Resumer")
    r = client_result(run_client(host, tmp_path / "ml", 640, 360, 30, 2, "resume", draw=False))
    assert r["frames"] > 20 and r["idle_currentgame"] == r["desktop_id"]
    assert r["resumed_frames"] > 20 and r["resumed_idr_first"]
    assert r["serverinfo_after"] == 0
    mine = [e["kind"] for e in events(host, "client.*", lambda ev: False, timeout=2)
            if e["client"]["fingerprint"] == ml.fingerprint]  # fmt: skip
    assert mine == ["client.connected", "client.disconnected"] * 2
    assert wait_for(lambda: not owned_processes(host.state_dir), 5)


def test_outsiders_pinging_the_stream_ports_get_nothing_and_the_client_every_frame(
    stream_host, tmp_path
):
    """A `PING` from anywhere never redirects the live video to its sender.

    While the real client streams, outsiders ping the video and audio ports every 20 ms, from
    127.0.0.2 and from the client's own IP (legacy `PING` and a made-up payload ping)."""
    host = stream_host
    pair(host, tmp_path / "ml", pin="2580", name="Spoofed")
    r = client_result(run_client(host, tmp_path / "ml", 640, 360, 30, 3, "spoof", draw=False))
    assert r["spoof_received"] == 0
    assert r["spoof_sent"] > 500  # the spoofing went on for the whole stream
    assert r["frames"] > 60 and r["frame_numbers_contiguous"]  # 1, 2, 3, ...: none lost
    assert r["decoded"] == r["frames"]
    assert r["serverinfo_after"] == 0
    assert wait_for(lambda: not owned_processes(host.state_dir), 5)


def test_host_shutdown_ends_the_session_and_leaves_nothing(stream_host, tmp_path):
    """Last in this module: it stops the module's host."""
    host = stream_host
    ml = pair(host, tmp_path / "ml", pin="8642", name="Late")
    assert status_of(ml.https("launch", f"appid={app_id(ml, 'Probe')}&{KEYS}")) == 200
    assert wait_for(lambda: any("sleep 300" in p for p in owned_processes(host.state_dir)), 10)
    assert host.stop() == 0
    assert owned_processes(host.state_dir) == []
    log = host.log_path.read_text(errors="replace")
    assert "ended (host_shutdown)" in log and "WorkerLostError" not in log
