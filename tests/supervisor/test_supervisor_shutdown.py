"""The supervisor's stop order, without a live host: host.stopping (and its wait) first, then
the children; a second SIGTERM/SIGINT cuts the wait short."""

from __future__ import annotations

import signal

from supervisor import lifecycle, main


class FakeChild:
    def __init__(self, name: str, calls: list):
        self.name, self.calls = name, calls

    def terminate(self) -> None:
        self.calls.append(("terminate", self.name))

    def wait(self, deadline: float) -> None:
        self.calls.append(("wait", self.name))

    def group_alive(self) -> bool:
        return False


def test_shutdown_announces_and_waits_before_any_child_stops(monkeypatch):
    calls: list = []
    sup = main.Supervisor()
    sup._announced = True  # host.started went out

    def announce(grace_s=None, *, abort=None):
        calls.append(("announce", abort()))
        sup._on_stop(signal.SIGTERM, None)  # the operator insists while the hooks run
        calls.append(("abort after a second signal", abort()))
        return True

    monkeypatch.setattr(lifecycle, "announce_stopping", announce)
    monkeypatch.setattr("displays.reaper.on_host_stop", lambda: calls.append(("displays",)))
    sup._on_stop(signal.SIGTERM, None)
    assert sup._stop
    sup.children = [FakeChild("daphne", calls), FakeChild("celery-hooks", calls)]
    sup.shutdown()
    assert calls == [
        ("announce", False),
        ("abort after a second signal", True),
        ("terminate", "daphne"),
        ("terminate", "celery-hooks"),
        ("wait", "daphne"),
        ("wait", "celery-hooks"),
        ("displays",),
    ]


def test_restart_signal_also_announces_stopping(monkeypatch):
    calls: list = []
    monkeypatch.setattr(
        lifecycle, "announce_stopping", lambda grace_s=None, *, abort=None: calls.append(abort())
    )
    monkeypatch.setattr("displays.reaper.on_host_stop", lambda: None)
    sup = main.Supervisor()
    sup._announced = True
    sup._on_restart(signal.SIGHUP, None)
    assert sup._stop and sup._restart
    sup.shutdown()
    assert calls == [False]  # announced, and a restart alone does not cut the wait short


def test_a_host_stopped_before_it_started_announces_no_stopping(monkeypatch):
    calls: list = []
    monkeypatch.setattr(
        lifecycle, "announce_stopping", lambda grace_s=None, *, abort=None: calls.append(1)
    )
    monkeypatch.setattr("displays.reaper.on_host_stop", lambda: None)
    sup = main.Supervisor()
    sup._on_stop(signal.SIGTERM, None)
    sup.shutdown()
    assert calls == []


def test_a_stop_during_preparation_ends_it_at_once(monkeypatch):
    sup = main.Supervisor()
    steps: list = []

    def prepare():
        steps.append("migrate")
        sup._on_stop(signal.SIGINT, None)  # the signal lands mid-step
        steps.append("identity")

    monkeypatch.setattr(sup, "_prepare", prepare)
    try:
        sup.prepare()
    except main.StopRequested:
        steps.append("stopped")
    assert steps == ["migrate", "stopped"]
    assert not sup._preparing
    sup._on_stop(signal.SIGTERM, None)  # outside preparation a stop only sets the flag
    assert sup._stop_requests == 2
