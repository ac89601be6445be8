"""The supervisor's process hygiene with real processes: the sentinel kills what a `kill -9`ed
supervisor leaves (grandchildren in their own sessions, display servers), the next start sweeps
an earlier run's strays and nothing else, and a child's stop takes its whole process group."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import psutil

from common import procs
from supervisor import sentinel
from supervisor.children import Child, finish_groups

FAKE_SUPERVISOR = textwrap.dedent(
    """
    import os, subprocess, sys, time
    from supervisor.sentinel import Sentinel
    sd, inst = sys.argv[1], sys.argv[2]
    env = {**os.environ, "HOST_INSTANCE": inst, "HOST_STATE_DIR": sd}
    Sentinel(sd, inst).start(env)
    deep = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)
    display = subprocess.Popen(
        ["sleep", "61"], env={"PATH": os.environ["PATH"], "HOST_DISPLAY_OWNER": sd},
        start_new_session=True,
    )
    other = subprocess.Popen(
        ["sleep", "62"], env={**env, "HOST_INSTANCE": "another-run"}, start_new_session=True
    )
    print(deep.pid, display.pid, other.pid, flush=True)
    time.sleep(60)
    """
)


def _gone_within(pids, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while any(procs.alive(p) for p in pids) and time.monotonic() < deadline:
        time.sleep(0.05)
    return not any(procs.alive(p) for p in pids)


def _kill(pids) -> None:
    for pid in pids:
        try:
            os.kill(pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_a_kill_9_of_the_supervisor_leaves_nothing_of_its_run(tmp_path):
    sup = subprocess.Popen(
        [sys.executable, "-c", FAKE_SUPERVISOR, str(tmp_path), "run-1"],
        stdout=subprocess.PIPE,
        text=True,
    )
    deep, display, other = map(int, sup.stdout.readline().split())
    sentinel_pids = [
        c.pid for c in psutil.Process(sup.pid).children() if "sentinel" in " ".join(c.cmdline())
    ]
    try:
        assert sentinel_pids and all(procs.alive(p) for p in (deep, display, other))
        os.kill(sup.pid, signal.SIGKILL)
        sup.wait()
        assert _gone_within([deep, display], 5.0), "grandchildren outlived a kill -9"
        assert _gone_within(sentinel_pids, 2.0), "the sentinel stayed after its sweep"
        assert procs.alive(other), "a process of another run was killed"
    finally:
        _kill([deep, display, other, *sentinel_pids])


def test_the_next_start_sweeps_an_earlier_run_and_nothing_else(tmp_path, monkeypatch):
    sd = str(tmp_path)
    monkeypatch.setenv(sentinel.INSTANCE_ENV, "this-run")
    base = {"PATH": os.environ["PATH"]}

    def spawn(**env):
        return subprocess.Popen(["sleep", "60"], env={**base, **env}, start_new_session=True).pid

    stale = spawn(HOST_INSTANCE="old-run", HOST_STATE_DIR=sd)
    stale_display = spawn(HOST_DISPLAY_OWNER=sd)
    mine = spawn(HOST_INSTANCE="this-run", HOST_STATE_DIR=sd)
    elsewhere = spawn(HOST_INSTANCE="old-run", HOST_STATE_DIR=sd + "-other")
    shell = spawn(HOST_STATE_DIR=sd)  # an operator's `manage.py` shell: no run mark
    try:
        assert sentinel.sweep_stale(sd) == 2
        assert _gone_within([stale, stale_display], 2.0)
        assert all(procs.alive(p) for p in (mine, elsewhere, shell))
    finally:
        _kill([stale, stale_display, mine, elsewhere, shell])


def test_a_child_stop_takes_its_whole_group_even_after_the_leader_exits():
    # The leader exits on SIGTERM at once; a worker of its group ignores SIGTERM.
    script = "trap '' TERM; exec sleep 60"
    leader = (
        "import subprocess, sys, time\n"
        f"subprocess.Popen(['sh', '-c', {script!r}])\n"
        "print('ready', flush=True)\n"
        "time.sleep(60)\n"
    )
    child = Child("worker-kind", [sys.executable, "-c", leader], dict(os.environ))
    child.start()
    try:
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            kids = psutil.Process(child.pid).children()
            if kids and "sleep" in " ".join(kids[0].cmdline()):
                break
            time.sleep(0.05)
        worker = kids[0].pid
        assert os.getpgid(worker) == child.pid  # its own group, led by the child
        child.terminate()
        child.wait(time.monotonic() + 1.0)
        assert not child.alive()
        finish_groups([child], grace_s=0.5)
        assert _gone_within([worker], 1.0), "a worker of the child's group outlived the stop"
    finally:
        try:
            os.killpg(child.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass


def test_the_display_marks_are_the_ones_the_display_backends_set():
    from common.statedir import state_dir
    from displays import headless, sway, xvfb

    assert sentinel.DISPLAY_OWNER_ENV == xvfb.OWNER_ENV
    assert sentinel.COMPOSITOR_OWNER_ENV == sway.OWNER_ENV
    assert xvfb._owner() == str(state_dir())
    assert sentinel.compositor_owner(str(state_dir())) == headless.owner() + ":"


def test_a_sentinel_that_does_not_finish_its_sweep_in_time_has_it_finished_by_release(tmp_path):
    """A restart (and an update's backup after it) must come after the last process of the
    run: release() finishes the sweep itself when the sentinel does not."""
    instance = "stuck-sweep"
    stuck = sentinel.Sentinel(str(tmp_path), instance)
    stuck.proc = subprocess.Popen(  # a sentinel that never ends its sweep
        [sys.executable, "-c", "import time; time.sleep(60)"], stdin=subprocess.PIPE
    )
    left = subprocess.Popen(
        [sys.executable, "-c", "import time; time.sleep(60)"],
        env={**os.environ, sentinel.INSTANCE_ENV: instance},
    )
    try:
        started = time.monotonic()
        stuck.release(timeout_s=0.5)
        assert time.monotonic() - started < 5
        assert left.wait(timeout=5) == -signal.SIGKILL
        assert stuck.proc.poll() is not None
    finally:
        for proc in (left, stuck.proc):
            if proc.poll() is None:
                proc.kill()
                proc.wait()
