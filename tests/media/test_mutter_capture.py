"""GNOME capture against a real headless mutter: ScreenCast over its
session bus (jeepney), frames through pipewiresrc in gst-launch, the MutterCapture frame
source. tests/support/gnome.py starts the desktop (dbus-daemon, PipeWire, WirePlumber,
mutter 43 with a 1280x720 virtual monitor) and a fullscreen foot of a known colour; foot's
background is changed while it runs (OSC 11 written to its terminal) to show live frames."""

from __future__ import annotations

import os
import subprocess
import time

import numpy as np
import pytest

from media.framesource import MutterCapture
from media.mutter import screencast
from media.mutter.frames import PipeWireFrames
from media.mutter.screencast import ScreenCast, ScreenCastError
from tests.support.gnome import gst_pipelines, missing_tools, running_gnome

pytestmark = [pytest.mark.e2e, pytest.mark.slow]

BLUE = (0x33, 0x66, 0xCC)  # RGB of foot's configured background
RED = (0xE0, 0x20, 0x10)


@pytest.fixture(scope="module")
def gnome():
    missing = missing_tools()
    if missing:
        pytest.skip(f"not installed: {', '.join(missing)} (scripts/system-deps.sh installs them)")
    with running_gnome("1280x720") as desk:
        fifo = desk.root / "term.fifo"
        os.mkfifo(fifo)
        # The terminal's shell copies what the test writes to the fifo onto the screen.
        desk.foot("3366cc", ["sh", "-c", f"while :; do cat {fifo}; done"])
        desk.fifo = fifo
        yield desk


def set_background(desk, rgb) -> None:
    with open(desk.fifo, "w") as f:
        f.write("\033]11;#" + "".join(f"{c:02x}" for c in rgb) + "\a")


