"""headless_mode on a GNOME session: the display machine gives each display a virtual monitor
of the person's own desktop (displays/gnome_monitors.py), against a real headless mutter
(tests/support/gnome.py). Two sessions at two modes at once, an app opening on its session's
monitor, the keep-alive states, a keeper that dies, host stop and start, and refusals."""

from __future__ import annotations

import os
import signal
import time

import pytest

from displays import capture, gnome_monitors, machine, reaper
from displays.models import VirtualDisplay
from media.framesource import MutterCapture
from media.mutter import screencast
from streaming import session_display
from tests.support import wl_app
from tests.support.gnome import gst_pipelines, missing_tools, running_gnome

pytestmark = [pytest.mark.e2e, pytest.mark.slow, pytest.mark.django_db]


@pytest.fixture(scope="module")
def gnome():
    missing = missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    with running_gnome("1280x720") as desk:
        yield desk


@pytest.fixture
def on_gnome(gnome, state, monkeypatch):
    """The host runs in that GNOME session with headless_mode on; nothing of it outlives the
    test (a failing test must not leave monitors for the next)."""
    monkeypatch.setenv("DBUS_SESSION_BUS_ADDRESS", gnome.bus_address)
    monkeypatch.setenv("XDG_RUNTIME_DIR", str(gnome.runtime_dir))
    monkeypatch.setenv("WAYLAND_DISPLAY", gnome.wayland_display)
    monkeypatch.delenv("DISPLAY", raising=False)
    conf(state, headless_mode="true")
    policy(keep_alive={"mode": "off"})
    yield gnome
    machine.release()
    gnome_monitors.stop_all()
    VirtualDisplay.objects.all().delete()


def conf(state, **values) -> None:
    (state / "host.conf").write_text("".join(f"{k} = {v}\n" for k, v in values.items()))


def monitors(desk) -> dict[str, tuple]:
    found = screencast.logical_monitors(desk.bus_address)
    return {c: (m["x"], m["y"], m["width"], m["height"]) for m in found for c in m["connectors"]}


def policy(**axes) -> None:
    from displays import policy as policies

    stored, _ = policies.load()
    policies.save({**stored, "preset": "custom", **axes})


def keep_alive(seconds: int) -> None:
    policy(keep_alive={"mode": "duration", "seconds": seconds})


def test_headless_mode_on_gnome_selects_virtual_monitors(on_gnome, state):
    sel = capture.select()
    assert (sel.backend, sel.headless, sel.error) == ("headless", "mutter", ""), sel
    assert "virtual monitor of the GNOME desktop" in sel.reason
    conf(state, headless_mode="true", capture="wlr")
    assert "set capture to auto or gnome" in capture.select().error
    conf(state, headless_mode="true", compositor_backend="sway")
    assert capture.select().headless in ("sway", "")  # the operator's choice wins


def test_two_sessions_get_their_own_monitors_at_their_own_modes(on_gnome):
    desk = on_gnome
    a = machine.acquire("alice", "1024x576@60")
    b = machine.acquire("bob", "800x600@30")
    assert (a["backend"], b["backend"]) == ("mutter", "mutter")
    assert a["owned"] and a["running"] and b["running"]
    assert a["output"] != b["output"] and "Meta-0" not in (a["output"], b["output"])
    live = monitors(desk)
    assert live[a["output"]][2:] == (1024, 576) and live[b["output"]][2:] == (800, 600), live
    assert (a["x"], a["y"]) == live[a["output"]][:2]  # where mutter put it
    assert live["Meta-0"] == (0, 0, 1280, 720)  # the person's own monitor is untouched
    for display, size in ((a, (1024, 576)), (b, (800, 600))):
        cap = session_display.open_capture(display)
        try:
            frame = cap(*size)
            assert frame.shape == (size[1], size[0], 4) and cap.failures == 0
        finally:
            cap.close()
    for display in (a, b):
        assert machine.disconnect(display["slot"]) is None  # keep_alive off: gone at once
    assert set(monitors(desk)) == {"Meta-0"}
    assert gnome_monitors.owned_pids() == [] and gst_pipelines(desk) == []


