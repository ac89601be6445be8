"""`file_apps` and `log_path` move the files the host uses: the catalog at once (HOST_APPS_FILE
still wins), the log from the next start of a real host (every process writes there, the console
reads it); unusable paths are a 400 at write and a start-up error naming the key."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time

import pytest

from tests.support.livehost import ROOT, free_base_port, start_host

pytestmark = pytest.mark.django_db


def _names(admin) -> list[str]:
    r = admin.get("/api/apps")
    assert r.status_code == 200, r.content
    return [a["name"] for a in r.json()["apps"]]


def test_file_apps_is_the_catalog_at_once_and_host_apps_file_wins(admin, state, monkeypatch):
    monkeypatch.delenv("HOST_APPS_FILE", raising=False)
    assert _names(admin) == ["Desktop"]  # the default catalog in the state dir
    elsewhere = state / "elsewhere"
    elsewhere.mkdir()
    chosen = elsewhere / "catalog.json"
    chosen.write_text(json.dumps({"env": {}, "apps": [{"name": "Elsewhere"}]}))
    r = admin.post("/api/config", {"file_apps": str(chosen)}, format="json")
    assert r.status_code == 200 and r.json()["restart_required"] is False, r.content
    assert _names(admin) == ["Elsewhere"]  # no restart
    r = admin.post("/api/apps", {"name": "Added", "cmd": "true", "index": -1}, format="json")
    assert r.status_code == 200, r.content
    assert [a["name"] for a in json.loads(chosen.read_text())["apps"]] == ["Added", "Elsewhere"]
    assert "Added" not in (state / "apps.json").read_text()
    # The environment wins over host.conf.
    pinned = state / "pinned.json"
    pinned.write_text(json.dumps({"apps": [{"name": "Pinned"}]}))
    monkeypatch.setenv("HOST_APPS_FILE", str(pinned))
    assert _names(admin) == ["Pinned"]
    monkeypatch.delenv("HOST_APPS_FILE")
    # Unusable paths are refused at write, naming the key; the catalog stays where it was.
    (state / "notes.json").write_text("[1, 2]")
    for bad, why in (
        ("relative.json", "must be an absolute path"),
        ("/etc/passwd", "must name a .json file"),
        (str(state / "notes.json"), "is not an app catalog"),
        (str(state / "missing" / "apps.json"), "does not exist or is not writable"),
    ):
        r = admin.post("/api/config", {"file_apps": bad}, format="json")
        assert r.status_code == 400, (bad, r.content)
        assert "file_apps" in r.json()["error"] and why in r.json()["error"], r.content
    assert _names(admin) == ["Added", "Elsewhere"]
    r = admin.post("/api/config", {"file_apps": None}, format="json")
    assert r.status_code == 200 and _names(admin) == ["Desktop"]


def test_log_path_unusable_is_400_at_write(admin, state):
    ro = state / "ro"
    ro.mkdir()
    (state / "a-dir.log").mkdir()
    ro.chmod(0o500)
    try:
        for bad, why in (
            (str(state / "nowhere" / "host.log"), "does not exist"),
            (str(state / "a-dir.log"), "is not a regular file"),
            ("host.log", "must be an absolute path"),
        ):
            r = admin.post("/api/config", {"log_path": bad}, format="json")
            assert r.status_code == 400 and why in r.json()["error"], (bad, r.content)
            assert "log_path" in r.json()["error"]
        r = admin.post("/api/config", {"log_path": str(ro / "host.log")}, format="json")
        if r.status_code == 400:  # root writes anywhere: only a non-root run can check this
            assert "is not writable by the host" in r.json()["error"]
        r = admin.post("/api/config", {"log_path": str(state / "elsewhere.log")}, format="json")
        assert r.status_code == 200 and r.json()["restart_required"] is True, r.content
    finally:
        ro.chmod(0o700)


@pytest.mark.e2e
def test_log_path_is_where_every_host_process_logs_and_the_console_reads(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    logs = tmp_path / "var-log"
    logs.mkdir()
    chosen = logs / "streaming-host.log"
    (state / "host.conf").write_text(f"log_path = {chosen}\n")
    host = start_host(state_dir=state)
    try:
        with host.mgmt() as c:
            assert c.get("/api/v1/health").status_code == 200
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline:
                text = chosen.read_text(errors="replace") if chosen.exists() else ""
                pids = set(re.findall(r"^\S+ \S+ [A-Z]+ (\d+) ", text, re.M))
                if len(pids) >= 3:
                    break
                time.sleep(0.5)
            assert len(pids) >= 3, text[-3000:]  # supervisor, web server, worker, planes...
            page = c.get("/api/v1/logs", params={"limit": 1000}).json()
            served = [e["msg"].splitlines()[0] for e in page["entries"]]
            assert "host started" in served  # the console reads the moved log
            text = chosen.read_text(errors="replace")  # and lines logged since the read above
            assert all(m in text for m in served), [m for m in served if m not in text]
        default = state / "logs" / "host.log"
        assert not default.exists() or default.stat().st_size == 0
    finally:
        assert host.stop() == 0, host.log_tail()


def test_an_unusable_log_path_stops_the_start_naming_the_key(tmp_path):
    state = tmp_path / "state"
    state.mkdir()
    (state / "host.conf").write_text(f"log_path = {tmp_path / 'gone' / 'host.log'}\n")
    env = {
        "HOST_STATE_DIR": str(state),
        "HOST_PORT": str(free_base_port()),
        "PATH": "/usr/bin:/bin",
    }
    done = subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "runhost"], cwd=ROOT, env=env,
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0
    assert done.stderr.strip() == (
        f"error: host config key log_path: the directory {tmp_path / 'gone'} does not exist "
        "(value from host.conf)"
    ), done.stderr[-2000:]
