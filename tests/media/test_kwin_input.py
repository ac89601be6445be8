"""KDE input against a real KWin 5.27 (`kwin_wayland --virtual`): KWinInput's keys, text,
clicks, pointer and wheel reach a native Wayland client (tests/support/wl_app.py, fullscreen,
which records what its wl_keyboard and wl_pointer receive). tests/support/kde.py starts KWin
and lets this interpreter use fake input the way a person lets the host in."""

from __future__ import annotations

import pytest

from media.kwin.input import KWinInput, KWinInputUnavailable
from tests.support.kde import missing_tools, running_kde

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

VK_H, VK_SHIFT = 0x48, 0x10
KEY_H, KEY_LEFTSHIFT, KEY_1 = 35, 42, 2
BTN_LEFT, BTN_RIGHT = 0x110, 0x111


@pytest.fixture
def kde():
    missing = missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    with running_kde() as desk:
        yield desk


@pytest.fixture
def app(kde):
    app = kde.app()
    yield app
    app.close()


def pointer_on(app, inp, x: int, y: int) -> None:
    """Move there until the client reports the pointer: KWin adds the fake pointer to the seat
    when input authenticates, and the client binds it only then, so a move sent at once can
    land before the client listens (seen under load)."""
    for _ in range(20):
        assert inp.move_absolute(x, y, 1280, 720)
        if app.wait(lambda: any(e[0] in ("enter", "motion") for e in app.events), 0.5):
            return
    raise AssertionError(f"the client never saw the pointer: {app.events[-10:]}")


def keys(app) -> list[tuple[int, int]]:
    return [(e[1], e[2]) for e in app.events if e[0] == "key"]


def test_keys_and_text_reach_a_wayland_client(kde, app):
    with KWinInput(kde.socket) as inp:
        assert (inp.width, inp.height, inp.output_name) == (1280, 720, "Virtual-0")
        # the client has the keyboard (bound once the seat has one, then focused)
        assert app.wait(lambda: ("kbd_enter",) in app.events, 10), app.events
        assert inp.key(VK_SHIFT, True) and inp.key(VK_H, True) and inp.key(VK_H, False)
        assert inp.key(VK_SHIFT, False)
        assert app.wait(lambda: len(keys(app)) >= 4, 10), app.events
        assert keys(app)[:4] == [(KEY_LEFTSHIFT, 1), (KEY_H, 1), (KEY_H, 0), (KEY_LEFTSHIFT, 0)]
        del app.events[:]
        assert inp.type_text("!ö") == 1  # '!' is Shift+1; 'ö' is not on the US layout
        assert inp.rejected == 1
        assert app.wait(lambda: len(keys(app)) >= 4, 10), app.events
        assert keys(app) == [(KEY_LEFTSHIFT, 1), (KEY_1, 1), (KEY_1, 0), (KEY_LEFTSHIFT, 0)]


def test_a_click_lands_where_the_pointer_was_moved(kde, app):
    with KWinInput(kde.socket) as inp:
        pointer_on(app, inp, 10, 10)
        # The client's picture is 640x360: (320, 180) is the centre of the 1280x720 output.
        assert inp.move_absolute(320, 180, 640, 360)
        assert inp.pointer() == (640, 360)
        assert inp.button(1, True) and inp.button(1, False)
        assert app.wait(lambda: any(e[0] == "button" for e in app.events), 10), app.events
        at = [e[1:] for e in app.events if e[0] in ("enter", "motion")][-1]
        assert abs(at[0] - 640.5) < 1 and abs(at[1] - 360.5) < 1, at
        assert app.wait(lambda: len([e for e in app.events if e[0] == "button"]) >= 2, 5)
        buttons = [e[1:] for e in app.events if e[0] == "button"]
        assert buttons == [(BTN_LEFT, 1), (BTN_LEFT, 0)]
        assert inp.move_relative(-40, 20) and inp.button(3, True) and inp.button(3, False)
        assert app.wait(lambda: len([e for e in app.events if e[0] == "button"]) >= 4, 5)
        at = [e[1:] for e in app.events if e[0] == "motion"][-1]
        assert abs(at[0] - 600.5) < 1 and abs(at[1] - 380.5) < 1, at
        assert [e[1:] for e in app.events if e[0] == "button"][2:] == [
            (BTN_RIGHT, 1),
            (BTN_RIGHT, 0),
        ]


def test_the_wheel_reaches_the_client(kde, app):
    with KWinInput(kde.socket) as inp:
        pointer_on(app, inp, 100, 100)
        assert inp.scroll(120)  # one notch up: Wayland's vertical axis, negative
        assert inp.scroll(-120)
        assert app.wait(lambda: len([e for e in app.events if e[0] == "axis"]) >= 2, 10)
    axes = [e[1:] for e in app.events if e[0] == "axis"]
    assert axes[0][0] == 0 and axes[0][1] < 0 and axes[-1][1] > 0, axes


def test_release_all_and_close_let_go(kde, app):
    inp = KWinInput(kde.socket)
    assert app.wait(lambda: ("kbd_enter",) in app.events, 10), app.events
    assert inp.key(VK_SHIFT, True) and inp.button(1, True)
    assert inp.release_all() == 2
    assert app.wait(lambda: (KEY_LEFTSHIFT, 0) in keys(app), 10), app.events
    assert inp.ended() is None
    inp.close()
    inp.close()
    assert inp.ended() == "closed"


def test_errors_name_the_cause(kde, tmp_path):
    with pytest.raises(KWinInputUnavailable, match="no output named 'DP-9'.*Virtual-0"):
        KWinInput(kde.socket, "DP-9")
    with pytest.raises(KWinInputUnavailable, match="no Wayland compositor"):
        KWinInput(str(tmp_path / "nobody"))


def test_a_process_kwin_does_not_allow_is_refused():
    if missing_tools():
        pytest.skip("KWin is not installed")
    refused = pytest.raises(KWinInputUnavailable, match="org_kde_kwin_fake_input.*desktop file")
    with running_kde(grant=None) as kde, refused:  # no desktop file names this interpreter
        KWinInput(kde.socket)


def test_kwin_ending_is_reported(kde):
    inp = KWinInput(kde.socket)
    try:
        kde.procs["kwin"].kill()
        kde.procs["kwin"].wait(10)
        with pytest.raises(KWinInputUnavailable):
            for _ in range(50):  # the first sends may still fit in the socket buffer
                inp.key(VK_H, True)
                inp.key(VK_H, False)
        assert inp.ended()
    finally:
        inp.close()