def test_an_app_opens_on_its_sessions_monitor(on_gnome):
    """A launch inside `placing` puts the pointer on the session's monitor, and mutter opens
    the new window there: the quadrant app, going fullscreen once mapped (as a game does),
    fills that monitor, not Meta-0; `placing` returns once the window shows."""
    desk = on_gnome
    display = machine.acquire("alice", "960x540@60")
    device = session_display.session_input(display, "t")
    assert device is not None
    t0 = time.monotonic()
    with session_display.placing(display, 10):
        app = wl_app.WaylandApp(str(desk.runtime_dir / desk.wayland_display))
    assert app.size == (640, 480) and time.monotonic() - t0 < 5, app.size  # held until mapped
    cap = MutterCapture(display["output"])
    try:
        time.sleep(0.3)  # mapped and placed
        app.go_fullscreen()
        assert app.wait(lambda: app.size == (960, 540), 20), app.size
        deadline = time.monotonic() + 10
        while True:
            frame = cap(960, 540)
            points = [(240, 135), (720, 135), (240, 405), (720, 405)]
            got = [tuple(int(v) for v in frame[y, x, 2::-1]) for x, y in points]
            if all(close(g, w) for g, w in zip(got, wl_app.QUADRANTS, strict=True)):
                break
            assert time.monotonic() < deadline, got
            time.sleep(0.1)
        device.key(0x41, True)  # VK_A: evdev 30 on the session's keyboard
        device.key(0x41, False)
        assert app.wait(lambda: ("key", 30, 1) in app.events, 5), app.events[-10:]
    finally:
        cap.close()
        app.close()
        device.close()
    machine.disconnect(display["slot"])


def close(got, want, tol: int = 24) -> bool:
    return all(abs(g - w) <= tol for g, w in zip(got, want, strict=True))


def test_a_kept_monitor_lingers_and_goes_on_release(on_gnome):
    desk = on_gnome
    keep_alive(600)
    display = machine.acquire("alice", "1024x576@60")
    kept = machine.disconnect(display["slot"])
    assert kept["state"] == "lingering" and kept["running"]
    assert display["output"] in monitors(desk)  # the monitor stays for the player's return
    again = machine.acquire("alice", "1024x576@60")  # same identity and mode: the same one
    assert (again["slot"], again["output"], again["state"]) == (
        display["slot"], display["output"], "active"
    )  # fmt: skip
    machine.disconnect(again["slot"])
    assert machine.release() == 1
    assert display["output"] not in monitors(desk) and gnome_monitors.owned_pids() == []


def test_a_dead_keeper_is_a_gone_monitor(on_gnome):
    desk = on_gnome
    display = machine.acquire("alice", "1024x576@60")
    os.kill(display["pid"], signal.SIGKILL)
    deadline = time.monotonic() + 5
    while display["output"] in monitors(desk):
        assert time.monotonic() < deadline, "mutter kept the monitor of a dead keeper"
        time.sleep(0.05)
    assert session_display.compositor_gone(display).endswith("is gone")
    assert machine.state()["displays"][0]["running"] is False
    fresh = machine.acquire("alice", "1024x576@60")  # a dead one is replaced, not joined
    assert fresh["running"] and fresh["pid"] != display["pid"]


def test_host_stop_ends_every_monitor_and_start_restores_the_kept_ones(on_gnome):
    desk = on_gnome
    keep_alive(600)
    display = machine.acquire("alice", "1024x576@60")
    machine.pin(display["slot"])
    machine.disconnect(display["slot"])
    reaper.on_host_stop()
    assert set(monitors(desk)) == {"Meta-0"} and gnome_monitors.owned_pids() == []
    assert reaper.on_host_start()["restored"] == 1
    (row,) = machine.state()["displays"]
    assert row["state"] == "pinned" and row["running"]
    assert monitors(desk)[row["output"]][2:] == (1024, 576)


def test_what_mutter_cannot_keep_is_refused(on_gnome, state):
    with pytest.raises(machine.DisplayError) as err:
        machine.acquire("alice", "1280x720@120")
    assert err.value.status == 503 and "run at 60 Hz" in err.value.message
    policy(topology="exclusive")
    with pytest.raises(machine.DisplayError) as err:
        machine.acquire("alice", "1280x720@60")
    assert err.value.status == 409 and "topology = exclusive cannot be kept on GNOME" in str(
        err.value.message
    )
    assert gnome_monitors.owned_pids() == [] and set(monitors(on_gnome)) == {"Meta-0"}
