"""The shared watch (`streaming.sessions.watch`): each check gives its end reason from the one
vocabulary, the control list's requests, a Redis outage, and the reason sets both planes and
the title's close decision read."""

from __future__ import annotations

import os
import time

import pytest
import redis

from streaming.sessions import registry, watch
from streaming.sessions.watch import End, Watch


class App:
    def __init__(self, exited: bool):
        self._exited = exited

    def exited(self) -> bool:
        return self._exited


@pytest.fixture(autouse=True)
def no_shutdown(monkeypatch):
    monkeypatch.delenv("SESSION_MANAGER_PID", raising=False)
    watch.SHUTDOWN.clear()
    yield
    watch.SHUTDOWN.clear()


@pytest.fixture
def quiet(monkeypatch):
    """No control list: the checks alone."""
    monkeypatch.setattr(registry, "pop", lambda sid: [])


def make(**kwargs) -> Watch:
    return Watch("0a1b2c3d", "ab" * 32, connect_timeout_s=20.0, **kwargs)


def tick(w: Watch, **probe) -> End | None:
    w.last_check = w.last_beat = 0.0
    return w.tick(**{"connected": True, **probe})


def test_a_live_session_with_nothing_wrong_goes_on(quiet):
    w = make(authorized=lambda fp: True)
    assert tick(w, display={"backend": "xvfb"}, app=App(False), publish=lambda: True) is None


@pytest.mark.parametrize(
    ("probe", "reason", "deliberate"),
    [
        ({"capture_lost": "X display :7"}, "display_lost", True),
        ({"encoder_failure": "nvenc: device lost"}, "encoder_failed", True),
        ({"app": App(True)}, "app_exited", True),
        ({"publish": lambda: False}, "released", True),
    ],
)
def test_each_check_gives_its_reason(quiet, probe, reason, deliberate):
    end = tick(make(), **probe)
    assert end is not None and end.reason == reason and end.deliberate is deliberate
    assert end.reason in watch.END_REASONS


def test_a_lost_display_says_which(quiet):
    end = tick(make(), capture_lost="X display :7")
    assert end.error == "X display :7 stopped answering"


def test_a_dead_compositor_is_display_lost(quiet):
    display = {"backend": "sway", "pid": 2**22 + 12345, "output": "HEADLESS-3",
               "wayland_display": "wayland-9"}  # fmt: skip
    end = tick(make(), display=display)
    assert end.reason == "display_lost" and "HEADLESS-3" in end.error


def test_an_unpaired_device_ends_with_unpaired(quiet):
    asked = []
    end = tick(make(authorized=lambda fp: asked.append(fp) or False))
    assert end.reason == "unpaired" and asked == ["ab" * 32]


def test_the_session_manager_gone_is_host_shutdown(quiet, monkeypatch):
    monkeypatch.setenv("SESSION_MANAGER_PID", str(os.getppid() + 1))
    assert tick(make()).reason == "host_shutdown"


def test_sigterm_is_host_shutdown(quiet):
    watch.SHUTDOWN.set()
    end = make().tick(connected=True)
    assert end.reason == "host_shutdown" and not end.deliberate  # per policy: CLIENT_REASONS


def test_a_client_that_never_connects_is_arm_timeout(quiet):
    w = Watch("0a1b2c3d", "ab" * 32, connect_timeout_s=0.05)
    assert tick(w, connected=False) is None
    time.sleep(0.1)
    end = tick(w, connected=False)
    assert end.reason == "arm_timeout" and not end.deliberate
    w.arm()  # a /resume answered: the clock starts again
    assert tick(w, connected=False) is None


def test_the_display_is_the_cause_before_the_app(quiet):
    end = tick(make(), capture_lost="X display :7", app=App(True))
    assert end.reason == "display_lost"


def test_a_stop_request_ends_with_its_reason(monkeypatch):
    monkeypatch.setattr(registry, "pop", lambda sid: [{"op": "stop", "reason": "app_closed",
                                                       "deliberate": True}])  # fmt: skip
    end = make().tick(connected=True)
    assert end == End("app_closed", True, detail="ended by the host")


def test_a_stop_without_a_reason_is_api_and_a_reconnect_is_not_deliberate(monkeypatch):
    monkeypatch.setattr(registry, "pop", lambda sid: [{"op": "stop"}])
    assert make().tick(connected=True).reason == "api"
    monkeypatch.setattr(registry, "pop", lambda sid: [{"op": "stop", "reason": "client",
                                                       "deliberate": False}])  # fmt: skip
    end = make().tick(connected=True)
    assert end.reason == "client" and not end.deliberate and end.detail == "reconnected"


def test_other_requests_go_to_the_plane(monkeypatch):
    monkeypatch.setattr(registry, "pop", lambda sid: [{"op": "resume", "arm": "x"}])
    seen = []
    w = make(on_request=lambda req: seen.append(req["op"]))
    assert w.tick(connected=True) is None and seen == ["resume"]
    w = make(on_request=lambda req: End("error", False, "ports busy"))
    assert w.tick(connected=True).reason == "error"


def test_a_redis_outage_is_no_end(monkeypatch):
    def down(*args):
        raise redis.ConnectionError("gone")

    monkeypatch.setattr(registry, "pop", down)
    w = make()
    assert tick(w, publish=down) is None
    assert w.redis_down


def test_the_reason_sets_are_one_vocabulary():
    assert watch.CLIENT_REASONS <= watch.END_REASONS
    assert watch.CLOSE_REASONS <= watch.END_REASONS
    assert set(watch.DISCONNECTED) <= watch.END_REASONS
    assert {watch.disconnect_reason(r) for r in watch.END_REASONS} == {"quit", "timeout", "error"}
    assert watch.disconnect_reason("display_lost") == "error"
    assert watch.disconnect_reason("arm_timeout") == "timeout"
    assert watch.disconnect_reason("cancel") == "quit"
