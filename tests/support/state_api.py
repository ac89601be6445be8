"""Fixtures of the display, media and config tests: an in-process API client on a
throwaway state dir."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
from rest_framework.test import APIClient


@pytest.fixture
def state(tmp_path, monkeypatch):
    """A fresh, empty state dir for one test (the store reads HOST_STATE_DIR on every call)."""
    monkeypatch.setenv("HOST_STATE_DIR", str(tmp_path))
    # capture `auto` attaches to a reachable DISPLAY: the runner's own desktop is not ours.
    for name in ("DISPLAY", "WAYLAND_DISPLAY", "HOST_CAPTURE_METHOD", "HOST_CAPTURE_MONITOR"):
        monkeypatch.delenv(name, raising=False)
    return tmp_path


@pytest.fixture
def v1(settings, state):
    settings.HOST_NO_MGMT_TOKEN = True
    # a tokenless host takes writes only with a header no cross-site page can send
    return APIClient(HTTP_X_REQUESTED_WITH="tests")


@pytest.fixture
def admin(settings, state, db, redis_db):
    """Admin API client with Basic credentials set in the throwaway state dir (logins are
    counted in Redis, so the test gets one)."""
    from access import credentials

    credentials.set_credentials("admin", "pw-for-tests")
    client = APIClient()
    client.credentials(HTTP_AUTHORIZATION="Basic YWRtaW46cHctZm9yLXRlc3Rz")
    return client


def _immutable(path: Path, on: bool) -> bool:
    flag = "+i" if on else "-i"
    return subprocess.run(["chattr", flag, str(path)], capture_output=True).returncode == 0


@pytest.fixture
def read_only_dir():
    """Make a directory unwritable for this process, root included (chattr +i), and undo it."""
    made: list[tuple[Path, int]] = []

    def make(path: Path) -> None:
        if os.geteuid() == 0:
            if shutil.which("chattr") is None or not _immutable(path, True):
                pytest.skip("root cannot make a read-only directory here (no chattr +i)")
            made.append((path, -1))
        else:
            made.append((path, path.stat().st_mode))
            path.chmod(0o500)

    yield make
    for path, mode in made:
        if mode == -1:
            _immutable(path, False)
        else:
            path.chmod(mode)
