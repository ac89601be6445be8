"""GNOME input against a real headless mutter: MutterInput's keys, text, clicks, pointer and
wheel reach a native Wayland client (a fullscreen foot whose shell writes what the terminal
receives to a file). tests/support/gnome.py starts the desktop."""

from __future__ import annotations

import time

import pytest

from media.mutter.remotedesktop import MutterInput, MutterInputUnavailable
from tests.support.gnome import missing_tools, running_gnome

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

VK_H, VK_I, VK_SHIFT, VK_RETURN = 0x48, 0x49, 0x10, 0x0D


@pytest.fixture
def gnome():
    missing = missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    with running_gnome("1280x720") as desk:
        yield desk


def terminal_to_file(desk, path, script: str) -> None:
    """A fullscreen foot running `script` (sh), which writes what it reads to `path`; wait
    until the shell is reading (it touches `path` first) and foot has mapped its window.
    Headless mutter has no keyboard or pointer of its own: the session's virtual ones are the
    seat's only devices, so a first key or click lost while they appear would show here."""
    ready = path.with_suffix(".ready")
    desk.foot("3366cc", ["sh", "-c", f": > {ready}; {script}"])
    wait_for(lambda: ready.exists(), "foot's shell to start")
    time.sleep(0.5)  # the window maps and takes keyboard focus a moment after the shell runs


def mouse_report_script(out) -> str:
    """Turn on foot's mouse reporting (mode 1000) and copy 4 reports (24 bytes) to `out`."""
    return f"printf '\\033[?1000h'; stty raw -echo; dd bs=1 count=24 of={out} 2>/dev/null"


def wait_for(ok, what: str, timeout: float = 10.0):
    deadline = time.monotonic() + timeout
    while not (got := ok()):
        assert time.monotonic() < deadline, f"no {what} in {timeout:g} s"
        time.sleep(0.05)
    return got


def read_when(path, n: int = 1) -> bytes:
    return wait_for(lambda: path.exists() and len(path.read_bytes()) >= n and path.read_bytes(),
                    f"{n} bytes in {path.name}")  # fmt: skip


def test_keys_and_text_reach_a_wayland_client(gnome):
    out = gnome.root / "typed.txt"
    terminal_to_file(gnome, out, f'read line; printf "%s" "$line" > {out}.tmp; mv {out}.tmp {out}')
    with MutterInput("Meta-0", bus_address=gnome.bus_address) as inp:
        assert (inp.width, inp.height) == (1280, 720)
        assert inp.key(VK_SHIFT, True) and inp.key(VK_H, True) and inp.key(VK_H, False)
        assert inp.key(VK_SHIFT, False)
        assert inp.key(VK_I, True) and inp.key(VK_I, False)
        assert inp.type_text(" World!") == 7  # keysyms: Shift comes from mutter's keymap
        assert inp.key(VK_RETURN, True) and inp.key(VK_RETURN, False)
        assert read_when(out).decode() == "Hi World!"


def test_a_click_lands_where_the_pointer_was_moved(gnome):
    """foot reports a press as ESC [ M b x y (X10 mouse mode 1000): button 0 (left) at the
    1-based cell (x, y), each + 32. The default font's cell size is read from the report of
    a second click one cell away, so the test does not depend on the font."""
    out = gnome.root / "mouse.bin"
    terminal_to_file(gnome, out, mouse_report_script(out))
    with MutterInput("Meta-0", bus_address=gnome.bus_address) as inp:
        # The client's picture is 640x360: (320, 180) is the centre of the 1280x720 monitor.
        assert inp.move_absolute(320, 180, 640, 360)
        assert inp.pointer() == (640, 360)
        assert inp.button(1, True) and inp.button(1, False)
        assert inp.move_absolute(0, 0, 640, 360)
        assert inp.move_relative(5, 5)
        assert inp.button(3, True) and inp.button(3, False)
        data = read_when(out, 24)
    # Mode 1000 reports a press (button 0 left, 2 right) and a release (3) at the cell.
    centre, corner = data[:6], data[12:18]
    assert data[6:10] == b"\x1b[M\x23" and data[18:] == b"\x1b[M\x23\x21\x21", data
    assert centre[:4] == b"\x1b[M\x20", centre  # left button
    assert corner == b"\x1b[M\x22\x21\x21", corner  # right button at cell 1,1 (after 5,5 px)
    col, row = centre[4] - 32, centre[5] - 32
    # The centre cell: the monitor's middle falls in column col, row row of a grid whose cells
    # are at most 40 px: within one cell of 640/cw and 360/ch for some plausible cell size.
    assert any(abs(col - (640 // cw + 1)) <= 1 for cw in range(5, 40)) and col > 5, col
    assert any(abs(row - (360 // ch + 1)) <= 1 for ch in range(8, 60)) and row > 3, row


def test_the_wheel_reaches_the_client(gnome):
    """foot reports wheel up/down as buttons 64/65 in mouse mode 1000."""
    out = gnome.root / "wheel.bin"
    terminal_to_file(gnome, out, mouse_report_script(out))
    with MutterInput("Meta-0", bus_address=gnome.bus_address) as inp:
        assert inp.move_absolute(100, 100, 1280, 720)
        assert inp.scroll(120)  # one notch up
        assert inp.scroll(-120)  # one notch down
        data = read_when(out, 24)
    reports = [data[i : i + 6] for i in range(0, 24, 6)]
    assert all(r[:3] == b"\x1b[M" for r in reports), data
    buttons = [r[3] - 32 for r in reports]  # foot reports a notch as one or more lines
    assert buttons[0] == 64 and 65 in buttons, buttons  # up first, then down
    assert set(buttons[: buttons.index(65)]) == {64}, buttons


def test_release_all_and_close_let_go_and_end_the_session(gnome):
    inp = MutterInput("Meta-0", bus_address=gnome.bus_address)
    assert inp.key(VK_SHIFT, True) and inp.button(1, True)
    assert inp.release_all() == 2
    assert inp.ended() is None
    inp.close()
    inp.close()
    assert inp.ended() == "closed"


def test_errors_name_the_cause(gnome, tmp_path):
    with pytest.raises(MutterInputUnavailable, match="no active monitor 'DP-9'.*Meta-0"):
        MutterInput("DP-9", bus_address=gnome.bus_address)
    with pytest.raises(MutterInputUnavailable, match="cannot connect"):
        MutterInput("Meta-0", bus_address=f"unix:path={tmp_path}/nobody")


def test_mutter_ending_is_reported(gnome):
    inp = MutterInput("Meta-0", bus_address=gnome.bus_address)
    try:
        gnome.procs["mutter"].kill()
        gnome.procs["mutter"].wait(10)
        with pytest.raises(MutterInputUnavailable):
            inp.key(VK_H, True)
        assert inp.ended()
    finally:
        inp.close()
