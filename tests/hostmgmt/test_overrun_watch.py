"""The CI guard against a test that outlives pytest-timeout (tests/support/overrun_watch.py):
past the limit it kills the browsers under its root, one grace later everything under it, and
nothing while the test is within its time or after it ended."""

from __future__ import annotations

import subprocess
import time

from common import procs
from tests.support.overrun_watch import Watch, descendants, is_browser


def test_an_overrun_kills_browsers_first_then_everything_under_the_root():
    # A stand-in for the run: a shell whose children are a "chromium" and a plain sleep.
    root = subprocess.Popen(
        ["bash", "-c", "(exec -a chromium sleep 60) & sleep 60 & wait"],
    )
    try:

        def started() -> bool:  # both children, the subshell past its exec as "chromium"
            kids = descendants(root.pid)
            return len(kids) == 2 and any(is_browser(p) for p in kids)

        deadline = time.monotonic() + 5
        while not started() and time.monotonic() < deadline:
            time.sleep(0.05)
        kids = descendants(root.pid)
        [browser] = [p for p in kids if is_browser(p)]
        [plain] = [p for p in kids if p != browser]
        now = [0.0]
        watch = Watch(root.pid, grace_s=90, clock=lambda: now[0])

        watch.begin("a::test", timeout_s=300)
        now[0] = 389
        assert watch.check() == []  # within its time and the grace
        now[0] = 391
        assert watch.check() == [browser]
        deadline = time.monotonic() + 5  # the real clock: a loaded machine takes a moment
        while procs.alive(browser) and time.monotonic() < deadline:
            time.sleep(0.02)
        now[0] = 470
        assert watch.check() == []  # the second stage waits one more grace
        assert procs.alive(plain)
        now[0] = 481
        assert watch.check() == [plain]
        assert watch.check() == []  # and acts once
        deadline = time.monotonic() + 5
        while (procs.alive(browser) or procs.alive(plain)) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not procs.alive(browser) and not procs.alive(plain)
    finally:
        root.kill()
        root.wait()


def test_a_test_that_ended_or_has_no_timeout_is_left_alone():
    root = subprocess.Popen(["bash", "-c", "(exec -a chromium sleep 60) & wait"])
    try:
        deadline = time.monotonic() + 5
        while not descendants(root.pid) and time.monotonic() < deadline:
            time.sleep(0.05)
        now = [0.0]
        watch = Watch(root.pid, grace_s=90, clock=lambda: now[0])
        watch.begin("a::test", timeout_s=300)
        watch.end()
        now[0] = 1000
        assert watch.check() == []
        watch.begin("b::test", timeout_s=0)  # pytest-timeout off for this test
        now[0] = 2000
        assert watch.check() == []
        assert all(procs.alive(pid) for pid in descendants(root.pid))
    finally:
        subprocess.run(["pkill", "-KILL", "-P", str(root.pid)], check=False)
        root.kill()
        root.wait()
