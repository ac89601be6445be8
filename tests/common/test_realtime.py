"""Realtime scheduling for a stream's pacing threads (common/realtime.py), with the real kernel:
each case runs in a child process so the policies and limits it sets die with it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PRELUDE = """
import logging, os, sys, threading, time
logging.basicConfig(level=logging.INFO, stream=sys.stdout, format="%(levelname)s %(message)s")
from common import realtime
def policy(tid=None):
    tid = tid or threading.get_native_id()
    return os.sched_getscheduler(tid) & ~os.SCHED_RESET_ON_FORK
START = policy()  # what this process was given (SCHED_OTHER on a desktop; a CI may differ)
# What a demoted thread goes back to: the start's policy unless that was a realtime one.
NORMAL = os.SCHED_OTHER if START in (os.SCHED_RR, os.SCHED_FIFO) else START
print("start policy", START)
"""

needs_root = pytest.mark.skipif(os.geteuid() != 0, reason="SCHED_RR needs CAP_SYS_NICE here")


def run(code: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", PRELUDE + code],
        cwd=ROOT, capture_output=True, text=True, timeout=60,
    )  # fmt: skip


@needs_root
def test_a_promoted_thread_runs_round_robin_and_nothing_it_starts_inherits_it():
    out = run("""
realtime.prepare()
assert realtime.promote("test loop") is None
print("main", policy() == os.SCHED_RR, os.sched_getparam(0).sched_priority)
seen = {}
t = threading.Thread(target=lambda: seen.update(child=policy()))
t.start(); t.join()
print("thread", seen["child"] == os.SCHED_OTHER)  # SCHED_RESET_ON_FORK: never inherited
import subprocess
print("process", subprocess.run([sys.executable, "-c",
      "import os; print(os.sched_getscheduler(0))"], capture_output=True, text=True).stdout.strip()
      == str(os.SCHED_OTHER))
import resource
print("rttime", resource.getrlimit(resource.RLIMIT_RTTIME))
""")
    assert out.returncode == 0, out.stderr
    assert "main True 10" in out.stdout
    assert "thread True" in out.stdout and "process True" in out.stdout
    assert "rttime (100000, 200000)" in out.stdout
    assert "test loop runs at realtime priority 10" in out.stdout


@needs_root
def test_a_thread_that_never_blocks_is_put_back_to_normal_priority_not_killed():
    out = run("""
realtime.prepare()
assert realtime.promote("spinner") is None
end = time.monotonic() + 0.6
while time.monotonic() < end and realtime.promoted():
    pass
print("after", policy() == NORMAL, realtime.promoted())
""")
    assert out.returncode == 0, out.stderr  # SIGKILL at the hard limit would be -9
    assert "after True set()" in out.stdout
    assert "back at normal priority" in out.stdout and "SIGXCPU" in out.stdout


def test_promotion_without_the_guard_is_refused_with_a_reason():
    out = run("""
print("reason:", realtime.promote("early"))
print("policy", policy() == START)
""")
    assert out.returncode == 0, out.stderr
    assert "reason: the process did not cap RLIMIT_RTTIME" in out.stdout
    assert "policy True" in out.stdout, out.stdout


def test_without_permission_or_realtimekit_it_stays_normal_and_says_why_once(tmp_path):
    """An unprivileged user (RLIMIT_RTPRIO 0) on a machine whose system bus is not there."""
    bus = f"unix:path={tmp_path / 'no-bus'}"
    out = run(f"""
import resource
resource.setrlimit(resource.RLIMIT_RTPRIO, (0, 0))
if os.geteuid() == 0:
    os.setgid(65534); os.setuid(65534)
realtime.prepare()
print("first:", realtime.promote("loop", bus_address={bus!r}))
print("second:", realtime.promote("pipe", bus_address={bus!r}))
print("policy", policy() == START)
""")
    assert out.returncode == 0, out.stderr
    assert "first: RLIMIT_RTPRIO is 0 and RealtimeKit cannot be reached" in out.stdout
    assert "second: RLIMIT_RTPRIO is 0" in out.stdout and "policy True" in out.stdout, out.stdout
    assert out.stdout.count("runs at normal priority") == 1, out.stdout