def centre_rgb(frame: np.ndarray) -> tuple[int, int, int]:
    h, w = frame.shape[:2]
    b, g, r = (int(v) for v in frame[h // 2 - 8 : h // 2 + 8, w // 2 - 8 : w // 2 + 8, :3]
               .reshape(-1, 3).mean(axis=0))  # fmt: skip
    return r, g, b


def close_to(got, want, tol=3) -> bool:
    return all(abs(a - b) <= tol for a, b in zip(got, want, strict=True))


def grab_until(cap: MutterCapture, size, rgb, timeout=5.0) -> np.ndarray:
    """Foot maps its window a moment after it starts: grab until the colour shows."""
    deadline = time.monotonic() + timeout
    while True:
        frame = cap(*size)
        if close_to(centre_rgb(frame), rgb) or time.monotonic() > deadline:
            return frame
        time.sleep(0.05)


def video_nodes(desk) -> set[int]:
    """Ids of the video stream nodes on the desktop's PipeWire (mutter's screencasts)."""
    import json

    out = subprocess.run(["pw-dump"], env=desk.env, capture_output=True, check=True, timeout=10)
    return {
        o["id"] for o in json.loads(out.stdout)
        if o.get("type", "").endswith(":Node")
        and o.get("info", {}).get("props", {}).get("media.class") == "Stream/Output/Video"
    }  # fmt: skip


def test_monitors_lists_the_virtual_monitor_with_its_mode(gnome):
    mons = screencast.monitors(gnome.bus_address)
    assert [(m.connector, m.width, m.height) for m in mons] == [("Meta-0", 1280, 720)]


def test_a_monitor_capture_shows_the_screen_and_follows_changes(gnome):
    cap = MutterCapture("Meta-0", bus_address=gnome.bus_address, env=gnome.env)
    try:
        frame = grab_until(cap, (1280, 720), BLUE)
        assert frame.shape == (720, 1280, 4) and frame.dtype == np.uint8
        assert close_to(centre_rgb(frame), BLUE), centre_rgb(frame)
        assert cap.failures == 0
        before = cap.frames_received
        set_background(gnome, RED)
        frame = grab_until(cap, (1280, 720), RED)
        assert close_to(centre_rgb(frame), RED), centre_rgb(frame)
        assert cap.frames_received > before  # a new frame came on damage
        set_background(gnome, BLUE)
        frame = grab_until(cap, (640, 360), BLUE)  # another size: scaled, same picture
        assert frame.shape == (360, 640, 4) and close_to(centre_rgb(frame), BLUE)
    finally:
        cap.close()


@pytest.mark.exclusive
def test_a_static_screen_still_gives_a_frame_per_grab_at_60_hz(gnome):
    """Mutter sends frames on damage only; the encoder asks 60 times a second regardless."""
    cap = MutterCapture("Meta-0", bus_address=gnome.bus_address, env=gnome.env)
    try:
        grab_until(cap, (1280, 720), BLUE)
        received = cap.frames_received
        t0 = time.perf_counter()
        frames, slowest = [], 0.0
        for i in range(60):
            t = time.perf_counter()
            frames.append(cap(1280, 720))
            slowest = max(slowest, time.perf_counter() - t)
            time.sleep(max(0.0, t0 + (i + 1) / 60 - time.perf_counter()))
        elapsed = time.perf_counter() - t0
        assert len(frames) == 60 and cap.failures == 0
        assert all(f.shape == (720, 1280, 4) for f in frames)
        assert 0.95 < elapsed < 1.25, elapsed
        assert slowest < 0.010, f"a grab blocked {slowest * 1000:.1f} ms"
        # The screen did not change: mutter had (nearly) nothing to send.
        assert cap.frames_received - received <= 5
    finally:
        cap.close()


def test_close_ends_the_pipeline_and_the_screencast(gnome):
    before_gst = set(gst_pipelines(gnome))  # this desktop's: other tests may run beside
    cap = MutterCapture("Meta-0", bus_address=gnome.bus_address, env=gnome.env)
    grab_until(cap, (1280, 720), BLUE)
    node, proc = cap.node_id, cap._frames.proc
    assert node in video_nodes(gnome)
    assert proc.pid in set(gst_pipelines(gnome)) - before_gst
    cap.close()
    assert proc.returncode is not None  # reaped
    assert set(gst_pipelines(gnome)) - before_gst == set()
    deadline = time.monotonic() + 3
    while node in video_nodes(gnome) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert node not in video_nodes(gnome), "mutter's stream node outlived close()"


def test_record_virtual_makes_a_monitor_of_the_asked_size_for_the_capture_only(gnome):
    cap = MutterCapture(None, bus_address=gnome.bus_address, env=gnome.env)
    try:
        frame = cap(1024, 576)
        assert cap.failures == 0 and frame.shape == (576, 1024, 4)
        mons = {(m.connector, m.width, m.height) for m in screencast.monitors(gnome.bus_address)}
        assert ("Meta-0", 1280, 720) in mons
        assert any(m[1:] == (1024, 576) for m in mons - {("Meta-0", 1280, 720)}), mons
        assert cap._frames.proc.poll() is None
    finally:
        cap.close()
    mons = [m.connector for m in screencast.monitors(gnome.bus_address)]
    assert mons == ["Meta-0"]  # the virtual monitor went with the session


def test_an_unknown_connector_is_a_clear_error(gnome):
    with pytest.raises(ScreenCastError, match=r"no monitor 'DP-9' \(it has: Meta-0\)"):
        ScreenCast("DP-9", bus_address=gnome.bus_address)
    cap = MutterCapture("DP-9", bus_address=gnome.bus_address, env=gnome.env)
    frame = cap(1280, 720)
    assert cap.failures == 1 and frame.shape == (720, 1280, 4) and not frame.any()
    cap.close()


def test_no_session_bus_is_a_clear_error(monkeypatch, tmp_path):
    monkeypatch.delenv("DBUS_SESSION_BUS_ADDRESS", raising=False)
    with pytest.raises(ScreenCastError, match="no D-Bus session bus"):
        ScreenCast("Meta-0")
    with pytest.raises(ScreenCastError, match="cannot connect to the D-Bus session bus"):
        ScreenCast("Meta-0", bus_address=f"unix:path={tmp_path}/nothing")
    cap = MutterCapture("Meta-0")
    cap(1280, 720)
    cap(1280, 720)
    assert cap.failures == 2 and cap.lost(after_s=0.0)
    cap.close()


def test_a_bus_without_mutter_is_a_clear_error():
    bus = subprocess.Popen(
        ["dbus-daemon", "--session", "--nofork", "--print-address"],
        stdout=subprocess.PIPE, start_new_session=True,
    )  # fmt: skip
    try:
        address = bus.stdout.readline().decode().strip()
        with pytest.raises(ScreenCastError, match="org.gnome.Mutter.ScreenCast is not on"):
            ScreenCast("Meta-0", bus_address=address)
        with pytest.raises(ScreenCastError, match="DisplayConfig is not on"):
            screencast.monitors(address)
    finally:
        bus.terminate()
        bus.wait(5)
        bus.stdout.close()


def test_no_first_frame_is_a_failure_and_the_pipeline_is_reaped(gnome):
    """A node id nobody streams on: pipewiresrc waits forever, latest() gives up."""
    frames = PipeWireFrames(999_999, 320, 180, env=gnome.env)
    try:
        with pytest.raises(Exception, match="no frame from PipeWire node 999999 in 0.5 s"):
            frames.latest(0.5)
    finally:
        frames.close()
    assert frames.proc.returncode is not None


def test_mutter_going_away_makes_the_source_lost():
    """Last resort of a session: the compositor dies, every grab fails, lost() ends it."""
    if missing_tools():
        pytest.skip("GNOME tools missing")
    with running_gnome("640x360") as desk:
        cap = MutterCapture("Meta-0", bus_address=desk.bus_address, env=desk.env)
        try:
            cap(640, 360)
            assert cap.failures == 0
            mutter = desk.procs["mutter"]
            mutter.terminate()
            mutter.wait(10)
            deadline = time.monotonic() + 5
            while not cap.lost(after_s=0.5) and time.monotonic() < deadline:
                frame = cap(640, 360)
                assert frame.shape == (360, 640, 4)  # the last frame, repeated
                time.sleep(1 / 60)
            assert cap.lost(after_s=0.5)
            assert cap._frames is None  # dropped: its gst-launch is gone too
        finally:
            cap.close()
