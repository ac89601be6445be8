"""Host state on the real host: TLS, daphne, Redis, Celery and the supervisor's countdown."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import pytest

from tests.support.livehost import ROOT, start_host

pytestmark = pytest.mark.e2e


def drive(host, *args) -> dict:
    """`manage.py drive_display ...` against the host's state dir, as an operator would."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.pop("REDIS_URL", None)
    env.update(
        HOST_STATE_DIR=str(host.state_dir),
        HOST_PORT=str(host.base_port),
        DJANGO_SETTINGS_MODULE="hostmgmt.settings",
        HOST_LOG_LEVEL="WARNING",
    )
    out = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "drive_display", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert out.returncode == 0, out.stderr
    return json.loads(out.stdout.strip().splitlines()[-1])


def owned_xvfb(state_dir: Path) -> list[int]:
    """Live (non-zombie) Xvfb processes carrying this host's owner marker."""
    marker = f"HOST_DISPLAY_OWNER={Path(state_dir).resolve()}".encode()
    pids = []
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            argv = Path(f"/proc/{entry}/cmdline").read_bytes().split(b"\0")
            env = Path(f"/proc/{entry}/environ").read_bytes().split(b"\0")
            stat = Path(f"/proc/{entry}/stat").read_text().rsplit(")", 1)[1].split()[0]
        except OSError:
            continue
        if argv and os.path.basename(argv[0]) == b"Xvfb" and marker in env and stat != "Z":
            pids.append(int(entry))
    return pids


def wait_for(predicate, timeout: float, step: float = 0.2):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(step)
    return predicate()


@contextmanager
def restored(path: Path):
    before = path.read_bytes() if path.exists() else None
    try:
        yield
    finally:
        if before is None:
            path.unlink(missing_ok=True)
        else:
            path.write_bytes(before)


def test_config_round_trip_through_both_apis_and_the_file(live_host, admin_auth):
    conf = live_host.state_dir / "host.conf"
    with restored(conf), restored(live_host.state_dir / "host.env"), live_host.mgmt() as v1, \
            live_host.client(auth=admin_auth) as admin:  # fmt: skip
        r = v1.put("/api/v1/host/config", json={"audio_video": {"max_fps": 90}})
        assert r.status_code == 200, r.text
        assert admin.get("/api/config").json()["max_fps"] == 90
        r = admin.post("/api/config", json={"max_fps": 144, "rate_cap_pct": 60})
        assert r.status_code == 200 and r.json()["status"] is True, r.text
        got = v1.get("/api/v1/host/config").json()
        assert got["settings"]["audio_video"]["max_fps"] == 144
        assert "HOST_RATE_CAP_PCT=60" in Path(got["env_path"]).read_text()
        conf.write_text(conf.read_text() + "# hand edit\nmax_fps = 30\n")
        assert v1.get("/api/v1/host/config").json()["settings"]["audio_video"]["max_fps"] == 30
        assert admin.get("/api/config").json()["max_fps"] == 30
        bad = admin.post("/api/config", json={"rate_cap_pct": 200})
        assert bad.status_code == 400 and "rate_cap_pct" in bad.json()["error"]
        bad = v1.put("/api/v1/host/config", json={"audio_video": {"max_fps": 1}})
        assert bad.status_code == 400 and bad.json()["fields"][0]["field"] == "audio_video.max_fps"
        assert "# hand edit" in conf.read_text()
        host = v1.get("/api/v1/host").json()
        assert "h264" in host["codecs"] and host["ports"]["mgmt"] == live_host.mgmt_port


def test_huge_bodies_are_refused_and_nothing_is_written(live_host, admin_auth):
    conf = live_host.state_dir / "host.conf"
    before = conf.read_bytes() if conf.exists() else None
    filler = "x" * (2 * 1024 * 1024)
    huge = "x" * (5 * 1024 * 1024)
    with live_host.mgmt() as v1, live_host.client(auth=admin_auth) as admin:
        # the management API reads up to 4 MiB, so a 2 MiB value meets its validator
        r = v1.put("/api/v1/host/config", json={"general": {"host_name": filler}})
        assert r.status_code == 400 and r.json()["fields"][0]["field"] == "general.host_name"
        r = v1.put("/api/v1/host/config", json={"general": {"host_name": huge}})
        assert r.status_code == 413 and r.json()["error"]
        r = admin.post("/api/config", json={"sunshine_name": filler})
        assert r.status_code == 413 and r.json()["status"] is False
        r = v1.put("/api/v1/display/settings", json={"capture_monitor": huge})
        assert r.status_code == 413
    assert (conf.read_bytes() if conf.exists() else None) == before


