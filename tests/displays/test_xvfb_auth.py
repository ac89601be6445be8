"""The X servers the host starts admit the host's uid and holders of its cookie alone: another
local user (`nobody`, uid 12345) is refused at the X handshake, while the host's own capture,
its python-xlib connections (input, clipboard) and the apps it launches get in (real Xvfb, real
second uids); the headless compositor's Xwayland admits its own user alone."""

from __future__ import annotations

import os
import shutil
import socket
import stat
import struct
import subprocess
import sys

import pytest

from displays import capture, sway, xauth, xvfb
from games.apprun import session_env

pytestmark = [
    pytest.mark.skipif(shutil.which("Xvfb") is None, reason="needs Xvfb (scripts/system-deps.sh)"),
]

NOBODY = 65534
# The 12-byte X connection setup with no authorization; the reply's first byte is the status:
# 0 Failed, 1 Success, 2 Authenticate. Run as another uid, over the display's socket file and
# its abstract twin (a socket file's mode does not guard the abstract one).
HANDSHAKE = r"""
import socket, struct, sys
n, where = sys.argv[1], sys.argv[2]
s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
s.settimeout(5)
s.connect(("\0" if where == "abstract" else "") + "/tmp/.X11-unix/X" + n)
s.sendall(struct.pack("<BxHHHHxx", ord("l"), 11, 0, 0, 0))
print(s.recv(1)[0])
"""


def handshake_as(uid: int | None, display: str, where: str) -> int:
    """The status byte an unauthenticated client of `uid` (None: this process's) gets."""
    argv = [sys.executable, "-c", HANDSHAKE, display.lstrip(":"), where]
    if uid is not None:
        python = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else sys.executable
        argv = ["setpriv", f"--reuid={uid}", f"--regid={uid}", "--clear-groups", "--",
                python, "-c", HANDSHAKE, display.lstrip(":"), where]  # fmt: skip
    out = subprocess.run(
        argv, capture_output=True, text=True, timeout=20, env={"PATH": "/usr/bin:/bin"}
    )
    assert out.returncode == 0, out.stderr
    return int(out.stdout.strip())


@pytest.fixture
def server(state):
    pid, display = xvfb.start(640, 480)
    try:
        yield pid, display
    finally:
        xvfb.stop(pid)


@pytest.mark.skipif(os.geteuid() != 0, reason="needs root to run a client as another uid")
def test_another_local_user_is_refused_by_the_hosts_xvfb(server):
    _, display = server
    for where in ("file", "abstract"):
        assert handshake_as(NOBODY, display, where) == 0, f"nobody got in over the {where} socket"
        assert handshake_as(12345, display, where) == 0, f"uid 12345 got in over {where}"
        # the host's own uid is admitted without the cookie (localuser), as Xwayland does
        assert handshake_as(None, display, where) == 1


def test_the_hosts_capture_input_and_apps_still_reach_the_display(server, state):
    """Capture (mss), XTEST input and clipboard (python-xlib) and launched apps connect as the
    host's uid with no XAUTHORITY of ours: the server admits that uid (localuser)."""
    pid, display = server
    assert xvfb.alive(pid)
    assert "XAUTHORITY" not in os.environ or os.environ["XAUTHORITY"] != str(xauth.path())
    assert capture.grab(display).size == (640, 480)
    assert capture.probe_x(display).ok

    class App:
        id, name, env = 1, "x", {}

    env = session_env({"PATH": os.environ["PATH"]}, x_display=display, app=App(), client={},
                      mode=(640, 480, 60))  # fmt: skip
    assert "XAUTHORITY" not in env
    code = (
        "import mss; from Xlib import display; "
        "print(display.Display().screen().width_in_pixels, "
        "mss.MSS().grab({'left': 0, 'top': 0, 'width': 8, 'height': 8}).size)"
    )
    app = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=20)  # fmt: skip
    assert app.returncode == 0 and app.stdout.split()[0] == "640", app.stderr


def test_the_cookie_file_is_private_and_readable_by_libxau_and_python_xlib(state):
    p = xauth.ensure()
    st = p.lstat()
    assert stat.S_ISREG(st.st_mode) and stat.S_IMODE(st.st_mode) == 0o600
    assert st.st_uid == os.geteuid()
    entries = xauth.parse(p.read_bytes())
    cookies = {e[4] for e in entries}
    assert len(cookies) == 1 and len(next(iter(cookies))) == 16
    assert {e[0] for e in entries} == {xauth.FAMILY_WILD, xauth.FAMILY_LOCAL}
    from Xlib import xauth as pyxauth

    name, data = pyxauth.Xauthority(str(p)).get_best_auth(
        pyxauth.FamilyLocal, socket.gethostname().encode(), 7
    )
    assert (name, data) == (b"MIT-MAGIC-COOKIE-1", next(iter(cookies)))
    assert xauth.ensure() == p and xauth.parse(p.read_bytes()) == entries  # kept as it is
    # A file another mode left readable is replaced with a fresh cookie.
    os.chmod(p, 0o644)
    xauth.ensure()
    assert stat.S_IMODE(p.stat().st_mode) == 0o600
    assert {e[4] for e in xauth.parse(p.read_bytes())} != cookies
    with pytest.raises(xauth.XauthError):
        xauth.parse(struct.pack(">H", 0) + b"\x00")


@pytest.mark.slow
@pytest.mark.skipif(not sway.available(), reason="sway is not installed")
@pytest.mark.skipif(os.geteuid() != 0, reason="runs sway as another user: needs root")
def test_the_headless_compositors_xwayland_admits_its_own_user_alone():
    """sway's Xwayland has no cookie: Xwayland itself admits only the uid it runs as (its
    default access control), which is the compositor's user, the user of every app on it."""
    comp = sway.SwayCompositor(run_as=(NOBODY, NOBODY))
    comp.start()
    try:
        comp.create_output(640, 480, 60)
        x = comp.xwayland_display(timeout=10)
        assert x, "sway has no Xwayland socket"
        # the compositor's user gets in (and its first connection starts Xwayland) ...
        assert handshake_as(NOBODY, x, "abstract") == 1
        # ... no other uid does, root included, over either socket
        assert handshake_as(12345, x, "abstract") == 0
        assert handshake_as(None, x, "abstract") == 0
        assert handshake_as(None, x, "file") == 0
    finally:
        comp.stop()
