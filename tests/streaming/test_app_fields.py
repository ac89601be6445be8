"""The session core's AppRun (both planes' app runner) applying the apps.json run fields, in
process with real commands: a launcher that detaches keeps the session, `auto-detach: false`
and `wait-all` decide when the app is over, `detached` commands outlive the session, `output`
takes the app's output or fails the launch, `elevated` is reported and not honoured."""

from __future__ import annotations

import logging
import os
import signal
import time

import pytest

from common import procs
from games import lifecycle, registry
from streaming.sessions.apps import AppRun, Choice

pytestmark = pytest.mark.django_db

DISPLAY = {"backend": "xvfb", "x_display": ":99"}  # machine.acquire's answer
CLIENT = {"name": "fields probe", "uuid": "u", "fingerprint": "f" * 64}
MODE = (1280, 720, 60)


@pytest.fixture
def state(tmp_path, monkeypatch, redis_db):
    home = tmp_path / "state"
    home.mkdir()
    monkeypatch.setenv("HOST_STATE_DIR", str(home))
    yield home
    lifecycle.stop_watching()
    registry.clear()


@pytest.fixture
def runs():
    started: list[AppRun] = []

    def make(sid: int, **fields) -> AppRun:
        choice = Choice(f"app:{sid}", f"Fields {sid}", exit_timeout=1, **fields)
        started.append(AppRun(choice, session_id=sid, client_name=CLIENT["name"]))
        return started[-1]

    yield make
    for run in started:
        run.end("api")


def holds(predicate, seconds: float) -> bool:
    """`predicate` stays true for `seconds`."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not predicate():
            return False
        time.sleep(0.05)
    return True


def wait_for(predicate, timeout: float = 8.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return True
        time.sleep(0.05)
    return predicate()


def test_a_launcher_that_detaches_keeps_the_session_and_its_detached_helper_outlives_it(
    state, runs, tmp_path
):
    out, helper = tmp_path / "app.log", tmp_path / "helper.pid"
    out.write_text("earlier\n")
    run = runs(980001, cmd="echo launcher-out; echo launcher-err >&2; exit 0", output=str(out),
               detached=[f"echo $$ > {helper}; exec sleep 60"])  # fmt: skip
    run.start(DISPLAY, {}, CLIENT, MODE)
    assert wait_for(lambda: run.proc.exited() and helper.exists())
    # Status 0 at once: a launcher. The session goes on with the display (nothing was seen).
    assert holds(lambda: not run.exited(), 1.5) and run.launcher_detached
    assert out.read_text().splitlines() == ["earlier", "launcher-out", "launcher-err"]
    pid = int(helper.read_text())
    try:
        assert os.getsid(pid) == pid and run.detached_pids == [pid]
        run.end("api")
        assert holds(lambda: procs.alive(pid), 1.0)  # not tracked: the session's end leaves it
    finally:
        os.killpg(pid, signal.SIGKILL)


def test_without_auto_detach_the_launcher_exit_ends_the_session(state, runs):
    run = runs(980002, cmd="exit 0", auto_detach=False)
    run.start(DISPLAY, {}, CLIENT, MODE)
    assert wait_for(run.exited, 5)
    assert not run.launcher_detached


def test_a_failing_quick_exit_is_not_a_detach(state, runs):
    run = runs(980003, cmd="exit 4")
    run.start(DISPLAY, {}, CLIENT, MODE)
    assert wait_for(run.exited, 5) and not run.launcher_detached


@pytest.mark.parametrize("wait_all", [True, False])
def test_wait_all_keeps_the_app_while_its_group_lives(state, runs, tmp_path, wait_all):
    child = tmp_path / "child.pid"
    # One process besides the shell: the game lifecycle layer takes the newest non-launcher
    # for the game, and a second, short `sleep` taken for it would end the session by its exit
    # (session_on_game_exit) whatever wait-all says.
    run = runs(980004 + wait_all, cmd=f"sleep 60 & echo $! > {child}; exit 3",
               wait_all=wait_all)  # fmt: skip
    run.start(DISPLAY, {}, CLIENT, MODE)
    assert wait_for(lambda: run.proc.exited() and child.exists())
    pid = int(child.read_text())
    if not wait_all:
        assert wait_for(run.exited, 5)  # only the launched command counted
        assert procs.alive(pid)  # (the session's end, not the verdict, ends the group)
        return
    assert holds(lambda: not run.exited(), 1.5)
    os.kill(pid, signal.SIGKILL)
    assert wait_for(run.exited, 5)


def test_an_output_file_that_cannot_be_opened_fails_the_launch_before_anything_runs(
    state, runs, tmp_path
):
    helper = tmp_path / "helper.pid"
    run = runs(980006, cmd="sleep 30", output=str(tmp_path / "gone" / "app.log"),
               detached=[f"echo $$ > {helper}"])  # fmt: skip
    with pytest.raises(OSError, match=r"App output file .*gone/app.log cannot be opened"):
        run.start(DISPLAY, {}, CLIENT, MODE)
    assert run.proc is None and run.detached_pids == []
    time.sleep(0.3)
    assert not helper.exists()


def test_elevated_is_reported_and_the_app_runs_with_the_host_rights(state, runs, tmp_path, caplog):
    uid = tmp_path / "uid"
    run = runs(980007, cmd=f"id -u > {uid}; exec sleep 30", elevated=True)
    with caplog.at_level(logging.WARNING, logger="streaming.sessions"):
        run.start(DISPLAY, {}, CLIENT, MODE)
    assert any("administrator on Windows" in r.getMessage() for r in caplog.records)
    assert wait_for(uid.exists) and wait_for(lambda: uid.read_text().strip())
    assert int(uid.read_text()) == os.getuid()
