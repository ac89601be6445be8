"""`stop_group(..., only_uid=)`: root signals an app's process group only while every member is
the compositor user's, so a group number reused by someone else's processes is left alone."""

from __future__ import annotations

import os
import subprocess

import pytest

from games.apprun import stop_group

NOBODY = 65534

pytestmark = pytest.mark.skipif(
    os.geteuid() != 0, reason="runs processes as another uid: needs root"
)


def _group_leader(*prefix: str) -> subprocess.Popen:
    return subprocess.Popen([*prefix, "sleep", "60"], start_new_session=True)


def test_a_group_that_is_not_the_users_is_not_signalled():
    root_group = _group_leader()
    try:
        stop_group(root_group.pid, 0.5, only_uid=NOBODY)
        assert root_group.poll() is None, "a root process group was signalled"
    finally:
        root_group.kill()
        root_group.wait()


def _wait_runs_as(pid: int, uid: int, timeout: float = 5.0) -> None:
    """Until setpriv has dropped to `uid` (before that the group is root's, and left alone)."""
    import time

    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with open(f"/proc/{pid}/status") as f:
            uids = next(line.split()[1:] for line in f if line.startswith("Uid:"))
        if set(uids) == {str(uid)}:
            return
        time.sleep(0.01)
    raise AssertionError(f"process {pid} never ran as uid {uid}")


def test_the_users_own_group_is_stopped():
    users = _group_leader("setpriv", f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups")
    try:
        _wait_runs_as(users.pid, NOBODY)
        stop_group(users.pid, 2.0, reap=users.poll, only_uid=NOBODY)
        assert users.wait(timeout=5) == -15
    finally:
        if users.poll() is None:
            users.kill()
            users.wait()
