"""Hook commands for real: `sh -c`, stdin, environment, ownership check, group kill."""

from __future__ import annotations

import json
import os
import time

import psutil

from common import procs
from hooks import runner

EVENT = {
    "seq": 7,
    "ts_ms": 1,
    "schema": 1,
    "kind": "game.exited",
    "game": {"app": "steam:42", "title": "Bad\x07Game\nTitle", "client": "deck", "plane": "native"},
    "reason": "terminated",
}


def test_command_gets_event_on_stdin_and_env(tmp_path):
    out = tmp_path / "out"
    result = runner.run_hook_command(f"cat > {out}.json; env > {out}.env", EVENT, 10)
    assert result.outcome == "ok" and result.exit_code == 0
    assert json.loads((tmp_path / "out.json").read_text()) == EVENT
    env = dict(
        line.split("=", 1)
        for line in (tmp_path / "out.env").read_text().splitlines()
        if "=" in line
    )
    assert env["PF_EVENT_KIND"] == "game.exited"
    assert env["PF_EVENT_SEQ"] == "7"
    assert env["PF_EVENT_GAME_APP"] == "steam:42"
    assert env["PF_EVENT_GAME_TITLE"] == "BadGameTitle"  # control characters stripped
    assert env["PF_EVENT_REASON"] == "terminated"
    assert json.loads(env["PF_EVENT_JSON"]) == EVENT


def test_env_naming_and_values():
    env = runner.event_env(
        {"seq": 1, "kind": "stream.started", "stream": {"hdr": True, "mode": "1920x1080@60"}}
    )
    assert env["PF_EVENT_STREAM_HDR"] == "true"
    assert env["PF_EVENT_STREAM_MODE"] == "1920x1080@60"


def test_host_secrets_are_not_passed(tmp_path, monkeypatch):
    monkeypatch.setenv("HOST_MGMT_TOKEN", "a" * 64)
    out = tmp_path / "env"
    runner.run_hook_command(f"env > {out}", EVENT, 10)
    assert "HOST_MGMT_TOKEN" not in out.read_text()


def test_exit_status_is_reported():
    result = runner.run_hook_command("exit 3", EVENT, 10)
    assert result.outcome == "failed" and result.exit_code == 3


def test_timeout_kills_command_and_its_child(tmp_path):
    pids = tmp_path / "pids"
    started = time.monotonic()
    result = runner.run_hook_command(
        f"sleep 60 & echo $! > {pids}; echo $$ >> {pids}; wait", EVENT, 1
    )
    assert result.outcome == "timeout"
    assert time.monotonic() - started < 10
    child, shell = (int(x) for x in pids.read_text().split())
    deadline = time.monotonic() + 5
    while time.monotonic() < deadline and any(procs.alive(p) for p in (child, shell)):
        time.sleep(0.05)
    assert not procs.alive(child) and not procs.alive(shell)


def test_group_writable_script_is_refused(tmp_path):
    script = tmp_path / "hook.sh"
    marker = tmp_path / "ran"
    script.write_text(f"#!/bin/sh\ntouch {marker}\n")
    script.chmod(0o775)
    result = runner.run_hook_command(f"{script} --flag", EVENT, 10)
    assert result.outcome == "refused" and "writable" in result.error
    assert not marker.exists()
    script.chmod(0o755)
    assert runner.run_hook_command(str(script), EVENT, 10).outcome == "ok"
    assert marker.exists()


def test_script_of_another_owner_is_refused(tmp_path):
    if os.geteuid() != 0:
        return  # cannot chown without root; the group-writable test covers the check
    script = tmp_path / "other.sh"
    script.write_text("#!/bin/sh\nexit 0\n")
    script.chmod(0o755)
    os.chown(script, 12345, 12345)
    result = runner.run_hook_command(str(script), EVENT, 10)
    assert result.outcome == "refused" and "owned" in result.error


def test_kill_running_ends_a_running_command_group(tmp_path):
    import threading

    results = []
    pidfile = tmp_path / "child.pid"
    thread = threading.Thread(
        target=lambda: results.append(
            runner.run_hook_command(f"sleep 600 & echo $! > {pidfile}; wait", EVENT, 600)
        )
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not (pidfile.exists() and pidfile.read_text().strip()) and time.monotonic() < deadline:
        time.sleep(0.02)
    grandchild = int(pidfile.read_text())
    assert runner.kill_running() == 1
    thread.join(10)
    assert not thread.is_alive()
    (result,) = results
    assert result.outcome == "failed" and result.error == "killed: the host is stopping"
    deadline = time.monotonic() + 5
    while psutil.pid_exists(grandchild) and psutil.Process(grandchild).status() != "zombie":
        assert time.monotonic() < deadline, "the command's background child survived"
        time.sleep(0.02)
    assert runner.kill_running() == 0  # nothing left running


def test_kill_running_leaves_prep_steps_alone(tmp_path):
    """An owed undo is forgotten once tried: a stopping worker must not cut it off."""
    import threading

    started, done = tmp_path / "started", tmp_path / "done"
    thread = threading.Thread(
        target=lambda: runner.run_command(f"touch {started}; sleep 0.5; touch {done}", timeout_s=10)
    )
    thread.start()
    deadline = time.monotonic() + 10
    while not started.exists():
        assert time.monotonic() < deadline, "the prep command did not start"
        time.sleep(0.01)
    assert runner.kill_running() == 0
    thread.join(10)
    assert done.exists()
