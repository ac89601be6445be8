"""Fixtures of the game-lifecycle tests: a throwaway state dir and real launcher scripts."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time

import pytest

from games import lifecycle, registry
from tests.support.events import emitted

# A store-style launcher: it starts the game in the background under its own name, writes the
# game's pid down and leaves, so the game is an orphan like a real one.
LAUNCHER = """#!/bin/bash
cd "$(dirname "$0")"
exec -a {name} {game} &
echo $! > game.pid
exit 0
"""
SLEEPER = "/bin/sleep 30"
# A game that ignores SIGTERM, so only the SIGKILL after exit-timeout ends it.
STUBBORN = (
    f"{sys.executable} -c 'import signal, time; "
    'signal.signal(signal.SIGTERM, signal.SIG_IGN); open("ready", "w").close(); '
    "time.sleep(30)'"
)


@pytest.fixture
def state(tmp_path, monkeypatch, redis_db):
    """A throwaway state dir, and the tests' Redis emptied: the bus's ring then holds only the
    events this test's process emitted (read with `game_events`)."""
    home = tmp_path / "state"
    home.mkdir()
    monkeypatch.setenv("HOST_STATE_DIR", str(home))
    yield home
    lifecycle.stop_watching()
    registry.clear()


@pytest.fixture
def on_game_exit():
    """`lifecycle.on_game_exit` for one test: its callbacks are unregistered at the end."""
    unregister = []
    yield lambda callback: unregister.append(lifecycle.on_game_exit(callback))
    for undo in unregister:
        undo()


class Launched:
    def __init__(self, install, proc):
        self.install, self.proc = install, proc

    @property
    def pgid(self) -> int:
        return self.proc.pid

    def game_pid(self, timeout: float = 3.0) -> int:
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            try:
                return int((self.install / "game.pid").read_text())
            except (FileNotFoundError, ValueError):
                time.sleep(0.01)
        raise AssertionError("the launcher never started the game")


@pytest.fixture
def launch(tmp_path):
    """launch(game=SLEEPER) runs a launcher script in its own session, like the engine does."""
    started: list[Launched] = []

    def run(game: str = SLEEPER, name: str = "mygame") -> Launched:
        install = tmp_path / f"game{len(started)}"
        install.mkdir()
        script = install / "launch.sh"
        script.write_text(LAUNCHER.format(game=game, name=name))
        script.chmod(0o755)
        proc = subprocess.Popen([str(script)], start_new_session=True)
        threading.Thread(target=proc.wait, daemon=True).start()  # reap the launcher
        started.append(Launched(install, proc))
        return started[-1]

    yield run
    for item in started:  # nothing outlives a test, whatever it did
        for kill, pid in ((os.killpg, item.pgid), (os.kill, _read_pid(item.install))):
            try:
                kill(pid, signal.SIGKILL)
            except (ProcessLookupError, TypeError, PermissionError):
                pass


def _read_pid(install):
    try:
        return int((install / "game.pid").read_text())
    except (FileNotFoundError, ValueError):
        return None


def wait_for(predicate, timeout: float = 5.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.01)
    return predicate()


def game_events(kind: str) -> list[dict]:
    """The `kind` events this test's process published on the bus (needs `state`)."""
    return emitted(kind)
