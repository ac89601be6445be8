"""Gamepads: honest availability, index and value checks, and the state-to-evdev mapping."""

from __future__ import annotations

import os

import pytest

from media.input.gamepad import (
    GamepadUnavailable,
    PadState,
    VirtualGamepad,
    availability,
    check_index,
    state_events,
)


def test_availability_matches_the_host():
    ok, reason = availability()
    if not os.path.exists("/dev/uinput"):
        assert not ok and "does not exist" in reason
        with pytest.raises(GamepadUnavailable):
            VirtualGamepad(0)
    assert availability("/nonexistent/uinput") == (
        False,
        "/nonexistent/uinput does not exist (no uinput module in this kernel)",
    )


def test_a_node_that_is_not_a_device_is_unavailable(tmp_path):
    fake = tmp_path / "uinput"
    fake.write_text("")
    assert availability(str(fake)) == (False, f"{fake} is not a character device")


@pytest.mark.parametrize("bad", [99, 16, -1, "0", 1.5, True, None])
def test_gamepad_index_out_of_range_is_refused(bad):
    with pytest.raises(ValueError):
        check_index(bad)
    with pytest.raises(ValueError):
        VirtualGamepad(bad)


def test_state_changes_become_evdev_events():
    a = PadState()
    b = PadState(buttons=0x1000 | 0x0001, left_trigger=300, left_x=-40000, left_y=32767)
    events = state_events(a, b)
    assert ("EV_KEY", "BTN_SOUTH", 1) in events and ("EV_KEY", "BTN_DPAD_UP", 1) in events
    assert ("EV_ABS", "ABS_Z", 255) in events  # trigger clamped to 0..255
    assert ("EV_ABS", "ABS_X", -32768) in events  # stick clamped
    assert ("EV_ABS", "ABS_Y", -32767) in events  # client Y up -> evdev Y down
    assert state_events(b.clamped(), b) == []
    released = state_events(b.clamped(), PadState())
    assert ("EV_KEY", "BTN_SOUTH", 0) in released and ("EV_KEY", "BTN_DPAD_UP", 0) in released
    assert ("EV_ABS", "ABS_Y", 0) in released
