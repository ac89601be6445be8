"""Process liveness and die-with-parent, on real processes."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from pathlib import Path

from common import procs

ROOT = Path(__file__).resolve().parents[2]


def _until(check, timeout: float = 10.0) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.02)
    return check()


def test_alive_is_false_for_a_zombie_and_for_what_is_no_pid():
    assert procs.alive(os.getpid())
    proc = subprocess.Popen(["sleep", "30"])
    try:
        assert procs.alive(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        assert _until(lambda: procs.state(proc.pid) == b"Z"), "not a zombie yet"
        assert not procs.alive(proc.pid), "a zombie counts as gone"
    finally:
        proc.kill()
        proc.wait()
    assert not procs.alive(proc.pid)
    for nothing in (None, 0, -1, "1", True, 1.0):
        assert not procs.alive(nothing)


def test_group_exists_counts_a_zombie_leader_and_group_alive_does_not():
    proc = subprocess.Popen(["sleep", "30"], start_new_session=True)
    try:
        assert procs.group_exists(proc.pid) and procs.group_alive(proc.pid)
        os.kill(proc.pid, signal.SIGKILL)
        assert _until(lambda: procs.state(proc.pid) == b"Z")
        assert procs.group_exists(proc.pid)
        assert not procs.group_alive(proc.pid)
    finally:
        proc.kill()
        proc.wait()
    assert not procs.group_exists(proc.pid) and not procs.group_alive(proc.pid)


def test_prctl_is_resolved_at_import_not_in_the_child():
    assert procs._prctl is not None


# The middle process starts a grandchild with die_with_me() and prints its pid; the grandchild
# writes TERM to a file when SIGTERM reaches it.
_MIDDLE = textwrap.dedent(
    """
    import subprocess, sys, time
    from common import procs

    child = subprocess.Popen(
        [sys.executable, "-c", sys.argv[1], sys.argv[2]], preexec_fn=procs.die_with_me()
    )
    print(child.pid, flush=True)
    time.sleep(60)
    """
)
_GRANDCHILD = textwrap.dedent(
    """
    import signal, sys, time
    from pathlib import Path

    def term(*_):
        Path(sys.argv[1]).write_text("TERM")
        sys.exit(0)

    signal.signal(signal.SIGTERM, term)
    Path(sys.argv[1] + ".ready").write_text("")
    time.sleep(60)
    """
)


def test_the_child_gets_sigterm_when_its_parent_is_killed(tmp_path):
    mark = tmp_path / "mark"
    middle = subprocess.Popen(
        [sys.executable, "-c", _MIDDLE, _GRANDCHILD, str(mark)],
        cwd=ROOT,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdout=subprocess.PIPE,
        text=True,
    )
    grandchild = int(middle.stdout.readline())
    try:
        assert _until(lambda: Path(f"{mark}.ready").exists()), "the grandchild did not start"
        assert not mark.exists()
        middle.kill()
        middle.wait()
        assert _until(lambda: mark.exists()), "the grandchild got no SIGTERM"
        assert mark.read_text() == "TERM"
        assert _until(lambda: not procs.alive(grandchild))
    finally:
        middle.kill()
        middle.wait()
        middle.stdout.close()
        if procs.alive(grandchild):
            os.kill(grandchild, signal.SIGKILL)


def test_a_child_whose_parent_is_already_gone_exits_before_exec():
    # A parent pid that is not the child's stands for a parent that died before the prctl.
    proc = subprocess.Popen(["true"], preexec_fn=lambda: procs.die_with_parent(1))
    assert proc.wait(10) == 1
    proc = subprocess.Popen(["true"], preexec_fn=procs.die_with_me())
    assert proc.wait(10) == 0
