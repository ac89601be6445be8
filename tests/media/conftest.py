"""Fixtures of the playable tests: one real Xvfb per module and an X client reading it back."""

from __future__ import annotations

import shutil

import pytest

from tests.media.xserver import Watcher, start_xvfb
from tests.support.state_api import admin, read_only_dir, state, v1  # noqa: F401 - fixtures


@pytest.fixture(scope="module")
def xvfb():
    if shutil.which("Xvfb") is None:
        pytest.skip("Xvfb is not installed (scripts/system-deps.sh installs it)")
    proc, name = start_xvfb(1280, 720)
    yield name
    proc.terminate()
    proc.wait(5)


@pytest.fixture
def watcher(xvfb):
    w = Watcher(xvfb)
    yield w
    w.close()