def test_preflight_is_ready_and_changes_nothing(live_host):
    with live_host.mgmt() as v1:
        before = v1.get("/api/v1/display/state").json()
        report = v1.get("/api/v1/diagnostics/preflight").json()
        assert v1.get("/api/v1/display/state").json() == before
    statuses = {c["id"]: c["status"] for c in report["checks"]}
    failed = [c for c in report["checks"] if c["status"] == "fail"]  # whole, in the message
    assert statuses["config-storage"] == "pass" and statuses["tls"] == "pass", failed
    assert statuses["redis"] == "pass" and statuses["worker"] == "pass", failed
    assert statuses["ports"] == "pass" and statuses["capture-backends"] == "pass", failed
    assert statuses["encoder"] in ("pass", "warn")
    assert report["ready"] is True and report["schema"] == 1, failed


@pytest.mark.slow
def test_display_walk_on_the_live_host(live_host):
    import mss

    settings_file = live_host.state_dir / "display-settings.json"
    with restored(settings_file), live_host.mgmt() as v1:
        r = v1.put(
            "/api/v1/display/settings", json={"keep_alive": {"mode": "duration", "seconds": 10}}
        )
        assert r.status_code == 200
        d = drive(live_host, "acquire", "--client", "e2e", "--mode", "640x360@30")
        assert d["pid"] in owned_xvfb(live_host.state_dir)
        with mss.MSS(display=d["x_display"]) as sct:
            shot = sct.grab(sct.monitors[1])
        assert shot.size == (640, 360)
        state = v1.get("/api/v1/display/state").json()["displays"]
        mine = next(s for s in state if s["slot"] == d["slot"])
        assert mine["state"] == "active" and mine["running"] is True
        # Release never touches an active display.
        assert v1.post("/api/v1/display/release", json={"slot": d["slot"]}).json() == {
            "released": 0
        }

        assert drive(live_host, "disconnect", "--slot", str(d["slot"]))["state"] == "lingering"
        again = drive(live_host, "acquire", "--client", "e2e", "--mode", "640x360@30")
        assert again["pid"] == d["pid"] and again["state"] == "active"
        drive(live_host, "disconnect", "--slot", str(d["slot"]))

        # The supervisor's tick ends the countdown: row and server both gone.
        def torn_down():
            rows = v1.get("/api/v1/display/state").json()["displays"]
            gone = all(s["slot"] != d["slot"] for s in rows)
            return gone and d["pid"] not in owned_xvfb(live_host.state_dir)

        assert wait_for(torn_down, timeout=20)


@pytest.mark.slow
def test_restart_keeps_ports_and_displays_and_shutdown_leaves_nothing():
    host = start_host()
    try:
        with host.mgmt() as v1:
            v1.put("/api/v1/display/settings", json={"keep_alive": {"mode": "forever"}})
            d = drive(host, "acquire", "--client", "r", "--mode", "640x360@30")
            drive(host, "disconnect", "--slot", str(d["slot"]))
            assert v1.post("/api/v1/host/restart").status_code == 202
        # The old server goes with the old run; the pinned display comes back on a new one.
        assert wait_for(lambda: d["pid"] not in owned_xvfb(host.state_dir), timeout=30)
        host.wait_ready(timeout=60)
        assert host.proc.poll() is None  # same supervisor process, re-executed
        with host.mgmt() as v1:
            state = wait_for(lambda: v1.get("/api/v1/display/state").json()["displays"], 10)
            assert [(s["slot"], s["state"], s["running"]) for s in state] == [
                (d["slot"], "pinned", True)
            ]
            restored_pid = state[0]["pid"]
            assert restored_pid in owned_xvfb(host.state_dir)
            assert v1.post("/api/v1/display/release", json={}).json() == {"released": 1}
            assert wait_for(lambda: restored_pid not in owned_xvfb(host.state_dir), timeout=5)
            live = drive(host, "acquire", "--client", "s", "--mode", "640x360@30")
            assert owned_xvfb(host.state_dir) == [live["pid"]]
            assert v1.post("/api/v1/host/shutdown").status_code == 202
        assert host.proc.wait(timeout=60) == 0
        assert owned_xvfb(host.state_dir) == []
    finally:
        host.stop()
