"""The apps.json run fields (games.appfields) with real processes: `output`, `detached`,
`auto-detach` and `wait-all` as the app process applies them, and `elevated` as a rule."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

import pytest

from common import procs
from games import appfields
from games.appfields import DETACHED, ENDED, RUNNING, exit_verdict
from games.apprun import AppProcess
from tests.games.conftest import wait_for


def verdict(status, ran=1.0, group=False, auto_detach=True, wait_all=True):
    return exit_verdict(status, ran, group, auto_detach=auto_detach, wait_all=wait_all)


# -- the rules ---------------------------------------------------------------------------------
def test_a_running_command_is_running_whatever_the_flags():
    for auto_detach in (True, False):
        for wait_all in (True, False):
            assert verdict(None, auto_detach=auto_detach, wait_all=wait_all) == RUNNING


def test_auto_detach_is_status_zero_within_the_window_only():
    assert verdict(0, ran=0.1) == DETACHED
    assert verdict(0, ran=0.1, group=True) == DETACHED  # what it started is the session's now
    assert verdict(0, ran=appfields.AUTO_DETACH_WINDOW_S + 0.1) == ENDED  # too late
    assert verdict(1, ran=0.1) == ENDED  # a failure is not a detach
    assert verdict(-15, ran=0.1) == ENDED  # nor a signal
    assert verdict(0, ran=0.1, auto_detach=False) == ENDED


def test_wait_all_waits_for_the_group_and_without_it_the_command_alone_counts():
    assert verdict(3, group=True) == RUNNING
    assert verdict(3, group=False) == ENDED
    assert verdict(3, group=True, wait_all=False) == ENDED
    assert verdict(0, ran=0.1, group=True, auto_detach=False) == RUNNING
    assert verdict(0, ran=0.1, group=True, auto_detach=False, wait_all=False) == ENDED


def test_elevated_fields_names_the_entry_and_each_prep_step():
    raw = {"elevated": "true", "prep-cmd": [{"do": "a"}, {"do": "b", "elevated": True}, "x"]}
    assert appfields.elevated_fields(raw) == ["elevated", "prep-cmd[1].elevated"]
    assert appfields.elevated_fields({"elevated": False, "prep-cmd": [{"elevated": 0}]}) == []
    assert "administrator on Windows" in appfields.ELEVATED_REASON


def test_output_path_rules(tmp_path):
    good = tmp_path / "app.log"
    assert appfields.check_output_path(str(good)) == str(good)
    bad = {
        "app.log": "absolute",
        str(tmp_path / "a\x1bb.log"): "printable",
        str(tmp_path / "missing" / "app.log"): "does not exist",
        str(tmp_path): "directory",
        "/proc/1/app.log": "not writable",  # not writable even by root
        "": "non-empty",
    }
    for value, why in bad.items():
        with pytest.raises(ValueError, match=why):
            appfields.check_output_path(value)


# -- output ----------------------------------------------------------------------------------
def test_output_is_appended_both_streams_and_earlier_lines_kept(tmp_path):
    log = tmp_path / "app.log"
    log.write_text("earlier run\n")
    fd = appfields.open_output(str(log))
    try:
        app = AppProcess("echo to-stdout; echo to-stderr >&2", dict(os.environ), output_fd=fd)
    finally:
        os.close(fd)
    assert app.proc.wait(5) == 0
    assert log.read_text().splitlines() == ["earlier run", "to-stdout", "to-stderr"]
    fresh = tmp_path / "new.log"
    os.close(appfields.open_output(str(fresh)))  # created when missing, never world-writable
    assert fresh.exists() and fresh.stat().st_mode & 0o022 == 0


def test_an_output_that_cannot_be_opened_is_a_clear_error(tmp_path):
    with pytest.raises(appfields.OutputError, match=r"cannot be opened: No such file"):
        appfields.open_output(str(tmp_path / "gone" / "app.log"))
    with pytest.raises(appfields.OutputError, match=r"cannot be opened: Is a directory"):
        appfields.open_output(str(tmp_path))
    with pytest.raises(appfields.OutputError, match="absolute"):
        appfields.open_output("relative.log")
    assert isinstance(appfields.OutputError("x"), OSError)  # the planes answer OSError


# -- detached --------------------------------------------------------------------------------
def test_detached_commands_run_in_a_session_of_their_own_and_outlive_the_app(tmp_path):
    app = AppProcess("sleep 30", dict(os.environ), exit_timeout=1)
    marks = [tmp_path / "d0", tmp_path / "d1"]
    pids = appfields.start_detached(
        [f"echo $$ > {marks[0]}; exec sleep 30", "", f"echo $$ > {marks[1]}; exec sleep 30"],
        {**os.environ, "HOST_INSTANCE": "run-1"},
    )
    try:
        assert len(pids) == 2
        for pid in pids:  # no run mark: the host's sentinel leaves them (they outlive the host)
            assert b"HOST_INSTANCE=" not in Path(f"/proc/{pid}/environ").read_bytes()
        for pid in pids:
            assert os.getsid(pid) == pid and os.getpgid(pid) == pid  # its own session and group
            assert os.getpgid(pid) != app.pgid
        assert wait_for(lambda: all(m.exists() for m in marks))
        app.terminate()  # the session's end signals the app's group only
        assert not procs.alive(app.pid)
        assert all(procs.alive(pid) for pid in pids)
    finally:
        for pid in pids:
            os.killpg(pid, signal.SIGKILL)
    assert wait_for(lambda: not any(procs.alive(p) for p in pids))  # reaped by their threads


def test_a_detached_command_that_cannot_start_is_skipped(tmp_path):
    pids = appfields.start_detached(["true"], dict(os.environ), working_dir=str(tmp_path / "x"))
    assert pids == []


# -- the app process's verdict ----------------------------------------------------------------
def _settled(app: AppProcess, auto_detach=True, wait_all=True, timeout=5.0) -> str:
    deadline = time.monotonic() + timeout
    while app.status() is None and time.monotonic() < deadline:
        time.sleep(0.01)
    return app.verdict(auto_detach, wait_all)


def test_a_launcher_that_exits_zero_at_once_detached():
    app = AppProcess("exit 0", dict(os.environ))
    assert _settled(app) == DETACHED
    assert _settled(app, auto_detach=False) == ENDED


def test_a_late_exit_zero_is_the_app_ending(monkeypatch):
    monkeypatch.setattr(appfields, "AUTO_DETACH_WINDOW_S", 0.2)
    app = AppProcess("sleep 0.4; exit 0", dict(os.environ))
    assert app.verdict(True, True) == RUNNING
    assert _settled(app) == ENDED


def test_wait_all_follows_the_group_after_the_command_exits(tmp_path):
    pidfile = tmp_path / "child"
    app = AppProcess(f"sleep 30 & echo $! > {pidfile}; exit 3", dict(os.environ))
    try:
        assert _settled(app) == RUNNING  # its child still runs in its group
        assert _settled(app, wait_all=False) == ENDED  # only the launched command counts
        child = int(pidfile.read_text())
        os.kill(child, signal.SIGKILL)
        assert wait_for(lambda: app.verdict(True, True) == ENDED)
    finally:
        app.terminate()
