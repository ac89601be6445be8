"""A root host runs its headless sway as another user (HOST_COMPOSITOR_USER), and every app
launched into a stream runs as that user: what that user can write must not steer root.

Real sway as `nobody`, a real attacker process of `nobody`, real root-owned victims: a
symlink planted where launch scripts were written, and forged pid files naming a root
process, change no root file and signal no root process."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time

import pytest

from displays import sway
from games.apprun import CompositorApp

pytestmark = [
    pytest.mark.slow,
    pytest.mark.skipif(not sway.available(), reason="sway is not installed"),
    pytest.mark.skipif(os.geteuid() != 0, reason="runs sway as another user: needs root"),
]

NOBODY = (65534, 65534)
PYTHON = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
# As the compositor's user: plant symlinks to the victim file and pid files naming the victim
# process under every name a launch used or might use, and keep forging the pid file of each
# launch script that shows up, every millisecond, for `secs` seconds.
ATTACKER = textwrap.dedent(
    r"""
    import glob, os, sys, time
    run, base, victim_file, victim_pid, secs = sys.argv[1:6]
    def forge(path):
        tmp = path + ".forged"
        try:
            with open(tmp, "w") as f:
                f.write(victim_pid + "\n")
            os.replace(tmp, path)
        except OSError:
            pass
    for d in {run, base}:
        for n in range(1, 11):
            try:
                os.symlink(victim_file, f"{d}/launch-{n}.sh")
            except OSError:
                pass
            forge(f"{d}/launch-{n}.pid")
    print("planted", flush=True)
    end = time.time() + float(secs)
    while time.time() < end:
        for d in {run, base}:
            for script in glob.glob(f"{d}/launch-*.sh"):
                if not os.path.islink(script):
                    forge(f"{run}/{os.path.basename(script)[:-3]}.pid")
        time.sleep(0.001)
    """
)


@pytest.fixture
def comp():
    c = sway.SwayCompositor(run_as=NOBODY, xwayland=False)
    c.start()
    try:
        yield c
    finally:
        c.stop()


@pytest.fixture
def root_sleep():
    """A root process in a process group of its own: what a forged pid file names."""
    proc = subprocess.Popen(["sleep", "600"], start_new_session=True)
    try:
        yield proc
    finally:
        proc.kill()
        proc.wait()


def attack(comp, victim_file, victim_pid: int, secs: float) -> subprocess.Popen:
    base = getattr(comp, "base_dir", None) or comp.runtime_dir
    argv = ["setpriv", f"--reuid={NOBODY[0]}", f"--regid={NOBODY[1]}", "--clear-groups", "--",
            PYTHON, "-c", ATTACKER, comp.runtime_dir, base, str(victim_file), str(victim_pid),
            str(secs)]  # fmt: skip
    proc = subprocess.Popen(argv, stdout=subprocess.PIPE, text=True)
    assert proc.stdout.readline().strip() == "planted"
    return proc


def test_the_compositor_user_cannot_steer_root_writes_or_signals(comp, root_sleep, tmp_path):
    victim = tmp_path / "victim"
    victim.write_text("precious\n")
    os.chmod(victim, 0o644)
    out = comp.create_output(640, 480, 60)
    attacker = attack(comp, victim, root_sleep.pid, secs=6)
    apps, refused = [], []
    try:
        for _ in range(3):
            try:
                apps.append(CompositorApp(comp, out, "sleep 300", {}, exit_timeout=1))
            except sway.CompositorError as exc:
                refused.append(str(exc))
        # Whatever the race gave: the root file is untouched ...
        st = victim.lstat()
        assert victim.read_text() == "precious\n", "a launch wrote through the planted symlink"
        assert (st.st_uid, st.st_gid) == (0, 0), "a launch handed the victim to the user"
        # ... every pid a launch accepted is the user's own app, in a group of the user's ...
        for app in apps:
            assert app.pid != root_sleep.pid
            assert set(sway._uids(app.pid)) == {NOBODY[0]}
            assert app.pgid not in (root_sleep.pid, os.getpgrp(), 0, 1)
        for app in apps:
            app.terminate()
        # ... and the root process the forged pid files named is alive.
        time.sleep(0.2)
        assert root_sleep.poll() is None, "the host signalled a root process group"
        assert all("started before this launch" in r or "compositor's user" in r
                   for r in refused), refused  # fmt: skip
    finally:
        attacker.kill()
        attacker.wait()
    # The host's own files are out of the user's reach: nothing planted in its directory.
    assert not any(name.startswith("launch-") for name in os.listdir(comp.base_dir))
    assert os.stat(comp.base_dir).st_uid == 0 and os.stat(comp.runtime_dir).st_uid == NOBODY[0]


def test_a_pid_that_is_not_this_launchs_app_is_refused(comp, root_sleep):
    uid, since = NOBODY[0], sway._boot_ticks()
    # root's process, started before the launch
    assert "compositor's user" in comp._not_launched(root_sleep.pid, uid, since)
    assert "not running" in comp._not_launched(2**22, uid, since)
    # sway itself: the user's, carrying the token, but older than the launch and not in a
    # group of its own
    assert comp._not_launched(comp.pid, uid, since)
    # A process of the user that does not carry this compositor's token.
    stranger = subprocess.Popen(["setpriv", f"--reuid={uid}", f"--regid={uid}",
                                 "--clear-groups", "--", "sleep", "60"],
                                start_new_session=True)  # fmt: skip
    try:
        deadline = time.monotonic() + 5
        while sway._uids(stranger.pid)[0] != uid and time.monotonic() < deadline:
            time.sleep(0.01)
        assert "not a process of this compositor" in comp._not_launched(stranger.pid, uid, since)
    finally:
        stranger.kill()
        stranger.wait()
    # The real thing passes.
    out = comp.create_output(640, 480, 60)
    pid = comp.launch("sleep 60", out)
    assert comp._not_launched(pid, uid, since) == ""
    os.killpg(os.getpgid(pid), signal.SIGKILL)


def test_pid_files_are_read_without_following_links_or_blocking(tmp_path):
    uid = os.geteuid()
    (tmp_path / "ok").write_text("4242\n")
    assert sway._read_pid(str(tmp_path / "ok"), uid) == 4242
    assert sway._read_pid(str(tmp_path / "ok"), uid + 1) is None  # another owner's file
    os.symlink(tmp_path / "ok", tmp_path / "link")
    assert sway._read_pid(str(tmp_path / "link"), uid) is None
    os.mkfifo(tmp_path / "fifo")
    assert sway._read_pid(str(tmp_path / "fifo"), uid) is None  # returns at once
    for text in ("1", "0", "-5", "x", "99999999999"):
        (tmp_path / "bad").write_text(text)
        assert sway._read_pid(str(tmp_path / "bad"), uid) is None, text


def test_as_root_only_the_users_processes_carrying_the_token_are_swept(root_sleep):
    token = "hardening-test:" + os.urandom(4).hex()
    env = {"PATH": "/usr/bin:/bin", sway.OWNER_ENV: token}
    mine = subprocess.Popen(["sleep", "60"], env=env, start_new_session=True)  # root's
    users = subprocess.Popen(["setpriv", "--reuid=65534", "--regid=65534", "--clear-groups",
                              "--", "sleep", "60"], env=env, start_new_session=True)  # fmt: skip
    try:
        time.sleep(0.2)
        assert sway.owned_pids(token) == [users.pid]
        sway.kill_owned(token, grace=2)
        assert users.wait(5) is not None and mine.poll() is None
    finally:
        for p in (mine, users):
            p.kill()
            p.wait()
