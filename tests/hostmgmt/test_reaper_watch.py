"""The CI guard against the Chromium reaping livelock (tests/support/reaper_watch.py): it finds
Chromium renderers by their command line, and a quiet machine has no process stuck in the loop."""

from __future__ import annotations

import os
import signal
import subprocess
import time

from tests.support import reaper_watch


def test_it_finds_a_chromium_renderer_and_nothing_else(tmp_path):
    shell = tmp_path / "chromium"  # a shell under Chromium's name, with a renderer's flag
    shell.symlink_to("/bin/sh")
    fake = subprocess.Popen(
        [str(shell), "-c", "sleep 30; true", "--type=renderer"], start_new_session=True
    )
    other = subprocess.Popen(["sleep", "30"])
    try:
        deadline = time.monotonic() + 5
        while fake.pid not in reaper_watch._chromium_renderers() and time.monotonic() < deadline:
            time.sleep(0.05)
        found = reaper_watch._chromium_renderers()
        assert fake.pid in found and other.pid not in found
    finally:
        os.killpg(fake.pid, signal.SIGKILL)  # the shell and its sleep
        other.kill()
        fake.wait()
        other.wait()


def test_a_quiet_machine_has_no_process_stuck_reaping():
    assert reaper_watch._stuck_pids() == set()
