"""Game lifecycle with real processes: a launcher script starts the "game" and exits."""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import threading
import time

import pytest

from common import procs
from games import DetectHints, GameWatcher, scan

LAUNCHER = """#!/bin/bash
# A launcher as stores ship them: start the game in the background, then leave.
cd "$(dirname "$0")"
export SteamAppId=4242
exec -a mygame {game} &
echo $! > game.pid
{after}
"""


@pytest.fixture
def install(tmp_path):
    """An install dir with a game binary (a copy of sleep) and a launcher script."""
    shutil.copy("/bin/sleep", tmp_path / "game.bin")
    yield tmp_path
    # Never leave a game (or its helpers) behind, whatever the test did.
    for name, kill in (("game.pid", os.kill), ("launcher.pgid", os.killpg)):
        try:
            kill(int((tmp_path / name).read_text()), signal.SIGKILL)
        except (FileNotFoundError, ProcessLookupError, ValueError):
            pass


def launch(install, game="sleep 30", after="exit 0"):
    script = install / "launch.sh"
    script.write_text(LAUNCHER.format(game=game, after=after))
    script.chmod(0o755)
    proc = subprocess.Popen([str(script)], start_new_session=True)
    (install / "launcher.pgid").write_text(str(proc.pid))
    return proc


class Recorder:
    def __init__(self):
        self.events = []
        self.cond = threading.Condition()

    def __call__(self, ev):
        with self.cond:
            self.events.append(ev)
            self.cond.notify_all()

    def wait_for(self, n, timeout=5.0):
        with self.cond:
            self.cond.wait_for(lambda: len(self.events) >= n, timeout)
        return self.events


