"""A child killed outright takes along what it started in sessions of its own (the hooks
worker's hook commands), when it is marked for that; an unmarked child's leftovers are not
touched by the sweep (real processes)."""

from __future__ import annotations

import os
import signal
import sys
import textwrap
import time

import pytest

from common import procs
from supervisor.children import Child

# The child starts a command in a session of its own (as the hooks worker runs a hook),
# reports its pid, then waits to be killed.
CHILD = textwrap.dedent(
    """
    import subprocess, sys, time
    p = subprocess.Popen(["sleep", "120"], start_new_session=True)
    open(sys.argv[1], "w").write(str(p.pid))
    time.sleep(120)
    """
)


def start(tmp_path, name: str, sweep: bool) -> tuple[Child, int]:
    out = tmp_path / f"{name}.pid"
    child = Child(name, [sys.executable, "-c", CHILD, str(out)], dict(os.environ),
                  sweep_marked=sweep)  # fmt: skip
    child.start()
    deadline = time.monotonic() + 10
    while not (out.exists() and out.read_text()):
        assert time.monotonic() < deadline, "the child never started its command"
        time.sleep(0.05)
    return child, int(out.read_text())


def kill_and_check(child: Child) -> None:
    os.kill(child.pid, signal.SIGKILL)
    child.proc.wait()
    child.check()  # what the supervisor's loop does on its next turn


@pytest.mark.parametrize("sweep", [True, False])
def test_a_killed_child_leaves_no_command_only_when_marked(tmp_path, sweep):
    child, orphan = start(tmp_path, "celery-hooks", sweep)
    try:
        assert procs.alive(orphan)
        kill_and_check(child)
        deadline = time.monotonic() + 3
        while procs.alive(orphan) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert procs.alive(orphan) is not sweep
    finally:
        child.stopping = True
        child.kill_group()
        if procs.alive(orphan):
            os.kill(orphan, signal.SIGKILL)
