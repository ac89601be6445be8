"""Stop the real host (`manage.py runhost`) at moments all through its start, by SIGTERM, SIGINT
and SIGKILL of the supervisor: 5 s after the supervisor is gone, no process of that host is left.

A process "of that host" is any descendant seen while it started (its ppid chain, snapshotted
every few tens of ms, since a killed parent breaks the chain), or any process whose environment
or command line names the host's state directory (HOST_STATE_DIR, the display owner marks, the
Redis socket path). One state directory serves every case, checked for leftovers before the
next start (so the next start's own sweep cannot hide a leftover).
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import psutil
import pytest

from supervisor.sentinel import compositor_owner
from tests.support.livehost import ROOT, start_host

pytestmark = pytest.mark.e2e

SEED = int(os.environ.get("STOP_TEST_SEED", "2126"))
LEFT_WAIT_S = 5.0
PHASE_WAIT_S = 90.0  # a phase not reached by then (a very loaded box): stop anyway


def _rng_points() -> list[float]:
    rng = random.Random(SEED)
    return [round(rng.uniform(0.2, 8.0), 2) for _ in range(2)]


R1, R2 = _rng_points()

# (signal, when): a delay in seconds, or the first descendant whose command line has the text.
CASES = [
    (signal.SIGTERM, 0.2),  # Django still loading
    (signal.SIGKILL, "redis-server"),  # the sentinel is up, Redis starting
    (signal.SIGTERM, "streaming.sessions.manager"),  # every child just spawned
    (signal.SIGINT, R1),  # seeded: mostly while preparing (migrate check, identity, TLS)
    (signal.SIGKILL, R2),
]


@pytest.fixture(scope="module")
def state_dir(tmp_path_factory) -> Path:
    """Migrated once, so the cases spend their time in the start itself."""
    path = tmp_path_factory.mktemp("stopstart")
    env = {k: v for k, v in os.environ.items() if not k.startswith("HOST_")}
    env.update(HOST_STATE_DIR=str(path), DJANGO_SETTINGS_MODULE="hostmgmt.settings")
    subprocess.run(
        [sys.executable, str(ROOT / "manage.py"), "migrate", "-v", "0"],
        env=env,
        cwd=ROOT,
        check=True,
        timeout=180,
    )
    return path


def _descendants(pid: int, seen: dict) -> list[psutil.Process]:
    try:
        kids = psutil.Process(pid).children(recursive=True)
    except psutil.Error:
        return []
    for kid in kids:
        try:
            seen[(kid.pid, kid.create_time())] = " ".join(kid.cmdline())[:160]
        except psutil.Error:
            pass
    return kids


def _host_processes(state_dir: Path, seen: dict, exclude: int) -> list[str]:
    sd = str(state_dir)
    compositor = compositor_owner(sd)
    left = []
    for proc in psutil.process_iter(["pid", "cmdline", "environ", "status", "create_time"]):
        info = proc.info
        if info["pid"] in (os.getpid(), exclude) or info["status"] == psutil.STATUS_ZOMBIE:
            continue
        env = info["environ"] or {}
        cmd = " ".join(info["cmdline"] or [])
        ours = (
            (info["pid"], info["create_time"]) in seen
            or env.get("HOST_STATE_DIR") == sd
            or env.get("HOST_DISPLAY_OWNER") == sd
            or env.get("HOST_COMPOSITOR_OWNER", "").startswith(compositor)
            or sd in cmd
        )
        if ours:
            left.append(f"{info['pid']} {cmd[:160]}")
    return left


def _stop_at(host, sig: int, when, seen: dict) -> str:
    """Send `sig` to the supervisor at `when`; what the host had reached by then."""
    start = time.monotonic()
    while True:
        kids = _descendants(host.proc.pid, seen)
        elapsed = time.monotonic() - start
        if host.proc.poll() is not None:
            pytest.fail(f"host exited by itself ({host.proc.returncode}):\n{host.log_tail()}")
        if isinstance(when, float):
            if elapsed >= when:
                break
        else:
            cmds = []
            for kid in kids:
                try:
                    cmds.append(" ".join(kid.cmdline()))
                except psutil.Error:
                    pass
            if any(when in c for c in cmds) or elapsed > PHASE_WAIT_S:
                break
        time.sleep(0.03)
    host.proc.send_signal(sig)
    return f"{len(seen)} descendants seen, {elapsed:.2f} s"


@pytest.mark.parametrize(("sig", "when"), CASES, ids=lambda v: str(v))
def test_no_process_outlives_a_host_stopped_while_starting(state_dir, sig, when):
    leftover = _host_processes(state_dir, {}, exclude=0)
    assert not leftover, f"an earlier case left: {leftover}"
    seen: dict = {}
    host = start_host(state_dir=state_dir, wait=False)
    try:
        reached = _stop_at(host, sig, when, seen)
        sent_at = time.monotonic()
        print(f"stopped {sig!r} at {when}: {reached}")
        try:
            # SIGTERM/SIGINT: host.stopping is never announced mid-start; children get 10 s.
            host.proc.wait(timeout=20)
        except subprocess.TimeoutExpired:
            pytest.fail(f"supervisor still running 20 s after {sig!r} ({reached})")
        gone_at = time.monotonic()
        left = _host_processes(state_dir, seen, host.proc.pid)
        while left and time.monotonic() - gone_at < LEFT_WAIT_S:
            time.sleep(0.1)
            left = _host_processes(state_dir, seen, host.proc.pid)
        assert not left, f"left {LEFT_WAIT_S} s after {sig!r} at {when} ({reached}): {left}"
        print(
            f"  supervisor gone {gone_at - sent_at:.2f} s after the signal, the rest "
            f"{time.monotonic() - gone_at:.2f} s later"
        )
        if sig != signal.SIGKILL:
            # Before Django has loaded, Python's default action ends it (nothing runs yet).
            allowed = (0,) if seen else (0, -sig)
            assert host.proc.returncode in allowed, host.log_tail()
    finally:
        if host.proc.poll() is None:
            host.proc.kill()
            host.proc.wait()
        for item in _host_processes(state_dir, seen, host.proc.pid):  # never leak into CI
            try:
                os.kill(int(item.split()[0]), signal.SIGKILL)
            except ProcessLookupError:
                pass