def game_pid(install, timeout=2.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        try:
            return int((install / "game.pid").read_text())
        except (FileNotFoundError, ValueError):
            time.sleep(0.01)
    raise AssertionError("the launcher did not start the game")


def test_running_names_the_child_and_a_kill_is_exited(install):
    rec = Recorder()
    launcher = launch(install)
    w = GameWatcher(DetectHints(process_name="mygame"), rec, poll_s=0.02).start()
    launcher.wait(5)
    pid = game_pid(install)
    (running,) = rec.wait_for(1)
    assert (running.state, running.pid, running.name) == ("running", pid, "mygame")
    assert running.pid != launcher.pid
    t0 = time.monotonic()
    os.kill(pid, signal.SIGTERM)  # the player quits (the game ends on its own)
    events = rec.wait_for(2)
    assert [(e.state, e.reason) for e in events] == [("running", None), ("exited", "exited")]
    seen_after = events[1].at - t0
    print(f"exit seen {seen_after * 1e3:.2f} ms after the kill")
    assert seen_after < 0.5
    assert w.wait(2)


def test_host_close_is_terminated_and_the_game_is_gone(install):
    rec = Recorder()
    launch(install).wait(5)
    pid = game_pid(install)
    hints = DetectHints(install_dir=str(install))
    w = GameWatcher(hints, rec, poll_s=0.02).start()
    events = rec.wait_for(1)
    assert events, f"no event in 5 s; alive={procs.alive(pid)} scan now={scan(hints)}"
    assert events[0].pid == pid
    assert w.terminate(timeout=2.0)
    assert [(e.state, e.reason) for e in rec.wait_for(2)] == [
        ("running", None),
        ("exited", "terminated"),
    ]
    assert not procs.alive(pid)


def test_a_game_that_ignores_sigterm_is_killed_after_the_timeout(install):
    rec = Recorder()
    launcher = launch(install, game="bash -c 'trap \"\" TERM; sleep 30 & wait; sleep 30'")
    launcher.wait(5)
    hints = DetectHints(process_name="mygame", session=launcher.pid)
    w = GameWatcher(hints, rec, poll_s=0.02).start()
    rec.wait_for(1)
    t0 = time.monotonic()
    assert w.terminate(timeout=0.3)
    took = time.monotonic() - t0
    assert 0.3 <= took < 2.0, took
    assert rec.wait_for(2)[1].reason == "terminated"
    # The whole launched group went, the game's own helper (its `sleep 30`) too.
    left = subprocess.run(["pgrep", "-g", str(launcher.pid)], capture_output=True, text=True)
    assert [p for p in left.stdout.split() if procs.alive(int(p))] == []


def test_the_launcher_is_not_the_game_while_both_live(install):
    """The launcher waits for the game (cwd and argv in the install dir, SteamAppId set)."""
    launcher = launch(install, game=f"{install}/game.bin 30", after="wait")
    pid = game_pid(install)
    for hints in (
        DetectHints(install_dir=str(install)),
        DetectHints(exe=str(install / "game.bin")),
        DetectHints(steam_appid="4242"),
        DetectHints(session=launcher.pid),
        DetectHints(process_name="game.bin", install_dir=str(install)),
    ):
        found = scan(hints)
        assert found is not None and found.pid == pid, hints
    assert launcher.poll() is None
    os.kill(pid, signal.SIGKILL)
    launcher.wait(5)


def test_natural_exit_and_detection_times(install):
    rec = Recorder()
    t0 = time.monotonic()
    launch(install, game="sleep 0.4").wait(5)
    w = GameWatcher(DetectHints(process_name="mygame"), rec, poll_s=0.02).start()
    running, exited = rec.wait_for(2)
    print(
        f"running seen after {(running.at - t0) * 1e3:.0f} ms, "
        f"exit after {(exited.at - t0) * 1e3:.0f} ms (game lives 400 ms)"
    )
    assert exited.reason == "exited" and 0.35 <= exited.at - t0 < 1.5
    w.stop()


def test_hints_that_match_nothing_report_not_found(install):
    rec = Recorder()
    for hints in (
        DetectHints(process_name="no-such-game"),
        DetectHints(install_dir=str(install / "missing")),
        DetectHints(steam_appid="999999999"),
    ):
        rec.events.clear()
        w = GameWatcher(hints, rec, poll_s=0.02, find_timeout=0.2).start()
        assert w.wait(3)
        assert [(e.state, e.reason, e.pid) for e in rec.events] == [("exited", "not_found", None)]
    w = GameWatcher(DetectHints(), rec, find_timeout=None).start()
    assert w.wait(1)  # no hints at all: nothing to watch, said at once
    assert scan(DetectHints()) is None


def test_detect_hints_from_a_library_entry():
    h = DetectHints.from_entry({"install_dir": " ", "exe": "/g/x.exe", "process_name": ""}, 620)
    assert (h.install_dir, h.exe, h.process_name, h.steam_appid) == (None, "/g/x.exe", None, "620")
    assert DetectHints.from_entry(None).empty


def test_an_updater_that_hands_over_to_the_game_is_followed(install):
    """First "mygame" is an updater (0.3 s), which starts the real "mygame" and leaves."""
    rec = Recorder()
    updater = "bash -c 'sleep 0.3; (exec -a mygame sleep 30) & echo $! > game.pid; sleep 0.05'"
    launcher = launch(install, game=updater)
    launcher.wait(5)
    w = GameWatcher(DetectHints(process_name="mygame"), rec, poll_s=0.02).start()
    first, second = rec.wait_for(2)
    assert (first.state, second.state) == ("running", "running")
    assert second.pid == game_pid(install) != first.pid
    os.kill(second.pid, signal.SIGTERM)
    third = rec.wait_for(3)[2]
    assert (third.state, third.reason, third.pid) == ("exited", "exited", second.pid)
    assert w.wait(2)


def test_steam_reaper_is_passed_over_for_the_game_it_wraps(install):
    """Steam-style: a `reaper ... AppId=777 -- game` wrapper whose child carries SteamAppId."""
    (install / "reaper.sh").write_text('shift 3; SteamAppId=777 "$@" & echo $! > game.pid; wait\n')
    wrapper = subprocess.Popen(
        ["bash", "-c", f'cd {install}; exec -a reaper bash reaper.sh "$@"', "-"]
        + ["SteamLaunch", "AppId=777", "--", str(install / "game.bin"), "30"],
        start_new_session=True,
    )
    (install / "launcher.pgid").write_text(str(wrapper.pid))
    pid = game_pid(install)
    found = None
    deadline = time.monotonic() + 2
    while found is None and time.monotonic() < deadline:
        found = scan(DetectHints(steam_appid="777"))
    assert found is not None and found.pid == pid and found.name == "game.bin"
    assert scan(DetectHints(steam_appid="778")) is None
    os.kill(pid, signal.SIGKILL)
    wrapper.wait(5)


def test_a_fork_of_the_game_is_not_taken_for_the_game(install):
    """A game that forks (a worker, or the moment between a fork and its exec) has a child with
    its very command line: the game is the parent, whose exit is the game's, not the child's."""
    launcher = launch(
        install, game=f"{sys.executable} -c 'import os, time; os.fork(); time.sleep(30)'"
    )
    launcher.wait(5)
    game = game_pid(install)
    deadline = time.monotonic() + 5
    while len(subprocess.run(["pgrep", "-P", str(game)], capture_output=True).stdout.split()) < 1:
        assert time.monotonic() < deadline, "the game never forked"
        time.sleep(0.02)
    found = scan(DetectHints(process_name="mygame", session=launcher.pid))
    assert found is not None and found.pid == game, (found, game)
