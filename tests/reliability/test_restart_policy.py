"""The supervisor's restart policy (`supervisor.children.Child.check`) with real
processes: a child killed by SIGKILL is started again after its backoff, and what it had
started in its own process group does not outlive it."""

from __future__ import annotations

import os
import signal
import time

from common import procs
from supervisor.children import Child


def test_a_killed_child_restarts_after_its_backoff_and_its_group_goes_first(tmp_path):
    marker = tmp_path / "grandchild.pid"
    # The child starts a grandchild in its own group (as a pool worker would), then waits.
    child = Child("probe", ["sh", "-c", f"sleep 300 & echo $! > {marker}; wait"], dict(os.environ))
    child.start()
    try:
        deadline = time.monotonic() + 10
        while not (marker.exists() and marker.read_text().strip()):
            assert time.monotonic() < deadline, "the probe never started its grandchild"
            time.sleep(0.02)
        grandchild = int(marker.read_text())
        first = child.pid
        os.kill(first, signal.SIGKILL)
        child.proc.wait()
        t0 = time.monotonic()
        child.check()  # notices the death: schedules the restart, ends the group
        deadline = time.monotonic() + 5
        while procs.alive(grandchild) and time.monotonic() < deadline:
            time.sleep(0.02)
        assert not procs.alive(grandchild), "the dead child's grandchild outlived it"
        while child.pid == first:
            assert time.monotonic() - t0 < 2, "not restarted within its 0.5 s backoff"
            child.check()
            time.sleep(0.02)
        assert child.alive() and child.restarts == 1
        assert time.monotonic() - t0 >= 0.45  # the backoff is honoured
    finally:
        child.terminate()
        child.wait(time.monotonic() + 5)
